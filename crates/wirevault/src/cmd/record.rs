//! `wirevault record`: validate the plan, open sources and the store, start
//! one capture worker and one writer per stream, report status, and account
//! for every packet at the end.

use crate::{exit, fail};
use anyhow::Context;
use crossbeam_queue::ArrayQueue;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wv_capture::afpacket::AfPacketSource;
use wv_capture::args::{parse_cpu_list, parse_percent, parse_size};
use wv_capture::file::FileSource;
use wv_capture::filter::{self, Filter};
use wv_capture::synthetic::{self, Synthetic};
use wv_capture::{Counts, SharedCounts, Source};
use wv_store::catalog::{Budget, Catalog, OnFull};
use wv_store::stream::{StreamConfig, StreamProducer};
use wv_store::writer::{self, WriterConfig, WriterShared};
use wv_store::Format;
use wv_sys::afpacket::{Fanout, FanoutMode, FilteredCounter, Ring, RingConfig};
use wv_sys::mem::{AlignedBuf, Backing};

/// Arguments of `wirevault record`.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["interface", "read", "synthetic"])))]
pub struct Args {
    /// Store directory (created if missing).
    #[arg(short = 'o', long = "output", value_name = "STORE_DIR")]
    store: PathBuf,
    /// Capture live from this network interface (AF_PACKET, TPACKET_V3).
    #[arg(short = 'i', long, value_name = "IF")]
    interface: Option<String>,
    /// Ingest existing pcap/pcapng files, keeping their timestamps (`-` or a pipe: standard input).
    #[arg(short = 'r', long, value_name = "FILE", num_args = 1.., value_terminator = "--")]
    read: Vec<PathBuf>,
    /// Generate traffic in memory: e.g. size=64,count=10M or size=imix,duration=10s,rate=1M.
    #[arg(long, value_name = "SPEC")]
    synthetic: Option<String>,
    /// Capture workers (fanout members, one stream directory each).
    #[arg(long, default_value_t = 1, value_name = "N")]
    workers: usize,
    /// tcpdump's -w: refused with a sentence (a store is a directory: -o; workers: --workers).
    #[arg(short = 'w', hide = true, value_name = "FILE", allow_hyphen_values = true)]
    tcpdump_write: Option<String>,
    /// Bytes stored per packet at most.
    #[arg(short = 's', long, default_value_t = wv_wire::MAX_SNAPLEN, value_name = "BYTES")]
    snaplen: u32,
    /// Arena size, split between workers (K/M/G suffixes; default 1G, or 1/8 of RAM if less).
    #[arg(long, value_name = "SIZE")]
    buffer: Option<String>,
    /// Write block size (multiple of 4K; default 4M).
    #[arg(long, default_value = "4M", value_name = "SIZE")]
    block_size: String,
    /// Close a file before it exceeds this size.
    #[arg(long, default_value = "1G", value_name = "SIZE")]
    file_size: String,
    /// Also close files at clock-aligned multiples of this duration (e.g. 1m, 1h).
    #[arg(long, value_name = "DURATION")]
    file_time: Option<String>,
    /// File format.
    #[arg(long, default_value = "pcap", value_parser = ["pcap", "pcapng"])]
    format: String,
    /// CPUs to pin to: capture workers take the first N, writers the next N (e.g. 0,1 or 2-5).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// Do not put the interface into promiscuous mode.
    #[arg(short = 'p', long)]
    no_promisc: bool,
    /// Stop after this long.
    #[arg(long, value_name = "DURATION")]
    duration: Option<String>,
    /// Stop after storing this many packets (exact with one worker).
    #[arg(short = 'c', long, value_name = "N")]
    count: Option<u64>,
    /// Store budget: bytes (e.g. 500G) or a share of the volume (e.g. 80%).
    #[arg(long, value_name = "SIZE|PERCENT")]
    max_size: Option<String>,
    /// At the budget: delete the oldest files (delete) or stop recording (stop, exit code 3).
    #[arg(long, default_value = "delete", value_parser = ["delete", "stop"])]
    on_full: String,
    /// After opening the capture sockets, switch to this user (and its group); the store is chowned to it.
    #[arg(short = 'Z', long, value_name = "USER")]
    user: Option<String>,
    /// Write buffered instead of O_DIRECT.
    #[arg(long)]
    no_direct: bool,
    /// Do not build index files.
    #[arg(long)]
    no_index: bool,
    /// Print the status and the summary as JSON lines on stdout.
    #[arg(long)]
    json: bool,
    /// No status line (the summary is still printed).
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Also write the counters, every second, to this file (always written to STORE/stats.json).
    #[arg(long, value_name = "FILE")]
    stats_file: Option<PathBuf>,
    /// Capture filter, in tcpdump's expression language. Options may come
    /// before or after it; after `--` every word is filter text.
    #[arg(value_name = "FILTER")]
    filter: Vec<String>,
}

