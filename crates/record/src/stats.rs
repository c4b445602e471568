//! What a recording reports: one typed, versioned [`RecordingStats`] (written as
//! `STORE/stats.json`, shown by the API's `/api/v1/status` and `/metrics`, rendered as the
//! status line and the summary), summed from the capture threads' and writers' published
//! counters; and the causes of drops, once, in [`DropCause`].

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use wv_capture::{Counts, SharedCounts};
use wv_store::catalog::Deleted;
use wv_store::writer::WriterShared;

/// The version of [`RecordingStats`] this build writes; a reader refuses others.
pub const VERSION: u32 = 1;

/// A cause of drops. Adding one: a variant here, its line in [`DropCause::ALL`] and in
/// [`DropCause::about`], and the counter it reads in `Snapshot::drops`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DropCause {
    /// The kernel's ring was full (the capture thread fell behind).
    Kernel,
    /// The arena was full (the disk fell behind).
    ArenaFull,
    /// A write failed; the stream stopped.
    WriteError,
    /// The store reached its budget with `--on-full stop`.
    Budget,
    /// Arrived after `-c N` was reached while the intake was stopping.
    Shutdown,
    /// Dated after 2106-02-07T06:28:15Z with `--format pcap` (32-bit seconds).
    TimestampRange,
    /// `--source xdp`: the AF_XDP socket's fill ring had no free chunk.
    FillRing,
    /// `--source xdp`: dropped by the socket for another reason (a frame too large for its
    /// chunks, say); a full RX ring is `Kernel`.
    XskOther,
}

/// What a cause of drops is called where.
pub struct About {
    /// Its key in the `dropped` object of stats.json and the API.
    pub name: &'static str,
    /// Its label on the status line (`None`: not shown there).
    pub label: Option<&'static str>,
    /// Its label in the summary.
    pub summary: &'static str,
    /// What it means, in a line (the metrics' help).
    pub meaning: &'static str,
}

impl DropCause {
    /// Every cause, in the order the reports list them.
    pub const ALL: [DropCause; 8] = [
        DropCause::Kernel,
        DropCause::ArenaFull,
        DropCause::WriteError,
        DropCause::Budget,
        DropCause::Shutdown,
        DropCause::TimestampRange,
        DropCause::FillRing,
        DropCause::XskOther,
    ];

    pub fn about(self) -> About {
        let a = |name, label, summary, meaning| About { name, label, summary, meaning };
        match self {
            DropCause::Kernel => a("kernel", Some("kernel"), "kernel", "the kernel's ring was full"),
            DropCause::ArenaFull => {
                a("arena_full", Some("arena"), "arena full", "the arena was full (the disk fell behind)")
            }
            DropCause::WriteError => a("write_error", Some("write"), "write error", "a write failed"),
            DropCause::Budget => a("budget", Some("budget"), "budget", "the store reached its budget (--on-full stop)"),
            DropCause::Shutdown => a("shutdown", None, "shutdown", "arrived after -c N while the intake stopped"),
            DropCause::TimestampRange => {
                a("timestamp_range", None, "time past pcap's range", "dated after 2106 with --format pcap")
            }
            DropCause::FillRing => a("fill_ring", None, "fill ring empty", "AF_XDP: no free chunk in the fill ring"),
            DropCause::XskOther => a("xsk_other", None, "AF_XDP other", "AF_XDP: dropped by the socket otherwise"),
        }
    }

    /// Whether a recording of `c` can have this cause (the summary lists only those, and any
    /// other that is not 0; stats.json lists every cause).
    pub fn applies(self, c: Causes) -> bool {
        match self {
            DropCause::Kernel => c.live,
            DropCause::TimestampRange => c.pcap,
            DropCause::FillRing | DropCause::XskOther => c.xdp,
            _ => true,
        }
    }
}

/// What a recording can drop packets for, beyond what every recording can.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Causes {
    /// A live source: the kernel's ring can overflow.
    pub live: bool,
    /// `--source xdp`: the AF_XDP socket's own causes.
    pub xdp: bool,
    /// `--format pcap`: 32-bit seconds.
    pub pcap: bool,
}

/// Where a recording is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// The store is being readied; nothing is captured yet.
    #[default]
    Starting,
    /// Capture is live.
    Capturing,
    /// Every packet is written or counted.
    Done,
}

