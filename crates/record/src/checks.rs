//! The rules a [`RecorderConfig`](crate::RecorderConfig) must meet, checked before anything
//! is created, so that a bad choice leaves no store directory behind.
//!
//! Two kinds: one option's value on its own (the parsers at the top, `Result<_, String>`
//! whose sentence starts with the option's name, so that clap's value parsers can take them
//! and say that sentence alone), and the rules between choices (the rest, returning an
//! [`Error`] of [`Problem::Config`](crate::Problem::Config), or `Failed` when a file on the
//! command line is not what it must be). The option names are `wirevault record`'s: the
//! sentences are the user's.

use crate::{defaults, Error, Note, Result, Stamping, Tuning};
use std::path::{Path, PathBuf};
use std::time::Duration;
use wv_capture::synthetic;
use wv_store::catalog::{Budget, OnFull};
use wv_units::{given_duration, given_size, Given};

/// `--block-size`: a multiple of 4K from 64K to 64M (the writers' O_DIRECT unit).
pub fn block_size(s: &str) -> Result<Given<u64>, String> {
    let g = given_size("--block-size", s)?;
    if g.value < 64 << 10 || !g.value.is_multiple_of(4096) || g.value > 64 << 20 {
        return Err(format!("--block-size must be a multiple of 4K between 64K and 64M, not {s}"));
    }
    Ok(g)
}

/// `--file-size`: 64K to 1T.
pub fn file_size(s: &str) -> Result<Given<u64>, String> {
    let g = given_size("--file-size", s)?;
    if !(64 << 10..=1 << 40).contains(&g.value) {
        return Err(format!("--file-size must be between 64K and 1T, not {s}"));
    }
    Ok(g)
}

/// `--buffer`: a size this machine has the memory for.
pub fn buffer(s: &str) -> Result<Given<u64>, String> {
    let g = given_size("--buffer", s)?;
    crate::host::buffer_fits(s, g.value).map_err(|e| e.message)?;
    Ok(g)
}

/// `--ring-size`: 8M to 4G per worker (that the workers' rings fit in memory is
/// [`sizing`]'s).
pub fn ring_size(s: &str) -> Result<Given<u64>, String> {
    let v = wv_units::parse_size(s).ok_or_else(|| wv_units::size_error("--ring-size", s))?;
    if !(8 << 20..=4 << 30).contains(&v) {
        return Err(format!("--ring-size must be between 8M and 4G per worker, not {s}"));
    }
    Ok(Given::new(v, s))
}

/// `--file-time`: 10ms to 366d.
pub fn file_time(s: &str) -> Result<Duration, String> {
    let d = given_duration("--file-time", s)?.value;
    if d < Duration::from_millis(10) || d > Duration::from_secs(366 * 86_400) {
        return Err(format!("--file-time must be between 10ms and 366d, not {s}"));
    }
    Ok(d)
}

/// `--duration`: longer than 0.
pub fn duration(s: &str) -> Result<Duration, String> {
    longer_than_0("--duration", s)
}

/// `flag`'s duration `s`, refused when it is 0.
fn longer_than_0(flag: &str, s: &str) -> Result<Duration, String> {
    let d = given_duration(flag, s)?.value;
    if d.is_zero() {
        return Err(format!("{flag} must be longer than 0"));
    }
    Ok(d)
}

/// `--dedup WINDOW`: longer than 0, at most 10s (the tables hold a window's frames).
pub fn dedup(s: &str) -> Result<Duration, String> {
    let d = given_duration("--dedup", s)?.value;
    if d.is_zero() || d > Duration::from_secs(10) {
        return Err(format!("--dedup must be a window longer than 0 and at most 10s (e.g. 1ms), not {s}"));
    }
    Ok(d)
}

/// `--flow-cutoff BYTES`: above 0.
pub fn flow_cutoff(s: &str) -> Result<u64, String> {
    match given_size("--flow-cutoff", s)?.value {
        0 => {
            Err("--flow-cutoff 0 would keep no packet of any connection: give the bytes to keep of each (e.g. 10K)"
                .into())
        }
        v => Ok(v),
    }
}

