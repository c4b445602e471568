//! `wirevault analyze STORE|FILE [--from T] [--to T] [EXPRESSION...]`:
//! statistics over the packets `query` would select (duplicates, malformed
//! frames, traffic mix, throughput, TCP analysis, RTP streams, one-way
//! delay against a second capture point), as a table, JSON or charts.
//! The mechanisms live in `wv_analyze`; this file parses, validates, wires.

use crate::cmd::query::{prepare_error, Selection};
use crate::log::Level;
use crate::{exit, fail};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

/// Default throughput interval.
const DEFAULT_STEP: &str = "1s";
/// Default duplicate time window.
const DEFAULT_DUP_WINDOW: &str = "1ms";

/// Arguments of `wirevault analyze`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub sel: Selection,
    /// Analyze only the first N matching packets (1 or more, as `query --limit`).
    #[arg(long, value_name = "N", value_parser = super::packet_limit)]
    pub limit: Option<u64>,
    /// Print the whole report as JSON on standard output instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write charts (throughput.svg, sizes.svg, jitter.svg) into DIR (created if missing).
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_STEP,
        help = format!("Throughput interval; {}", wv_units::DURATION_FORMS))]
    pub step: String,
    /// Most throughput intervals (1 to 16,777,216): a capture spanning more than N steps
    /// gets its step doubled until it fits (said on standard error), so that output stays
    /// bounded.
    #[arg(long, value_name = "N", default_value_t = wv_analyze::DEFAULT_MAX_INTERVALS)]
    pub max_intervals: usize,
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_DUP_WINDOW, help = format!(
        "A frame is a duplicate of an identical one at most this long before it; {}",
        wv_units::DURATION_FORMS
    ))]
    pub dup_window: String,
    /// ... and among the previous N frames (`editcap -D N+1`).
    #[arg(long, value_name = "N", default_value_t = wv_analyze::Config::default().dup_frames)]
    pub dup_frames: usize,
    /// Frames whose network layer is longer than this are reported as over the MTU.
    #[arg(long, value_name = "BYTES", default_value_t = wv_analyze::Config::default().mtu)]
    pub mtu: u32,
    /// Most flows (address pair, transport, port pair: every per-flow statistic shares
    /// one table), RTP streams and reference packets of --against; packets beyond are
    /// counted as untracked.
    #[arg(long, value_name = "N", default_value_t = wv_analyze::Config::default().max_flows)]
    pub max_flows: usize,
    /// Rows of each list in the table.
    #[arg(long, value_name = "N", default_value_t = wv_analyze::Config::default().top)]
    pub top: usize,
    /// Examples listed per duplicate and malformed kind.
    #[arg(long, value_name = "N", default_value_t = wv_analyze::Config::default().examples)]
    pub examples: usize,
    /// Measure one-way delay against a second capture point (a store or a
    /// capture file holding the same packets, selected by the same filter).
    #[arg(long, value_name = "STORE|FILE")]
    pub against: Option<PathBuf>,
    /// Exit with code 1 if a file was missing, short or unreadable (the
    /// report still covers every readable packet), as `query --strict`.
    #[arg(long)]
    pub strict: bool,
}

/// A duration in nanoseconds (the one grammar: [`super::duration_arg`]);
/// only --dup-window may be 0.
fn duration(flag: &str, v: &str) -> anyhow::Result<u64> {
    let ns = super::duration_arg(flag, v)?.as_nanos() as u64;
    if ns == 0 && flag != "--dup-window" {
        return Err(fail(exit::USAGE, format!("{flag} must be longer than 0")));
    }
    Ok(ns)
}

/// The validated plan.
struct Plan {
    cfg: wv_analyze::Config,
    input: Input,
}

/// What is analyzed: one store's query, or the fleet's merge (--store, --fleet).
enum Input {
    One(wv_query::Query),
    Fleet(Vec<wv_fleet::Node>, wv_fleet::Selection),
}

impl Input {
    fn expr(&self) -> &str {
        match self {
            Input::One(q) => &q.expr,
            Input::Fleet(_, sel) => &sel.expr,
        }
    }
}

fn plan(args: &Args) -> anyhow::Result<Plan> {
    let input = if args.sel.sources.given() {
        let (nodes, sel) = super::fleet::selection(&args.sel, args.limit)?;
        Input::Fleet(nodes, sel)
    } else {
        Input::One(args.sel.query(args.limit)?)
    };
    let cfg = wv_analyze::Config {
        dup_window_ns: duration("--dup-window", &args.dup_window)?,
        dup_frames: args.dup_frames,
        mtu: args.mtu,
        step_ns: duration("--step", &args.step)?,
        max_flows: args.max_flows,
        max_intervals: args.max_intervals,
        examples: args.examples,
        top: args.top,
    };
    if args.json && args.plot.as_deref().is_some_and(|p| p.as_os_str() == "-") {
        return Err(fail(exit::USAGE, "--plot takes a directory, not standard output"));
    }
    Ok(Plan { cfg, input })
}