/// One stream's counters (capture worker i and its writer), or their sum.
/// `received = written + pending + filtered + deduplicated + cut + every drop` at any moment,
/// and without `pending` once the recording is done.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamStats {
    pub received: u64,
    pub written: u64,
    /// Packets in the arena, not written yet.
    pub pending: u64,
    pub filtered: u64,
    pub deduplicated: u64,
    pub cut: u64,
    pub flows_evicted: u64,
    /// Flow records written to `STORE/flows/` (docs/flows.md), and of the records ended, those
    /// pushed out of the full flow table (`flows_evicted` is `--flow-cutoff`'s table).
    pub flows_written: u64,
    pub flow_records_evicted: u64,
    /// Flow records not exported because an IPFIX exporter's queue was full
    /// (`--flows-to ipfix=...`, docs/ipfix.md).
    #[serde(default)]
    pub ipfix_records_dropped: u64,
    /// Drops by cause ([`DropCause`]'s names).
    pub dropped: BTreeMap<String, u64>,
    /// Packets the capture thread stored into the arena.
    pub stored_in_arena: u64,
    /// Bytes of the received frames as they were on the wire.
    pub wire_bytes: u64,
    /// Files closed, their bytes, and the bytes the disk took (aligned tails included).
    pub files: u64,
    pub file_bytes: u64,
    pub disk_bytes: u64,
    pub spilled_bytes: u64,
    /// What retention deleted.
    pub files_deleted: u64,
    pub bytes_deleted: u64,
    /// The fullest arena, 0..=1.
    pub arena_fill: f64,
    /// CPU of the capture threads (s).
    pub capture_cpu_s: f64,
}

impl StreamStats {
    /// Every drop, summed.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }

    pub fn drops(&self, cause: DropCause) -> u64 {
        self.dropped.get(cause.about().name).copied().unwrap_or(0)
    }
}

/// Who stamped a recording's packets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timestamps {
    /// The catalog's name of the source: `software`, `hardware` or `file`.
    pub source: String,
    /// Frames stamped by the NIC and by the kernel, in all and per stream.
    pub hardware: u64,
    pub software: u64,
    pub streams: Vec<Stamped>,
}

/// Frames stamped by the NIC and by the kernel, of one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamped {
    pub hardware: u64,
    pub software: u64,
}

/// A recording's report: `STORE/stats.json` (rewritten every second), what `/api/v1/status`
/// shows of a recording and what `/metrics` counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RecordingStats {
    /// [`VERSION`].
    pub version: u32,
    pub state: State,
    pub elapsed_s: f64,
    /// What is recorded: `interface eth1`, `2 file(s)`, `synthetic traffic`.
    pub sources: Vec<String>,
    pub workers: usize,
    /// A live AF_PACKET interface: `small` while capture runs on the small ring it went live
    /// on, `full` once its full rings took over; `None` for other sources.
    pub rings: Option<String>,
    /// The sum over the streams.
    #[serde(flatten)]
    pub total: StreamStats,
    pub streams: Vec<StreamStats>,
    /// Over the last second.
    pub pps: f64,
    pub gbps: f64,
    pub disk_mb_s: f64,
    /// The process's CPU until capture was live, and of it the arenas' first blocks.
    pub startup_cpu_s: f64,
    pub arena_prefault_cpu_s: f64,
    pub arena_bytes: u64,
    /// The arenas' memory faulted in (before capture, and after by the prefault thread ahead
    /// of their use), and how much of them was ever used (their high-water marks).
    pub arena_faulted_bytes: u64,
    pub arena_used_bytes: u64,
    /// Every stream's arena blocks are io_uring fixed buffers (the kernel refused none).
    pub arena_registered: bool,
    pub arena_background_cpu_s: f64,
    /// Where the arena's size came from: `--buffer`, `disk-bench` or `memory`.
    pub arena_from: String,
    /// Who stamped the packets.
    pub timestamps: Timestamps,
    /// The most writes one stream had in flight (zero-copy).
    pub writes_in_flight_max: u64,
    /// The retention budget (`--max-size`), and `delete` or `stop`.
    pub budget_bytes: Option<u64>,
    pub on_full: Option<String>,
    /// `received` equals everything counted: only once done.
    pub balanced: Option<bool>,
    /// `--flows-to clickhouse=URL` (docs/clickhouse.md), `None` without: what went there.
    #[serde(default, skip_serializing_if = "Option::is_none", flatten)]
    pub clickhouse: Option<ClickhouseStats>,
}

