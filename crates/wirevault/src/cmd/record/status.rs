//! What `record` reports: the status line (standard error) or JSON line
//! (standard output) every second, `STORE/stats.json` (and `--stats-file`),
//! and the summary at the end. The counters are summed here from the
//! workers' and writers' published copies; the causes of drops are listed
//! once, in [`DROP_CAUSES`].

use super::plan::OutputPlan;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use wv_capture::{Counts, SharedCounts};
use wv_store::catalog::Deleted;
use wv_store::writer::WriterShared;

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
        s.write(r#"{"state":"starting"}"#);
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
            if let Ok((mut f, tmp)) = create_temp(p) {
                // Replace only a regular file (or nothing): a device or
                // symlink put there since the start is left alone.
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

/// Creates the temporary file `--stats-file FILE` is written through:
/// `.FILE.PID.N.part` beside it, new (O_CREAT|O_EXCL, so never through a
/// symlink or over anything there) and O_NOFOLLOW, mode 0640. The caller
/// renames it over FILE or removes it.
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

/// One line on standard output; a closed output (`--json | head`) must not
/// stop the recorder, so errors are ignored.
fn out_line(line: &str) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// What a recording can drop packets for, beyond what every recording can: the summary
/// lists only these causes (and any other whose count is not 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Causes {
    /// A live source: the kernel's ring can overflow.
    pub live: bool,
    /// `--source xdp`: the AF_XDP socket's own causes.
    pub xdp: bool,
    /// `--format pcap`: 32-bit seconds.
    pub pcap: bool,
}

/// A cause of drops, as each report names it.
struct DropCause {
    /// Key in the `dropped` object of the JSON.
    json: &'static str,
    /// Label on the status line (`None`: not shown there).
    line: Option<&'static str>,
    /// Label in the summary.
    summary: &'static str,
    /// Whether a recording of these [`Causes`] can have it (the JSON lists every cause).
    of: fn(Causes) -> bool,
}

fn any(_: Causes) -> bool {
    true
}

/// Every cause of drops, in the order the reports list them; the values
/// come from [`Snapshot::drops`] in the same order.
const DROP_CAUSES: [DropCause; 8] = [
    DropCause { json: "kernel", line: Some("kernel"), summary: "kernel", of: |c| c.live },
    DropCause { json: "arena_full", line: Some("arena"), summary: "arena full", of: any },
    DropCause { json: "write_error", line: Some("write"), summary: "write error", of: any },
    DropCause { json: "budget", line: Some("budget"), summary: "budget", of: any },
    // Packets that arrived after -c N was reached while intake was stopping.
    DropCause { json: "shutdown", line: None, summary: "shutdown", of: any },
    // Packets dated after 2106-02-07T06:28:15Z with --format pcap (32-bit seconds).
    DropCause { json: "timestamp_range", line: None, summary: "time past pcap's range", of: |c| c.pcap },
    // `--source xdp`: the AF_XDP socket's fill ring had no free chunk for the frame.
    DropCause { json: "fill_ring", line: None, summary: "fill ring empty", of: |c| c.xdp },
    // `--source xdp`: dropped by the AF_XDP socket for another reason (a frame too large for
    // its chunks, say); a full RX ring is `kernel`.
    DropCause { json: "xsk_other", line: None, summary: "AF_XDP other", of: |c| c.xdp },
];

/// All counters at one moment.
pub struct Snapshot {
    counts: Counts,
    arena_fill: f64,
    written: u64,
    write_error: u64,
    /// Packets not stored because the store reached its budget (`--on-full stop`).
    pub budget: u64,
    disk_bytes: u64,
    /// Bytes written through the page cache while the arena was filling.
    spilled_bytes: u64,
    file_bytes: u64,
    files: u64,
    /// What retention deleted: files and bytes, and of them the files this
    /// recording wrote with the newest packet they held.
    pub deleted: Deleted,
    /// Per stream: frames with a hardware stamp, with a software stamp.
    stamps: Vec<[u64; 2]>,
    /// Per stream: received, written, lost to a write error (one stream's own account, as a
    /// volume that fails takes only its writers' files).
    streams: Vec<[u64; 3]>,
    /// The most writes one stream had in flight (zero-copy).
    in_flight_max: u64,
    /// Every stream's arena is registered with io_uring.
    arena_registered: bool,
}

/// What the recording cost before its first packet, and its timestamp source
/// (in `stats.json` beside the per-packet counters, which exclude it).
#[derive(Clone, Default)]
pub struct Startup {
    /// CPU time of the whole process until the capture threads started (s).
    pub cpu_s: f64,
    /// Of it, the arenas' allocation and pre-faulting (CPU s), and their bytes.
    pub arena_prefault_cpu_s: f64,
    pub arena_bytes: u64,
    /// Bytes of the arenas faulted in before capture started; the rest is the background
    /// thread's (`prefault`), whose progress and CPU are added as it goes.
    pub arena_faulted: u64,
    pub arena_background: Option<Arc<super::prefault::Progress>>,
    /// Where the arena size came from (`Plan::buffer_from`).
    pub arena_from: &'static str,
    /// The catalog's name of the timestamp source.
    pub timestamps: &'static str,
    /// A live AF_PACKET interface: `"small"` while capture runs on the small ring it went live
    /// on, `"full"` once its full rings took over (`wv_capture::handover`); `None` otherwise.
    pub rings: Option<&'static str>,
}

/// Packets the source saw: delivered to the capture thread, or filtered or dropped before.
fn received(c: &Counts) -> u64 {
    c.delivered + c.filtered_kernel + c.dropped_kernel + c.dropped_fill_ring + c.dropped_xsk_other
}

impl Snapshot {
    /// The counters once every writer has ended: the arenas hold nothing
    /// more (the fill the capture threads last published was before the
    /// writers emptied them).
    pub fn drained(mut self) -> Snapshot {
        self.arena_fill = 0.0;
        self
    }

    pub fn take(sc: &[Arc<SharedCounts>], ws: &[Arc<WriterShared>]) -> Snapshot {
        // The writers' counters first: the capture counters read after them
        // are the later of the two (see `published_only`).
        let sum = |f: fn(&WriterShared) -> u64| ws.iter().map(|w| f(w)).sum::<u64>();
        // Each writer's (written, write errors), read once: for the totals and its stream's row.
        let own: Vec<[u64; 2]> = ws
            .iter()
            .map(|w| [w.written_packets.load(Ordering::Acquire), w.dropped_write_error.load(Ordering::Acquire)])
            .collect();
        let (written, write_error, budget) = (
            own.iter().map(|o| o[0]).sum(),
            own.iter().map(|o| o[1]).sum(),
            sum(|w| w.dropped_budget.load(Ordering::Acquire)),
        );
        let mut counts = Counts::default();
        let mut fill: f64 = 0.0;
        let mut stamps = Vec::with_capacity(sc.len());
        let mut streams = Vec::with_capacity(sc.len());
        for (s, [w, e]) in sc.iter().zip(&own) {
            let (c, f) = s.load();
            stamps.push([c.ts_hardware, c.ts_software]);
            streams.push([received(&c), *w, *e]);
            counts += c;
            fill = fill.max(f);
        }
        Snapshot {
            counts,
            arena_fill: fill,
            written,
            write_error,
            budget,
            disk_bytes: sum(|w| w.disk_bytes.load(Ordering::Relaxed)),
            spilled_bytes: sum(|w| w.spilled_bytes.load(Ordering::Relaxed)),
            file_bytes: sum(|w| w.file_bytes.load(Ordering::Relaxed)),
            files: sum(|w| w.files_closed.load(Ordering::Relaxed)),
            deleted: ws.iter().map(|w| w.retention()).fold(Deleted::default(), Deleted::and),
            stamps,
            streams,
            in_flight_max: ws.iter().map(|w| w.writes_in_flight_max.load(Ordering::Relaxed)).max().unwrap_or(0),
            arena_registered: ws.iter().all(|w| w.arena_registered.load(Ordering::Relaxed)),
        }
    }

    /// A stream's snapshot taken while it records, as of its capture
    /// thread's last publication: that thread publishes its counters every
    /// few batches, while its writer counts each packet it writes, so the
    /// writer can be a few batches ahead and the packets it wrote more than
    /// the packets captured (`written` above `received`). What the writer
    /// did beyond the capture thread's figures is left for the next
    /// snapshot. The final snapshot, taken when both have finished, is
    /// exact and not clamped.
    pub fn published_only(mut self) -> Snapshot {
        // In the writer's order: a packet is written, or fails, or finds
        // the budget reached, in stream order, so what it wrote comes
        // first and `written` never goes back from one snapshot to the next.
        let stored = self.counts.stored;
        self.written = self.written.min(stored);
        self.write_error = self.write_error.min(stored - self.written);
        self.budget = self.budget.min(stored - self.written - self.write_error);
        let own = [self.received(), self.written, self.write_error];
        if let [e] = &mut self.streams[..] {
            *e = own;
        }
        self
    }

    /// Each stream's own snapshot.
    pub fn each(sc: &[Arc<SharedCounts>], ws: &[Arc<WriterShared>]) -> Vec<Snapshot> {
        sc.iter().zip(ws).map(|(c, w)| Snapshot::take(std::slice::from_ref(c), std::slice::from_ref(w))).collect()
    }

    /// The sum of the streams' snapshots: the total the reports show is
    /// exactly the sum of the per-stream counters the API shows.
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
            stamps: Vec::with_capacity(parts.len()),
            streams: Vec::with_capacity(parts.len()),
            in_flight_max: 0,
            arena_registered: true,
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
            t.stamps.extend_from_slice(&p.stamps);
            t.streams.extend_from_slice(&p.streams);
            t.in_flight_max = t.in_flight_max.max(p.in_flight_max);
            t.arena_registered &= p.arena_registered;
        }
        t
    }

    /// The counters as the HTTP API shows them (the same values `stats.json` holds).
    fn counters(&self, done: bool) -> wv_serve::Counters {
        let c = &self.counts;
        wv_serve::Counters {
            received: self.received(),
            written: self.written,
            pending: c.stored.saturating_sub(self.written + self.write_error + self.budget),
            filtered: self.filtered(),
            deduplicated: c.deduplicated,
            cut: c.cut,
            flows_evicted: c.flows_evicted,
            dropped: DROP_CAUSES.iter().zip(self.drops()).map(|(d, n)| (d.json.to_string(), n)).collect(),
            wire_bytes: c.wire_bytes,
            file_bytes: self.file_bytes,
            disk_bytes: self.disk_bytes,
            files_written: self.files,
            files_deleted: self.deleted.files,
            bytes_deleted: self.deleted.bytes,
            arena_fill: (self.arena_fill * 1000.0).round() / 1000.0,
            capture_cpu_s: (c.cpu_ns as f64 / 1e6).round() / 1e3,
            balanced: done.then(|| self.balanced()),
        }
    }

    fn received(&self) -> u64 {
        received(&self.counts)
    }

    fn filtered(&self) -> u64 {
        self.counts.filtered_user + self.counts.filtered_kernel
    }

    /// The drops of each cause, in the order of [`DROP_CAUSES`].
    fn drops(&self) -> [u64; DROP_CAUSES.len()] {
        let c = &self.counts;
        [
            c.dropped_kernel,
            c.dropped_arena_full,
            self.write_error,
            self.budget,
            c.dropped_shutdown,
            c.dropped_timestamp_range,
            c.dropped_fill_ring,
            c.dropped_xsk_other,
        ]
    }

    /// Frames not stored on purpose: `--dedup`'s duplicates and what
    /// `--flow-cutoff` cut.
    fn reduced(&self) -> u64 {
        self.counts.deduplicated + self.counts.cut
    }

    /// received = written + filtered + deduplicated + cut + every drop, exactly.
    pub fn balanced(&self) -> bool {
        self.received() == self.written + self.filtered() + self.reduced() + self.drops().iter().sum::<u64>()
    }

    fn json(&self, state: &str, elapsed: f64, rates: Rates, start: &Startup) -> String {
        let c = &self.counts;
        let (bg_bytes, bg_cpu, used) = start.arena_background.as_ref().map_or((0, 0.0, 0), |b| {
            let cpu = b.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9;
            (b.bytes.load(Ordering::Relaxed), cpu, b.used.load(Ordering::Relaxed))
        });
        let dropped: serde_json::Map<String, serde_json::Value> =
            DROP_CAUSES.iter().zip(self.drops()).map(|(d, n)| (d.json.to_string(), n.into())).collect();
        serde_json::json!({
            "state": state,
            "elapsed_s": (elapsed * 1000.0).round() / 1000.0,
            "received": self.received(),
            "written": self.written,
            "filtered": self.filtered(),
            "deduplicated": c.deduplicated,
            "cut": c.cut,
            "flows_evicted": c.flows_evicted,
            // CPU time of the capture threads (not the writers, not start-up).
            "capture_cpu_s": (c.cpu_ns as f64 / 1e6).round() / 1e3,
            // The process's CPU before capture started, and the arenas' share of it.
            "startup_cpu_s": (start.cpu_s * 1e3).round() / 1e3,
            "arena_prefault_cpu_s": (start.arena_prefault_cpu_s * 1e3).round() / 1e3,
            "arena_bytes": start.arena_bytes,
            // The arenas' memory faulted in: before capture, and after by a thread of its own
            // ahead of their use (its CPU below); and how much of them was ever used (their
            // blocks are taken lowest first: a disk that keeps up uses a few).
            // (The mapping is whole 2 MiB pages: it can be a little more than `arena_bytes`.)
            "arena_faulted_bytes": (start.arena_faulted + bg_bytes).min(start.arena_bytes),
            "arena_used_bytes": used.min(start.arena_bytes),
            // Every stream's arena is registered with io_uring (its writes skip pinning pages).
            "arena_registered": start.arena_bytes > 0 && self.arena_registered,
            "arena_background_cpu_s": (bg_cpu * 1e3).round() / 1e3,
            "arena_from": start.arena_from,
            "rings": start.rings,
            "timestamps": {
                "source": start.timestamps,
                "hardware": c.ts_hardware,
                "software": c.ts_software,
                "streams": self.stamps.iter().map(|[h, s]| serde_json::json!({"hardware": h, "software": s})).collect::<Vec<_>>(),
            },
            "dropped": dropped,
            // Each stream's own account (stream i: capture worker i and its writer).
            "streams": self.streams.iter().map(|[r, w, e]| serde_json::json!({"received": r, "written": w, "write_error": e})).collect::<Vec<_>>(),
            "stored_in_arena": c.stored,
            "wire_bytes": c.wire_bytes,
            "files": self.files,
            "file_bytes": self.file_bytes,
            "disk_bytes": self.disk_bytes,
            "spilled_bytes": self.spilled_bytes,
            "arena_fill": (self.arena_fill * 1000.0).round() / 1000.0,
            "pps": rates.pps.round(),
            "gbps": (rates.gbps * 1000.0).round() / 1000.0,
            "disk_mb_s": rates.disk_mb_s.round(),
            "writes_in_flight_max": self.in_flight_max,
            // Only meaningful once every packet has left the arena.
            "balanced": (state == "done").then(|| self.balanced()),
        })
        .to_string()
    }

    fn line(&self, rates: Rates) -> String {
        let drops: Vec<String> = DROP_CAUSES
            .iter()
            .zip(self.drops())
            .filter_map(|(d, n)| d.line.map(|label| format!("{label} {n}")))
            .collect();
        format!(
            "{:>10.0} pps {:>7.3} Gb/s | stored {} filtered {}{} | drops {} | arena {:>5.1}% | disk {:>6.0} MB/s",
            rates.pps,
            rates.gbps,
            self.counts.stored,
            self.filtered(),
            self.reduced_each().map(|(what, n)| format!(" {what} {n}")).collect::<String>(),
            drops.join(" "),
            self.arena_fill * 100.0,
            rates.disk_mb_s
        )
    }

    /// The deduplicated and cut counts that are not zero, with their names
    /// (a recording without --dedup or --flow-cutoff reads as before).
    fn reduced_each(&self) -> impl Iterator<Item = (&'static str, u64)> {
        let c = &self.counts;
        [("deduplicated", c.deduplicated), ("cut", c.cut)].into_iter().filter(|(_, n)| *n > 0)
    }

    /// The summary line; its drop causes are those `causes` can have, and any other that
    /// is not 0 (a count is never left out).
    fn summary(&self, elapsed: f64, store: &Path, causes: Causes) -> String {
        let drops = self.drops();
        let each: Vec<String> = DROP_CAUSES
            .iter()
            .zip(drops)
            .filter(|(d, n)| (d.of)(causes) || *n > 0)
            .map(|(d, n)| format!("{} {n}", d.summary))
            .collect();
        format!(
            "wirevault: {} packets received in {:.2}s: {} written, {} filtered{}, {} dropped ({}); {} files, {} bytes in {}",
            self.received(),
            elapsed,
            self.written,
            self.filtered(),
            self.reduced_each().map(|(what, n)| format!(", {n} {what}")).collect::<String>(),
            drops.iter().sum::<u64>(),
            each.join(", "),
            self.files,
            self.file_bytes,
            store.display()
        )
    }
}

