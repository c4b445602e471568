//! From flags to a [`RecorderConfig`]: each flag to its field. The rules the values must
//! meet, the defaults and what they are measured against are the recorder's
//! (`wv_record::checks`, `defaults`, `host`); what is here is the command line's own: the
//! refusals of tcpdump's habits and of a second `-o`, and the reporting flags.

use super::args::{Args, LiveSourceArg, TimestampsArg};
use super::failed;
use crate::{exit, fail};
use std::path::{Path, PathBuf};
use wv_record::{checks, Note};
pub use wv_record::{Layout, RecorderConfig, Reductions, Source as SourcePlan, Stamping, Tuning};

pub fn usage(msg: String) -> anyhow::Error {
    fail(exit::USAGE, msg)
}

/// What `record` makes of its flags: the recorder's configuration, and what the binary itself
/// reports and how.
pub struct Plan {
    pub config: RecorderConfig,
    pub output: OutputPlan,
    /// What to say once at start (a disk-bench result not taken).
    pub notes: Vec<Note>,
}

/// What is reported while recording and at the end, on the terminal.
#[derive(Clone)]
pub struct OutputPlan {
    /// Status and summary as JSON lines on standard output.
    pub json: bool,
    /// No status line.
    pub quiet: bool,
    /// Print `wirevault tune`'s warnings at start-up (not `--no-tune-warnings`).
    pub tune_warnings: bool,
}

/// Checks everything that can be checked before anything is created: a bad option leaves no
/// store directory behind.
pub fn plan(a: &Args) -> anyhow::Result<Plan> {
    let store = refuse_conflicts(a)?;
    let synthetic = a.synthetic.as_deref().map(|s| wv_capture::synthetic::parse_spec(s).map_err(usage)).transpose()?;
    if let Some(spec) = &synthetic {
        checks::synthetic_ends(spec, a.count.is_some() || a.duration.is_some() || a.max_size.is_some())
            .map_err(failed)?;
    }
    let (sizing, notes) = checks::sizing(&checks::SizeChoices {
        store,
        workers: a.workers,
        live: a.interface.is_some(),
        synthetic: a.synthetic.is_some(),
        snaplen: a.snaplen,
        block: a.block_size.value,
        file: a.file_size.value,
        buffer: a.buffer.as_ref(),
        ring: a.ring_size.as_ref(),
        zero_copy: a.zero_copy,
        pcapng: a.format == super::args::FormatArg::Pcapng,
        xdp: a.capture_source == LiveSourceArg::Xdp,
    })
    .map_err(failed)?;
    let timestamps = match a.timestamps {
        TimestampsArg::Hw => Stamping::Hardware,
        TimestampsArg::Sw => Stamping::Software,
        TimestampsArg::Auto => Stamping::Auto,
    };
    // In the order the checks ran when they were the binary's: the first refusal stays the same.
    let source = source(a, synthetic, timestamps)?;
    let cpus = a.cpus.as_deref().map(wv_record::host::cpus_available).transpose().map_err(failed)?;
    let budget = a.max_size.as_ref().map(|m| budget(a, m)).transpose()?;
    let timeouts = (a.flow_idle_timeout, a.flow_active_timeout);
    let (flows, sinks) =
        checks::flows(a.flows, timeouts, a.max_flows, &a.flows_to, a.clickhouse_auth.as_deref()).map_err(failed)?;
    let config = RecorderConfig {
        store: store.clone(),
        volumes: a.volumes.clone(),
        source,
        workers: a.workers,
        snaplen: a.snaplen,
        stream: Layout {
            format: a.format.into(),
            arena_per_worker: sizing.per_worker,
            block_size: a.block_size.value,
            file_size: a.file_size.value,
            file_time_ns: a.file_time.map(|d| d.as_nanos() as u64),
        },
        cpus,
        count: a.count,
        duration: a.duration,
        expression: (!a.filter.is_empty()).then(|| a.filter.join(" ")),
        budget,
        user: a.user.clone(),
        direct: !a.no_direct,
        spill: a.spill_above.0,
        index: !a.no_index,
        flows,
        flows_to: sinks.ipfix,
        clickhouse: sinks.clickhouse,
        stats_copy: a.stats_file.clone(),
        tuning: Tuning { ring_blocks: sizing.ring_blocks, ..Tuning::default() },
        reduce: Reductions {
            dedup_window_ns: a.dedup.map(|d| d.as_nanos() as u64),
            flow_cutoff: a.flow_cutoff,
            flow_table: checks::flow_table(a.flow_table).map_err(failed)?,
            flow_idle_ns: a.flow_idle.as_nanos() as u64,
        },
        timestamps,
        buffer_from: sizing.buffer_from,
        zero_copy: a.zero_copy,
    };
    let output = OutputPlan { json: a.json, quiet: a.quiet, tune_warnings: !a.no_tune_warnings };
    Ok(Plan { config, output, notes })
}