/// What the ClickHouse inserter did: flow files (batches) and their records ClickHouse has
/// (sent, or found there after a restart), those waiting in the store, those retention
/// deleted before they were sent, and the tries that failed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClickhouseStats {
    pub clickhouse_batches_sent: u64,
    pub clickhouse_records_sent: u64,
    pub clickhouse_batches_pending: u64,
    pub clickhouse_records_pending: u64,
    pub clickhouse_batches_lost: u64,
    pub clickhouse_records_lost: u64,
    pub clickhouse_failures: u64,
}

impl ClickhouseStats {
    pub fn of(c: &wv_flows::clickhouse::spool::Counters) -> ClickhouseStats {
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        ClickhouseStats {
            clickhouse_batches_sent: l(&c.batches_sent),
            clickhouse_records_sent: l(&c.records_sent),
            clickhouse_batches_pending: l(&c.batches_pending),
            clickhouse_records_pending: l(&c.records_pending),
            clickhouse_batches_lost: l(&c.batches_lost),
            clickhouse_records_lost: l(&c.records_lost),
            clickhouse_failures: l(&c.failures),
        }
    }
}

impl RecordingStats {
    /// A stats.json as written by this version, or why not.
    pub fn parse(text: &str) -> Result<RecordingStats, String> {
        let v: RecordingStats = serde_json::from_str(text).map_err(|e| format!("not a recording's stats: {e}"))?;
        if v.version != VERSION {
            return Err(format!("stats of version {} (this wirevault reads version {VERSION})", v.version));
        }
        Ok(v)
    }

    /// The status line (every second on standard error).
    pub fn line(&self) -> String {
        let t = &self.total;
        let drops: Vec<String> = DropCause::ALL
            .iter()
            .filter_map(|d| d.about().label.map(|label| format!("{label} {}", t.drops(*d))))
            .collect();
        format!(
            "{:>10.0} pps {:>7.3} Gb/s | stored {} filtered {}{} | drops {} | arena {:>5.1}% | disk {:>6.0} MB/s",
            self.pps,
            self.gbps,
            t.stored_in_arena,
            t.filtered,
            reduced(t).map(|(what, n)| format!(" {what} {n}")).collect::<String>(),
            drops.join(" "),
            t.arena_fill * 100.0,
            self.disk_mb_s
        )
    }

    /// The summary line; its drop causes are those `causes` can have, and any other that is
    /// not 0 (a count is never left out).
    pub fn summary(&self, store: &Path, causes: Causes) -> String {
        let t = &self.total;
        let each: Vec<String> = DropCause::ALL
            .iter()
            .filter(|d| d.applies(causes) || t.drops(**d) > 0)
            .map(|d| format!("{} {}", d.about().summary, t.drops(*d)))
            .collect();
        format!(
            "{} packets received in {:.2}s: {} written, {} filtered{}, {} dropped ({}); {} files, {} bytes in {}{}",
            t.received,
            self.elapsed_s,
            t.written,
            t.filtered,
            reduced(t).map(|(what, n)| format!(", {n} {what}")).collect::<String>(),
            t.dropped_total(),
            each.join(", "),
            t.files,
            t.file_bytes,
            store.display(),
            // Said only when it happened: records the IPFIX exporters' full queues refused.
            match t.ipfix_records_dropped {
                0 => String::new(),
                n => format!("; {n} flow records not exported (IPFIX queue full)"),
            }
        )
    }
}

/// The deduplicated and cut counts that are not zero, with their names (a recording without
/// --dedup or --flow-cutoff reads as before).
fn reduced(t: &StreamStats) -> impl Iterator<Item = (&'static str, u64)> {
    [("deduplicated", t.deduplicated), ("cut", t.cut)].into_iter().filter(|(_, n)| *n > 0)
}

/// Rounds to `digits` decimals (the reports' precision).
fn round(v: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (v * m).round() / m
}

