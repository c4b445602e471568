//! From flags to a validated plan: everything that can be checked before
//! anything is created is checked here, so a bad option leaves no store
//! directory behind. The defaults of `record` and its fixed tunings live in
//! [`defaults`] and [`Tuning`], nowhere else.

use super::args::{Args, LiveSourceArg, TimestampsArg};
use crate::{exit, fail};
use std::path::{Path, PathBuf};
use std::time::Duration;
use wv_capture::synthetic;
pub use wv_record::{
    min_budget, Layout as StreamPlan, RecorderConfig, Reductions as ReducePlan, Source as SourcePlan, Stamping, Tuning,
};
use wv_store::catalog::Budget;
use wv_units::{parse_cpu_list, parse_percent};

/// Defaults of the flags of `record` (clap shows them in `--help`).
pub mod defaults {
    /// `--workers`.
    pub const WORKERS: usize = 1;
    /// `--block-size`.
    pub const BLOCK_SIZE: &str = "4M";
    /// `--file-size`.
    pub const FILE_SIZE: &str = "1G";
    /// `--flow-idle`: a connection silent this long starts again (the
    /// Time Machine's inactivity timeout is of this order).
    pub const FLOW_IDLE: &str = "60s";

    /// `--ring-size` when not given: 256 MiB of kernel ring in all, split
    /// between the workers, at least 32 MiB each.
    pub fn ring_size(workers: usize) -> u64 {
        (RING_TOTAL / workers.max(1) as u64).max(RING_MIN) / (4 << 20) * (4 << 20)
    }

    /// `--buffer` when not given and the store has no disk-bench result:
    /// see [`buffer_for_memory`], and for the zero-copy path
    /// [`zero_copy_buffer_for_memory`].
    pub fn buffer(zero_copy: bool) -> u64 {
        let ram = wv_sys::cpu::usable_memory();
        if zero_copy {
            zero_copy_buffer_for_memory(ram)
        } else {
            buffer_for_memory(ram)
        }
    }

    /// The arena a machine with `ram` bytes (what the process's cgroup allows, if less) gets
    /// by default: 1/8 of it, at least 64 MiB, at most 4 GiB. Buffered writers (tcpdump,
    /// netsniff-ng) park a burst in the page cache, up to vm.dirty_ratio (20%) of memory;
    /// the arena stays resident (and pinned, once registered with io_uring), so it takes a
    /// smaller share. Its blocks are taken lowest first (`wv_sys::byte_ring`) and only its
    /// first [`Tuning::arena_first`](wv_record::Tuning::arena_first) bytes (64 MiB) are faulted in before capture starts, the rest
    /// ahead of the backlog by a background thread (`prefault`): on a disk that keeps up it
    /// costs a few blocks, whatever its size (stats.json `arena_used_bytes`,
    /// `arena_faulted_bytes`; fresh memory costs ~3 s of CPU per GiB here).
    pub fn buffer_for_memory(ram: u64) -> u64 {
        (ram / ARENA_SHARE).clamp(ARENA_MIN, ARENA_MAX)
    }

    /// The zero-copy path's buffer (its ring, with [`ring_size`]) on a machine with `ram`
    /// bytes, when no `--buffer` or disk-bench result sets it: 1/8 of it up to 1 GiB, beyond
    /// 16 GiB 1/16 of it up to 4 GiB (the copy path's arena before it was faulted in behind
    /// capture). The kernel zeroes the whole ring when it is made, all of it start-up cost.
    pub fn zero_copy_buffer_for_memory(ram: u64) -> u64 {
        let small = ZERO_COPY_SMALL_MAX.min(ram / ARENA_SHARE);
        let large = (ram / ZERO_COPY_LARGE_SHARE).min(ARENA_MAX);
        small.max(large).max(ARENA_MIN)
    }

    // The numbers of the rules above, which `--help` states from them
    // (`buffer_default`, `ring_default`): one statement of each default.

    /// The copy path's arena takes 1/ARENA_SHARE of the memory...
    pub const ARENA_SHARE: u64 = 8;
    /// ... at least this much ...
    pub const ARENA_MIN: u64 = 64 << 20;
    /// ... and at most this much (so does the zero-copy ring).
    pub const ARENA_MAX: u64 = 4 << 30;
    /// The zero-copy buffer: 1/ARENA_SHARE up to this, beyond ...
    pub const ZERO_COPY_SMALL_MAX: u64 = 1 << 30;
    /// ... 1/ZERO_COPY_LARGE_SHARE of the memory.
    pub const ZERO_COPY_LARGE_SHARE: u64 = 16;
    /// The live workers' kernel rings together, when `--ring-size` is not given ...
    pub const RING_TOTAL: u64 = 256 << 20;
    /// ... at least this much each.
    pub const RING_MIN: u64 = 32 << 20;
    /// The zero-copy path's default ring (buffer share and ring) at most.
    pub const RING_MAX: u64 = 4 << 30;

