//! A recording from its configuration to its summary: [`Recorder::prepare`] (sources checked,
//! store readied, locked and repaired), [`Prepared::start`] (capture goes live,
//! `crate::start`), [`Recording::tick`] while it runs, [`Recording::stop`] at the end.

use crate::config::{RecorderConfig, Source};
use crate::prefault::Prefault;
use crate::sources::{open_sources, Sources};
use crate::start::{go_live, hand_over, open_all, Opening, Shared, Stream};
use crate::stats::{Causes, RecordingStats, Snapshot, Stamped, State, StatsFile, Timestamps, VERSION};
use crate::store;
use crate::{Error, Note, Result};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wv_capture::worker::Quota;
use wv_capture::SharedCounts;
use wv_store::catalog::{Catalog, LiveBudget, OnFull};
use wv_store::lock::StoreLock;
use wv_store::recover::RepairReport;
use wv_store::volume::Rotation;
use wv_store::writer::WriterShared;

/// Where recordings begin (see the module doc).
pub struct Recorder;

impl Recorder {
    /// Checks `config` against the host and readies the store: the sources are checked (a
    /// live interface's filter compiled, no ring yet), the store created or checked, locked
    /// (one recorder at a time), `stats.json` set to `starting`, a previous crash repaired
    /// and the volumes registered. Nothing is captured yet; a store this created is removed
    /// again if the [`Prepared`] is dropped without [`Prepared::start`]. Setting `stop` (a
    /// signal handler's flag) stops the recording, at any moment from now on.
    pub fn prepare(config: RecorderConfig, stop: Arc<AtomicBool>) -> Result<Prepared> {
        // Capture files and indexes are readable by the owner's group only.
        wv_sys::cpu::set_umask(0o027);
        // Sources first: interface and filter errors come before any file is created.
        let sources = open_sources(&config, &stop)?;
        let mut notes = Vec::new();
        let new_store = store::NewStore::before_prepare(&config.store);
        store::prepare_store(&config.store)?;
        let lock = StoreLock::exclusive(&config.store, "record").map_err(|e| Error::failed(e.to_string()))?;
        let stats_file = match StatsFile::create(&config.store, config.stats_copy.clone()) {
            Ok(f) => Some(f),
            Err(e) => {
                let p = config.store.join(wv_store::layout::STATS);
                notes.push(Note::warning(format!("{} not written: {e}", p.display())));
                None
            }
        };
        // A previous run may have crashed: make the store consistent first.
        let repaired =
            wv_store::recover::repair(&config.store, Some(&wv_index::index_for_repair), None).map_err(|e| {
                Error::failed(format!("cannot check the store {} for a previous crash: {e}", config.store.display()))
            })?;
        let rotation = store::volumes(&config, sources.streams(&config))?;
        let budget = Arc::new(LiveBudget::new(config.budget));
        Ok(Prepared { config, sources, stop, budget, new_store, lock, rotation, repaired, stats_file, notes })
    }
}

/// A recording ready to go live (see [`Recorder::prepare`]).
pub struct Prepared {
    config: RecorderConfig,
    sources: Sources,
    stop: Arc<AtomicBool>,
    budget: Arc<LiveBudget>,
    new_store: store::NewStore,
    lock: StoreLock,
    rotation: Option<Arc<Rotation>>,
    repaired: RepairReport,
    stats_file: Option<StatsFile>,
    notes: Vec<Note>,
}

impl Prepared {
    /// What the start-up repair did (`RepairReport::is_clean` when nothing was needed).
    pub fn repaired(&self) -> &RepairReport {
        &self.repaired
    }

    /// The budget the writers obey, which a reload may change while they run.
    pub fn budget(&self) -> Arc<LiveBudget> {
        self.budget.clone()
    }