/// The validated plan.
struct Plan {
    store: PathBuf,
    format: Format,
    workers: usize,
    snaplen: u32,
    arena_per_worker: u64,
    block_size: u64,
    file_size: u64,
    file_time_ns: Option<u64>,
    cpus: Option<Vec<usize>>,
    duration: Option<Duration>,
    expression: Option<String>,
    budget: Option<Budget>,
    synthetic: Option<synthetic::Spec>,
}

fn usage(msg: String) -> anyhow::Error {
    fail(exit::USAGE, msg)
}

/// Sizes beyond this (1 EiB) are out of range for every option: no store,
/// file or arena comes near it, and larger values would overflow.
const MAX_SIZE: u64 = 1 << 60;

/// Checks everything that can be checked before anything is created: a bad
/// option leaves no store directory behind.
fn plan(a: &Args) -> anyhow::Result<Plan> {
    if a.tcpdump_write.is_some() {
        return Err(usage(
            "record has no -w: give the store directory with -o DIR (it holds the pcap files) and the number of capture workers with --workers N".into(),
        ));
    }
    if a.interface.as_deref() == Some("any") {
        return Err(usage(
            "-i any (Linux cooked capture) is not supported: record each interface with its own -i IF and -o STORE, or an interface that sees all the traffic (a bridge or a mirror port)".into(),
        ));
    }
    if a.count == Some(0) {
        return Err(usage("-c/--count must be at least 1 (-c 0 would store nothing)".into()));
    }
    match std::fs::metadata(&a.store) {
        Ok(m) if !m.is_dir() => {
            return Err(usage(format!(
                "-o {} is not a directory: a store is a directory (give a new or an existing store directory)",
                a.store.display()
            )))
        }
        _ => {}
    }
    if let Some(u) = &a.user {
        if wv_sys::cpu::lookup_user(u).is_none() {
            return Err(usage(format!("--user: no user named {u} (see /etc/passwd)")));
        }
    }
    if let Some(sf) = &a.stats_file {
        check_stats_file(sf)?;
    }
    let synthetic = a.synthetic.as_deref().map(|s| synthetic::parse_spec(s).map_err(usage)).transpose()?;
    if let Some(sp) = &synthetic {
        if sp.count.is_none()
            && sp.duration.is_none()
            && a.count.is_none()
            && a.duration.is_none()
            && a.max_size.is_none()
        {
            return Err(usage(
                "--synthetic needs an end: count=N or duration=T in the spec, -c N, --duration T, or a --max-size budget".into(),
            ));
        }
    }
    let size = |what: &str, s: &str| match parse_size(s) {
        None => Err(usage(format!("{what} \"{s}\" is not a size like 4M or 1G"))),
        Some(v) if v >= MAX_SIZE => Err(usage(format!("{what} {s} is out of range (sizes go up to 1023P)"))),
        Some(v) => Ok(v),
    };
    let block_size = size("--block-size", &a.block_size)?;
    if block_size < 64 << 10 || block_size % 4096 != 0 || block_size > 64 << 20 {
        return Err(usage(format!("--block-size must be a multiple of 4K between 64K and 64M, not {}", a.block_size)));
    }
    let file_size = size("--file-size", &a.file_size)?;
    if !(64 << 10..=1 << 40).contains(&file_size) {
        return Err(usage(format!("--file-size must be between 64K and 1T, not {}", a.file_size)));
    }
    if a.workers == 0 || a.workers > 64 {
        return Err(usage(format!("--workers must be 1..=64, not {}", a.workers)));
    }
    if a.workers > 1 && a.interface.is_none() {
        return Err(usage("--workers > 1 needs --interface (fanout spreads live traffic over workers)".into()));
    }
    if a.snaplen == 0 || a.snaplen > wv_wire::MAX_SNAPLEN {
        return Err(usage(format!("--snaplen must be 1..={}, not {}", wv_wire::MAX_SNAPLEN, a.snaplen)));
    }
    let buffer = match &a.buffer {
        Some(b) => {
            let v = size("--buffer", b)?;
            let ram = wv_sys::cpu::total_memory();
            if ram > 0 && v > ram {
                return Err(usage(format!(
                    "--buffer {b} is more than this machine's memory ({} MiB); give at most a share of it, e.g. 1G",
                    ram >> 20
                )));
            }
            v
        }
        None => (1u64 << 30).min(wv_sys::cpu::total_memory() / 8).max(64 << 20),
    };
    let per = (buffer / a.workers as u64) / block_size * block_size;
    if per < 4 * block_size {
        return Err(usage(format!(
            "--buffer {} is too small: each worker needs at least 4 blocks of {} bytes",
            a.buffer.as_deref().unwrap_or("default"),
            block_size
        )));
    }
    let dur = |what: &str, s: &str| {
        synthetic::parse_duration(s)
            .ok_or_else(|| usage(format!("{what} \"{s}\" is not a duration like 30s, 5m or 1h")))
    };
    let file_time_ns = match &a.file_time {
        Some(t) => {
            let d = dur("--file-time", t)?;
            if d < Duration::from_millis(10) || d > Duration::from_secs(366 * 86_400) {
                return Err(usage(format!("--file-time must be between 10ms and 366d, not {t}")));
            }
            Some(d.as_nanos() as u64)
        }
        None => None,
    };
    let duration = a.duration.as_deref().map(|d| dur("--duration", d)).transpose()?;
    if duration.is_some_and(|d| d.is_zero()) {
        return Err(usage("--duration must be longer than 0".into()));
    }
    let cpus = match &a.cpus {
        Some(c) => {
            let v = parse_cpu_list(c).ok_or_else(|| usage(format!("--cpus \"{c}\" is not a list like 0,1 or 2-5")))?;
            let allowed = wv_sys::cpu::allowed_cpus();
            if let Some(bad) = v.iter().find(|c| !allowed.contains(c)) {
                return Err(usage(format!(
                    "--cpus: CPU {bad} is not available to this process (allowed: {allowed:?})"
                )));
            }
            Some(v)
        }
        None => None,
    };
    let expression = (!a.filter.is_empty()).then(|| a.filter.join(" "));
    let on_full = if a.on_full == "stop" { OnFull::Stop } else { OnFull::DeleteOldest };
    let budget = match &a.max_size {
        None => None,
        Some(m) => {
            let max_bytes = if m.trim().ends_with('%') {
                let share = parse_percent(m)
                    .ok_or_else(|| usage(format!("--max-size \"{m}\" is not a percentage in (0, 100]")))?;
                // The volume of the store, or of its nearest existing parent: nothing is created yet.
                let on = a.store.ancestors().find(|p| p.exists()).unwrap_or(Path::new("."));
                let on = if on.as_os_str().is_empty() { Path::new(".") } else { on };
                let (_, total) = wv_sys::fs::fs_space(on).map_err(|e| {
                    fail(exit::ERROR, format!("cannot read the size of the volume of {}: {e}", a.store.display()))
                })?;
                (total as f64 * share) as u64
            } else {
                size("--max-size", m)?
            };
            let need = reserve(file_size, a.workers) + file_size;
            if max_bytes < need {
                return Err(usage(format!(
                    "--max-size {m} ({max_bytes} bytes) is too small for {} stream(s) of --file-size {}: it needs at least {need} bytes",
                    a.workers, a.file_size
                )));
            }
            Some(Budget { max_bytes, on_full })
        }
    };
    Ok(Plan {
        store: a.store.clone(),
        format: if a.format == "pcapng" { Format::Pcapng } else { Format::Pcap },
        workers: a.workers,
        snaplen: a.snaplen,
        arena_per_worker: per,
        block_size,
        file_size,
        file_time_ns,
        cpus,
        duration,
        expression,
        budget,
        synthetic,
    })
}

