//! What a recording is made of: the configuration [`crate::Recorder`] takes. Every default
//! and every flag is the binary's (`wirevault record`); the fixed tunings are here, named.

use std::path::PathBuf;
use std::time::Duration;
use wv_capture::synthetic;
use wv_store::catalog::Budget;
use wv_store::Format;

/// Whose receive stamps a live interface's frames carry (`--timestamps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamping {
    /// The NIC's hardware stamps: refused where the NIC has none.
    Hardware,
    /// The kernel's software stamps.
    Software,
    /// The NIC's where it has them, else the kernel's, with a note.
    Auto,
}

/// Fixed tunings of a recording: not flags, but named here so that the
/// wiring has no bare numbers.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Bytes per block of a live worker's TPACKET_V3 ring.
    pub ring_block_size: usize,
    /// Blocks per ring (`--ring-size` / `ring_block_size`; by default 64 ×
    /// 4 MiB = 256 MiB for one worker, see the binary's `defaults::ring_size`).
    pub ring_blocks: usize,
    /// Milliseconds after which the kernel hands over a block that is not full (a stop's drain
    /// waits twice that without a block, `afpacket::Drain`). 40, not 10: at ~1 Mpps of 64-byte frames a
    /// 4 MiB block then fills before its timer fires, which halved the disk writes (each a
    /// virtio notification, a VM exit here) and cut 6-8 ns per packet (DESIGN.md, "Live capture").
    pub ring_retire_ms: u32,
    /// Bytes of each arena faulted in before capture starts (a disk that keeps up uses two or
    /// three blocks; 64 MiB, ~0.2 s of CPU on this VM, absorbs a writer's pause, such as
    /// retention deleting files, without page faults on the capture thread); the rest is
    /// faulted in ahead of the backlog by a thread of its own (`prefault`).
    pub arena_first: u64,
    /// The small ring a live interface goes live on at once, before its full rings are made
    /// (`wv_capture::handover`): its block size and blocks. 32 MiB, which the kernel makes in
    /// ~0.1 s here, in 1 MiB blocks, so that the zero-copy path's writes in flight (half of
    /// them at most) leave the kernel blocks to fill.
    pub warm_ring: (usize, usize),
    /// io_uring queue depth of a writer (writes in flight).
    pub write_depth: u32,
    /// Ring blocks whose writes may be in flight at once on the zero-copy path (DESIGN.md,
    /// "Zero-copy block path": why this number).
    pub zc_inflight: u32,
    /// Preallocation step of a writer where the whole file cannot be preallocated at once
    /// (`wv_sys::fs::Prealloc`: a nearly full volume). The writer never preallocates past
    /// one `--file-size`: retention reserves one per open file.
    pub prealloc_step: u64,
    /// Segments the hand-off queue between a worker and its writer holds.
    pub queue_segments: usize,
    /// A worker commits a partial block after this long without a commit.
    pub flush_after_ns: u64,
    /// Live and generated traffic: close a file at its time boundary by the
    /// wall clock this long after the boundary (see `StreamConfig`).
    pub clock_close_grace_ns: u64,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            ring_block_size: 4 << 20,
            ring_blocks: 64,
            ring_retire_ms: 40,
            arena_first: 64 << 20,
            warm_ring: (1 << 20, 32),
            write_depth: 8,
            zc_inflight: 16,
            prealloc_step: 64 << 20,
            queue_segments: 65_536,
            flush_after_ns: 1_000_000_000,
            clock_close_grace_ns: 250_000_000,
        }
    }
}

/// Where the packets come from.
pub enum Source {
    /// `-i IF`: live capture, one ring per worker.
    Live {
        interface: String,
        promisc: bool,
        /// `--source xdp`: AF_XDP sockets instead of AF_PACKET rings.
        xdp: bool,
    },
    /// `-r FILE...`: files read front to back (`-` is standard input).
    Read { files: Vec<PathBuf> },
    /// `--synthetic SPEC`.
    Synthetic(synthetic::Spec),
}

/// How each stream lays out its files.
pub struct Layout {
    pub format: Format,
    pub arena_per_worker: u64,
    pub block_size: u64,
    pub file_size: u64,
    pub file_time_ns: Option<u64>,
}