/// `--flow-idle`: longer than 0.
pub fn flow_idle(s: &str) -> Result<Duration, String> {
    longer_than_0("--flow-idle", s)
}

/// `--flow-idle-timeout`: at least 1s (flows are checked once a second).
pub fn flow_idle_timeout(s: &str) -> Result<Duration, String> {
    flow_timeout("--flow-idle-timeout", s)
}

/// `--flow-active-timeout`: at least 1s.
pub fn flow_active_timeout(s: &str) -> Result<Duration, String> {
    flow_timeout("--flow-active-timeout", s)
}

fn flow_timeout(flag: &str, s: &str) -> Result<Duration, String> {
    let d = given_duration(flag, s)?.value;
    if d < Duration::from_secs(1) {
        return Err(format!("{flag} must be at least 1s (flows are checked once a second)"));
    }
    Ok(d)
}

/// `--max-flows N`: 1 to 2^26 flows a stream (the flow-record table, [`wv_flows::FlowConfig::max_flows`]).
pub fn max_flows(s: &str) -> Result<usize, String> {
    // 2^26 flows is a 12.2 GiB table a stream: more is a typo, not a plan.
    const MAX: usize = 1 << 26;
    match s.trim().parse::<usize>() {
        Ok(n @ 1..=MAX) => Ok(n),
        _ => Err(format!("--max-flows must be a number of flows from 1 to {MAX} (e.g. 65536), not \"{s}\"")),
    }
}

/// `--flows`, the flow timeouts, `--max-flows` and the `--flows-to` sinks (`--clickhouse-auth`
/// is the ClickHouse table's USER:PASSWORD file): the flow table's settings, if records are
/// made, and where they also go as they end. A sink implies the records.
pub fn flows(
    records: bool,
    (idle, active): (Duration, Duration),
    max_flows: usize,
    sinks: &[String],
    auth: Option<&std::path::Path>,
) -> Result<(Option<wv_flows::FlowConfig>, crate::config::FlowSinks)> {
    let to = crate::config::FlowSinks::parse(sinks, auth).map_err(Error::config)?;
    let config = (records || !sinks.is_empty()).then_some(wv_flows::FlowConfig {
        idle_timeout_ns: idle.as_nanos() as u64,
        active_timeout_ns: active.as_nanos() as u64,
        max_flows,
    });
    Ok((config, to))
}

/// `--max-size`: bytes, or a share of the store's volumes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MaxSize {
    Bytes(u64),
    /// A fraction in (0, 1].
    Share(f64),
}

/// `--max-size SIZE|PERCENT`.
pub fn max_size(s: &str) -> Result<Given<MaxSize>, String> {
    if s.trim().ends_with('%') {
        let share =
            wv_units::parse_percent(s).ok_or_else(|| format!("--max-size \"{s}\" is not a percentage in (0, 100]"))?;
        return Ok(Given::new(MaxSize::Share(share), s));
    }
    Ok(Given::new(MaxSize::Bytes(given_size("--max-size", s)?.value), s))
}

/// `--spill-above`: the fraction of the arena (`None`: off).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spill(pub Option<f64>);

/// `--spill-above`: a percentage of the arena (0-100), or `off`.
pub fn spill(s: &str) -> Result<Spill, String> {
    if s.eq_ignore_ascii_case("off") {
        return Ok(Spill(None));
    }
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(Spill(Some(p / 100.0))),
        _ => Err(format!("'{s}' is not a percentage of the arena from 0 to 100, or 'off'")),
    }
}

/// `-s BYTES`: 1 to 262,144; 0 means 262,144, as for tcpdump.
pub fn snaplen(s: &str) -> Result<u32, String> {
    let max = wv_wire::MAX_SNAPLEN;
    match s.trim().parse::<u64>() {
        Ok(0) => Ok(max),
        Ok(n) if n <= u64::from(max) => Ok(n as u32),
        Ok(n) => Err(format!("{n} is not in 0..={max} (0 means {max})")),
        Err(_) => Err(format!("{s} is not a number of bytes (0 to {max})")),
    }
}