    /// Goes live: per stream an arena, a writer and a capture thread; a live AF_PACKET
    /// interface on a small ring at once, its full rings following (`crate::start`).
    pub fn start(self) -> Result<Recording> {
        let Prepared {
            config, mut sources, stop, budget, mut new_store, lock, rotation, stats_file, mut notes, ..
        } = self;
        let catalog = Arc::new(
            Catalog::open(&config.store)
                .map_err(|e| Error::failed(format!("cannot open the catalog of {}: {e}", config.store.display())))?,
        );
        let nstreams = sources.streams(&config);
        // With several streams, `-c N` is one count they share.
        let quota = config.count.filter(|_| nstreams > 1).map(|n| Arc::new(Quota::new(n)));
        let shared = Shared {
            catalog,
            budget: budget.clone(),
            rotation: rotation.clone(),
            stop: stop.clone(),
            quota,
            exporters: start_exporters(&config)?,
            streams: nstreams,
        };
        let prefault = Prefault::start();
        let cpu_before_arenas = wv_sys::cpu::process_cpu_ns();
        let mut streams = Vec::new();
        // A live AF_PACKET interface goes live on a small ring at once, its full rings follow
        // (`wv_capture::handover`); the others open everything first.
        let opening = match sources.live.take() {
            Some(live) if live.xdp.is_none() && !live.hw_stamps => {
                Some(go_live(&config, live, sources.stamps, &shared, &prefault, &mut streams)?)
            }
            live => {
                sources.live = live;
                let chowned = open_all(&config, &mut sources, &shared, &prefault, &mut streams)?;
                notes.extend(chowned);
                None
            }
        };
        let arena_cpu_ns = wv_sys::cpu::process_cpu_ns().saturating_sub(cpu_before_arenas);
        new_store.keep();
        let startup = Startup {
            cpu_s: wv_sys::cpu::process_cpu_ns() as f64 / 1e9,
            arena_prefault_cpu_s: arena_cpu_ns as f64 / 1e9,
            arena_bytes: if config.zero_copy { 0 } else { config.stream.arena_per_worker * nstreams as u64 },
            arena_faulted: streams.iter().filter_map(|s| s.arena).map(|(faulted, ..)| faulted).sum(),
            timestamps: sources.stamps.name(),
        };
        notes.extend(arena_notes(&streams));
        notes.extend(sources.notes.drain(..).map(Note::aside));
        let rings = match (&opening, &config.source) {
            (Some(_), _) => Some("small"),
            (None, Source::Live { xdp: false, .. }) => Some("full"),
            _ => None,
        };
        let causes = Causes {
            live: matches!(config.source, Source::Live { .. }),
            xdp: matches!(config.source, Source::Live { xdp: true, .. }),
            pcap: config.stream.format == wv_store::Format::Pcap,
        };
        let mut r = Recording {
            counts: streams.iter().map(|s| s.counts.clone()).collect(),
            writer_shared: streams.iter().map(|s| s.writer_shared.clone()).collect(),
            config,
            shared,
            streams,
            opening,
            handed: None,
            stamping: None,
            prefault: Some(prefault),
            stats_file,
            startup,
            rings,
            causes,
            began: Instant::now(),
            last: (Instant::now(), 0, 0, 0),
            rates: (0.0, 0.0, 0.0),
            notes,
            failure: None,
            rotation,
            budget,
            stop,
            report_now: true,
            _lock: lock,
            file_problems: None,
            clickhouse: None,
        };
        r.file_problems = r.streams.iter_mut().find_map(|s| s.file_problems.take());
        r.clickhouse = r.config.clickhouse.clone().filter(|_| r.config.flows.is_some()).and_then(|t| {
            let said = Arc::new(std::sync::Mutex::new(Vec::new()));
            let s2 = said.clone();
            let log: wv_flows::clickhouse::spool::Log =
                Arc::new(move |m| s2.lock().unwrap_or_else(|p| p.into_inner()).push(m));
            match wv_flows::clickhouse::spool::Inserter::start(t, r.config.store.clone(), log) {
                Ok(i) => Some(Clickhouse { counters: i.counters.clone(), inserter: Some(i), said }),
                Err(e) => {
                    r.notes.push(Note::warning(format!(
                        "flow records are not sent to ClickHouse: cannot start its thread: {e}"
                    )));
                    None
                }
            }
        });
        Ok(r)
    }
}