    /// `--buffer`'s default, as its help says it.
    pub fn buffer_default() -> String {
        format!(
            "what the store's {} asks for (disk-bench --rate R --json), else 1/{ARENA_SHARE} of the memory this \
             process may use (its cgroup's limit if lower), {} to {}; with --zero-copy 1/{ARENA_SHARE} of it up \
             to {}, beyond {} of memory 1/{ZERO_COPY_LARGE_SHARE} of it up to {}",
            wv_store::layout::DISK_BENCH,
            size(ARENA_MIN),
            size(ARENA_MAX),
            size(ZERO_COPY_SMALL_MAX),
            size(ZERO_COPY_SMALL_MAX * ZERO_COPY_LARGE_SHARE),
            size(ARENA_MAX),
        )
    }

    /// `--ring-size`'s default, as its help says it.
    pub fn ring_default() -> String {
        format!(
            "{} for one worker, {} split between more, at least {} each; with --zero-copy that plus the \
             worker's share of --buffer, up to {}",
            size(RING_TOTAL),
            size(RING_TOTAL),
            size(RING_MIN),
            size(RING_MAX),
        )
    }

    /// `n` bytes with the largest binary suffix that divides them (64M, 4G).
    fn size(n: u64) -> String {
        let (v, unit) = [(40, "T"), (30, "G"), (20, "M"), (10, "K")]
            .into_iter()
            .find(|(s, _)| n >= 1 << s && n.is_multiple_of(1 << s))
            .map_or((n, ""), |(s, u)| (n >> s, u));
        format!("{v}{unit}")
    }
}

/// Sizes beyond this (1 EiB) are out of range for every option: no store,
/// file or arena comes near it, and larger values would overflow.
const MAX_SIZE: u64 = 1 << 60;

pub fn usage(msg: String) -> anyhow::Error {
    fail(exit::USAGE, msg)
}

/// The size of the file systems holding `dirs` (each once), each judged at
/// the path or its nearest existing parent: nothing is created yet
/// (`record --max-size PERCENT` and `tune` take a share of it).
pub fn volumes_size(dirs: &[&Path]) -> anyhow::Result<u64> {
    volumes_space(dirs).map(|(_, total)| total)
}

/// The free and total bytes of the file systems holding `dirs`, each once
/// (see [`volumes_size`]).
pub fn volumes_space(dirs: &[&Path]) -> anyhow::Result<(u64, u64)> {
    let mut seen = Vec::new();
    let (mut free, mut total) = (0u64, 0u64);
    for dir in dirs {
        let on = dir.ancestors().find(|p| p.exists()).filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let dev = std::fs::metadata(on).map(|m| std::os::unix::fs::MetadataExt::dev(&m)).ok();
        if dev.is_some_and(|d| seen.contains(&d)) {
            continue;
        }
        seen.extend(dev);
        let (f, t) = wv_sys::fs::fs_space(on)
            .map_err(|e| fail(exit::ERROR, format!("cannot read the size of the volume of {}: {e}", dir.display())))?;
        free = free.saturating_add(f);
        total = total.saturating_add(t);
    }
    Ok((free, total))
}

/// Every different `-o` the command line gives, in order, as clap's own
/// tokenizer reads them (`-o DIR`, `-oDIR`, `-o=DIR`, `--output[=]DIR`,
/// combined short flags such as `-qoDIR`; nothing after `--`). The parse
/// that `record` runs on keeps only the last one (`args_override_self`, for
/// `--config`), so a second store would be taken without a word.
fn outputs_given(argv: &[String]) -> Vec<String> {
    use clap::CommandFactory;
    // `-o` appended: it keeps every value (the other flags still override
    // themselves, so a repeated `-q` does not stop the parse).
    let cmd = crate::Cli::command()
        .ignore_errors(true)
        .mut_subcommand("record", |s| s.mut_arg("store", |a| a.action(clap::ArgAction::Append)));
    let Ok(m) = cmd.try_get_matches_from(argv) else { return Vec::new() };
    let Some(given) = m.subcommand_matches("record").and_then(|r| r.get_many::<std::path::PathBuf>("store")) else {
        return Vec::new();
    };
    let mut found: Vec<String> = Vec::new();
    for v in given.map(|p| p.display().to_string()) {
        if !found.contains(&v) {
            found.push(v);
        }
    }
    found
}