/// An unwritable `--stats-file` is an error before recording starts, not a
/// file silently never written. The file is written as FILE.json.part and
/// renamed, so that temporary name must be creatable beside it.
fn check_stats_file(sf: &Path) -> anyhow::Result<()> {
    if sf.is_dir() {
        return Err(usage(format!("--stats-file {} is a directory; name a file", sf.display())));
    }
    let tmp = sf.with_extension("json.part");
    let probe = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp);
    match probe {
        Ok(_) => {
            let _ = std::fs::remove_file(&tmp);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => {
            Err(usage(format!("--stats-file {}: cannot write there ({e}); choose a writable directory", sf.display())))
        }
    }
}

/// Bytes not yet in the catalog that the store may hold besides it: per
/// stream, the file being written and one closed file waiting for its index
/// (each with room for its index, well under 5% of the capture). A second
/// closed file can wait while the first one's index is written, so usage
/// may pass the budget by at most one file, as `--max-size` promises.
fn reserve(file_size: u64, streams: usize) -> u64 {
    2 * (file_size + file_size / 20) * streams as u64
}

/// Switches the process to `user` (its uid, primary gid, no supplementary
/// groups) after handing it what wirevault owns in the store. The open
/// sockets keep working; no capability is kept, because none is needed once
/// they are open.
fn drop_privileges(user: &str, store: &Path) -> anyhow::Result<()> {
    let (uid, gid) = wv_sys::cpu::lookup_user(user)
        .ok_or_else(|| fail(exit::USAGE, format!("--user: no user named {user} (see /etc/passwd)")))?;
    for skipped in chown_store(store, uid, gid)
        .map_err(|e| fail(exit::ERROR, format!("cannot hand the store {} to {user}: {e}", store.display())))?
    {
        say!("wirevault: warning: {skipped} is not part of the store layout; its owner was left as it is");
    }
    wv_sys::cpu::switch_user(uid, gid).map_err(|e| fail(exit::ERROR, format!("cannot switch to user {user}: {e}")))?;
    Ok(())
}