/// All counters of one stream (or their sum) at one moment, as published.
pub(crate) struct Snapshot {
    counts: Counts,
    arena_fill: f64,
    written: u64,
    write_error: u64,
    /// Packets not stored because the store reached its budget (`--on-full stop`).
    pub budget: u64,
    disk_bytes: u64,
    spilled_bytes: u64,
    file_bytes: u64,
    files: u64,
    /// What retention deleted, and of it the files this recording wrote.
    pub deleted: Deleted,
    /// The most writes one stream had in flight (zero-copy).
    in_flight_max: u64,
    /// Every stream's arena blocks are registered with io_uring.
    arena_registered: bool,
    flows_written: u64,
    flow_records_evicted: u64,
    ipfix_records_dropped: u64,
}

/// Packets the source saw: delivered to the capture thread, or filtered or dropped before.
fn received(c: &Counts) -> u64 {
    c.delivered + c.filtered_kernel + c.dropped_kernel + c.dropped_fill_ring + c.dropped_xsk_other
}

impl Snapshot {
    /// The counters once every writer has ended: the arenas hold nothing more.
    pub fn drained(mut self) -> Snapshot {
        self.arena_fill = 0.0;
        self
    }

    fn take(sc: &Arc<SharedCounts>, w: &Arc<WriterShared>) -> Snapshot {
        // The writer's counters first: the capture counters read after them are the later of
        // the two (see `published_only`).
        let (written, write_error) =
            (w.written_packets.load(Ordering::Acquire), w.dropped_write_error.load(Ordering::Acquire));
        let budget = w.dropped_budget.load(Ordering::Acquire);
        let (counts, arena_fill) = sc.load();
        Snapshot {
            counts,
            arena_fill,
            written,
            write_error,
            budget,
            disk_bytes: w.disk_bytes.load(Ordering::Relaxed),
            spilled_bytes: w.spilled_bytes.load(Ordering::Relaxed),
            file_bytes: w.file_bytes.load(Ordering::Relaxed),
            files: w.files_closed.load(Ordering::Relaxed),
            deleted: w.retention(),
            in_flight_max: w.writes_in_flight_max.load(Ordering::Relaxed),
            arena_registered: w.arena_registered.load(Ordering::Relaxed),
            flows_written: w.flows_written.load(Ordering::Relaxed),
            flow_records_evicted: w.flow_records_evicted.load(Ordering::Relaxed),
            ipfix_records_dropped: w.ipfix_records_dropped.load(Ordering::Relaxed),
        }
    }

    /// A stream's snapshot taken while it records, as of its capture thread's last
    /// publication: the writer counts each packet it writes, the capture thread publishes
    /// every few batches, so the writer can be ahead. What it did beyond the capture thread's
    /// figures is left for the next snapshot. The final snapshot, taken when both finished,
    /// is exact and not clamped.
    pub fn published_only(mut self) -> Snapshot {
        // In the writer's order: a packet is written, or fails, or finds the budget reached,
        // in stream order, so `written` never goes back from one snapshot to the next.
        let stored = self.counts.stored;
        self.written = self.written.min(stored);
        self.write_error = self.write_error.min(stored - self.written);
        self.budget = self.budget.min(stored - self.written - self.write_error);
        self
    }

    /// Each stream's own snapshot.
    pub fn each(sc: &[Arc<SharedCounts>], ws: &[Arc<WriterShared>]) -> Vec<Snapshot> {
        sc.iter().zip(ws).map(|(c, w)| Snapshot::take(c, w)).collect()
    }

    /// The sum of the streams' snapshots: the total is exactly the sum of the streams'.
    pub fn sum(parts: &[Snapshot]) -> Snapshot {
        let mut t = Snapshot {
            counts: Counts::default(),
            arena_fill: 0.0,
            written: 0,
            write_error: 0,
            budget: 0,
            disk_bytes: 0,
            spilled_bytes: 0,
            file_bytes: 0,
            files: 0,
            deleted: Deleted::default(),
            in_flight_max: 0,
            arena_registered: true,
            flows_written: 0,
            flow_records_evicted: 0,
            ipfix_records_dropped: 0,
        };
        for p in parts {
            t.counts += p.counts;
            t.arena_fill = t.arena_fill.max(p.arena_fill);
            t.written += p.written;
            t.write_error += p.write_error;
            t.budget += p.budget;
            t.disk_bytes += p.disk_bytes;
            t.spilled_bytes += p.spilled_bytes;
            t.file_bytes += p.file_bytes;
            t.files += p.files;
            t.deleted = t.deleted.and(p.deleted);
            t.in_flight_max = t.in_flight_max.max(p.in_flight_max);
            t.arena_registered &= p.arena_registered;
            t.flows_written += p.flows_written;
            t.flow_records_evicted += p.flow_records_evicted;
            t.ipfix_records_dropped += p.ipfix_records_dropped;
        }
        t
    }