/// What the API's snapshot is made of: the counters (in all and per
/// stream), what is recorded, and the budget in force.
pub struct Now<'a> {
    pub total: &'a Snapshot,
    pub streams: &'a [Snapshot],
    pub sources: &'a [String],
    pub budget: Option<wv_store::catalog::Budget>,
}

/// Rates over the last status interval.
#[derive(Clone, Copy, Default)]
pub struct Rates {
    pps: f64,
    gbps: f64,
    disk_mb_s: f64,
}

/// The reports of one recording: status lines while it runs, the last
/// counters at the end.
pub struct Status {
    output: OutputPlan,
    store: PathBuf,
    stats_file: StatsFile,
    start: Instant,
    /// The previous sample: when, the capture counters, the disk bytes.
    last: (Instant, Counts, u64),
    /// Set by the wiring once capture starts.
    pub startup: Startup,
}

impl Status {
    /// Starts the clock and writes an empty `stats.json`.
    pub fn start(store: &Path, output: OutputPlan) -> Status {
        let stats_file = StatsFile::create(store, output.stats_file.clone());
        let now = Instant::now();
        Status {
            output,
            store: store.to_path_buf(),
            stats_file,
            start: now,
            last: (now, Counts::default(), 0),
            startup: Startup::default(),
        }
    }