/// Gives `uid:gid` the store directory and what the store layout names in
/// it (catalog, stats, lock, `stream-NNN` directories and the capture and
/// index files in them), never following a symlink (each is opened beneath
/// the store with O_NOFOLLOW and changed through that descriptor). Returns
/// the paths left alone: anything else, and every symlink.
fn chown_store(store: &Path, uid: u32, gid: u32) -> std::io::Result<Vec<String>> {
    use wv_store::layout;
    use wv_sys::fs::{Dir, Kind};
    let dir = Dir::open(store)?;
    dir.chown_self(uid, gid)?;
    let mut skipped = Vec::new();
    let top = [layout::CATALOG, layout::STATS, wv_store::lock::LOCK_FILE];
    for (name, kind) in dir.list("")? {
        let shown = || dir.display(&name).display().to_string();
        if kind == Kind::File && top.contains(&name.as_str()) {
            dir.chown(&name, uid, gid)?;
        } else if kind == Kind::Dir && is_stream_dir(&name) {
            dir.chown(&name, uid, gid)?;
            for (f, k) in dir.list(&name)? {
                let rel = format!("{name}/{f}");
                let stem = f.strip_suffix(layout::PART).unwrap_or(&f);
                let stem = stem.strip_suffix(layout::INDEX).unwrap_or(stem);
                if k == Kind::File && wv_store::catalog::is_capture_name(stem) {
                    dir.chown(&rel, uid, gid)?;
                } else {
                    skipped.push(dir.display(&rel).display().to_string());
                }
            }
        } else {
            skipped.push(shown());
        }
    }
    Ok(skipped)
}

fn is_stream_dir(name: &str) -> bool {
    name.strip_prefix("stream-")
        .and_then(|n| n.parse::<usize>().ok())
        .is_some_and(|n| name == wv_store::layout::stream_dir(n))
}

/// What makes a directory a wirevault store: a catalog, a lock file or a
/// `stream-NNN` directory in it. `record` writes into an empty directory or
/// a store, nothing else.
fn is_store(store: &Path) -> std::io::Result<bool> {
    use wv_sys::fs::{Dir, Kind};
    let dir = Dir::open(store)?;
    let list = dir.list("")?;
    Ok(list.is_empty()
        || list.iter().any(|(n, k)| {
            (*k == Kind::File && (n == wv_store::layout::CATALOG || n == wv_store::lock::LOCK_FILE))
                || (*k == Kind::Dir && is_stream_dir(n))
        }))
}