/// What the recording cost before capture was live (in `stats.json` beside the per-packet
/// counters, which exclude it).
struct Startup {
    cpu_s: f64,
    arena_prefault_cpu_s: f64,
    arena_bytes: u64,
    arena_faulted: u64,
    timestamps: &'static str,
}

/// Whoever [`Recording::watch`] reports to: the caller's terminal, API and service manager.
pub trait Watch {
    /// Every 100 ms while the recording runs (the caller's signals, a watchdog).
    fn turn(&mut self);
    /// The counters, once a second; `running` is false once the streams have ended.
    fn stats(&mut self, st: RecordingStats, running: bool);
    /// What the recording has to say, as it comes.
    fn note(&mut self, n: Note);
}

/// A recording that runs (see the module doc).
pub struct Recording {
    config: RecorderConfig,
    shared: Shared,
    streams: Vec<Stream>,
    counts: Vec<Arc<SharedCounts>>,
    writer_shared: Vec<Arc<WriterShared>>,
    /// The full rings being made, until they take over; then the flag set once the small
    /// ring is closed, and what keeps the kernel's receive stamps on.
    opening: Option<Opening>,
    handed: Option<Arc<AtomicBool>>,
    stamping: Option<OwnedFd>,
    prefault: Option<Prefault>,
    stats_file: Option<StatsFile>,
    startup: Startup,
    rings: Option<&'static str>,
    causes: Causes,
    began: Instant,
    /// The previous second's sample: when, packets stored, wire bytes, disk bytes.
    last: (Instant, u64, u64, u64),
    /// Packets a second, Gb/s on the wire, MB/s to disk, over the last second.
    rates: (f64, f64, f64),
    notes: Vec<Note>,
    /// The full rings could not be made: the recording stops with it.
    failure: Option<Error>,
    rotation: Option<Arc<Rotation>>,
    budget: Arc<LiveBudget>,
    stop: Arc<AtomicBool>,
    report_now: bool,
    _lock: StoreLock,
    /// The file reader's input problems, sent when its capture thread ends.
    file_problems: Option<std::sync::mpsc::Receiver<(Vec<String>, Option<String>)>>,
    /// `--flows-to clickhouse=URL`: the inserter, its counters and what it has to say.
    clickhouse: Option<Clickhouse>,
}

/// The ClickHouse inserter of a recording (`wv_flows::clickhouse::spool`).
struct Clickhouse {
    inserter: Option<wv_flows::clickhouse::spool::Inserter>,
    counters: Arc<wv_flows::clickhouse::spool::Counters>,
    said: Arc<std::sync::Mutex<Vec<String>>>,
}

impl Clickhouse {
    fn take_said(&self) -> Vec<Note> {
        std::mem::take(&mut *self.said.lock().unwrap_or_else(|p| p.into_inner()))
            .into_iter()
            .map(Note::warning)
            .collect()
    }
}

/// How a recording ended: its final counters (written to `stats.json` too), its summary
/// line, what it has to say after the summary, and the error that stopped it, if one did.
pub struct Summary {
    pub stats: RecordingStats,
    /// The summary line, without prefix.
    pub line: String,
    pub notes: Vec<Note>,
    pub failure: Option<Error>,
}

impl Recording {
    /// The budget the writers obey, which a reload may change while they run.
    pub fn budget(&self) -> Arc<LiveBudget> {
        self.budget.clone()
    }