    pub fn elapsed(&self) -> std::time::Duration {
        self.start.elapsed()
    }

    /// True when a second has passed since the last status.
    pub fn due(&self) -> bool {
        self.last.0.elapsed() >= std::time::Duration::from_secs(1)
    }

    /// Writes the counters as they are now: `stats.json` always, the status
    /// line unless `all_done` (the summary follows) or `--quiet`.
    pub fn report(&mut self, snap: &Snapshot, all_done: bool) -> Rates {
        let dt = self.last.0.elapsed().as_secs_f64().max(1e-9);
        let rates = Rates {
            pps: (snap.counts.stored - self.last.1.stored) as f64 / dt,
            gbps: (snap.counts.wire_bytes - self.last.1.wire_bytes) as f64 * 8.0 / dt / 1e9,
            disk_mb_s: (snap.disk_bytes - self.last.2) as f64 / dt / 1e6,
        };
        let json = snap.json("capturing", self.start.elapsed().as_secs_f64(), rates, &self.startup);
        self.stats_file.write(&json);
        if !self.output.quiet && !all_done {
            if self.output.json {
                out_line(&json);
            } else {
                let _ = writeln!(std::io::stderr().lock(), "{}", snap.line(rates));
            }
        }
        self.last = (Instant::now(), snap.counts, snap.disk_bytes);
        rates
    }