/// Creates the store directory (0750) or checks that the one there is a
/// store, and proves it is writable.
fn prepare_store(store: &Path) -> anyhow::Result<()> {
    let shown = store.display();
    let io_fail = |what: &str, e: std::io::Error| {
        let msg = match e.kind() {
            std::io::ErrorKind::PermissionDenied => {
                format!("{what} {shown}: permission denied; choose another -o or fix its permissions")
            }
            std::io::ErrorKind::NotADirectory => format!("{shown}: a component of the path is not a directory"),
            _ => format!("{what} {shown}: {e}; choose another -o or fix its permissions"),
        };
        fail(exit::ERROR, msg)
    };
    match std::fs::metadata(store) {
        Ok(m) if !m.is_dir() => {
            return Err(fail(exit::ERROR, format!("{shown} is not a directory; -o names the store directory")))
        }
        Ok(_) => {
            if !is_store(store).map_err(|e| io_fail("cannot read the store directory", e))? {
                return Err(fail(
                    exit::ERROR,
                    format!("{shown} is not empty and not a wirevault store (no catalog.jsonl, .lock or stream-NNN directory); choose an empty or new directory for -o"),
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(wv_sys::fs::DIR_MODE)
                .create(store)
                .map_err(|e| io_fail("cannot create the store directory", e))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(store, std::fs::Permissions::from_mode(wv_sys::fs::DIR_MODE))
                .map_err(|e| io_fail("cannot set the mode of the store directory", e))?;
        }
        Err(e) => return Err(io_fail("cannot reach the store directory", e)),
    }
    let probe = ".wirevault-probe";
    let dir = wv_sys::fs::Dir::open(store).map_err(|e| io_fail("cannot open the store directory", e))?;
    let _ = dir.unlink(probe);
    dir.open_file(probe, wv_sys::fs::Open::CreateNew, 0)
        .map_err(|e| io_fail("cannot write in the store directory", e))?;
    let _ = dir.unlink(probe);
    Ok(())
}

/// Signals whose default action ends the process and that can be caught:
/// each stops the recording as SIGTERM does (tcpdump treats SIGHUP so too),
/// so that no signal loses what was written. Hardware faults (SIGSEGV,
/// SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS) are not among them: returning
/// from their handler would repeat the fault. SIGPIPE is ignored (the Rust
/// runtime sets it so): a closed standard output is a write error, not death.
fn stop_signals() -> Vec<libc::c_int> {
    let mut v = vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
        libc::SIGSTKFLT,
    ];
    v.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    v
}

/// One line on standard output; a closed output (`--json | head`) must not
/// stop the recorder, so errors are ignored.
fn out_line(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

pub fn run(a: Args) -> anyhow::Result<u8> {
    // Before anything else, so that a signal at any moment stops cleanly.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in stop_signals() {
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    let p = plan(&a)?;
    // Capture files and indexes are readable by the owner's group only.
    wv_sys::cpu::set_umask(0o027);

    // Sources first: interface and filter errors should come before any file is created.
    let mut sources: Vec<Box<dyn Source>> = Vec::new();
    let mut file_source_idx = None;
    let mut iface_note = None;
    if let Some(ifname) = &a.interface {
        let linktype =
            wv_sys::netif::linktype_of(ifname).map_err(|e| fail(exit::ERROR, e.to_string()))?.ok_or_else(|| {
                fail(exit::ERROR, format!("interface {ifname} has a link type wirevault cannot store yet"))
            })?;
        let filt: Option<Filter> = match &p.expression {
            Some(e) => Some(filter::compile_live(e, ifname, p.snaplen).map_err(|e| fail(exit::USAGE, e.to_string()))?),
            None => None,
        };
        let mut prog = filt.as_ref().map(Filter::sock_filter);
        if prog.is_none() && p.snaplen < wv_wire::MAX_SNAPLEN {
            // Let the kernel cut packets at the snap length, as libpcap does.
            prog = Some(vec![libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: p.snaplen }]);
        }
        // The filtered-packet counter opens before the rings so it covers their lifetime.
        let counter = match (&filt, &prog) {
            (Some(_), Some(pr)) => match wv_sys::bpf::invert(pr) {
                Some(inv) => {
                    Some(Arc::new(FilteredCounter::open(ifname, &inv).map_err(|e| fail(exit::ERROR, e.to_string()))?))
                }
                None => {
                    iface_note =
                        Some("this filter returns a computed length, so filtered packets are not counted".to_string());
                    None
                }
            },
            _ => None,
        };
        let group_id = (std::process::id() & 0xffff) as u16;
        let ring_blocks = 64usize; // 64 × 4 MiB = 256 MiB of kernel ring per worker
        for w in 0..p.workers {
            let cfg = RingConfig {
                block_size: 4 << 20,
                block_count: ring_blocks,
                retire_tov_ms: 10,
                promisc: !a.no_promisc,
                fanout: (p.workers > 1).then_some(Fanout { group_id, mode: FanoutMode::Hash }),
                filter: prog.clone(),
            };
            let ring = Ring::open(ifname, &cfg).map_err(|e| fail(exit::ERROR, e.to_string()))?;
            let c = if w == 0 { counter.clone() } else { None };
            sources.push(Box::new(AfPacketSource::new(ring, linktype, p.snaplen, c)));
        }
        if let (Some(node), Some(cpus)) = (wv_sys::netif::numa_node(ifname), &p.cpus) {
            for c in cpus {
                if wv_sys::cpu::cpu_numa_node(*c).is_some_and(|n| n != node) {
                    say!("wirevault: warning: CPU {c} is not on NUMA node {node} of {ifname}; capture will cross the interconnect");
                }
            }
        }
    } else if !a.read.is_empty() {
        let stdin = a.read.iter().filter(|f| f.as_os_str() == "-").count();
        if stdin > 1 {
            return Err(fail(exit::USAGE, "--read: standard input (-) can be read only once"));
        }
        for f in a.read.iter().filter(|f| f.as_os_str() != "-") {
            // Regular files, and pipes: /dev/stdin, FIFOs, process substitution.
            match std::fs::metadata(f) {
                Ok(m) if m.is_dir() => {
                    return Err(fail(
                        exit::USAGE,
                        format!("--read: {} is a directory, not a capture file", f.display()),
                    ))
                }
                Ok(_) => {}
                Err(e) => {
                    // `--read a.pcap udp`: --read takes every word up to the next option.
                    let hint = if a.read.len() > 1 && e.kind() == std::io::ErrorKind::NotFound {
                        " (--read takes every following word as a file: put the filter after -- or after another option)"
                    } else {
                        ""
                    };
                    return Err(fail(exit::USAGE, format!("--read: cannot read {}: {e}{hint}", f.display())));
                }
            }
        }
        if let Some(e) = &p.expression {
            // Validate once for Ethernet so a typo fails before anything is written.
            filter::compile(e, wv_wire::linktype::ETHERNET, p.snaplen).map_err(|e| fail(exit::USAGE, e.to_string()))?;
        }
        file_source_idx = Some(0);
        sources.push(Box::new(FileSource::new(a.read.clone(), p.expression.clone())));
    } else if let Some(spec) = p.synthetic.clone() {
        let filt = match &p.expression {
            Some(e) => Some(
                filter::compile(e, wv_wire::linktype::ETHERNET, p.snaplen)
                    .map_err(|e| fail(exit::USAGE, e.to_string()))?,
            ),
            None => None,
        };
        sources.push(Box::new(Synthetic::new(spec, filt)));
    }

    prepare_store(&p.store)?;
    // One writer at a time, held until the recording ends (the kernel drops it
    // with the process), taken before the start-up repair.
    let _lock =
        wv_store::lock::StoreLock::exclusive(&p.store, "record").map_err(|e| fail(exit::ERROR, e.to_string()))?;
    // A previous run may have crashed: make the store consistent first.
    let rep = wv_store::recover::repair(&p.store, Some(&crate::cmd::repair::index_one), None).map_err(|e| {
        fail(exit::ERROR, format!("cannot check the store {} for a previous crash: {e}", p.store.display()))
    })?;
    crate::cmd::repair::print_report(&rep, &p.store, true);
    if let Some(u) = &a.user {
        drop_privileges(u, &p.store)?;
    }
    let catalog =
        Arc::new(Catalog::open(&p.store).with_context(|| format!("cannot open the catalog of {}", p.store.display()))?);

    // Streams: arena, queue, writer thread, worker thread.
    let mut writers = Vec::new();
    let mut workers = Vec::new();
    let mut shared_counts = Vec::new();
    let mut writer_shared = Vec::new();
    let mut huge_fallback = false;
    let nworkers = sources.len();
    let mut file_problems_rx = None;
    for (id, mut src) in sources.into_iter().enumerate() {
        let buf = AlignedBuf::new(p.arena_per_worker as usize, true).map_err(|e| {
            fail(exit::ERROR, format!("cannot allocate a {} byte arena ({e}); lower --buffer", p.arena_per_worker))
        })?;
        huge_fallback |= buf.backing() != Backing::HugeTlb;
        let (prod, cons) = wv_sys::byte_ring::byte_ring(buf);
        let queue = Arc::new(ArrayQueue::new(65_536));
        let wshared = Arc::new(WriterShared::default());
        let wcfg = WriterConfig {
            store: p.store.clone(),
            stream: id,
            format: p.format,
            direct: !a.no_direct,
            depth: 8,
            chunk: p.block_size,
            // The writer never preallocates past one --file-size: retention
            // reserves one per open file.
            prealloc_step: 64 << 20,
            file_size: p.file_size,
            index: !a.no_index,
            budget: p.budget,
            reserve: reserve(p.file_size, p.workers),
        };
        let (q2, c2, s2) = (queue.clone(), catalog.clone(), wshared.clone());
        let wcpu = p.cpus.as_ref().map(|c| c[(nworkers + id) % c.len()]);
        let wt = std::thread::Builder::new()
            .name(format!("wv-writer-{id}"))
            .spawn(move || {
                if let Some(c) = wcpu {
                    let _ = wv_sys::cpu::pin_current_thread(c);
                }
                writer::run::<wv_index::Builder>(cons, q2, wcfg, c2, s2)
            })
            .context("cannot start a writer thread")?;
        let mut sp = StreamProducer::new(
            prod,
            queue,
            StreamConfig {
                format: p.format,
                file_size: p.file_size,
                file_time_ns: p.file_time_ns,
                block_size: p.block_size,
                flush_after_ns: 1_000_000_000,
                clock_close_grace_ns: (file_source_idx.is_none()).then_some(250_000_000),
            },
        );
        sp.set_writer(wt.thread().clone());
        sp.set_last_seq(wv_store::layout::max_seq(&p.store.join(wv_store::layout::stream_dir(id))));
        let sc = Arc::new(SharedCounts::default());
        let (stop2, sc2) = (stop.clone(), sc.clone());
        let ccpu = p.cpus.as_ref().map(|c| c[id % c.len()]);
        let limits = wv_capture::worker::Limits { max_packets: a.count, snaplen: p.snaplen };
        let is_file = file_source_idx == Some(id);
        let (ptx, prx) = std::sync::mpsc::channel::<Vec<String>>();
        if is_file {
            file_problems_rx = Some(prx);
        }
        let ct = std::thread::Builder::new()
            .name(format!("wv-capture-{id}"))
            .spawn(move || {
                if let Some(c) = ccpu {
                    let _ = wv_sys::cpu::pin_current_thread(c);
                }
                let r = wv_capture::worker::run(src.as_mut(), &mut sp, &stop2, &sc2, limits);
                if is_file {
                    let _ = ptx.send(file_problems(src.as_ref()));
                }
                r
            })
            .context("cannot start a capture thread")?;
        writers.push(wt);
        workers.push(ct);
        shared_counts.push(sc);
        writer_shared.push(wshared);
    }
    if huge_fallback {
        say!("wirevault: note: no reserved hugepages (vm.nr_hugepages); the arena uses transparent huge pages where the kernel has them, 4 KiB pages elsewhere");
    }
    if let Some(n) = iface_note {
        say!("wirevault: note: {n}");
    }

    // Status loop.
    let start = Instant::now();
    let mut stats_file = StatsFile::create(&p.store, a.stats_file.clone());
    let mut last = (Instant::now(), Counts::default(), 0u64);
    let mut stopped_for = None::<&str>;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let all_done = workers.iter().all(|w| w.is_finished());
        if p.duration.is_some_and(|d| start.elapsed() >= d) && !stop.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
            stopped_for.get_or_insert("duration reached");
        }
        if writer_shared.iter().any(|w| w.failed.load(Ordering::Acquire)) && !stop.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
            stopped_for.get_or_insert("write error");
        }
        if last.0.elapsed() >= Duration::from_secs(1) || all_done {
            let snap = Snapshot::take(&shared_counts, &writer_shared);
            let dt = last.0.elapsed().as_secs_f64().max(1e-9);
            let pps = (snap.counts.stored - last.1.stored) as f64 / dt;
            let gbps = (snap.counts.wire_bytes - last.1.wire_bytes) as f64 * 8.0 / dt / 1e9;
            let mbs = (snap.disk_bytes - last.2) as f64 / dt / 1e6;
            let json = snap.json("running", start.elapsed().as_secs_f64(), pps, gbps, mbs);
            stats_file.write(&json);
            if !a.quiet && !all_done {
                if a.json {
                    out_line(&json);
                } else {
                    let _ = writeln!(std::io::stderr().lock(), "{}", snap.line(pps, gbps, mbs));
                }
            }
            last = (Instant::now(), snap.counts, snap.disk_bytes);
        }
        if all_done {
            break;
        }
    }

    // Join and account.
    let mut capture_errors = Vec::new();
    for w in workers {
        match w.join() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => capture_errors.push(e.to_string()),
            Err(_) => capture_errors.push("a capture thread panicked".into()),
        }
    }
    for w in writers {
        match w.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => capture_errors.push(format!("writer: {e}")),
            Err(_) => capture_errors.push("a writer thread panicked".into()),
        }
    }
    let problems = file_problems_rx.and_then(|r| r.recv().ok()).unwrap_or_default();
    let snap = Snapshot::take(&shared_counts, &writer_shared);
    let elapsed = start.elapsed().as_secs_f64();
    let json = snap.json("done", elapsed, 0.0, 0.0, 0.0);
    stats_file.write(&json);
    if a.json {
        out_line(&json);
    }
    say!("{}", snap.summary(elapsed, &p.store));
    for w in &writer_shared {
        for m in w.warnings.lock().unwrap_or_else(|x| x.into_inner()).iter() {
            say!("wirevault: warning: {m}");
        }
        if w.direct_refused.load(Ordering::Relaxed) {
            say!("wirevault: note: the file system refused O_DIRECT; wrote through the page cache instead");
            break;
        }
    }
    let (rf, rb): (u64, u64) = writer_shared.iter().fold((0, 0), |(f, b), w| {
        (f + w.retention_files.load(Ordering::Relaxed), b + w.retention_bytes.load(Ordering::Relaxed))
    });
    if rf > 0 {
        say!("wirevault: retention deleted the {rf} oldest file(s), {rb} bytes, to stay within --max-size");
    }
    if !snap.balanced() {
        say!("wirevault: error: counters do not add up (a bug; please report it with the summary above)");
    }
    for pr in &problems {
        say!("wirevault: {pr}");
    }
    if let Some(e) = writer_shared.iter().find_map(|w| w.error.lock().unwrap_or_else(|x| x.into_inner()).clone()) {
        let (msg, full) = e;
        if writer_shared.iter().any(|w| w.budget_reached.load(Ordering::Acquire)) {
            return Err(fail(
                exit::DISK_FULL,
                format!("{msg}; recording stopped, every file written so far is closed and valid; {} later packets were not stored (counted as budget); set a larger --max-size, or --on-full delete to keep recording", snap.budget),
            ));
        }
        return Err(if full {
            fail(exit::DISK_FULL, format!("{msg}; recording stopped, every file written so far is closed and valid; free space or set a smaller --file-size/--max-size"))
        } else {
            fail(exit::ERROR, format!("{msg}; recording stopped, every file written so far is closed and valid"))
        });
    }
    if let Some(e) = capture_errors.first() {
        return Err(fail(exit::ERROR, format!("capture failed: {e}")));
    }
    if !problems.is_empty() {
        return Err(fail(
            exit::ERROR,
            format!("{} input problem(s) (listed above); everything readable was stored", problems.len()),
        ));
    }
    let _ = stopped_for;
    Ok(if snap.balanced() { exit::OK } else { exit::ERROR })
}