/// `--buffer TEXT` of `v` bytes, if this machine has that much memory
/// (`record` and `tune` take the same).
pub fn buffer_fits(text: &str, v: u64) -> anyhow::Result<u64> {
    let ram = wv_sys::cpu::total_memory();
    if ram > 0 && v > ram {
        return Err(usage(format!(
            "--buffer {text} is more than this machine's memory ({} MiB); give at most a share of it, e.g. 1G",
            ram >> 20
        )));
    }
    Ok(v)
}

/// `--cpus LIST`, if every CPU in it is available to this process (`record`
/// and `tune` take the same).
pub fn cpus_available(c: &str) -> anyhow::Result<Vec<usize>> {
    let v = parse_cpu_list(c).ok_or_else(|| usage(format!("--cpus \"{c}\" is not a list like 0,1 or 2-5")))?;
    let allowed = wv_sys::cpu::allowed_cpus();
    if let Some(bad) = v.iter().find(|c| !allowed.contains(c)) {
        return Err(usage(format!("--cpus: CPU {bad} is not available to this process (allowed: {allowed:?})")));
    }
    Ok(v)
}

/// What `record` makes of its flags: the recorder's configuration, and what the binary itself
/// reports and how.
pub struct Plan {
    pub config: RecorderConfig,
    pub output: OutputPlan,
    /// Warnings about the plan to print once at start (sentences without a prefix).
    pub notes: Vec<String>,
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

/// Checks everything that can be checked before anything is created: a bad
/// option leaves no store directory behind.
pub fn plan(a: &Args) -> anyhow::Result<Plan> {
    let store = refuse_conflicts(a)?;
    let synthetic = synthetic_spec(a)?;
    let mut notes = Vec::new();
    let sizes = sizes(a, store, &mut notes)?;
    let times = times(a)?;
    let sinks = flows_to(a)?;
    let config = RecorderConfig {
        store: store.clone(),
        volumes: a.volumes.clone(),
        source: source(a, synthetic)?,
        workers: a.workers,
        snaplen: a.snaplen,
        stream: StreamPlan {
            format: a.format.into(),
            arena_per_worker: sizes.per_worker,
            block_size: sizes.block,
            file_size: sizes.file,
            file_time_ns: times.file_time_ns,
        },
        cpus: a.cpus.as_deref().map(cpus_available).transpose()?,
        count: a.count,
        duration: times.duration,
        expression: (!a.filter.is_empty()).then(|| a.filter.join(" ")),
        budget: budget(a, store, sizes.file)?,
        user: a.user.clone(),
        direct: !a.no_direct,
        spill: a.spill_above.0,
        index: !a.no_index,
        flows: flows(a)?,
        flows_to: sinks.ipfix,
        clickhouse: sinks.clickhouse,
        stats_copy: a.stats_file.clone(),
        tuning: Tuning { ring_blocks: sizes.ring_blocks, ..Tuning::default() },
        reduce: reductions(a)?,
        timestamps: match a.timestamps {
            TimestampsArg::Hw => Stamping::Hardware,
            TimestampsArg::Sw => Stamping::Software,
            TimestampsArg::Auto => Stamping::Auto,
        },
        buffer_from: sizes.buffer_from,
        zero_copy: a.zero_copy,
    };
    let output = OutputPlan { json: a.json, quiet: a.quiet, tune_warnings: !a.no_tune_warnings };
    Ok(Plan { config, output, notes })
}

/// The refusals that need no value parsed: tcpdump's `-w`, a second `-o`, `-i any`, `-c 0`, a
/// store that is a file, an unknown `--user`, a bad `--stats-file`. Returns the store.
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
    if let [first, second, ..] = &outputs_given(&argv)[..] {
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
    if std::fs::metadata(store).is_ok_and(|m| !m.is_dir()) {
        return Err(fail(
            exit::ERROR,
            format!(
                "-o {} is not a directory: a store is a directory (give a new or an existing store directory)",
                store.display()
            ),
        ));
    }
    if let Some(u) = &a.user {
        if wv_sys::cpu::lookup_user(u).is_none() {
            return Err(usage(format!("--user: no user named {u} (see /etc/passwd)")));
        }
    }
    if let Some(sf) = &a.stats_file {
        check_stats_file(sf, store)?;
    }
    Ok(store)
}

/// `--synthetic SPEC`, which must end somehow.
fn synthetic_spec(a: &Args) -> anyhow::Result<Option<synthetic::Spec>> {
    let spec = a.synthetic.as_deref().map(|s| synthetic::parse_spec(s).map_err(usage)).transpose()?;
    let endless = |sp: &synthetic::Spec| {
        sp.count.is_none() && sp.duration.is_none() && a.count.is_none() && a.duration.is_none() && a.max_size.is_none()
    };
    if spec.as_ref().is_some_and(endless) {
        return Err(usage(
            "--synthetic needs an end: count=N or duration=T in the spec, -c N, --duration T, or a --max-size budget"
                .into(),
        ));
    }
    Ok(spec)
}

/// `what`'s value `s` as a size below [`MAX_SIZE`].
fn size(what: &str, s: &str) -> anyhow::Result<u64> {
    match crate::cmd::size_arg(what, s, true)? {
        v if v >= MAX_SIZE => Err(usage(format!("{what} {s} is out of range (sizes go up to 1023P)"))),
        v => Ok(v),
    }
}

/// The byte sizes of the streams and their buffers.
struct Sizes {
    block: u64,
    file: u64,
    per_worker: u64,
    ring_blocks: usize,
    buffer_from: &'static str,
}

/// Blocks, files, workers, snaplen, the buffer (from `--buffer`, the store's disk-bench result
/// or memory) and the kernel ring.
fn sizes(a: &Args, store: &Path, notes: &mut Vec<String>) -> anyhow::Result<Sizes> {
    let block = size("--block-size", &a.block_size)?;
    if block < 64 << 10 || block % 4096 != 0 || block > 64 << 20 {
        return Err(usage(format!("--block-size must be a multiple of 4K between 64K and 64M, not {}", a.block_size)));
    }
    let file = size("--file-size", &a.file_size)?;
    if !(64 << 10..=1 << 40).contains(&file) {
        return Err(usage(format!("--file-size must be between 64K and 1T, not {}", a.file_size)));
    }
    if a.workers == 0 || a.workers > 64 {
        return Err(usage(format!("--workers must be 1..=64, not {}", a.workers)));
    }
    // (With --synthetic each worker generates SPEC on its own stream: the
    // store's throughput with several writers, e.g. on several volumes.)
    if a.workers > 1 && a.interface.is_none() && a.synthetic.is_none() {
        return Err(usage(
            "--workers > 1 needs --interface (fanout spreads live traffic over workers) or --synthetic".into(),
        ));
    }
    if a.snaplen == 0 || a.snaplen > wv_wire::MAX_SNAPLEN {
        return Err(usage(format!("--snaplen must be 1..={}, not {}", wv_wire::MAX_SNAPLEN, a.snaplen)));
    }
    let (buffer, buffer_from) = match &a.buffer {
        Some(b) => (buffer_fits(b, size("--buffer", b)?)?, "--buffer"),
        None => match disk_bench_buffer(store)? {
            Some(Ok(b)) => (b, "disk-bench"),
            Some(Err(why)) => {
                notes.push(why);
                (defaults::buffer(a.zero_copy), "memory")
            }
            None => (defaults::buffer(a.zero_copy), "memory"),
        },
    };
    let per_worker = (buffer / a.workers as u64) / block * block;
    if per_worker < 4 * block {
        return Err(usage(format!(
            "--buffer {} is too small: each worker needs at least 4 blocks of {} bytes",
            a.buffer.as_deref().unwrap_or("default"),
            block
        )));
    }
    if a.zero_copy {
        check_zero_copy(a)?;
    }
    let ring_blocks = (ring_size(a, per_worker)? / Tuning::default().ring_block_size as u64).max(2) as usize;
    Ok(Sizes { block, file, per_worker, ring_blocks, buffer_from })
}

/// Each worker's kernel ring in bytes: `--ring-size`, or its default.
fn ring_size(a: &Args, per_worker: u64) -> anyhow::Result<u64> {
    let Some(r) = &a.ring_size else {
        // Zero-copy: the ring is the only buffer, as large as the copy path's arena and ring
        // together (the same memory; with the arena's size alone it held half as much and
        // dropped frames under contention where the copy path did not: bench/RESULTS.md).
        // (From memory, --buffer's default is smaller on this path: zero_copy_buffer_for_memory.)
        return Ok(if a.zero_copy {
            (per_worker + defaults::ring_size(a.workers)).clamp(8 << 20, defaults::RING_MAX)
        } else {
            defaults::ring_size(a.workers)
        });
    };
    let v = crate::cmd::size_arg("--ring-size", r, true)?;
    if !(8 << 20..=4 << 30).contains(&v) {
        return Err(usage(format!("--ring-size must be between 8M and 4G per worker, not {r}")));
    }
    let ram = wv_sys::cpu::total_memory();
    if ram > 0 && v.saturating_mul(a.workers as u64) > ram / 2 {
        return Err(usage(format!(
            "--ring-size {r} for {} worker(s) is more than half this machine's memory ({} MiB); give less",
            a.workers,
            ram >> 20
        )));
    }
    Ok(v)
}

/// `--file-time` (in ns) and `--duration`.
struct Times {
    file_time_ns: Option<u64>,
    duration: Option<Duration>,
}

fn times(a: &Args) -> anyhow::Result<Times> {
    let file_time_ns = match &a.file_time {
        Some(t) => {
            let d = crate::cmd::duration_arg("--file-time", t)?;
            if d < Duration::from_millis(10) || d > Duration::from_secs(366 * 86_400) {
                return Err(usage(format!("--file-time must be between 10ms and 366d, not {t}")));
            }
            Some(d.as_nanos() as u64)
        }
        None => None,
    };
    let duration = a.duration.as_deref().map(|d| crate::cmd::duration_arg("--duration", d)).transpose()?;
    if duration.is_some_and(|d| d.is_zero()) {
        return Err(usage("--duration must be longer than 0".into()));
    }
    Ok(Times { file_time_ns, duration })
}

/// `--flows`, `--flow-idle-timeout`, `--flow-active-timeout`.
fn flows(a: &Args) -> anyhow::Result<Option<wv_flows::FlowConfig>> {
    let idle = crate::cmd::duration_arg("--flow-idle-timeout", &a.flow_idle_timeout)?;
    let active = crate::cmd::duration_arg("--flow-active-timeout", &a.flow_active_timeout)?;
    for (flag, d) in [("--flow-idle-timeout", idle), ("--flow-active-timeout", active)] {
        if d < Duration::from_secs(1) {
            return Err(usage(format!("{flag} must be at least 1s (flows are checked once a second)")));
        }
    }
    Ok((a.flows || !a.flows_to.is_empty()).then(|| wv_flows::FlowConfig {
        idle_timeout_ns: idle.as_nanos() as u64,
        active_timeout_ns: active.as_nanos() as u64,
        ..wv_flows::FlowConfig::default()
    }))
}

/// `--flows-to SINK=URL` and `--clickhouse-auth FILE`: IPFIX collectors, a ClickHouse table.
fn flows_to(a: &Args) -> anyhow::Result<wv_record::config::FlowSinks> {
    if !a.flows_to.is_empty() && a.zero_copy {
        return Err(usage("--flows-to needs flow records, which --zero-copy does not make; drop one of them".into()));
    }
    wv_record::config::FlowSinks::parse(&a.flows_to, a.clickhouse_auth.as_deref()).map_err(usage)
}

/// `--dedup`, `--flow-cutoff`, `--flow-table`, `--flow-idle`.
fn reductions(a: &Args) -> anyhow::Result<ReducePlan> {
    let dedup_window_ns = match &a.dedup {
        Some(w) => {
            let d = crate::cmd::duration_arg("--dedup", w)?;
            if d.is_zero() || d > Duration::from_secs(10) {
                return Err(usage(format!(
                    "--dedup must be a window longer than 0 and at most 10s (e.g. 1ms), not {w}"
                )));
            }
            Some(d.as_nanos() as u64)
        }
        None => None,
    };
    let flow_cutoff = a.flow_cutoff.as_deref().map(|b| size("--flow-cutoff", b)).transpose()?;
    if flow_cutoff == Some(0) {
        return Err(usage(
            "--flow-cutoff 0 would keep no packet of any connection: give the bytes to keep of each (e.g. 10K)".into(),
        ));
    }
    if !(1..=1 << 30).contains(&a.flow_table) {
        return Err(usage(format!("--flow-table must be 1..={}, not {}", 1u64 << 30, a.flow_table)));
    }
    let flow_idle = crate::cmd::duration_arg("--flow-idle", &a.flow_idle)?;
    if flow_idle.is_zero() {
        return Err(usage("--flow-idle must be longer than 0".into()));
    }
    Ok(ReducePlan { dedup_window_ns, flow_cutoff, flow_table: a.flow_table, flow_idle_ns: flow_idle.as_nanos() as u64 })
}

/// `--max-size` (bytes or a share of the store's volumes) and `--on-full`.
fn budget(a: &Args, store: &Path, file_size: u64) -> anyhow::Result<Option<Budget>> {
    let Some(m) = &a.max_size else { return Ok(None) };
    let max_bytes = if m.trim().ends_with('%') {
        let share =
            parse_percent(m).ok_or_else(|| usage(format!("--max-size \"{m}\" is not a percentage in (0, 100]")))?;
        // A share of every volume the store writes to.
        let dirs: Vec<&Path> = std::iter::once(store).chain(a.volumes.iter().map(PathBuf::as_path)).collect();
        (volumes_size(&dirs)? as f64 * share) as u64
    } else {
        size("--max-size", m)?
    };
    let need = min_budget(file_size, a.workers);
    if max_bytes < need {
        return Err(usage(format!(
            "--max-size {m} ({max_bytes} bytes) is too small for {} stream(s) of --file-size {}: it needs at least {need} bytes",
            a.workers, a.file_size
        )));
    }
    Ok(Some(Budget { max_bytes, on_full: a.on_full.into() }))
}

/// The source: `-i IF` (AF_PACKET or AF_XDP), `--read FILE...` or `--synthetic SPEC`, with the
/// timestamp choice it allows.
fn source(a: &Args, synthetic: Option<synthetic::Spec>) -> anyhow::Result<SourcePlan> {
    if a.timestamps == TimestampsArg::Hw && a.interface.is_none() {
        return Err(usage(
            "--timestamps hw applies to a live interface (-i IF) only: --read keeps the files' own times and --synthetic stamps with the kernel's clock".into(),
        ));
    }
    let xdp = a.capture_source == LiveSourceArg::Xdp;
    if xdp && a.interface.is_none() {
        return Err(usage("--source xdp reads a live interface: give -i IF".into()));
    }
    if xdp && a.timestamps == TimestampsArg::Hw {
        return Err(usage(
            "--timestamps hw: AF_XDP frames carry no timestamp (wirevault stamps them with the system clock); record with --source afpacket for the NIC's stamps".into(),
        ));
    }
    if let Some(interface) = &a.interface {
        Ok(SourcePlan::Live { interface: interface.clone(), promisc: !a.no_promisc, xdp })
    } else if !a.read.is_empty() {
        check_read(&a.read)?;
        Ok(SourcePlan::Read { files: a.read.clone() })
    } else if let Some(spec) = synthetic {
        Ok(SourcePlan::Synthetic(spec))
    } else {
        // clap's group requires one of the three.
        Err(usage("give a source: -i IF, --read FILE or --synthetic SPEC".into()))
    }
}

/// `--zero-copy` works on a live interface writing pcapng.
fn check_zero_copy(a: &Args) -> anyhow::Result<()> {
    if a.interface.is_none() {
        return Err(usage("--zero-copy writes a live capture ring's blocks; it needs -i IF".into()));
    }
    if a.format != super::args::FormatArg::Pcapng {
        return Err(usage("--zero-copy writes pcapng only; add --format pcapng".into()));
    }
    if a.capture_source == LiveSourceArg::Xdp {
        return Err(usage(
            "--zero-copy writes AF_PACKET ring blocks; AF_XDP (--source xdp) has none: give one of them".into(),
        ));
    }
    Ok(())
}

/// The buffer a `wirevault disk-bench --rate R --json` result kept in the
/// store as `disk-bench.json` asks for (its `buffer_with_margin_bytes`: the
/// measured dips at that rate, with margin), at most half the machine's
/// memory; `None` when the store has none; `Some(Err(warning))` when the
/// result cannot speak for the store's disk: it measured another file
/// system than the store's, or ran less than [`DISK_BENCH_MIN_S`] (too
/// short to see how long the disk's dips last). Then the default applies.
fn disk_bench_buffer(store: &Path) -> anyhow::Result<Option<Result<u64, String>>> {
    let path = store.join(wv_store::layout::DISK_BENCH);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound || e.kind() == std::io::ErrorKind::NotADirectory => {
            return Ok(None)
        }
        Err(e) => {
            return Err(fail(exit::ERROR, format!("cannot read {}: {e}; remove it or give --buffer", path.display())))
        }
    };
    use wv_diskbench::report::{ParseError, Report, VERSION};
    let not_a_result = || {
        usage(format!(
            "{} is not a `wirevault disk-bench DIR --rate R --json` result with a buffer (a sustained rate); run that again, or remove the file, or give --buffer",
            path.display()
        ))
    };
    let report = match Report::parse(text.as_bytes()) {
        Ok(r) => r,
        Err(ParseError::Version(v)) => {
            return Err(usage(format!(
                "{} is a disk-bench result of version {v} and this wirevault reads version {VERSION}: run disk-bench again, or remove the file, or give --buffer",
                path.display()
            )))
        }
        Err(ParseError::Malformed(_)) => return Err(not_a_result()),
    };
    let Some(b) = report.rate.as_ref().and_then(|r| r.buffer_with_margin_bytes) else {
        return Err(not_a_result());
    };
    let dev = |p: &Path| std::fs::metadata(p).ok().map(|m| std::os::unix::fs::MetadataExt::dev(&m));
    // A relative directory (an older disk-bench wrote it as given) is taken
    // from the store, where the file is kept.
    let measured = store.join(&report.dir);
    let ignored = |why: String| {
        Ok(Some(Err(format!(
            "{} {why}: its buffer is not used, the default is; run disk-bench on the store's volume for {DISK_BENCH_MIN_S} s or more, or give --buffer",
            path.display()
        ))))
    };
    if dev(&measured).is_none_or(|d| Some(d) != dev(store)) {
        return ignored(format!("measured {}, not the store's file system", measured.display()));
    }
    let secs = report.elapsed_s;
    if secs < DISK_BENCH_MIN_S as f64 {
        return ignored(format!("comes from a run of {secs:.1} s"));
    }
    let ram = wv_sys::cpu::total_memory();
    Ok(Some(Ok(if ram > 0 { b.min(ram / 2) } else { b }.max(64 << 20))))
}

