//! A `disk-bench` result and what it means for a plan: how many such
//! volumes a storage rate needs and how large a buffer absorbs their dips.
//!
//! The result is `disk-bench --json`'s [`wv_diskbench::report::Report`]
//! (version 1), of which a plan reads only the fields of [`DiskBench`]:
//! `{"version":1, "overall_bytes_per_s":f (optional), "mean_bytes_per_s":f,
//! "ci99_bytes_per_s":[lo,hi], "worst_10s_bytes_per_s":f,
//! "per_second_bytes":[f,...], "dir":s, "mode":s}`, so that a result
//! written by hand (a volume measured with another tool) needs no more.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The only disk-bench JSON version this reads.
pub const VERSION: u64 = wv_diskbench::report::VERSION;

/// Why a disk-bench file cannot be used.
#[derive(thiserror::Error, Debug)]
pub enum BenchError {
    #[error("cannot read the disk-bench result {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a disk-bench result (`wirevault disk-bench --json` output): {message}", path.display())]
    Malformed { path: PathBuf, message: String },
    #[error("{} is a disk-bench result of version {version}; this wirevault reads version {VERSION}: run disk-bench again with this wirevault", path.display())]
    Version { path: PathBuf, version: u64 },
}

/// The fields of a disk-bench result ([`wv_diskbench::report::Report`]) that a plan uses.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DiskBench {
    /// Bytes written over the run's time: what the volume sustains (older
    /// results lack it: the mean then stands in).
    #[serde(default)]
    pub overall_bytes_per_s: Option<f64>,
    /// The mean of the files' own rates: never below the overall
    /// throughput (files written together share the time).
    pub mean_bytes_per_s: f64,
    pub ci99_bytes_per_s: [f64; 2],
    /// None (null) when the run was shorter than 10 s.
    #[serde(default)]
    pub worst_10s_bytes_per_s: Option<f64>,
    pub per_second_bytes: Vec<f64>,
    pub dir: String,
    pub mode: String,
}

impl DiskBench {
    /// Reads and checks a disk-bench JSON file.
    pub fn read(path: &Path) -> Result<DiskBench, BenchError> {
        let bytes = std::fs::read(path).map_err(|source| BenchError::Io { path: path.to_path_buf(), source })?;
        DiskBench::parse(&bytes).map_err(|e| match e {
            ParseError::Version(version) => BenchError::Version { path: path.to_path_buf(), version },
            ParseError::Malformed(message) => BenchError::Malformed { path: path.to_path_buf(), message },
        })
    }

    /// Parses a disk-bench JSON object: the version first, then the fields.
    pub fn parse(bytes: &[u8]) -> Result<DiskBench, ParseError> {
        wv_diskbench::report::version_of(bytes).map_err(|e| match e {
            wv_diskbench::report::ParseError::Version(v) => ParseError::Version(v),
            wv_diskbench::report::ParseError::Malformed(m) => ParseError::Malformed(m),
        })?;
        let b: DiskBench = serde_json::from_slice(bytes).map_err(|e| ParseError::Malformed(e.to_string()))?;
        let finite = |x: f64| x.is_finite() && x >= 0.0;
        if !(b.mean_bytes_per_s > 0.0
            && finite(b.mean_bytes_per_s)
            && b.worst_10s_bytes_per_s.is_none_or(finite)
            && b.overall_bytes_per_s.is_none_or(|x| finite(x) && x > 0.0)
            && b.ci99_bytes_per_s.iter().all(|x| finite(*x))
            && b.per_second_bytes.iter().all(|x| finite(*x)))
        {
            return Err(ParseError::Malformed("its rates must be non-negative numbers and the mean positive".into()));
        }
        Ok(b)
    }

    /// What the volume sustains: bytes over the run's time (the mean of
    /// the files' rates for results without it).
    pub fn throughput(&self) -> f64 {
        self.overall_bytes_per_s.unwrap_or(self.mean_bytes_per_s)
    }

    /// Volumes like this one needed to store `bytes_per_s`, at their
    /// throughput (`at_throughput`, as disk-bench judges a rate sustained)
    /// and at their worst 10-second window.
    pub fn volumes(&self, bytes_per_s: f64) -> Volumes {
        let n = |per: f64| if per > 0.0 { Some((bytes_per_s / per).ceil().max(1.0) as u64) } else { None };
        Volumes {
            at_throughput: n(self.throughput()).unwrap_or(1),
            at_worst_10s: self.worst_10s_bytes_per_s.and_then(n),
        }
    }
}

/// Why [`DiskBench::parse`] refused.
#[derive(Debug, Clone, PartialEq)]
pub enum ParseError {
    Version(u64),
    Malformed(String),
}

/// How many volumes a storage rate needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Volumes {
    pub at_throughput: u64,
    /// `None` when the worst 10 s window wrote nothing (no number of such
    /// volumes suffices), or is not known (a run shorter than 10 s).
    pub at_worst_10s: Option<u64>,
}