/// `--max-size` over the store and its volumes, and `--on-full`.
fn budget(a: &Args, m: &wv_units::Given<checks::MaxSize>) -> anyhow::Result<wv_store::catalog::Budget> {
    let store = a.store.as_deref().unwrap_or(Path::new("."));
    let dirs: Vec<&Path> = std::iter::once(store).chain(a.volumes.iter().map(PathBuf::as_path)).collect();
    checks::budget(m, a.on_full.into(), &dirs, &a.file_size, a.workers).map_err(failed)
}

/// The refusals of the command line's own (tcpdump's `-w`, a second `-o`, `-i any`, `-c 0`),
/// then the recorder's probes of the store, `--user` and `--stats-file`. Returns the store.
fn refuse_conflicts(a: &Args) -> anyhow::Result<&PathBuf> {
    if a.tcpdump_write.is_some() {
        return Err(usage(
            "record has no -w: give the store directory with -o DIR (it holds the pcap files) and the number of capture workers with --workers N".into(),
        ));
    }
    // clap requires -o unless -w (refused above) is given.
    let Some(store) = a.store.as_ref() else {
        return Err(usage("record needs a store directory: -o DIR".into()));
    };
    let argv: Vec<String> = std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect();
    if let [first, second, ..] = &crate::cmd::habits::values_given(&argv, "record", "store")[..] {
        return Err(usage(format!(
            "-o is given twice ({first} and {second}): a store is one directory; give each more disk with --volume DIR"
        )));
    }
    if a.interface.as_deref() == Some("any") {
        return Err(usage(
            "-i any (Linux cooked capture) is not supported: record each interface with its own -i IF and -o STORE, or an interface that sees all the traffic (a bridge or a mirror port)".into(),
        ));
    }
    if a.count == Some(0) {
        return Err(usage("-c/--count must be at least 1 (-c 0 would store nothing)".into()));
    }
    wv_record::host::store_dir(store).map_err(failed)?;
    if let Some(u) = &a.user {
        wv_record::host::user_known(u).map_err(failed)?;
    }
    if let Some(sf) = &a.stats_file {
        checks::stats_file(sf, store).map_err(failed)?;
    }
    Ok(store)
}

/// The source: `-i IF` (AF_PACKET or AF_XDP), `--read FILE...` or `--synthetic SPEC`.
fn source(a: &Args, synthetic: Option<wv_capture::synthetic::Spec>, stamps: Stamping) -> anyhow::Result<SourcePlan> {
    let xdp = a.capture_source == LiveSourceArg::Xdp;
    checks::stamping(a.interface.is_some(), xdp, stamps).map_err(failed)?;
    if let Some(interface) = &a.interface {
        Ok(SourcePlan::Live { interface: interface.clone(), promisc: !a.no_promisc, xdp })
    } else if !a.read.is_empty() {
        checks::read_files(&a.read).map_err(failed)?;
        Ok(SourcePlan::Read { files: a.read.clone() })
    } else if let Some(spec) = synthetic {
        Ok(SourcePlan::Synthetic(spec))
    } else {
        // clap's group requires one of the three.
        Err(usage("give a source: -i IF, --read FILE or --synthetic SPEC".into()))
    }
}