fn file_problems(src: &dyn Source) -> Vec<String> {
    src.problems()
}

/// `STORE/stats.json`: a fixed 4 KiB file rewritten in place (JSON padded
/// with spaces), so the counters can still be written when the disk is full.
struct StatsFile {
    file: Option<std::fs::File>,
    extra: Option<PathBuf>,
}

const STATS_LEN: usize = 4096;

impl StatsFile {
    /// Opens `STORE/stats.json` beneath the store, never through a symlink, 0640.
    fn create(store: &Path, extra: Option<PathBuf>) -> StatsFile {
        let how = wv_sys::fs::Open::Create { truncate: true, append: false };
        let file = wv_sys::fs::Dir::open(store).and_then(|d| d.open_file(wv_store::layout::STATS, how, 0));
        let file = match file {
            Ok(f) => Some(f),
            Err(e) => {
                say!("wirevault: warning: {} not written: {e}", store.join(wv_store::layout::STATS).display());
                None
            }
        };
        let mut s = StatsFile { file, extra };
        s.write("{}");
        s
    }

    fn write(&mut self, json: &str) {
        use std::os::unix::fs::FileExt;
        let mut buf = json.as_bytes().to_vec();
        buf.push(b'\n');
        if let Some(f) = &self.file {
            if buf.len() <= STATS_LEN {
                buf.resize(STATS_LEN, b' ');
                let _ = f.write_all_at(&buf, 0);
            } else {
                let _ = f.set_len(0).and_then(|()| f.write_all_at(&buf, 0));
            }
        }
        if let Some(p) = &self.extra {
            let tmp = p.with_extension("json.part");
            if std::fs::File::create(&tmp).and_then(|mut f| f.write_all(&buf)).is_ok() {
                let _ = std::fs::rename(&tmp, p);
            }
        }
    }
}