    /// What the recording has said since the last call.
    pub fn take_notes(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.notes)
    }

    /// The drop causes this recording can have (the summary lists those).
    pub fn causes(&self) -> Causes {
        self.causes
    }

    /// How full the fullest arena is, for whoever yields to capture (the API's queries).
    pub fn arena_pressure(&self) -> impl Fn() -> f64 + Send + Sync + 'static {
        let c = self.counts.clone();
        move || c.iter().map(|s| s.load().1).fold(0.0, f64::max)
    }

    /// Every stream has ended and written out what its arena held.
    pub fn is_done(&self) -> bool {
        self.streams.iter().all(|s| s.capture.is_finished() && s.writer.as_ref().is_none_or(|w| w.is_finished()))
    }

    /// One turn of the recording, every ~100 ms: the full rings take over once made, the
    /// recording stops at `--duration` or on a write error, notes are gathered; once a second
    /// the counters are written to `stats.json` and returned (and written at once after a
    /// change: the start, the full rings' take-over).
    pub fn tick(&mut self) -> Option<RecordingStats> {
        if self.opening.as_ref().is_some_and(|o| o.opener.is_finished()) {
            self.take_over();
        }
        if self.handed.as_ref().is_some_and(|h| h.load(Ordering::Acquire)) {
            self.handed = None;
            self.rings = Some("full");
            self.report_now = true;
        }
        if let Some(r) = &self.rotation {
            self.notes.extend(r.take_notes().into_iter().map(Note::warning));
        }
        for e in &self.shared.exporters {
            self.notes.extend(e.take_notes().into_iter().map(Note::warning));
        }
        if let Some(e) = self.prefault.as_ref().and_then(|p| p.progress.take_error()) {
            self.notes.push(Note::warning(e));
        }
        if let Some(c) = &self.clickhouse {
            self.notes.extend(c.take_said());
        }
        let duration_reached = self.config.duration.is_some_and(|d| self.began.elapsed() >= d);
        let write_failed = self.writer_shared.iter().any(|w| w.failed.load(Ordering::Acquire));
        if duration_reached || write_failed {
            self.stop.store(true, Ordering::Relaxed);
        }
        let second = self.last.0.elapsed() >= Duration::from_secs(1);
        if !(std::mem::take(&mut self.report_now) || second) {
            return None;
        }
        // Written at once after a change (the start, the full rings' take-over), returned
        // once a second.
        let st = if second { self.measure(false) } else { self.stats(State::Capturing, false) };
        if let Some(f) = &mut self.stats_file {
            f.write(&st);
        }
        second.then_some(st)
    }

    /// The counters now, as the last [`Recording::tick`] measured the rates.
    pub fn snapshot(&self) -> RecordingStats {
        self.stats(State::Capturing, false)
    }

    /// Runs the recording until every writer has written out what its arena held (after a
    /// stop, a slow disk: seconds), turning [`Recording::tick`] every 100 ms and handing what
    /// comes to `to`, as grep-searcher hands matches to its caller's sink.
    pub fn watch(&mut self, to: &mut impl Watch) {
        loop {
            to.turn();
            let done = self.is_done();
            if let Some(st) = self.tick() {
                to.stats(st, !done);
            }
            for n in self.take_notes() {
                to.note(n);
            }
            if done {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops the recording: the sources' intake stops, what they hold is stored, the writers
    /// write out the arenas, every thread is joined; the final counters go to `stats.json`.
    /// Call [`Recording::tick`] until [`Recording::is_done`] first where the status should
    /// go on while the writers drain (a slow disk: seconds); this waits for them otherwise.
    pub fn stop(mut self) -> Summary {
        self.stop.store(true, Ordering::Relaxed);
        while !self.is_done() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut capture_errors = Vec::new();
        let mut writers = Vec::new();
        for s in std::mem::take(&mut self.streams) {
            match s.capture.join() {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => capture_errors.push(e.to_string()),
                Err(_) => capture_errors.push("a capture thread panicked".into()),
            }
            writers.extend(s.writer);
        }
        for w in writers {
            match w.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => capture_errors.push(format!("writer: {e}")),
                Err(_) => capture_errors.push("a writer thread panicked".into()),
            }
        }
        // The writers' taps have offered their last records: the exporters send them and end.
        for e in &self.shared.exporters {
            e.finish();
            self.notes.extend(e.take_notes().into_iter().map(Note::warning));
        }
        if let Source::Live { interface, .. } = &self.config.source {
            // The ring reports a deleted interface as one that went down.
            if !capture_errors.is_empty() && wv_sys::netif::ifindex(interface).is_err() {
                capture_errors = vec![format!(
                    "network interface {interface} no longer exists (it was deleted while recording); everything captured before is stored"
                )];
            }
        }
        let (problems, unread) = self.file_problems.take().and_then(|r| r.recv().ok()).unwrap_or_default();
        // The writers wrote the last flow files: the inserter gets a few seconds to send them
        // (the rest wait in the store for the next recording).
        if let Some(c) = &mut self.clickhouse {
            if let Some(i) = c.inserter.take() {
                i.stop(Duration::from_secs(10));
            }
            let said = c.take_said();
            self.notes.extend(said);
        }
        let stats = self.stats(State::Done, true);
        if let Some(f) = &mut self.stats_file {
            f.write(&stats);
        }
        if let Some(e) = self.prefault.take().and_then(Prefault::stop) {
            self.notes.push(Note::warning(e));
        }
        let line = stats.summary(&self.config.store, self.causes);
        let snap = Snapshot::sum(&Snapshot::each(&self.counts, &self.writer_shared));
        let mut notes = self.take_notes();
        if snap.timestamp_range_drops() > 0 {
            notes.push(Note::warning(format!(
                "{} packet(s) dated after 2106-02-07T06:28:15Z were not stored: a pcap record cannot hold their time; record with --format pcapng to keep them",
                snap.timestamp_range_drops()
            )));
        }
        // A run stopped (signal, --duration, -c) before the end of its files: what it stored
        // is a prefix of them; said, so that it is not taken for all.
        if let Some(u) = unread {
            notes.push(Note::aside(format!("stopped before the end of the input: {u}")));
        }
        if let Some(r) = &self.rotation {
            notes.extend(r.take_notes().into_iter().map(Note::warning));
        }
        let reading = matches!(self.config.source, Source::Read { .. });
        let mut failure = self.failure.take();
        let ended = outcome(&snap, &self.writer_shared, &capture_errors, (&problems, reading), &mut notes);
        failure = failure.or(ended.err());
        if failure.is_none() {
            if let Some(n) = self.rotation.as_ref().map(|r| r.taken_out()).filter(|&n| n > 0) {
                failure = Some(Error::failed(format!("{n} volume(s) were taken out of rotation (said above); the recording went on on the others, every file written is closed and valid, and packets lost on the way are counted as write_error")));
            }
        }
        Summary { stats, line, notes, failure }
    }

    /// The full rings are made: they take over, the other streams start.
    fn take_over(&mut self) {
        let o = self.opening.take().expect("the full rings being made");
        self.handed = Some(o.handed.clone());
        match hand_over(&self.config, o, &self.shared, self.prefault.as_ref().expect("running"), &mut self.streams) {
            Ok((fd, chowned)) => {
                self.stamping = Some(fd);
                self.notes.extend(chowned);
            }
            Err(e) => {
                self.stop.store(true, Ordering::Relaxed);
                self.failure = Some(e);
            }
        }
        self.counts = self.streams.iter().map(|s| s.counts.clone()).collect();
        self.writer_shared = self.streams.iter().map(|s| s.writer_shared.clone()).collect();
        self.report_now = true;
    }

    /// The counters now, and the rates since the last measure (kept for snapshots).
    fn measure(&mut self, done: bool) -> RecordingStats {
        let total = Snapshot::sum(&Snapshot::each(&self.counts, &self.writer_shared));
        let dt = self.last.0.elapsed().as_secs_f64().max(1e-9);
        let (stored, wire, disk) = (total.stored(), total.wire_bytes(), total.disk_bytes());
        self.rates = (
            stored.saturating_sub(self.last.1) as f64 / dt,
            wire.saturating_sub(self.last.2) as f64 * 8.0 / dt / 1e9,
            disk.saturating_sub(self.last.3) as f64 / dt / 1e6,
        );
        self.last = (Instant::now(), stored, wire, disk);
        self.stats(if done { State::Done } else { State::Capturing }, done)
    }

    /// The report of the counters now: while recording as each capture thread last
    /// published them, once done exact.
    fn stats(&self, state: State, done: bool) -> RecordingStats {
        let mut parts = Snapshot::each(&self.counts, &self.writer_shared);
        if done {
            parts = parts.into_iter().map(Snapshot::drained).collect();
        } else {
            parts = parts.into_iter().map(Snapshot::published_only).collect();
        }
        let total = Snapshot::sum(&parts);
        let (bg_bytes, bg_cpu, used) = self.prefault.as_ref().map_or((0, 0.0, 0), |p| {
            let b = &p.progress;
            (b.bytes.load(Ordering::Relaxed), b.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9, b.used())
        });
        let st = &self.startup;
        let round3 = |v: f64| (v * 1e3).round() / 1e3;
        let t = total.stats();
        let stamps = parts.iter().map(|p| p.stamped()).collect::<Vec<Stamped>>();
        let budget = self.budget.get();
        RecordingStats {
            version: VERSION,
            state,
            elapsed_s: round3(self.began.elapsed().as_secs_f64()),
            sources: vec![source_name(&self.config.source)],
            workers: parts.len(),
            rings: self.rings.map(str::to_string),
            streams: parts.iter().map(|p| p.stats()).collect(),
            pps: self.rates.0.round(),
            gbps: round3(self.rates.1),
            disk_mb_s: self.rates.2.round(),
            startup_cpu_s: round3(st.cpu_s),
            arena_prefault_cpu_s: round3(st.arena_prefault_cpu_s),
            arena_bytes: st.arena_bytes,
            // (The mapping is whole 2 MiB pages: it can be a little more than `arena_bytes`.)
            arena_faulted_bytes: (st.arena_faulted + bg_bytes).min(st.arena_bytes),
            arena_used_bytes: used.min(st.arena_bytes),
            arena_registered: st.arena_bytes > 0 && total.arena_registered(),
            arena_background_cpu_s: round3(bg_cpu),
            arena_from: self.config.buffer_from.to_string(),
            timestamps: Timestamps {
                source: st.timestamps.to_string(),
                hardware: stamps.iter().map(|s| s.hardware).sum(),
                software: stamps.iter().map(|s| s.software).sum(),
                streams: stamps,
            },
            writes_in_flight_max: total.in_flight_max(),
            budget_bytes: budget.map(|b| b.max_bytes),
            on_full: budget.map(|b| match b.on_full {
                OnFull::DeleteOldest => "delete".to_string(),
                OnFull::Stop => "stop".to_string(),
            }),
            balanced: done.then(|| total.balanced()),
            clickhouse: self.clickhouse.as_ref().map(|c| crate::stats::ClickhouseStats::of(&c.counters)),
            total: t,
        }
    }
}

/// What is recorded, in a few words.
fn source_name(s: &Source) -> String {
    match s {
        Source::Live { interface, .. } => format!("interface {interface}"),
        Source::Read { files } => format!("{} file(s)", files.len()),
        Source::Synthetic(_) => "synthetic traffic".into(),
    }
}

/// What the start-up says of the arenas: reserved hugepages missing, io_uring refusing them.
fn arena_notes(streams: &[Stream]) -> Vec<Note> {
    let arenas: Vec<(u64, bool, bool)> = streams.iter().filter_map(|s| s.arena).collect();
    let mut notes = Vec::new();
    if arenas.iter().any(|&(_, _, fixed)| !fixed) {
        notes.push(Note::aside("the kernel refused to register the arena with io_uring; each write pins its pages instead (slower on fast disks)"));
    }
    if arenas.iter().any(|&(_, hugetlb, _)| !hugetlb) {
        // Reserved hugepages may exist, too few for the arena: say which.
        let free = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            m.lines().find_map(|l| l.strip_prefix("HugePages_Free:").and_then(|v| v.trim().parse::<u64>().ok()))
        });
        let why = match free {
            Some(n) if n > 0 => format!("too few reserved hugepages free for the arena ({n}; vm.nr_hugepages)"),
            _ => "no reserved hugepages (vm.nr_hugepages)".to_string(),
        };
        notes.push(Note::aside(format!(
            "{why}; the arena uses transparent huge pages where the kernel has them, 4 KiB pages elsewhere"
        )));
    }
    notes
}