/// What one recording is: every choice made (the binary maps its flags and their defaults
/// onto it), nothing created yet. [`crate::Recorder::prepare`] checks what can only be checked
/// against the host (the interface, the store) and [`crate::Prepared::start`] records.
pub struct RecorderConfig {
    pub store: PathBuf,
    /// `--volume`: extra volumes of the store.
    pub volumes: Vec<PathBuf>,
    pub source: Source,
    pub workers: usize,
    pub snaplen: u32,
    pub stream: Layout,
    pub cpus: Option<Vec<usize>>,
    /// `-c N`.
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub expression: Option<String>,
    pub budget: Option<Budget>,
    /// `--user`: switch to this user once the sockets are open.
    pub user: Option<String>,
    /// Try O_DIRECT.
    pub direct: bool,
    /// Spill to the page cache while the arena is fuller than this fraction.
    pub spill: Option<f64>,
    /// Build index files.
    pub index: bool,
    /// Flow records (`STORE/flows/`, docs/flows.md) with these timeouts and table size;
    /// `None`: without `--flows`. On the zero-copy path the capture thread is the writer, and
    /// the flow table runs there beside the index keys.
    pub flows: Option<wv_flows::FlowConfig>,
    /// `--flows-to ipfix=...`: IPFIX collectors the flow records also go to as they end
    /// (with `flows`; docs/ipfix.md).
    pub flows_to: Vec<wv_ipfix::Destination>,
    /// `--flows-to clickhouse=URL`: the flow files are sent there too (with `flows`;
    /// docs/clickhouse.md).
    pub clickhouse: Option<wv_flows::clickhouse::Target>,
    /// `--stats-file`: a copy of `STORE/stats.json`, kept up to date with it.
    pub stats_copy: Option<PathBuf>,
    pub tuning: Tuning,
    pub reduce: Reductions,
    /// Whose receive stamps a live interface's frames carry.
    pub timestamps: Stamping,
    /// Where the arena size came from: `--buffer`, `disk-bench` (the store's
    /// `disk-bench.json`) or `memory`.
    pub buffer_from: &'static str,
    /// `--zero-copy`: the ring's blocks are written as they are (no arena).
    pub zero_copy: bool,
}

/// `--dedup` and `--flow-cutoff`: what is deliberately not stored.
#[derive(Clone, Copy, Debug, Default)]
pub struct Reductions {
    /// `--dedup`: the window in ns.
    pub dedup_window_ns: Option<u64>,
    /// `--flow-cutoff`: bytes kept per connection.
    pub flow_cutoff: Option<u64>,
    pub flow_table: usize,
    pub flow_idle_ns: u64,
}

impl Reductions {
    /// The tables of one worker (allocated and touched now).
    pub fn build(&self) -> wv_capture::reduce::Reduce {
        use wv_capture::reduce::{Cutoff, Dedup, Reduce};
        Reduce::new(
            self.dedup_window_ns.map(|w| Dedup::new(w, Dedup::DEFAULT_ENTRIES)),
            self.flow_cutoff.map(|b| Cutoff::new(b, self.flow_idle_ns, self.flow_table)),
        )
    }
}

impl RecorderConfig {
    /// Bytes the store may hold besides its catalog (see [`reserve`]).
    pub fn reserve(&self) -> u64 {
        // A zero-copy file may run one ring block past --file-size.
        let over = if self.zero_copy { self.tuning.ring_block_size as u64 } else { 0 };
        reserve(self.stream.file_size + over, self.workers)
    }
}

/// The smallest `--max-size` for `streams` streams of `file_size` files:
/// the files being written and one closed file.
pub fn min_budget(file_size: u64, streams: usize) -> u64 {
    reserve(file_size, streams) + file_size
}

/// Bytes the store may hold besides its catalog when a file opens: per
/// stream, the file being written (with room for its index, well under 5%
/// of the capture). Closed files waiting for their index are counted by
/// the catalog itself until their line is written (`Catalog::uncataloged`),
/// so usage stays under the budget however far the index threads lag.
pub fn reserve(file_size: u64, streams: usize) -> u64 {
    (file_size + file_size / 20) * streams as u64
}

/// The sinks of `--flows-to SINK=URL` (repeatable): IPFIX collectors and at most one
/// ClickHouse table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowSinks {
    pub ipfix: Vec<wv_ipfix::Destination>,
    pub clickhouse: Option<wv_flows::clickhouse::Target>,
}

impl FlowSinks {
    /// Parses the `--flows-to` values; `auth` is `--clickhouse-auth` (a USER:PASSWORD file).
    /// Errors are one sentence naming the flag.
    pub fn parse(values: &[String], auth: Option<&std::path::Path>) -> Result<FlowSinks, String> {
        let mut sinks = FlowSinks::default();
        for v in values {
            match v.split_once('=') {
                Some(("ipfix", url)) => sinks.ipfix.push(wv_ipfix::Destination::parse(url).map_err(|e| format!("--flows-to: {e}"))?),
                Some(("clickhouse", url)) => {
                    if sinks.clickhouse.is_some() {
                        return Err("--flows-to clickhouse=URL is given twice: one ClickHouse table per recording".into());
                    }
                    let auth = auth.map(wv_flows::clickhouse::read_auth).transpose().map_err(|e| format!("--clickhouse-auth: {e}"))?;
                    sinks.clickhouse = Some(wv_flows::clickhouse::Target::parse(url, auth).map_err(|e| format!("--flows-to: {e}"))?);
                }
                _ => {
                    return Err(format!(
                        "--flows-to {v:?} is not SINK=URL with a known sink: give ipfix=udp://HOST:4739, ipfix=tcp://HOST:PORT or clickhouse=http://HOST:8123/DB"
                    ))
                }
            }
        }
        if sinks.clickhouse.is_none() && auth.is_some() {
            return Err("--clickhouse-auth is for --flows-to clickhouse=URL, which is not given".into());
        }
        Ok(sinks)
    }
}