/// All counters at one moment.
struct Snapshot {
    counts: Counts,
    arena_fill: f64,
    written: u64,
    write_error: u64,
    /// Packets not stored because the store reached its budget (`--on-full stop`).
    budget: u64,
    disk_bytes: u64,
    file_bytes: u64,
    files: u64,
}

impl Snapshot {
    fn take(sc: &[Arc<SharedCounts>], ws: &[Arc<WriterShared>]) -> Snapshot {
        let mut c = Counts::default();
        let mut fill: f64 = 0.0;
        for s in sc {
            let (x, f) = s.load();
            c.delivered += x.delivered;
            c.filtered_user += x.filtered_user;
            c.filtered_kernel += x.filtered_kernel;
            c.dropped_kernel += x.dropped_kernel;
            c.stored += x.stored;
            c.stored_bytes += x.stored_bytes;
            c.wire_bytes += x.wire_bytes;
            c.dropped_arena_full += x.dropped_arena_full;
            c.dropped_shutdown += x.dropped_shutdown;
            fill = fill.max(f);
        }
        let sum = |f: fn(&WriterShared) -> u64| ws.iter().map(|w| f(w)).sum::<u64>();
        Snapshot {
            counts: c,
            arena_fill: fill,
            written: sum(|w| w.written_packets.load(Ordering::Relaxed)),
            write_error: sum(|w| w.dropped_write_error.load(Ordering::Relaxed)),
            budget: sum(|w| w.dropped_budget.load(Ordering::Relaxed)),
            disk_bytes: sum(|w| w.disk_bytes.load(Ordering::Relaxed)),
            file_bytes: sum(|w| w.file_bytes.load(Ordering::Relaxed)),
            files: sum(|w| w.files_closed.load(Ordering::Relaxed)),
        }
    }