/// A progress bar on standard error when it is a terminal.
fn progress(total: Option<u64>) -> Option<indicatif::ProgressBar> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = match total {
        Some(n) => indicatif::ProgressBar::new(n).with_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} packets, {per_sec}, {eta} left")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        ),
        None => indicatif::ProgressBar::new_spinner().with_style(
            indicatif::ProgressStyle::with_template("{spinner} {pos} packets, {per_sec}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        ),
    };
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr_with_hz(4));
    Some(bar)
}

/// Runs a query into `f`, with the query's warnings said on standard error;
/// returns how many files were damaged or missing.
fn each(q: wv_query::Query, mut f: impl FnMut(u64, u32, u32, &[u8])) -> anyhow::Result<usize> {
    let prepared = wv_query::prepare(q).map_err(prepare_error)?;
    let outside = prepared.outside();
    let bar = progress(prepared.packets_upper_bound());
    let mut n = 0u64;
    let mut g = |p: wv_query::PacketRef<'_>| {
        f(p.ts_ns, p.origlen, p.linktype, p.data);
        n += 1;
        if n.is_multiple_of(4096) {
            if let Some(b) = &bar {
                b.set_position(n);
            }
        }
        Ok(())
    };
    let report =
        wv_query::run(prepared, wv_query::Sink::Packets(&mut g)).map_err(|e| fail(exit::ERROR, e.to_string()))?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    super::query::say_warnings(&report.warnings);
    if let (0, Some(why)) = (n, &outside) {
        info!("no packet matched: {why}");
    }
    if report.part_files > 0 {
        info!("{} file(s) being written or left by a crash are not included", report.part_files);
    }
    Ok(report.damaged + report.on_unusable_volume)
}

pub fn run(args: Args) -> anyhow::Result<u8> {
    let p = plan(&args)?;
    let mut an = wv_analyze::Analyzer::new(p.cfg.clone()).map_err(|e| fail(exit::USAGE, e.to_string()))?;
    let mut damaged = 0;
    if let Some(other) = &args.against {
        let mut d = wv_analyze::delay::Delay::new(p.cfg.max_flows);
        let expr = p.input.expr().to_string();
        let q = wv_query::Query { store: other.clone(), from_ns: None, to_ns: None, expr, limit: None };
        damaged += each(q, |ts, len, _, data| d.reference(ts, len, data))?;
        an.with_delay(d);
    }
    // With several sources, the nodes left out are named and make the exit
    // code (1 unless --allow-partial), as in `query`.
    let mut partial = exit::OK;
    match p.input {
        Input::One(q) => {
            damaged += each(q, |ts_ns, wire_len, linktype, data| {
                an.feed(&wv_analyze::Frame { ts_ns, linktype, wire_len, data });
            })?
        }
        Input::Fleet(nodes, sel) => {
            let mut feed = |m: wv_fleet::MergedPacket<'_>| {
                an.feed(&wv_analyze::Frame { ts_ns: m.ts_ns, linktype: m.linktype, wire_len: m.origlen, data: m.data });
                Ok(())
            };
            let outcome = wv_fleet::each(&nodes, &sel, &mut feed).map_err(|e| match e {
                wv_fleet::MergeError::Usage(m) => fail(exit::USAGE, m),
                e => fail(exit::ERROR, e.to_string()),
            })?;
            partial =
                super::fleet::say_lost(&outcome.lost, &outcome.warnings, args.sel.sources.allow_partial, nodes.len());
        }
    }
    let report = an.finish();
    say_step(&report, &args);
    if let Some(dir) = &args.plot {
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(exit::ERROR, format!("cannot create the --plot directory {}: {e}", dir.display())))?;
        let files = wv_analyze::plot::write_all(&report, dir).map_err(|e| fail(exit::ERROR, e.to_string()))?;
        for f in files {
            info!("wrote {}", f.display());
        }
    }
    // Straight to standard output through a buffer: the JSON of a big
    // capture lists every conversation, and need not be held whole.
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &report).map_err(std::io::Error::from).and_then(|_| out.write_all(b"\n"))
    } else {
        out.write_all(wv_analyze::report::table(&report, args.top).as_bytes())
    };
    let ok = if args.strict && damaged > 0 {
        message!(Level::Error, "--strict: {damaged} damaged or missing file(s)");
        exit::ERROR
    } else {
        partial
    };
    match written.and_then(|_| out.flush()) {
        Ok(()) => Ok(ok),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ok),
        Err(e) => Err(fail(exit::ERROR, format!("cannot write the report: {e}"))),
    }
}

/// A note when throughput is given per another step than `--step` asked, and why.
fn say_step(report: &wv_analyze::Report, args: &Args) {
    let t = &report.throughput;
    if t.step_ns == t.requested_step_ns {
        return;
    }
    let base = t.requested_step_ns.max(wv_analyze::qos::io::MIN_STEP_NS);
    let mut why = Vec::new();
    if base > t.requested_step_ns {
        why.push(
            "a step is at least 1 us (frame times count in whole microseconds, as tshark's io,stat counts them)"
                .to_string(),
        );
    }
    if t.step_ns > base {
        why.push(format!(
            "at {} the capture spans more than {} intervals (--max-intervals)",
            wv_analyze::report::duration_text(base),
            args.max_intervals
        ));
    }
    note!(
        "throughput is given per {} instead of --step {}: {}",
        wv_analyze::report::duration_text(t.step_ns),
        args.step,
        why.join(", and ")
    );
}
