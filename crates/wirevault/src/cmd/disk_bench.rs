//! `wirevault disk-bench DIR`: gauge a volume with the recorder's own writer.
//!
//! Flags -> [`plan`] (every check, the free-space limit) -> the run
//! (`wv_diskbench::runner`) -> statistics, the buffer a rate needs, the
//! report (text or `--json`) and the plot. The mechanisms are in
//! `crates/diskbench`; the defaults are `record`'s (block size, queue depth,
//! preallocation step), so what is measured is what `record` would do.

use crate::cmd::record::{defaults, Tuning};
use crate::{exit, fail};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use wv_diskbench::report::{RateAsked, Report};
use wv_diskbench::runner::{self, Config, Mode};
use wv_diskbench::{buffer, plot, BenchError};
use wv_units::{format_bytes as human_bytes, parse_size};

/// The paper's method: 100 files of 2 GB.
const FILES: u32 = 100;
const FILE_SIZE: &str = "2G";
/// `--quick`: about a minute on a 1 GB/s disk.
const QUICK_FILES: u32 = 60;
const QUICK_FILE_SIZE: &str = "1G";
/// Share of the volume's free space a run may use without `--allow-fill`.
const MAX_FILL: f64 = 0.80;
/// Safety margin on the measured buffer.
const MARGIN: f64 = 1.5;
/// The smallest `--buffer` recommended (record's own floor for its default).
const MIN_BUFFER: u64 = 64 << 20;

/// Arguments of `wirevault disk-bench`.
#[derive(clap::Args)]
#[command(after_help = "Throughputs are in bytes per second (GB/s = 10^9 B/s); rates take bits (10gbps, \
                        9.95Gb/s, 100Mbit/s) or bytes (1.2GB/s, 800MiB/s) per second.")]
pub struct Args {
    /// A directory on the volume to gauge. The files are written into it and removed afterwards.
    pub dir: PathBuf,
    /// Number of files (at least 2; default 100, the paper's method, or 60 with --quick).
    #[arg(long, value_name = "N")]
    pub files: Option<u32>,
    #[arg(long, value_name = "SIZE", help = format!(
        "Bytes per file, a multiple of 4K (default 2G, or 1G with --quick); {}",
        wv_units::SIZE_FORMS
    ))]
    pub file_size: Option<String>,
    /// About a minute on a 1 GB/s disk: 60 files of 1 GiB instead of 100 of 2 GiB
    /// (--files and --file-size still apply).
    #[arg(long)]
    pub quick: bool,
    /// Write through the page cache with write(2) and one fsync per file, as
    /// `dd conv=fsync` does, instead of the recorder's O_DIRECT io_uring writes.
    #[arg(long)]
    pub buffered: bool,
    #[arg(long, default_value = defaults::BLOCK_SIZE, value_name = "SIZE", help = format!(
        "Bytes per write (multiple of 4K, 64K..64M; record's default); {}",
        wv_units::SIZE_FORMS
    ))]
    pub block_size: String,
    /// Writes in flight (record's writer: 8).
    #[arg(long, value_name = "N")]
    pub queue_depth: Option<u32>,
    #[arg(long, value_name = "RATE", help = format!(
        "The capture rate to sustain: says whether the volume keeps up and the smallest buffer that absorbs its \
         measured dips; {}, or a file written by `wirevault plan --json` (its largest store rate)",
        wv_units::BYTE_RATE_FORMS
    ))]
    pub rate: Option<String>,
    /// Safety factor on the measured buffer (at least 1).
    #[arg(long, default_value_t = MARGIN, value_name = "FACTOR")]
    pub margin: f64,
    /// Draw the per-second series, the mean and the rate (FILE.svg or FILE.png).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Print one JSON object on standard output instead of the report.
    #[arg(long)]
    pub json: bool,
    /// Leave the files in DIR.
    #[arg(long)]
    pub keep: bool,
    /// Use more than 80% of the volume's free space.
    #[arg(long)]
    pub allow_fill: bool,
}

/// The validated plan.
struct Plan {
    cfg: Config,
    /// Bytes per second.
    rate: Option<f64>,
    rate_text: Option<String>,
    margin: f64,
    plot: Option<PathBuf>,
    json: bool,
}

fn usage(msg: String) -> anyhow::Error {
    fail(exit::USAGE, msg)
}