/// What [`sizing`] sizes: the choices the streams' sizes depend on.
pub struct SizeChoices<'a> {
    pub store: &'a Path,
    pub workers: usize,
    /// `-i IF` given (`--workers` above 1 needs it or `--synthetic`).
    pub live: bool,
    pub synthetic: bool,
    pub snaplen: u32,
    pub block: u64,
    pub file: u64,
    /// `--buffer`, when given.
    pub buffer: Option<&'a Given<u64>>,
    /// `--ring-size`, when given.
    pub ring: Option<&'a Given<u64>>,
    pub zero_copy: bool,
    /// The files are pcapng (`--zero-copy` writes no other).
    pub pcapng: bool,
    /// `--source xdp`.
    pub xdp: bool,
}

/// The byte sizes of the streams and their buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    pub per_worker: u64,
    pub ring_blocks: usize,
    /// Where the arena's size came from: `--buffer`, `disk-bench` or `memory`.
    pub buffer_from: &'static str,
}

/// Sizes the arenas (from `--buffer`, the store's disk-bench result or memory) and the kernel
/// rings, with the warnings to say once (a disk-bench result not taken).
pub fn sizing(c: &SizeChoices) -> Result<(Sizing, Vec<Note>)> {
    if c.workers == 0 || c.workers > 64 {
        return Err(Error::config(format!("--workers must be 1..=64, not {}", c.workers)));
    }
    // (With --synthetic each worker generates SPEC on its own stream: the store's throughput
    // with several writers, e.g. on several volumes.)
    if c.workers > 1 && !c.live && !c.synthetic {
        return Err(Error::config(
            "--workers > 1 needs --interface (fanout spreads live traffic over workers) or --synthetic",
        ));
    }
    if c.snaplen == 0 || c.snaplen > wv_wire::MAX_SNAPLEN {
        return Err(Error::config(format!("--snaplen must be 1..={}, not {}", wv_wire::MAX_SNAPLEN, c.snaplen)));
    }
    let mut notes = Vec::new();
    let (buffer, buffer_from) = match c.buffer {
        Some(b) => (b.value, "--buffer"),
        None => match crate::host::disk_bench_buffer(c.store)? {
            Some(Ok(b)) => (b, "disk-bench"),
            Some(Err(why)) => {
                notes.push(Note::warning(why));
                (defaults::buffer(c.zero_copy), "memory")
            }
            None => (defaults::buffer(c.zero_copy), "memory"),
        },
    };
    let per_worker = (buffer / c.workers as u64) / c.block * c.block;
    if per_worker < 4 * c.block {
        return Err(Error::config(format!(
            "--buffer {} is too small: each worker needs at least 4 blocks of {} bytes",
            c.buffer.map_or("default", |b| b.text.as_str()),
            c.block
        )));
    }
    if c.zero_copy {
        zero_copy(c.live, c.pcapng, c.xdp)?;
    }
    let ring = ring_bytes(c, per_worker)?;
    let ring_blocks = (ring / Tuning::default().ring_block_size as u64).max(2) as usize;
    Ok((Sizing { per_worker, ring_blocks, buffer_from }, notes))
}

/// Each worker's kernel ring in bytes: `--ring-size`, or its default.
fn ring_bytes(c: &SizeChoices, per_worker: u64) -> Result<u64> {
    let Some(r) = c.ring else {
        // Zero-copy: the ring is the only buffer, as large as the copy path's arena and ring
        // together (the same memory; with the arena's size alone it held half as much and
        // dropped frames under contention where the copy path did not: bench/RESULTS.md).
        // (From memory, --buffer's default is smaller on this path: zero_copy_buffer_for_memory.)
        return Ok(if c.zero_copy {
            (per_worker + defaults::ring_size(c.workers)).clamp(8 << 20, defaults::RING_MAX)
        } else {
            defaults::ring_size(c.workers)
        });
    };
    crate::host::rings_fit(&r.text, r.value, c.workers)
}

/// `--zero-copy` works on a live AF_PACKET interface writing pcapng.
pub fn zero_copy(live: bool, pcapng: bool, xdp: bool) -> Result<()> {
    if !live {
        return Err(Error::config("--zero-copy writes a live capture ring's blocks; it needs -i IF"));
    }
    if !pcapng {
        return Err(Error::config("--zero-copy writes pcapng only; add --format pcapng"));
    }
    if xdp {
        return Err(Error::config(
            "--zero-copy writes AF_PACKET ring blocks; AF_XDP (--source xdp) has none: give one of them",
        ));
    }
    Ok(())
}