/// The buffer that absorbs the dips of a throughput series (bytes written
/// in each second) when data arrives at `rate` bytes/s: the largest backlog
/// `b_i = max(0, b_{i-1} + rate - s_i)` over the series (the largest
/// cumulative deficit of any run of seconds). A series that keeps up needs
/// 0; a 2-second dip to half the rate needs `rate × 1 s`. When the series'
/// mean is below `rate` the backlog grows with the length of the run and no
/// buffer suffices: [`Buffer::sustained`] is false.
///
/// The rule is disk-bench's own ([`wv_diskbench::buffer::needed`]), so
/// `plan --bench` and `disk-bench --rate` give the same buffer.
pub fn buffer_for(rate: f64, series: &[f64]) -> Buffer {
    let whole: Vec<u64> = series.iter().map(|s| s.max(0.0).round() as u64).collect();
    let worst = wv_diskbench::buffer::needed(&whole, rate);
    let mean = if series.is_empty() { 0.0 } else { series.iter().sum::<f64>() / series.len() as f64 };
    Buffer { bytes: worst, sustained: !series.is_empty() && mean >= rate }
}

/// The result of [`buffer_for`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Buffer {
    /// The largest backlog, in bytes.
    pub bytes: f64,
    /// The series' mean throughput reaches the rate.
    pub sustained: bool,
}

/// The safety margin added to a measured buffer for the `--buffer` advice:
/// a run measures one sample of the dips, a longer one may see deeper ones.
pub const BUFFER_MARGIN: f64 = 0.5;

/// A `record --buffer` value for a measured backlog: plus [`BUFFER_MARGIN`],
/// rounded up as disk-bench rounds its advice (a power of two or 1.5 times
/// one, in MiB), at least 64 MiB.
pub fn advised_buffer(bytes: f64) -> u64 {
    wv_diskbench::buffer::round_up(bytes * (1.0 + BUFFER_MARGIN), 64 << 20)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_known_answers() {
        let r = 1000.0;
        assert_eq!(buffer_for(r, &[1000.0; 10]), Buffer { bytes: 0.0, sustained: true });
        // A 2-second dip to half the rate, then enough to catch up.
        let mut s = vec![1000.0; 3];
        s.extend([500.0, 500.0]);
        s.extend([1500.0, 1500.0, 1000.0]);
        assert_eq!(buffer_for(r, &s), Buffer { bytes: 1000.0, sustained: true });
        // Two dips separated by recovery: the deeper one counts, not their sum.
        let s = [500.0, 1500.0, 200.0, 1800.0];
        assert_eq!(buffer_for(r, &s).bytes, 800.0);
        // Never catching up.
        let b = buffer_for(r, &[900.0; 5]);
        assert!(!b.sustained);
        assert_eq!(b.bytes, 500.0);
        assert!(!buffer_for(r, &[]).sustained);
    }

    #[test]
    fn advice_has_the_margin() {
        assert_eq!(advised_buffer(0.0), 64 << 20);
        assert_eq!(advised_buffer((1u64 << 30) as f64), 1536 << 20);
    }

    fn json(version: &str) -> String {
        format!(
            r#"{{"version":{version},"mean_bytes_per_s":1.0e9,"ci99_bytes_per_s":[0.9e9,1.1e9],"worst_10s_bytes_per_s":4.0e8,"per_second_bytes":[1e9,1e9],"dir":"/d","mode":"direct","extra":1}}"#
        )
    }

    #[test]
    fn reads_version_1_only() {
        let b = DiskBench::parse(json("1").as_bytes()).unwrap();
        assert_eq!(b.mean_bytes_per_s, 1e9);
        assert_eq!(b.ci99_bytes_per_s, [0.9e9, 1.1e9]);
        assert_eq!(DiskBench::parse(json("2").as_bytes()), Err(ParseError::Version(2)));
        assert!(matches!(DiskBench::parse(b"{}"), Err(ParseError::Malformed(_))));
        assert!(matches!(DiskBench::parse(b"[1]"), Err(ParseError::Malformed(_))));
        assert!(matches!(DiskBench::parse(br#"{"version":1}"#), Err(ParseError::Malformed(_))));
        let zero = json("1").replace("\"mean_bytes_per_s\":1.0e9", "\"mean_bytes_per_s\":0");
        assert!(matches!(DiskBench::parse(zero.as_bytes()), Err(ParseError::Malformed(_))));
    }

    #[test]
    fn volumes_at_throughput_and_worst() {
        let b = DiskBench::parse(json("1").as_bytes()).unwrap();
        // 9.948 Gb/s = 1.2435 GB/s: 2 volumes of 1 GB/s, 4 of 0.4 GB/s.
        assert_eq!(b.volumes(1.2435e9), Volumes { at_throughput: 2, at_worst_10s: Some(4) });
        assert_eq!(b.volumes(1e9), Volumes { at_throughput: 1, at_worst_10s: Some(3) });
    }
}