/// The IPFIX exporters of `--flows-to` (none without flow records).
fn start_exporters(config: &RecorderConfig) -> Result<Vec<Arc<wv_ipfix::Exporter>>> {
    if config.flows.is_none() {
        return Ok(Vec::new());
    }
    config
        .flows_to
        .iter()
        .map(|d| {
            wv_ipfix::Exporter::start(d.clone(), wv_ipfix::ExportConfig::default())
                .map_err(|e| Error::failed(format!("cannot start the IPFIX exporter of {}: {e}", d.url())))
        })
        .collect()
}

/// After the summary: the writers' warnings and notes, retention, the balance check and
/// input problems (`reading`: the source is files) into `notes`, then the error that stopped
/// the recording, if one did.
fn outcome(
    snap: &Snapshot,
    writer_shared: &[Arc<WriterShared>],
    capture_errors: &[String],
    (problems, reading): (&[String], bool),
    notes: &mut Vec<Note>,
) -> Result<()> {
    for w in writer_shared {
        for m in w.warnings.lock().unwrap_or_else(|x| x.into_inner()).iter() {
            notes.push(Note::warning(m.clone()));
        }
        if w.direct_refused.load(Ordering::Relaxed) {
            notes.push(Note::aside("the file system refused O_DIRECT; wrote through the page cache instead"));
            break;
        }
    }
    let (spills, spilled): (u64, u64) = writer_shared
        .iter()
        .fold((0, 0), |(n, b), w| (n + w.spills.load(Ordering::Relaxed), b + w.spilled_bytes.load(Ordering::Relaxed)));
    if spilled > 0 {
        notes.push(Note::aside(format!(
            "the disk fell behind {spills} time(s): {spilled} bytes went through the page cache while the arena was more than half full (`--spill-above off` turns this off)"
        )));
    }
    if snap.deleted.files > 0 {
        notes.push(retention_said(snap.deleted, reading));
    }
    let balanced = snap.balanced();
    if !balanced {
        notes.push(Note::error("counters do not add up (a bug; please report it with the summary above)"));
    }
    notes.extend(problems.iter().map(|p| Note::info(p.clone())));
    if let Some((msg, full)) =
        writer_shared.iter().find_map(|w| w.error.lock().unwrap_or_else(|x| x.into_inner()).clone())
    {
        if writer_shared.iter().any(|w| w.budget_reached.load(Ordering::Acquire)) {
            return Err(Error::disk_full(format!("{msg}; recording stopped, every file written so far is closed and valid; {} later packets were not stored (counted as budget); set a larger --max-size, or --on-full delete to keep recording", snap.budget)));
        }
        return Err(if full {
            Error::disk_full(format!("{msg}; recording stopped, every file written so far is closed and valid; free space or set a smaller --file-size/--max-size"))
        } else {
            Error::failed(format!("{msg}; recording stopped, every file written so far is closed and valid"))
        });
    }
    if let Some(e) = capture_errors.first() {
        return Err(Error::failed(format!("capture failed: {e}")));
    }
    if !problems.is_empty() {
        return Err(Error::failed(format!(
            "{} input problem(s) (listed above); everything readable was stored",
            problems.len()
        )));
    }
    if !balanced {
        // Said above, as an error note after the summary.
        return Err(Error::silent());
    }
    Ok(())
}

/// What the summary says of retention: the files and bytes deleted, and those of them (with
/// the newest packet they held) this recording wrote. Reading files, losing some of them is
/// not what was asked: a warning.
fn retention_said(d: wv_store::catalog::Deleted, reading: bool) -> Note {
    let (files, bytes, own) = (d.files, d.bytes, d.own_files);
    let all = format!("retention deleted the {files} oldest file(s), {bytes} bytes, to stay within --max-size");
    if own == 0 {
        return Note::info(all);
    }
    let until = wv_store::layout::utc_rfc3339(d.own_last_ns);
    if reading {
        Note::warning(format!(
            "{all}; {own} of them were written by this run: the input is larger than the budget, and its packets up to {until} are no longer in the store; give a larger --max-size (or a store of its own) to keep all of it"
        ))
    } else {
        Note::info(format!("{all}; {own} of them were written by this run (its packets up to {until})"))
    }
}