fn plan(a: Args) -> anyhow::Result<Plan> {
    let size = |what: &str, s: &str| {
        parse_size(s).filter(|&v| v < 1 << 60).ok_or_else(|| usage(wv_units::size_error(what, s)))
    };
    let files = a.files.unwrap_or(if a.quick { QUICK_FILES } else { FILES });
    if !(2..=1_000_000).contains(&files) {
        return Err(usage(format!(
            "--files must be between 2 and 1000000 (the confidence interval needs two), not {files}"
        )));
    }
    let fs_text =
        a.file_size.clone().unwrap_or_else(|| (if a.quick { QUICK_FILE_SIZE } else { FILE_SIZE }).to_string());
    let file_size = size("--file-size", &fs_text)?;
    if file_size < 4096 || !file_size.is_multiple_of(4096) {
        return Err(usage(format!(
            "--file-size must be a multiple of 4K (O_DIRECT writes whole pages), not {fs_text}"
        )));
    }
    let block_size = size("--block-size", &a.block_size)?;
    if !(64 << 10..=64 << 20).contains(&block_size) || !block_size.is_multiple_of(4096) {
        return Err(usage(format!("--block-size must be a multiple of 4K between 64K and 64M, not {}", a.block_size)));
    }
    let tuning = Tuning::default();
    let depth = a.queue_depth.unwrap_or(tuning.write_depth);
    if !(1..=1024).contains(&depth) {
        return Err(usage(format!("--queue-depth must be between 1 and 1024, not {depth}")));
    }
    if !(a.margin.is_finite() && (1.0..=100.0).contains(&a.margin)) {
        return Err(usage(format!("--margin must be a factor between 1 and 100, not {}", a.margin)));
    }
    let rate = match &a.rate {
        None => None,
        Some(r) if std::path::Path::new(r).is_file() => Some(plan_rate(std::path::Path::new(r))?),
        Some(r) => {
            Some(wv_units::parse_rate(r).map_err(|e| usage(wv_units::rate_error("--rate", r, e, true)))?.bytes_per_s())
        }
    };
    if let Some(p) = &a.plot {
        check_plot(p)?;
    }
    check_dir(&a.dir)?;
    check_space(&a, files, file_size)?;
    Ok(Plan {
        cfg: Config {
            dir: a.dir,
            files,
            file_size,
            mode: if a.buffered { Mode::Buffered } else { Mode::Direct },
            block_size,
            depth,
            prealloc_step: tuning.prealloc_step,
            keep: a.keep,
        },
        rate,
        rate_text: a.rate,
        margin: a.margin,
        plot: a.plot,
        json: a.json,
    })
}

/// `--plot FILE`: an .svg or .png where a file can be written, checked before the run.
fn check_plot(p: &std::path::Path) -> anyhow::Result<()> {
    if plot::Format::of(p).is_none() {
        return Err(usage(format!("--plot {} must end in .svg or .png", p.display())));
    }
    // Where the chart goes is checked before the run, not after it.
    let existed = p.exists();
    match std::fs::OpenOptions::new().append(true).create(true).open(p) {
        Ok(_) if !existed => drop(std::fs::remove_file(p)),
        Ok(_) => {}
        Err(e) => {
            return Err(usage(format!("--plot {}: cannot write there ({e}); choose a writable path", p.display())))
        }
    }
    Ok(())
}

/// DIR exists and is a directory.
fn check_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(fail(
                exit::ERROR,
                format!("{} is not a directory; give a directory on the volume to gauge", dir.display()),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(fail(
                exit::ERROR,
                format!("{} does not exist; give a directory on the volume to gauge", dir.display()),
            ))
        }
        Err(e) => return Err(fail(exit::ERROR, format!("{}: {e}", dir.display()))),
    }
    Ok(())
}

/// The run fits in [`MAX_FILL`] of the volume's free space, unless `--allow-fill`.
fn check_space(a: &Args, files: u32, file_size: u64) -> anyhow::Result<()> {
    let (free, _total) =
        wv_sys::fs::fs_space(&a.dir).map_err(|e| fail(exit::ERROR, format!("{}: {e}", a.dir.display())))?;
    let need = u64::from(files).saturating_mul(file_size);
    let limit = (free as f64 * MAX_FILL) as u64;
    if need > limit && !a.allow_fill {
        let fit = limit / file_size;
        let advice = if fit >= 2 {
            format!("at most {fit} such files fit (--files {fit})")
        } else {
            "not even two such files fit (make --file-size smaller)".to_string()
        };
        return Err(usage(format!(
            "{} has {} free; {files} files of {} ({}) would use more than {:.0}% of it: {advice}, or pass --allow-fill",
            a.dir.display(),
            human_bytes(free),
            human_bytes(file_size),
            human_bytes(need),
            MAX_FILL * 100.0
        )));
    }
    Ok(())
}