/// The timestamp choice the source allows: hardware stamps from a live AF_PACKET interface
/// only; `xdp` needs a live interface.
pub fn stamping(live: bool, xdp: bool, stamps: Stamping) -> Result<()> {
    if stamps == Stamping::Hardware && !live {
        return Err(Error::config(
            "--timestamps hw applies to a live interface (-i IF) only: --read keeps the files' own times and --synthetic stamps with the kernel's clock",
        ));
    }
    if xdp && !live {
        return Err(Error::config("--source xdp reads a live interface: give -i IF"));
    }
    if xdp && stamps == Stamping::Hardware {
        return Err(Error::config(
            "--timestamps hw: AF_XDP frames carry no timestamp (wirevault stamps them with the system clock); record with --source afpacket for the NIC's stamps",
        ));
    }
    Ok(())
}

/// A synthetic source must end: by its spec, or by `other_end` (`-c`, `--duration`, a
/// budget).
pub fn synthetic_ends(spec: &synthetic::Spec, other_end: bool) -> Result<()> {
    if spec.count.is_none() && spec.duration.is_none() && !other_end {
        return Err(Error::config(
            "--synthetic needs an end: count=N or duration=T in the spec, -c N, --duration T, or a --max-size budget",
        ));
    }
    Ok(())
}

/// `--flow-table N`: 1 to 2^30 connections per worker.
pub fn flow_table(n: usize) -> Result<usize> {
    if !(1..=1 << 30).contains(&n) {
        return Err(Error::config(format!("--flow-table must be 1..={}, not {n}", 1u64 << 30)));
    }
    Ok(n)
}

/// The retention budget of `max` (a share of every volume the store writes to, measured now)
/// for `workers` streams of `file` files: at least [`crate::min_budget`].
pub fn budget(
    max: &Given<MaxSize>,
    on_full: OnFull,
    dirs: &[&Path],
    file: &Given<u64>,
    workers: usize,
) -> Result<Budget> {
    let max_bytes = match max.value {
        MaxSize::Bytes(b) => b,
        MaxSize::Share(share) => (crate::host::volumes_size(dirs)? as f64 * share) as u64,
    };
    let need = crate::min_budget(file.value, workers);
    if max_bytes < need {
        return Err(Error::config(format!(
            "--max-size {max} ({max_bytes} bytes) is too small for {workers} stream(s) of --file-size {file}: it needs at least {need} bytes"
        )));
    }
    Ok(Budget { max_bytes, on_full })
}

/// A budget in words, as a reload reports its change.
pub fn budget_text(b: Option<Budget>) -> String {
    match b {
        None => "none".into(),
        Some(b) => format!(
            "{} bytes ({})",
            b.max_bytes,
            if b.on_full == OnFull::Stop { "stop when full" } else { "delete the oldest" }
        ),
    }
}

/// `--read`: standard input at most once; every other name a file or a pipe (/dev/stdin,
/// FIFOs, process substitution), not a directory.
pub fn read_files(files: &[PathBuf]) -> Result<()> {
    let stdin = files.iter().filter(|f| f.as_os_str() == "-").count();
    if stdin > 1 {
        return Err(Error::config("--read: standard input (-) can be read only once"));
    }
    for f in files.iter().filter(|f| f.as_os_str() != "-") {
        match std::fs::metadata(f) {
            Ok(m) if m.is_dir() => {
                return Err(Error::failed(format!("--read: {} is a directory, not a capture file", f.display())))
            }
            // A regular file's header is checked now, so that a non-capture input creates no
            // store; a pipe's when it is read (it cannot be read twice): then the store exists
            // and the input is reported as an input problem (exit 1).
            Ok(m) if m.is_file() => capture_header(f)?,
            Ok(_) => {}
            Err(e) => {
                // `--read a.pcap udp`: --read takes every word up to the next option.
                let hint = if files.len() > 1 && e.kind() == std::io::ErrorKind::NotFound {
                    " (--read takes every following word as a file: put the filter after -- or after another option)"
                } else {
                    ""
                };
                return Err(Error::failed(format!("--read: cannot read {}: {e}{hint}", f.display())));
            }
        }
    }
    Ok(())
}