    pub fn in_flight_max(&self) -> u64 {
        self.in_flight_max
    }

    pub fn arena_registered(&self) -> bool {
        self.arena_registered
    }

    pub fn disk_bytes(&self) -> u64 {
        self.disk_bytes
    }

    pub fn stored(&self) -> u64 {
        self.counts.stored
    }

    pub fn wire_bytes(&self) -> u64 {
        self.counts.wire_bytes
    }

    pub fn timestamp_range_drops(&self) -> u64 {
        self.counts.dropped_timestamp_range
    }

    /// The drops of `cause`.
    fn drops(&self, cause: DropCause) -> u64 {
        let c = &self.counts;
        match cause {
            DropCause::Kernel => c.dropped_kernel,
            DropCause::ArenaFull => c.dropped_arena_full,
            DropCause::WriteError => self.write_error,
            DropCause::Budget => self.budget,
            DropCause::Shutdown => c.dropped_shutdown,
            DropCause::TimestampRange => c.dropped_timestamp_range,
            DropCause::FillRing => c.dropped_fill_ring,
            DropCause::XskOther => c.dropped_xsk_other,
        }
    }

    /// received = written + filtered + deduplicated + cut + every drop, exactly.
    pub fn balanced(&self) -> bool {
        let c = &self.counts;
        let drops: u64 = DropCause::ALL.iter().map(|d| self.drops(*d)).sum();
        received(c) == self.written + c.filtered_user + c.filtered_kernel + c.deduplicated + c.cut + drops
    }

    /// The counters as every report shows them.
    pub fn stats(&self) -> StreamStats {
        let c = &self.counts;
        StreamStats {
            received: received(c),
            written: self.written,
            pending: c.stored.saturating_sub(self.written + self.write_error + self.budget),
            filtered: c.filtered_user + c.filtered_kernel,
            deduplicated: c.deduplicated,
            cut: c.cut,
            flows_evicted: c.flows_evicted,
            flows_written: self.flows_written,
            flow_records_evicted: self.flow_records_evicted,
            ipfix_records_dropped: self.ipfix_records_dropped,
            dropped: DropCause::ALL.iter().map(|d| (d.about().name.to_string(), self.drops(*d))).collect(),
            stored_in_arena: c.stored,
            wire_bytes: c.wire_bytes,
            files: self.files,
            file_bytes: self.file_bytes,
            disk_bytes: self.disk_bytes,
            spilled_bytes: self.spilled_bytes,
            files_deleted: self.deleted.files,
            bytes_deleted: self.deleted.bytes,
            arena_fill: round(self.arena_fill, 3),
            capture_cpu_s: round(c.cpu_ns as f64 / 1e9, 3),
        }
    }

    /// Frames stamped by the NIC and by the kernel.
    pub fn stamped(&self) -> Stamped {
        Stamped { hardware: self.counts.ts_hardware, software: self.counts.ts_software }
    }
}

/// `STORE/stats.json`: a fixed 4 KiB file rewritten in place (JSON padded with spaces), so
/// the counters can still be written when the disk is full; and a copy elsewhere
/// (`--stats-file`), replaced whole each time.
pub(crate) struct StatsFile {
    file: Option<std::fs::File>,
    copy: Option<PathBuf>,
}

const STATS_LEN: usize = 4096;

impl StatsFile {
    /// Opens `STORE/stats.json` beneath the store, never through a symlink, 0640, and writes
    /// `starting` into it (what a previous recording left is never read as this one's).
    pub fn create(store: &Path, copy: Option<PathBuf>) -> std::io::Result<StatsFile> {
        let how = wv_sys::fs::Open::Create { truncate: true, append: false };
        let file = wv_sys::fs::Dir::open(store).and_then(|d| d.open_file(wv_store::layout::STATS, how, 0))?;
        let mut s = StatsFile { file: Some(file), copy };
        s.write(&RecordingStats { version: VERSION, ..Default::default() });
        Ok(s)
    }