/// The shortest disk-bench run whose buffer `record` takes (its worst
/// 10-second window needs 10 s).
const DISK_BENCH_MIN_S: u64 = 10;

/// `--read`: standard input at most once; every other name a file or a
/// pipe (/dev/stdin, FIFOs, process substitution), not a directory.
fn check_read(files: &[PathBuf]) -> anyhow::Result<()> {
    let stdin = files.iter().filter(|f| f.as_os_str() == "-").count();
    if stdin > 1 {
        return Err(usage("--read: standard input (-) can be read only once".into()));
    }
    for f in files.iter().filter(|f| f.as_os_str() != "-") {
        match std::fs::metadata(f) {
            Ok(m) if m.is_dir() => {
                return Err(fail(exit::ERROR, format!("--read: {} is a directory, not a capture file", f.display())))
            }
            // A regular file's header is checked now, so that a non-capture
            // input creates no store; a pipe's when it is read (it cannot be
            // read twice): then the store exists and the input is reported
            // as an input problem (exit 1).
            Ok(m) if m.is_file() => check_capture_header(f)?,
            Ok(_) => {}
            Err(e) => {
                // `--read a.pcap udp`: --read takes every word up to the next option.
                let hint = if files.len() > 1 && e.kind() == std::io::ErrorKind::NotFound {
                    " (--read takes every following word as a file: put the filter after -- or after another option)"
                } else {
                    ""
                };
                return Err(fail(exit::ERROR, format!("--read: cannot read {}: {e}{hint}", f.display())));
            }
        }
    }
    Ok(())
}