/// A regular `--read` file must start as a pcap or pcapng file does.
fn capture_header(f: &Path) -> Result<()> {
    use std::io::Read;
    let mut head = Vec::with_capacity(4);
    std::fs::File::open(f)
        .and_then(|h| h.take(4).read_to_end(&mut head))
        .map_err(|e| Error::failed(format!("--read: cannot read {}: {e}", f.display())))?;
    let ok = head.first_chunk::<4>().is_some_and(|m| wv_wire::Format::of_magic(*m).is_some());
    if !ok {
        return Err(Error::failed(format!(
            "--read: {} is not a pcap or pcapng file (its first bytes are no capture file header)",
            f.display()
        )));
    }
    Ok(())
}

/// `--stats-file FILE`: FILE must not exist as anything but a regular file (a symlink,
/// device, FIFO or directory is refused: it would be replaced), must not be in the store (by
/// device and inode, as query's `-w`: it would replace the catalog or a capture), and its
/// directory must take the temporary file it is written through ([`crate::stats::create_temp`]).
pub fn stats_file(sf: &Path, store: &Path) -> Result<()> {
    let shown = sf.display();
    match std::fs::symlink_metadata(sf) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(Error::config(format!(
                "--stats-file {shown} is a symbolic link; name a regular file or a new one"
            )))
        }
        Ok(m) if m.is_dir() => return Err(Error::config(format!("--stats-file {shown} is a directory; name a file"))),
        Ok(m) if !m.is_file() => {
            return Err(Error::config(format!(
                "--stats-file {shown} is not a regular file (a device, pipe or socket) and would be replaced; name a regular file"
            )))
        }
        _ => {}
    }
    if wv_query::check_outside(store, Some(store), &[], sf).is_err() {
        return Err(Error::config(format!(
            "--stats-file {shown} is inside the store {} (it always holds stats.json); write the copy elsewhere",
            store.display()
        )));
    }
    match crate::stats::create_temp(sf) {
        Ok((_, tmp)) => {
            let _ = std::fs::remove_file(&tmp);
            Ok(())
        }
        Err(e) => {
            Err(Error::config(format!("--stats-file {shown}: cannot write there ({e}); choose a writable directory")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_sink_makes_flow_records() {
        let t = (Duration::from_secs(60), Duration::from_secs(300));
        let sink = ["ipfix=udp://127.0.0.1:4739".to_string()];
        let (records, to) = flows(false, t, 1000, &sink, None).unwrap();
        let records = records.unwrap();
        assert_eq!((records.idle_timeout_ns, records.max_flows, to.ipfix.len()), (60_000_000_000, 1000, 1));
        assert!(flows(false, t, 1000, &[], None).unwrap().0.is_none());
        let e = flows(true, t, 1000, &["nfcapd=udp://h:1".to_string()], None).unwrap_err();
        assert!(e.message.starts_with("--flows-to \"nfcapd=udp://h:1\" is not SINK=URL"), "{}", e.message);
    }

    #[test]
    fn value_refusals_start_with_the_option() {
        assert!(block_size("65K").unwrap_err().starts_with("--block-size must be a multiple of 4K"));
        assert_eq!(block_size("64K").unwrap().value, 64 << 10);
        assert!(file_time("1ms").unwrap_err().starts_with("--file-time must be between 10ms and 366d"));
        assert!(flow_idle_timeout("999ms").unwrap_err().starts_with("--flow-idle-timeout must be at least 1s"));
        for bad in ["0", "-1", "1e3", "", &((1usize << 26) + 1).to_string()] {
            assert!(max_flows(bad).unwrap_err().starts_with("--max-flows must be a number of flows from 1"), "{bad}");
        }
        assert_eq!((max_flows("1"), max_flows("65536")), (Ok(1), Ok(65536)));
        assert_eq!(snaplen("0"), Ok(wv_wire::MAX_SNAPLEN));
        assert_eq!(max_size("50%").unwrap().value, MaxSize::Share(0.5));
        assert_eq!(spill("off"), Ok(Spill(None)));
    }
}