    pub fn write(&mut self, stats: &RecordingStats) {
        use std::io::Write;
        use std::os::unix::fs::FileExt;
        let Ok(json) = serde_json::to_string(stats) else { return };
        let mut buf = json.into_bytes();
        buf.push(b'\n');
        if let Some(f) = &self.file {
            if buf.len() <= STATS_LEN {
                let mut padded = buf.clone();
                padded.resize(STATS_LEN, b' ');
                let _ = f.write_all_at(&padded, 0);
            } else {
                let _ = f.set_len(0).and_then(|()| f.write_all_at(&buf, 0));
            }
        }
        if let Some(p) = &self.copy {
            if let Ok((mut f, tmp)) = create_temp(p) {
                // Replace only a regular file (or nothing): a device or symlink put there since
                // the start is left alone.
                let replaceable = match std::fs::symlink_metadata(p) {
                    Ok(m) => m.is_file(),
                    Err(e) => e.kind() == std::io::ErrorKind::NotFound,
                };
                let ok = replaceable && f.write_all(&buf).is_ok() && std::fs::rename(&tmp, p).is_ok();
                if !ok {
                    let _ = std::fs::remove_file(&tmp);
                }
            }
        }
    }
}

/// Creates the temporary file a `--stats-file FILE` copy is written through:
/// `.FILE.PID.N.part` beside it, new (O_CREAT|O_EXCL, so never through a symlink or over
/// anything there) and O_NOFOLLOW, mode 0640. The caller renames it over FILE or removes it.
pub fn create_temp(file: &Path) -> std::io::Result<(std::fs::File, PathBuf)> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let n = N.fetch_add(1, Ordering::Relaxed);
    let tmp = file.with_file_name(format!(".{name}.{}.{n}.part", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o640)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    Ok((f, tmp))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot(stored: u64, written: u64, write_error: u64, budget: u64) -> Snapshot {
        let counts = Counts { delivered: stored, stored, ..Counts::default() };
        let s = Snapshot::sum(&[]);
        Snapshot { counts, written, write_error, budget, ..s }
    }

    #[test]
    fn a_writer_ahead_of_the_capture_counters_is_shown_as_of_them() {
        // The writer wrote 12 packets; the capture thread last published 10.
        let s = snapshot(10, 12, 0, 0).published_only();
        assert_eq!((s.stats().received, s.written), (10, 10));
        assert!(s.balanced());
        let s = snapshot(10, 7, 2, 3).published_only();
        assert_eq!((s.written, s.write_error, s.budget), (7, 2, 1));
        // The budget reached while the capture counters lag: what was written is not taken back.
        let s = snapshot(10, 12, 0, 5).published_only();
        assert_eq!((s.written, s.write_error, s.budget), (10, 0, 0));
        // Behind is as it is: the rest is pending.
        let s = snapshot(10, 4, 1, 0).published_only();
        assert_eq!((s.written, s.write_error, s.budget), (4, 1, 0));
        assert_eq!(s.stats().pending, 5);
    }

    #[test]
    fn every_cause_has_one_name_and_a_meaning() {
        let names: std::collections::BTreeSet<&str> = DropCause::ALL.iter().map(|d| d.about().name).collect();
        assert_eq!(names.len(), DropCause::ALL.len());
        assert!(DropCause::ALL.iter().all(|d| !d.about().meaning.is_empty()));
        // Every cause is in a stream's `dropped`, in the order the reports list them.
        let s = snapshot(3, 3, 0, 0).stats();
        assert_eq!(s.dropped.len(), DropCause::ALL.len());
    }

    #[test]
    fn stats_read_back_as_written_version_included() {
        let mut st = RecordingStats { version: VERSION, state: State::Capturing, workers: 2, ..Default::default() };
        st.total = snapshot(5, 4, 0, 0).stats();
        st.streams = vec![st.total.clone(), StreamStats::default()];
        let text = serde_json::to_string(&st).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        // The totals are stats.json's top level, as before (bench scripts and tests read them so).
        assert_eq!(
            (v["written"].as_u64(), v["dropped"]["kernel"].as_u64(), v["state"].as_str()),
            (Some(4), Some(0), Some("capturing"))
        );
        assert_eq!(RecordingStats::parse(&text).unwrap(), st);
        let other = text.replacen("\"version\":1", "\"version\":9", 1);
        assert!(RecordingStats::parse(&other).unwrap_err().contains("version 9"));
    }
}