/// The rate a `wirevault plan --json` result asks the store to sustain:
/// the largest `store_bytes_per_s` of its rows (bytes per second).
fn plan_rate(path: &std::path::Path) -> anyhow::Result<f64> {
    let bad = |why: &str| {
        fail(
            exit::USAGE,
            format!(
                "--rate {}: {why}; give a rate (10gbps, 1.2GB/s) or a file written by `wirevault plan --json`",
                path.display()
            ),
        )
    };
    let text = std::fs::read_to_string(path).map_err(|e| bad(&format!("cannot read it ({e})")))?;
    // An array of rows as `plan --json` writes it, or one of them.
    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    enum Rows {
        Many(Vec<wv_plan::report::Row>),
        One(Box<wv_plan::report::Row>),
    }
    let rows = match serde_json::from_str::<Rows>(&text) {
        Ok(Rows::Many(rows)) => rows,
        Ok(Rows::One(row)) => vec![*row],
        Err(_) if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() => return Err(bad("not JSON")),
        Err(_) => return Err(bad("not the rows of `plan --json`, with their store_bytes_per_s")),
    };
    if let Some(r) = rows.iter().find(|r| r.version != wv_plan::report::VERSION) {
        return Err(bad(&format!(
            "its rows are of version {} and this wirevault reads version {}: run plan --json again",
            r.version,
            wv_plan::report::VERSION
        )));
    }
    rows.iter()
        .map(|r| r.store_bytes_per_s)
        .filter(|x| x.is_finite() && *x > 0.0)
        .reduce(f64::max)
        .ok_or_else(|| bad("no store_bytes_per_s in it (is it `plan --json` output?)"))
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let p = plan(args)?;
    // Every signal that stops `record` stops the run; the files are removed.
    let stop = Arc::new(AtomicBool::new(false));
    crate::cmd::catch_signals(crate::cmd::stop_signals(), |_| Arc::clone(&stop))?;
    let total = u64::from(p.cfg.files) * p.cfg.file_size;
    let bar = progress_bar(total);
    let outcome = runner::run(&p.cfg, &stop, &mut |done| {
        if let Some(b) = &bar {
            b.set_position(done);
        }
    });
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let dir = p.cfg.dir.display();
    let out = match outcome {
        Ok(o) => o,
        Err(BenchError::Interrupted) => {
            return Err(fail(exit::ERROR, format!("interrupted; the files written in {dir} were removed")))
        }
        Err(BenchError::Write { full: true, path, source }) => {
            return Err(fail(
                exit::DISK_FULL,
                format!("the volume filled up while writing {path} ({source}); the files were removed: use fewer or smaller files"),
            ))
        }
        Err(e) => return Err(fail(exit::ERROR, format!("{e}; the files written in {dir} were removed"))),
    };
    let memory = wv_sys::fs::memory_fs(&p.cfg.dir).ok().flatten();
    if let Some(kind) = memory {
        warn!(
            "{dir} is on {kind}, in memory: these figures are the speed of RAM, not of a disk; give a directory on the volume the store will use"
        );
    }
    if p.cfg.mode == Mode::Direct && !out.direct {
        note!("{dir} refused O_DIRECT (tmpfs, some FUSE/ZFS setups): measured buffered io_uring writes, as record would use there");
    }
    let rate = p.rate.map(|bytes_per_s| RateAsked {
        bytes_per_s,
        given: p.rate_text.clone(),
        margin: p.margin,
        floor: MIN_BUFFER.max(4 * p.cfg.block_size),
    });
    let report = Report::new(&p.cfg, &out, rate.as_ref(), memory);
    if let Some(path) = &p.plot {
        let title = format!("disk-bench {dir}: {} files of {}", p.cfg.files, human_bytes(p.cfg.file_size));
        let chart =
            plot::Chart { per_second: &out.per_second, mean: report.mean_bytes_per_s, rate: p.rate, title: &title };
        plot::draw(path, &chart).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    }
    if p.json {
        let line = serde_json::to_string(&report).map_err(|e| fail(exit::ERROR, e.to_string()))?;
        use std::io::Write as _;
        let mut o = std::io::stdout().lock();
        if writeln!(o, "{line}").and_then(|_| o.flush()).is_err() {
            return Err(fail(exit::ERROR, "cannot write to standard output"));
        }
    } else {
        print(&report, &p.cfg.dir);
    }
    Ok(exit::OK)
}

fn progress_bar(total: u64) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let style = indicatif::ProgressStyle::with_template(
        "{spinner} {elapsed_precise} [{bar:40}] {decimal_bytes}/{decimal_total_bytes} {decimal_bytes_per_sec} eta {eta}",
    )
    .ok()?
    .progress_chars("=> ");
    Some(
        indicatif::ProgressBar::with_draw_target(Some(total), indicatif::ProgressDrawTarget::stderr())
            .with_style(style),
    )
}

