//! The result of a run as `disk-bench --json` writes it: one typed,
//! versioned [`Report`]. `record` reads it back from a store's
//! `disk-bench.json` (its buffer) and the text report is drawn from it.

use crate::buffer;
use crate::runner::{Config, Mode, Outcome};
use crate::stats::{self, Summary};
use serde::{Deserialize, Serialize};

/// The version of [`Report`]: raised when a field changes meaning or goes
/// away, not when one is added.
pub const VERSION: u64 = 1;

/// A run's figures; throughputs in bytes per second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`VERSION`].
    pub version: u64,
    /// Absolute: record compares its file system with the store's.
    pub dir: String,
    /// How the files were written (`Direct` only where O_DIRECT was taken).
    pub mode: Mode,
    /// O_DIRECT was asked for and the file system refused it.
    pub direct_refused: bool,
    /// The memory file system (tmpfs, ramfs) the run was on, if any.
    pub memory_fs: Option<String>,
    pub block_size: u64,
    pub queue_depth: u32,
    pub files: u32,
    pub file_size: u64,
    pub total_bytes: u64,
    pub elapsed_s: f64,
    /// Bytes over the run's time: what the volume sustains.
    pub overall_bytes_per_s: f64,
    /// The mean of the files' own rates (never below the overall
    /// throughput: files written together share the time).
    pub mean_bytes_per_s: f64,
    pub std_dev_bytes_per_s: f64,
    pub ci99_bytes_per_s: [f64; 2],
    pub p5_bytes_per_s: f64,
    pub p95_bytes_per_s: f64,
    pub min_bytes_per_s: f64,
    pub max_bytes_per_s: f64,
    /// `None` when the run was shorter than the window.
    pub worst_1s_bytes_per_s: Option<f64>,
    pub worst_10s_bytes_per_s: Option<f64>,
    pub per_file_bytes_per_s: Vec<f64>,
    /// Bytes completed in each whole second.
    pub per_second_bytes: Vec<u64>,
    /// The files left behind (`--keep`).
    pub kept: Vec<String>,
    /// What the rate asked for (`--rate`) needs from the volume.
    pub rate: Option<RateReport>,
}

/// What a rate needs from the volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RateReport {
    pub bytes_per_s: f64,
    pub bits_per_s: f64,
    /// The rate as given on the command line.
    pub given: Option<String>,
    /// The long-run throughput reaches the rate: a finite buffer suffices.
    pub sustained: bool,
    /// Even the worst 10 s window reaches it (`None`: run shorter than 10 s).
    pub worst_10s_meets_rate: Option<bool>,
    /// The largest backlog of the per-second series at the rate (when sustained).
    pub buffer_bytes: Option<u64>,
    /// `buffer_bytes` times the margin, rounded up as [`buffer::round_up`] does.
    pub buffer_with_margin_bytes: Option<u64>,
    pub margin: f64,
    /// `buffer_with_margin_bytes` as `record --buffer` takes it.
    pub record_buffer_arg: Option<String>,
    pub shortfall_bytes_per_hour: f64,
}

/// The rate a run is judged against, and how its buffer is advised.
#[derive(Debug, Clone)]
pub struct RateAsked {
    pub bytes_per_s: f64,
    /// As given on the command line.
    pub given: Option<String>,
    /// Safety factor on the measured buffer.
    pub margin: f64,
    /// The smallest buffer advised.
    pub floor: u64,
}

impl Report {
    /// The report of run `out` of `cfg`; `memory_fs` names the memory file
    /// system the run was on.
    pub fn new(cfg: &Config, out: &Outcome, rate: Option<&RateAsked>, memory_fs: Option<&str>) -> Report {
        let per_file: Vec<f64> = out.files.iter().map(|f| f.bytes_per_s()).collect();
        let s = Summary::of(&per_file).unwrap_or(Summary {
            n: per_file.len(),
            mean: 0.0,
            std_dev: 0.0,
            ci99: (0.0, 0.0),
            p5: 0.0,
            p95: 0.0,
            min: 0.0,
            max: 0.0,
        });
        let overall = out.total_bytes as f64 / out.elapsed.max(1e-9);
        let worst_10s = stats::worst_window(&out.per_second, 10);
        let rate = rate.map(|r| {
            let sustained = overall >= r.bytes_per_s;
            let need = buffer::needed(&out.per_second, r.bytes_per_s);
            let with_margin = sustained.then(|| buffer::round_up(need * r.margin, r.floor));
            RateReport {
                bytes_per_s: r.bytes_per_s,
                bits_per_s: r.bytes_per_s * 8.0,
                given: r.given.clone(),
                sustained,
                worst_10s_meets_rate: worst_10s.map(|w| w >= r.bytes_per_s),
                buffer_bytes: sustained.then_some(need.ceil() as u64),
                buffer_with_margin_bytes: with_margin,
                margin: r.margin,
                record_buffer_arg: with_margin.map(buffer::size_arg),
                shortfall_bytes_per_hour: (r.bytes_per_s - overall).max(0.0) * 3600.0,
            }
        });
        Report {
            version: VERSION,
            dir: std::fs::canonicalize(&cfg.dir).unwrap_or_else(|_| cfg.dir.clone()).display().to_string(),
            mode: if out.direct { Mode::Direct } else { Mode::Buffered },
            direct_refused: cfg.mode == Mode::Direct && !out.direct,
            memory_fs: memory_fs.map(str::to_string),
            block_size: cfg.block_size,
            queue_depth: cfg.depth,
            files: cfg.files,
            file_size: cfg.file_size,
            total_bytes: out.total_bytes,
            elapsed_s: out.elapsed,
            overall_bytes_per_s: overall,
            mean_bytes_per_s: s.mean,
            std_dev_bytes_per_s: s.std_dev,
            ci99_bytes_per_s: [s.ci99.0, s.ci99.1],
            p5_bytes_per_s: s.p5,
            p95_bytes_per_s: s.p95,
            min_bytes_per_s: s.min,
            max_bytes_per_s: s.max,
            worst_1s_bytes_per_s: stats::worst_window(&out.per_second, 1),
            worst_10s_bytes_per_s: worst_10s,
            per_file_bytes_per_s: per_file,
            per_second_bytes: out.per_second.clone(),
            kept: out.kept.iter().map(|k| k.display().to_string()).collect(),
            rate,
        }
    }

    /// Reads a report: its version first, so that another version is
    /// refused as such rather than as a field it lacks.
    pub fn parse(bytes: &[u8]) -> Result<Report, ParseError> {
        version_of(bytes)?;
        serde_json::from_slice(bytes).map_err(|e| ParseError::Malformed(e.to_string()))
    }
}

/// Why a report was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    #[error("it is a disk-bench result of version {0}; this wirevault reads version {VERSION}")]
    Version(u64),
    #[error("{0}")]
    Malformed(String),
}

/// The version of a report (or a report's part) as JSON, refused unless it
/// is [`VERSION`].
pub fn version_of(bytes: &[u8]) -> Result<(), ParseError> {
    #[derive(Deserialize)]
    struct Versioned {
        version: Option<u64>,
    }
    let v: Versioned = serde_json::from_slice(bytes).map_err(|e| ParseError::Malformed(e.to_string()))?;
    match v.version {
        Some(VERSION) => Ok(()),
        Some(other) => Err(ParseError::Version(other)),
        None => Err(ParseError::Malformed("it has no numeric \"version\"".into())),
    }
}