    /// What the HTTP API shows: `total` (the snapshot just reported) and
    /// each stream's own, at `rates`.
    pub fn recording(&self, now: &Now<'_>, rates: Rates, done: bool) -> wv_serve::Recording {
        let (total, streams) = (now.total, now.streams);
        wv_serve::Recording {
            state: if done { "done" } else { "capturing" }.into(),
            elapsed_s: (self.start.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
            sources: now.sources.to_vec(),
            workers: streams.len(),
            total: total.counters(done),
            streams: streams.iter().map(|s| s.counters(done)).collect(),
            pps: rates.pps.round(),
            gbps: (rates.gbps * 1000.0).round() / 1000.0,
            disk_mb_s: rates.disk_mb_s.round(),
            budget_bytes: now.budget.map(|b| b.max_bytes),
            on_full: now.budget.map(|b| {
                match b.on_full {
                    wv_store::catalog::OnFull::DeleteOldest => "delete",
                    wv_store::catalog::OnFull::Stop => "stop",
                }
                .to_string()
            }),
        }
    }

    /// The final counters: `stats.json`, the JSON line with `--json`, and
    /// the summary on standard error.
    pub fn finish(&mut self, snap: &Snapshot) {
        let elapsed = self.start.elapsed().as_secs_f64();
        let json = snap.json("done", elapsed, Rates::default(), &self.startup);
        self.stats_file.write(&json);
        if self.output.json {
            out_line(&json);
        }
        say!("{}", snap.summary(elapsed, &self.store, self.output.causes));
        if snap.counts.dropped_timestamp_range > 0 {
            say!(
                "wirevault: warning: {} packet(s) dated after 2106-02-07T06:28:15Z were not stored: a pcap record cannot hold their time; record with --format pcapng to keep them",
                snap.counts.dropped_timestamp_range
            );
        }
    }
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
        assert_eq!((s.received(), s.written), (10, 10));
        assert!(s.balanced());
        let s = snapshot(10, 7, 2, 3).published_only();
        assert_eq!((s.written, s.write_error, s.budget), (7, 2, 1));
        // The budget reached while the capture counters lag: what was
        // written is not taken back.
        let s = snapshot(10, 12, 0, 5).published_only();
        assert_eq!((s.written, s.write_error, s.budget), (10, 0, 0));
        // Behind is as it is: the rest is pending.
        let s = snapshot(10, 4, 1, 0).published_only();
        assert_eq!((s.written, s.write_error, s.budget), (4, 1, 0));
        assert_eq!(s.counters(false).pending, 5);
    }
}