/// A regular `--read` file must start as a pcap or pcapng file does.
fn check_capture_header(f: &Path) -> anyhow::Result<()> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4);
    std::fs::File::open(f)
        .and_then(|h| h.take(4).read_to_end(&mut head))
        .map_err(|e| fail(exit::ERROR, format!("--read: cannot read {}: {e}", f.display())))?;
    let ok = head.first_chunk::<4>().is_some_and(|m| wv_wire::Format::of_magic(*m).is_some());
    if !ok {
        return Err(fail(
            exit::ERROR,
            format!(
                "--read: {} is not a pcap or pcapng file (its first bytes are no capture file header)",
                f.display()
            ),
        ));
    }
    Ok(())
}

/// `--stats-file FILE`, checked before anything is created: FILE must not
/// exist as anything but a regular file (a symlink, device, FIFO or
/// directory is refused: it would be replaced), must not be in the store
/// (by device and inode, as query's `-w`: it would replace the catalog or a
/// capture), and its directory must take the temporary file it is written
/// through (see `status::StatsFile`).
fn check_stats_file(sf: &Path, store: &Path) -> anyhow::Result<()> {
    let shown = sf.display();
    match std::fs::symlink_metadata(sf) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(usage(format!("--stats-file {shown} is a symbolic link; name a regular file or a new one")))
        }
        Ok(m) if m.is_dir() => return Err(usage(format!("--stats-file {shown} is a directory; name a file"))),
        Ok(m) if !m.is_file() => {
            return Err(usage(format!(
                "--stats-file {shown} is not a regular file (a device, pipe or socket) and would be replaced; name a regular file"
            )))
        }
        _ => {}
    }
    if wv_query::check_outside(store, Some(store), &[], sf).is_err() {
        return Err(usage(format!(
            "--stats-file {shown} is inside the store {} (it always holds stats.json); write the copy elsewhere",
            store.display()
        )));
    }
    match wv_record::stats::create_temp(sf) {
        Ok((_, tmp)) => {
            let _ = std::fs::remove_file(&tmp);
            Ok(())
        }
        Err(e) => Err(usage(format!("--stats-file {shown}: cannot write there ({e}); choose a writable directory"))),
    }
}