/// The text report, drawn from the JSON one; `dir` as given on the command line.
fn print(r: &Report, dir: &std::path::Path) {
    use std::io::Write as _;
    let how = if r.mode == Mode::Direct {
        format!("O_DIRECT io_uring, {} writes, queue depth {}", human_bytes(r.block_size), r.queue_depth)
    } else if r.direct_refused {
        format!(
            "buffered io_uring (O_DIRECT refused), {} writes, queue depth {}",
            human_bytes(r.block_size),
            r.queue_depth
        )
    } else {
        format!("buffered write(2) of {} + fsync per file", human_bytes(r.block_size))
    };
    let mut t = String::new();
    let gb = |b: f64| format!("{:.3}", b / 1e9);
    t += &format!("disk-bench {}: {} files of {}, {how}\n", dir.display(), r.files, human_bytes(r.file_size));
    t += &format!(
        "  wrote {} in {:.1} s: {} GB/s overall\n",
        human_bytes(r.total_bytes),
        r.elapsed_s,
        gb(r.overall_bytes_per_s)
    );
    t += &format!(
        "  per file (n = {}): mean {} GB/s, 99% CI [{}, {}], p5 {}, p95 {}, min {}, max {} GB/s\n",
        r.per_file_bytes_per_s.len(),
        gb(r.mean_bytes_per_s),
        gb(r.ci99_bytes_per_s[0]),
        gb(r.ci99_bytes_per_s[1]),
        gb(r.p5_bytes_per_s),
        gb(r.p95_bytes_per_s),
        gb(r.min_bytes_per_s),
        gb(r.max_bytes_per_s)
    );
    let win = |w: Option<f64>| w.map_or("n/a (run too short)".to_string(), |v| format!("{} GB/s", gb(v)));
    t += &format!(
        "  per second ({} whole seconds): worst 1 s {}, worst 10 s {}\n",
        r.per_second_bytes.len(),
        win(r.worst_1s_bytes_per_s),
        win(r.worst_10s_bytes_per_s)
    );
    if let Some(v) = &r.rate {
        t += &rate_verdict(r, v);
    }
    for k in &r.kept {
        t += &format!("  kept {k}\n");
    }
    let _ = std::io::stdout().lock().write_all(t.as_bytes());
}

/// What the run says about `--rate`: sustained or not, and the buffer its dips need.
fn rate_verdict(r: &Report, v: &wv_diskbench::report::RateReport) -> String {
    let mut t = String::new();
    let gb = |b: f64| format!("{:.3}", b / 1e9);
    let at = format!("{} ({} GB/s)", v.given.as_deref().unwrap_or(""), gb(v.bytes_per_s));
    if !v.sustained {
        t += &format!(
            "  at {at}: NOT sustained: the volume writes {} GB/s, {} GB/s short; no finite buffer suffices ({} behind per hour)\n",
            gb(r.overall_bytes_per_s),
            gb(v.bytes_per_s - r.overall_bytes_per_s),
            human_bytes(v.shortfall_bytes_per_hour as u64)
        );
    } else {
        let need = v.buffer_bytes.unwrap_or(0) as f64;
        let with = v.buffer_with_margin_bytes.unwrap_or(0);
        let dips = match v.worst_10s_meets_rate {
            Some(true) => "even its worst 10 s window keeps up",
            Some(false) => "its worst 10 s window falls below the rate",
            None => "the run was shorter than 10 s",
        };
        let margin = if buffer::round_up(need * v.margin, 0) < with {
            // The floor made it, not the dips: said, or 0 B x 1.5 reads as 64 MiB.
            format!(
                "x{} margin: {}, below {}, the smallest buffer record takes",
                v.margin,
                human_bytes((need * v.margin).ceil() as u64),
                human_bytes(with)
            )
        } else {
            format!("x{} margin: {}", v.margin, human_bytes(with))
        };
        t += &format!(
            "  at {at}: sustained on average ({dips}); the measured dips need a {} buffer, {margin}\n",
            human_bytes(need as u64)
        );
        t += &format!("  use: wirevault record --buffer {} ...\n", buffer::size_arg(with));
        if r.per_second_bytes.len() < 60 {
            t += &format!(
                "  note: the series has {} s; a longer run (the default 100 x 2G) sees rarer dips\n",
                r.per_second_bytes.len()
            );
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(2 << 30), "2.00 GiB");
        assert_eq!(human_bytes(1536 << 20), "1.50 GiB");
    }
}