    fn received(&self) -> u64 {
        self.counts.delivered + self.counts.filtered_kernel + self.counts.dropped_kernel
    }

    fn filtered(&self) -> u64 {
        self.counts.filtered_user + self.counts.filtered_kernel
    }

    /// received = written + filtered + every drop, exactly.
    fn balanced(&self) -> bool {
        let c = &self.counts;
        self.received()
            == self.written
                + self.filtered()
                + c.dropped_kernel
                + c.dropped_arena_full
                + self.write_error
                + self.budget
                + c.dropped_shutdown
    }

    fn json(&self, state: &str, elapsed: f64, pps: f64, gbps: f64, mbs: f64) -> String {
        let c = &self.counts;
        serde_json::json!({
            "state": state,
            "elapsed_s": (elapsed * 1000.0).round() / 1000.0,
            "received": self.received(),
            "written": self.written,
            "filtered": self.filtered(),
            "dropped": {
                "kernel": c.dropped_kernel,
                "arena_full": c.dropped_arena_full,
                "write_error": self.write_error,
                "budget": self.budget,
                "shutdown": c.dropped_shutdown,
            },
            "stored_in_arena": c.stored,
            "wire_bytes": c.wire_bytes,
            "files": self.files,
            "file_bytes": self.file_bytes,
            "disk_bytes": self.disk_bytes,
            "arena_fill": (self.arena_fill * 1000.0).round() / 1000.0,
            "pps": pps.round(),
            "gbps": (gbps * 1000.0).round() / 1000.0,
            "disk_mb_s": mbs.round(),
            // Only meaningful once every packet has left the arena.
            "balanced": (state == "done").then(|| self.balanced()),
        })
        .to_string()
    }

    fn line(&self, pps: f64, gbps: f64, mbs: f64) -> String {
        let c = &self.counts;
        format!(
            "{:>10.0} pps {:>7.3} Gb/s | stored {} filtered {} | drops kernel {} arena {} write {} budget {} | arena {:>5.1}% | disk {:>6.0} MB/s",
            pps,
            gbps,
            c.stored,
            self.filtered(),
            c.dropped_kernel,
            c.dropped_arena_full,
            self.write_error,
            self.budget,
            self.arena_fill * 100.0,
            mbs
        )
    }

    fn summary(&self, elapsed: f64, store: &Path) -> String {
        let c = &self.counts;
        let drops = c.dropped_kernel + c.dropped_arena_full + self.write_error + self.budget + c.dropped_shutdown;
        format!(
            "wirevault: {} packets received in {:.2}s: {} written, {} filtered, {} dropped (kernel {}, arena full {}, write error {}, budget {}, shutdown {}); {} files, {} bytes in {}",
            self.received(),
            elapsed,
            self.written,
            self.filtered(),
            drops,
            c.dropped_kernel,
            c.dropped_arena_full,
            self.write_error,
            self.budget,
            c.dropped_shutdown,
            self.files,
            self.file_bytes,
            store.display()
        )
    }
}