#[cfg(test)]
mod tests {
    use super::defaults::{buffer_for_memory, zero_copy_buffer_for_memory};
    use super::outputs_given;

    #[test]
    fn a_second_output_is_found_in_every_spelling() {
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(outputs_given(&argv("wirevault record -i eth0 -o /a")), ["/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -o /a -i eth0 --output /a")), ["/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -o /a --output=/b")), ["/a", "/b"]);
        assert_eq!(outputs_given(&argv("wirevault record -o/a -o /b")), ["/a", "/b"]);
        assert_eq!(outputs_given(&argv("wirevault record -o /a -o=/a")), ["/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -o /a -- -o /b")), ["/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -qo/b -o /a")), ["/b", "/a"]);
        assert_eq!(outputs_given(&argv("wirevault record -i eth0 -o /a -q -q -c 1 -c 2 -o /b")), ["/a", "/b"]);
        assert_eq!(outputs_given(&argv("wirevault --log-level debug record -qo /b --output /a")), ["/b", "/a"]);
        // A value that looks like the flag is another option's value.
        assert_eq!(outputs_given(&argv("wirevault record -w -o -o /a")), ["/a"]);
        assert!(outputs_given(&argv("wirevault query -o /a -o /b")).is_empty());
    }

    #[test]
    fn default_buffer_grows_with_memory_up_to_4g() {
        const G: u64 = 1 << 30;
        for (ram, want, zc) in [
            (256 << 20, 64 << 20, 64 << 20),
            (4 * G, 512 << 20, 512 << 20),
            (8 * G, G, G),
            (16 * G, 2 * G, G),
            (24 * G, 3 * G, 1536 << 20),
            (64 * G, 4 * G, 4 * G),
            (512 * G, 4 * G, 4 * G),
        ] {
            assert_eq!(buffer_for_memory(ram), want, "{ram}");
            assert_eq!(zero_copy_buffer_for_memory(ram), zc, "{ram}");
        }
    }

    /// The rules `--help` states from the named numbers are the rules the
    /// functions compute: at each bound and in between.
    #[test]
    fn the_stated_defaults_are_the_computed_ones() {
        use super::defaults::*;
        const G: u64 = 1 << 30;
        assert_eq!(buffer_for_memory(0), ARENA_MIN);
        assert_eq!(buffer_for_memory(ARENA_MIN * ARENA_SHARE * 3), ARENA_MIN * 3);
        assert_eq!(buffer_for_memory(1 << 50), ARENA_MAX);
        assert_eq!(zero_copy_buffer_for_memory(0), ARENA_MIN);
        assert_eq!(zero_copy_buffer_for_memory(4 * G), 4 * G / ARENA_SHARE);
        assert_eq!(zero_copy_buffer_for_memory(ZERO_COPY_SMALL_MAX * ZERO_COPY_LARGE_SHARE), ZERO_COPY_SMALL_MAX);
        assert_eq!(zero_copy_buffer_for_memory(48 * G), 48 * G / ZERO_COPY_LARGE_SHARE);
        assert_eq!(zero_copy_buffer_for_memory(1 << 50), ARENA_MAX);
        assert_eq!((ring_size(1), ring_size(2), ring_size(64)), (RING_TOTAL, RING_TOTAL / 2, RING_MIN));
        assert!(buffer_default()
            .contains("1/8 of the memory this process may use (its cgroup's limit if lower), 64M to 4G"));
        assert!(ring_default().starts_with("256M for one worker, 256M split between more, at least 32M each"));
    }
}
