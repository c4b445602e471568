//! Wiring: builds the real objects of a recording from its validated plan
//! (sources, the store, per stream an arena, a capture thread and a writer
//! thread), waits for them while reporting status, and turns the outcome
//! into an exit code.

use super::args::Args;
use super::args::TimestampsArg;
use super::plan::{self, Plan, SourcePlan};
use super::reload::Reloader;
use super::start::{go_live, hand_over, open_all, Shared, Stream};
use super::status::{Now, Snapshot, Startup, Status};
use super::store;
use crate::{exit, fail};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use wv_capture::file::FileSource;
use wv_capture::filter::{self, Filter};
use wv_capture::synthetic::Synthetic;
use wv_capture::worker::Quota;
use wv_capture::xdp::XdpSource;
use wv_capture::{SharedCounts, Source};
use wv_store::catalog::{Catalog, LiveBudget, Stamps};
use wv_store::writer::WriterShared;

pub fn run(a: Args) -> anyhow::Result<u8> {
    // Before anything else: the signals held since `main` began (see
    // `cmd::hold_signals`) reach these handlers, so that a signal at any
    // moment stops cleanly.
    let stop = Arc::new(AtomicBool::new(false));
    // With --config, SIGHUP re-reads it (see `reload`), with --listen the
    // server's tokens and certificates; without either, it stops as tcpdump.
    let hup = Arc::new(AtomicBool::new(false));
    let reloads = a.config.is_some() || a.listen.listen.is_some();
    crate::cmd::catch_signals(crate::cmd::stop_signals(), |sig| {
        if sig == libc::SIGHUP && reloads {
            hup.clone()
        } else {
            stop.clone()
        }
    })?;
    let p = plan::plan(&a)?;
    for n in &p.notes {
        say!("{n}");
    }
    // The budget the writers obey, changed by a reload.
    let budget = Arc::new(LiveBudget::new(p.budget));
    // Hooks for what else a reload changes go here (`Reloader::hook`).
    let mut reloader = Reloader::new(&a, budget.clone());
    // Capture files and indexes are readable by the owner's group only.
    wv_sys::cpu::set_umask(0o027);

    // Sources first: interface and filter errors should come before any file
    // is created. A live interface is only checked here (its filter
    // compiled): its rings open last, so that nothing queues in them while
    // the store is repaired and the arenas are faulted in (at slow rates a
    // ring holds well under a second of traffic before the kernel drops).
    let mut sources = open_sources(&p, &stop)?;

    // A store this run creates is removed again if start-up fails before
    // anything is recorded (a taken --listen port, an arena refused).
    let mut new_store = store::NewStore::before_prepare(&p.store);
    store::prepare_store(&p.store)?;
    // One writer at a time, held until the recording ends (the kernel drops it
    // with the process), taken before the start-up repair.
    let _lock =
        wv_store::lock::StoreLock::exclusive(&p.store, "record").map_err(|e| fail(exit::ERROR, e.to_string()))?;
    // A previous run may have crashed: make the store consistent first.
    let rep = wv_store::recover::repair(&p.store, Some(&crate::cmd::repair::index_one), None).map_err(|e| {
        fail(exit::ERROR, format!("cannot check the store {} for a previous crash: {e}", p.store.display()))
    })?;
    crate::cmd::repair::print_report(&rep, &p.store, true);
    let rotation = store::volumes(&p, sources.streams(&p))?;
    // The HTTP server binds before capture starts: a taken port or a bad
    // certificate is one sentence, with nothing recorded yet.
    let board = wv_serve::Board::new();
    let server = match a.listen.config(&p.store, None)? {
        Some(cfg) => Some(crate::cmd::serve::start(cfg, Some(board.clone()))?),
        None => None,
    };
    new_store.keep();
    if let (Some(r), Some(s)) = (&mut reloader, &server) {
        let handle = s.reloader();
        // Said only when the server has files to read again: "nothing to
        // reload" beside the budget the same reload changed read as a contradiction.
        r.hook(
            &[],
            Box::new(move |_| {
                handle
                    .reload_changes()
                    .map(|d| (!d.is_empty()).then(|| format!("reloaded {}", d.join(", "))))
                    .map_err(|e| format!("api: {e}"))
            }),
        );
    }
    let catalog =
        Arc::new(Catalog::open(&p.store).with_context(|| format!("cannot open the catalog of {}", p.store.display()))?);
    let nstreams = sources.streams(&p);
    // Streams: writer thread, then capture thread. With several, `-c N` is one count they share.
    let quota = p.count.filter(|_| nstreams > 1).map(|n| Arc::new(Quota::new(n)));
    let shared = Shared {
        catalog: catalog.clone(),
        budget: budget.clone(),
        rotation: rotation.clone(),
        stop: stop.clone(),
        quota,
        streams: nstreams,
    };
    let prefault = super::prefault::Prefault::start();
    let cpu_before_arenas = wv_sys::cpu::process_cpu_ns();
    let mut streams = Vec::new();
    // A live AF_PACKET interface goes live on a small ring at once, its full rings follow
    // (`wv_capture::handover`); the others open everything first.
    let mut opening = match sources.live.take() {
        Some(live) if live.xdp.is_none() && !live.hw_stamps => {
            Some(go_live(&p, live, sources.stamps, &shared, &prefault, &mut streams)?)
        }
        live => {
            sources.live = live;
            open_all(&p, &mut sources, &shared, &prefault, &mut streams)?;
            None
        }
    };
    let arena_cpu_ns = wv_sys::cpu::process_cpu_ns().saturating_sub(cpu_before_arenas);
    // Start-up ends here: what follows is the per-packet work.
    let startup = Startup {
        cpu_s: wv_sys::cpu::process_cpu_ns() as f64 / 1e9,
        arena_prefault_cpu_s: arena_cpu_ns as f64 / 1e9,
        arena_bytes: if p.zero_copy { 0 } else { p.stream.arena_per_worker * nstreams as u64 },
        arena_faulted: streams.iter().filter_map(|s| s.arena).map(|(faulted, ..)| faulted).sum(),
        arena_background: Some(prefault.progress.clone()),
        arena_from: p.buffer_from,
        timestamps: sources.stamps.name(),
        rings: match (&opening, &p.source) {
            (Some(_), _) => Some("small"),
            (None, SourcePlan::Live { xdp: false, .. }) => Some("full"),
            _ => None,
        },
    };
    // Capture runs: said once (as tcpdump's "listening on"), and to the service manager
    // (Type=notify).
    if let (false, SourcePlan::Live { interface, .. }) = (p.output.quiet, &p.source) {
        say!("wirevault: capturing on {interface}: {} worker(s), store {}", p.workers, p.store.display());
    }
    let mut notifier = crate::notify::Notifier::from_env();
    if let Some(n) = &notifier {
        n.ready(&format!("recording {} into {}", source_name(&p.source), p.store.display()));
    }
    let mut status = Status::start(&p.store, p.output.clone());
    status.startup = startup;
    // The host's tuning warnings (NUMA, interrupts, offloads, the store's volume), once, after the
    // store's own errors and before capture starts; the CPUs' NUMA node is among them.
    if p.output.tune_warnings {
        crate::cmd::tune::startup_warnings(&wv_tune::Inputs {
            interface: match &p.source {
                SourcePlan::Live { interface, .. } => Some(interface.clone()),
                _ => None,
            },
            store: Some(p.store.clone()),
            cpus: p.cpus.clone(),
            buffer: p.stream.arena_per_worker * p.workers as u64,
            budget: p.budget.map(|b| b.max_bytes),
            min_budget: plan::min_budget(p.stream.file_size, p.workers),
            other_free: if p.volumes.is_empty() {
                0
            } else {
                let all: Vec<&Path> = std::iter::once(&p.store).chain(&p.volumes).map(PathBuf::as_path).collect();
                let free = |dirs: &[&Path]| plan::volumes_space(dirs).map_or(0, |(f, _)| f);
                free(&all).saturating_sub(free(&all[..1]))
            },
        });
    }
    arena_notes(&streams);
    for n in &sources.notes {
        say!("wirevault: note: {n}");
    }
    let mut counts: Vec<Arc<SharedCounts>> = streams.iter().map(|s| s.counts.clone()).collect();
    let mut writer_shared: Vec<Arc<WriterShared>> = streams.iter().map(|s| s.writer_shared.clone()).collect();
    if server.is_some() {
        set_pressure(&board, &counts);
    }
    // The full rings' handover failed (they could not be made): the recording stops with it.
    let mut capture_failure = None;
    // Keeps the kernel's receive stamps on once the full rings took over.
    let mut _stamping = None;
    // stats.json is written at once (not on the second): now, and when the full rings took over.
    let mut report_now = true;
    // Set once the small ring is closed and the full rings alone capture.
    let mut handed: Option<Arc<AtomicBool>> = None;

    // Status loop.
    loop {
        if !report_now {
            std::thread::sleep(Duration::from_millis(100));
        }
        // The full rings are made: they take over, the other streams start.
        if opening.as_ref().is_some_and(|o| o.opener.is_finished()) {
            let o = opening.take().expect("checked above");
            handed = Some(o.handed.clone());
            match hand_over(&p, o, &shared, &prefault, &mut streams) {
                Ok(fd) => _stamping = Some(fd),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    capture_failure = Some(e);
                }
            }
            counts = streams.iter().map(|s| s.counts.clone()).collect();
            writer_shared = streams.iter().map(|s| s.writer_shared.clone()).collect();
            if server.is_some() {
                set_pressure(&board, &counts);
            }
        }
        if handed.as_ref().is_some_and(|h| h.load(Ordering::Acquire)) {
            handed = None;
            status.startup.rings = Some("full");
            report_now = true;
        }
        if hup.swap(false, Ordering::Relaxed) {
            if let Some(r) = &mut reloader {
                r.reload();
            } else if let Some(s) = &server {
                match s.reload() {
                    Ok(what) => say!("wirevault: api: {what}"),
                    Err(e) => say!("wirevault: warning: api: reload failed, the previous settings stay: {e}"),
                }
            }
        }
        if let Some(n) = &mut notifier {
            n.tick();
        }
        for note in rotation.as_ref().map(|r| r.take_notes()).unwrap_or_default() {
            say!("wirevault: warning: {note}");
        }
        if let Some(e) = prefault.progress.take_error() {
            say!("wirevault: warning: {e}");
        }
        // Done when the writers are too: while they write out what the
        // arenas hold (a slow disk: seconds), the status, stats.json and the
        // API go on, and a SIGHUP is still read.
        let all_done =
            streams.iter().all(|s| s.capture.is_finished() && s.writer.as_ref().is_none_or(|w| w.is_finished()));
        let duration_reached = p.duration.is_some_and(|d| status.elapsed() >= d);
        let write_failed = writer_shared.iter().any(|w| w.failed.load(Ordering::Acquire));
        if duration_reached || write_failed {
            stop.store(true, Ordering::Relaxed);
        }
        if std::mem::take(&mut report_now) || status.due() || all_done {
            let mut streams = Snapshot::each(&counts, &writer_shared);
            if !all_done {
                streams = streams.into_iter().map(Snapshot::published_only).collect();
            }
            let total = Snapshot::sum(&streams);
            let rates = status.report(&total, all_done);
            if server.is_some() {
                publish(&board, &status, (&total, &streams), rates, (&p, budget.get()), false);
            }
        }
        if all_done {
            break;
        }
    }
    if let Some(n) = &notifier {
        n.send("STOPPING=1");
    }

    if let Some(e) = prefault.stop() {
        say!("wirevault: warning: {e}");
    }
    // Join and account: capture threads first, then writers.
    let mut capture_errors = Vec::new();
    let mut writer_threads = Vec::new();
    let mut file_problems = None;
    for s in streams {
        match s.capture.join() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => capture_errors.push(e.to_string()),
            Err(_) => capture_errors.push("a capture thread panicked".into()),
        }
        writer_threads.extend(s.writer);
        file_problems = file_problems.or(s.file_problems);
    }
    for w in writer_threads {
        match w.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => capture_errors.push(format!("writer: {e}")),
            Err(_) => capture_errors.push("a writer thread panicked".into()),
        }
    }
    if let SourcePlan::Live { interface, .. } = &p.source {
        // The ring reports a deleted interface as one that went down.
        if !capture_errors.is_empty() && wv_sys::netif::ifindex(interface).is_err() {
            capture_errors = vec![format!(
                "network interface {interface} no longer exists (it was deleted while recording); everything captured before is stored"
            )];
        }
    }
    let (problems, unread) = file_problems.and_then(|r| r.recv().ok()).unwrap_or_default();
    let streams: Vec<Snapshot> = Snapshot::each(&counts, &writer_shared).into_iter().map(Snapshot::drained).collect();
    let snap = Snapshot::sum(&streams).drained();
    status.finish(&snap);
    if let Some(server) = server {
        publish(&board, &status, (&snap, &streams), Default::default(), (&p, budget.get()), true);
        server.stop();
    }
    if let Some(e) = capture_failure {
        return Err(e);
    }
    // A run stopped (signal, --duration, -c) before the end of its files:
    // what it stored is a prefix of them; said, so that it is not taken for all.
    if let Some(u) = unread {
        say!("wirevault: note: stopped before the end of the input: {u}");
    }
    for note in rotation.as_ref().map(|r| r.take_notes()).unwrap_or_default() {
        say!("wirevault: warning: {note}");
    }
    let reading = matches!(p.source, SourcePlan::Read { .. });
    let code = outcome(&snap, &writer_shared, &capture_errors, (&problems, reading))?;
    match rotation.as_ref().map(|r| r.taken_out()) {
        Some(n) if n > 0 && code == exit::OK => Err(fail(
            exit::ERROR,
            format!("{n} volume(s) were taken out of rotation (said above); the recording went on on the others, every file written is closed and valid, and packets lost on the way are counted as write_error"),
        )),
        _ => Ok(code),
    }
}

/// The API's queries pause while an arena is filling (see wv_serve).
fn set_pressure(board: &wv_serve::Board, counts: &[Arc<SharedCounts>]) {
    let c = counts.to_vec();
    board.set_pressure(Arc::new(move || c.iter().map(|s| s.load().1).fold(0.0, f64::max)));
}

/// What the start-up says of the arenas: reserved hugepages missing, io_uring refusing them.
fn arena_notes(streams: &[Stream]) {
    let arenas: Vec<(u64, bool, bool)> = streams.iter().filter_map(|s| s.arena).collect();
    if arenas.iter().any(|&(_, _, fixed)| !fixed) {
        say!("wirevault: note: the kernel refused to register the arena with io_uring; each write pins its pages instead (slower on fast disks)");
    }
    if arenas.iter().any(|&(_, hugetlb, _)| !hugetlb) {
        // Reserved hugepages may exist, too few for the arena: say which.
        let free =
            std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| wv_tune::parse::meminfo(&m, "HugePages_Free"));
        let why = match free {
            Some(n) if n > 0 => format!("too few reserved hugepages free for the arena ({n}; vm.nr_hugepages)"),
            _ => "no reserved hugepages (vm.nr_hugepages)".to_string(),
        };
        say!("wirevault: note: {why}; the arena uses transparent huge pages where the kernel has them, 4 KiB pages elsewhere");
    }
}

/// Publishes the counters to the HTTP API: `total` (the sum of `streams`)
/// as just reported, each stream's own, and the budget in force now.
fn publish(
    board: &wv_serve::Board,
    status: &Status,
    (total, streams): (&Snapshot, &[Snapshot]),
    rates: super::status::Rates,
    (p, budget): (&Plan, Option<wv_store::catalog::Budget>),
    done: bool,
) {
    let sources = vec![source_name(&p.source)];
    let now = Now { total, streams, sources: &sources, budget };
    board.publish(status.recording(&now, rates, done));
}

/// What is recorded, for the service manager's status text.
fn source_name(s: &SourcePlan) -> String {
    match s {
        SourcePlan::Live { interface, .. } => format!("interface {interface}"),
        SourcePlan::Read { files } => format!("{} file(s)", files.len()),
        SourcePlan::Synthetic(_) => "synthetic traffic".into(),
    }
}

/// The sources of a recording, opened (a live interface: checked, its rings
/// opened later by `start`).
pub struct Sources {
    /// One per stream.
    pub list: Vec<Box<dyn Source>>,
    /// A live interface whose rings are not open yet.
    pub live: Option<Live>,
    /// The stream that reads files (`--read`), whose input problems are reported at the end.
    pub file_source: Option<usize>,
    /// Notes to print once the streams run.
    pub notes: Vec<String>,
    /// Where the packets' timestamps come from.
    pub stamps: Stamps,
}

impl Sources {
    /// How many streams the recording has: one per worker of a live
    /// interface, otherwise one per source.
    pub fn streams(&self, p: &Plan) -> usize {
        if self.live.is_some() {
            p.workers
        } else {
            self.list.len()
        }
    }
}

/// A live interface, checked: its link type and the kernel filter program.
pub struct Live {
    pub ifname: String,
    pub promisc: bool,
    pub linktype: u32,
    /// The capture filter as the kernel runs it (also cuts at the snap length).
    pub prog: Option<Vec<libc::sock_filter>>,
    /// A user filter was given (so filtered packets are counted).
    pub filtered: bool,
    /// The rings ask for the NIC's hardware stamps.
    pub hw_stamps: bool,
    /// `--source xdp`: AF_XDP sockets, with the filter they run in user space.
    pub xdp: Option<Option<Filter>>,
}

/// Opens the sources: checks a live interface and compiles its filter (its
/// rings open later, in `start`), opens the file reader or the generator.
fn open_sources(p: &Plan, stop: &Arc<AtomicBool>) -> anyhow::Result<Sources> {
    let mut list: Vec<Box<dyn Source>> = Vec::new();
    let mut file_source = None;
    let mut notes = Vec::new();
    let mut live = None;
    let mut stamps = Stamps::Software;
    match &p.source {
        SourcePlan::Live { interface: ifname, promisc, xdp } => {
            let linktype =
                wv_sys::netif::linktype_of(ifname).map_err(|e| fail(exit::ERROR, e.to_string()))?.ok_or_else(|| {
                    fail(exit::ERROR, format!("interface {ifname} has a link type wirevault cannot store yet"))
                })?;
            if *xdp {
                live = Some(xdp_live(p, ifname, *promisc, linktype)?);
                return Ok(Sources { list, live, file_source, notes, stamps });
            }
            let filt: Option<Filter> = match &p.expression {
                Some(e) => {
                    Some(filter::compile_live(e, ifname, p.snaplen).map_err(|e| fail(exit::USAGE, e.to_string()))?)
                }
                None => None,
            };
            if let Some(f) = filt.as_ref().filter(|f| f.jumps_back()) {
                return Err(fail(
                    exit::USAGE,
                    format!(
                        "the kernel cannot run the filter \"{}\" (libpcap compiles `protochain` into a loop, which socket filters cannot hold); record with --source xdp, which filters in user space, or record without it and select with `wirevault query`",
                        filter::shown(&f.expression)
                    ),
                ));
            }
            let mut prog = filt.as_ref().map(Filter::sock_filter);
            if prog.is_none() && p.snaplen < wv_wire::MAX_SNAPLEN {
                // Let the kernel cut packets at the snap length, as libpcap does.
                prog = Some(vec![libc::sock_filter { code: 0x06, jt: 0, jf: 0, k: p.snaplen }]);
            }
            if filt.is_some() && prog.as_deref().is_some_and(|pr| wv_sys::bpf::invert(pr).is_none()) {
                notes.push("this filter returns a computed length, so filtered packets are not counted".to_string());
            }
            let hw_stamps = live_stamps(ifname, p.timestamps, &mut notes)?;
            if hw_stamps {
                stamps = Stamps::Hardware;
            }
            let filtered = filt.is_some();
            live = Some(Live {
                ifname: ifname.clone(),
                promisc: *promisc,
                linktype,
                prog,
                filtered,
                hw_stamps,
                xdp: None,
            });
        }
        SourcePlan::Read { files } => {
            if let Some(e) = &p.expression {
                // Validate once for Ethernet so a typo fails before anything is written.
                filter::compile(e, wv_wire::linktype::ETHERNET, p.snaplen)
                    .map_err(|e| fail(exit::USAGE, e.to_string()))?;
            }
            file_source = Some(0);
            stamps = Stamps::File;
            // Interleaved link types go out grouped (fewer files), unless the input's order
            // decides what is stored: `-c`, `--dedup`, `--flow-cutoff`.
            let group = p.count.is_none() && p.reduce.dedup_window_ns.is_none() && p.reduce.flow_cutoff.is_none();
            list.push(Box::new(
                FileSource::new(files.clone(), p.expression.clone()).stop_on(stop.clone()).group_link_types(group),
            ));
        }
        SourcePlan::Synthetic(spec) => {
            let filt = match &p.expression {
                Some(e) => Some(
                    filter::compile(e, wv_wire::linktype::ETHERNET, p.snaplen)
                        .map_err(|e| fail(exit::USAGE, e.to_string()))?,
                ),
                None => None,
            };
            for _ in 0..p.workers {
                list.push(Box::new(Synthetic::new(spec.clone(), filt.clone())));
            }
        }
    }
    Ok(Sources { list, live, file_source, notes, stamps })
}

/// `--timestamps` on a live interface: whether its rings ask for the NIC's
/// stamps. The NIC's capabilities come from `ETHTOOL_GET_TS_INFO` (as
/// `wirevault timestamps -i IF` shows them); with them, its receive stamping
/// is turned on for every packet. `hw` on an interface without them is a
/// usage error; `auto` falls back to the kernel's clock with a note.
fn live_stamps(ifname: &str, choice: TimestampsArg, notes: &mut Vec<String>) -> anyhow::Result<bool> {
    if choice == TimestampsArg::Sw {
        return Ok(false);
    }
    let info = wv_sys::tsinfo::ts_info(ifname);
    if !info.as_ref().is_ok_and(|i| i.hardware_receive()) {
        if choice == TimestampsArg::Hw {
            let offers = match &info {
                Ok(i) if i.capabilities().is_empty() => "no timestamping at all".to_string(),
                Ok(i) => i.capabilities().join(", "),
                Err(e) => format!("no answer: {e}"),
            };
            return Err(fail(
                exit::USAGE,
                format!("--timestamps hw: interface {ifname} cannot stamp received packets in hardware (its driver offers {offers}); record with --timestamps sw or auto"),
            ));
        }
        notes.push(format!(
            "{ifname} has no hardware receive timestamps; packets carry the kernel's software stamps (--timestamps sw chooses them without this note)"
        ));
        return Ok(false);
    }
    match wv_sys::tsinfo::enable_hw_rx(ifname) {
        Ok(_) => Ok(true),
        Err(e) if choice == TimestampsArg::Hw => Err(fail(
            exit::ERROR,
            format!("--timestamps hw: cannot turn on hardware receive stamping on {ifname} ({e}); record with --timestamps sw or auto"),
        )),
        Err(e) => {
            notes.push(format!(
                "cannot turn on hardware receive stamping on {ifname} ({e}); packets carry the kernel's software stamps"
            ));
            Ok(false)
        }
    }
}

/// `--source xdp` on a live interface: the filter compiled for the frames as they are on the
/// wire (XDP sees VLAN tags in place, as a file holds them), run in user space.
fn xdp_live(p: &Plan, ifname: &str, promisc: bool, linktype: u32) -> anyhow::Result<Live> {
    // Checked before the store exists (the sockets open after it).
    workers_per_queue(p, ifname)?;
    let filt = match &p.expression {
        Some(e) => Some(filter::compile(e, linktype, p.snaplen).map_err(|e| fail(exit::USAGE, e.to_string()))?),
        None => None,
    };
    let filtered = filt.is_some();
    Ok(Live { ifname: ifname.to_string(), promisc, linktype, prog: None, filtered, hw_stamps: false, xdp: Some(filt) })
}

/// The interface's receive queues, when `--workers` is that many (AF_XDP
/// reads each queue with its own worker); a usage error otherwise.
fn workers_per_queue(p: &Plan, ifname: &str) -> anyhow::Result<u32> {
    let queues = wv_sys::xdp::rx_queues(ifname);
    if queues as usize != p.workers {
        return Err(fail(
            exit::USAGE,
            format!(
                "interface {ifname} has {queues} receive queue(s) and --source xdp reads each with its own worker: give --workers {queues}"
            ),
        ));
    }
    Ok(queues)
}

/// Opens one AF_XDP socket per receive queue (one per worker), puts them in the XDP program's
/// map and attaches the program: natively where the driver can, else generic, with a note.
pub fn open_xsks(
    p: &Plan,
    live: Live,
    filt: Option<Filter>,
    notes: &mut Vec<String>,
) -> anyhow::Result<Vec<Box<dyn Source>>> {
    use wv_sys::xdp::{AttachMode, XdpProgram, XskSocket, CHUNK};
    let err = |e: wv_sys::xdp::Error| fail(exit::ERROR, e.to_string());
    let ifname = &live.ifname;
    let queues = workers_per_queue(p, ifname)?;
    // The UMEM of each socket holds as many bytes as its ring would (--ring-size), in whole
    // chunks, a power of two of them.
    let ring = (p.tuning.ring_block_size * p.tuning.ring_blocks / CHUNK).clamp(2048, 1 << 18);
    let frames = 1u32 << (usize::BITS - 1 - ring.leading_zeros());
    let mut prog = XdpProgram::load(queues).map_err(err)?;
    // Attached first (a queue without a socket passes its frames to the host), so that an
    // interface with another XDP program is refused before any socket binds.
    let mode = prog.attach(ifname).map_err(err)?;
    let mut socks = Vec::new();
    for q in 0..queues {
        let sock = XskSocket::open(ifname, q, frames).map_err(err)?;
        prog.insert(q, &sock).map_err(err)?;
        socks.push(sock);
    }
    if mode == AttachMode::Generic {
        notes.push(format!("{ifname}'s driver has no native XDP: the program runs in generic mode (slower)"));
    }
    if socks.iter().any(|s| !s.zerocopy()) {
        notes.push(format!(
            "{ifname}'s driver has no zero-copy AF_XDP: the kernel copies each frame into the socket's memory (copy mode)"
        ));
    }
    notes.push(format!(
        "--source xdp: {ifname}'s frames go to wirevault only, not to the host's network stack, while it records{}",
        if live.promisc { " (promiscuous mode is not set on this path: `ip link set IF promisc on`)" } else { "" }
    ));
    let prog = Arc::new(prog);
    Ok(socks
        .into_iter()
        .map(|s| Box::new(XdpSource::new(s, prog.clone(), live.linktype, p.snaplen, filt.clone())) as Box<dyn Source>)
        .collect())
}

/// After the summary: the writers' warnings and notes, retention, the
/// balance check and input problems (`reading`: the source is files),
/// then the exit code (or the error
/// that stopped the recording).
fn outcome(
    snap: &Snapshot,
    writer_shared: &[Arc<WriterShared>],
    capture_errors: &[String],
    (problems, reading): (&[String], bool),
) -> anyhow::Result<u8> {
    for w in writer_shared {
        for m in w.warnings.lock().unwrap_or_else(|x| x.into_inner()).iter() {
            say!("wirevault: warning: {m}");
        }
        if w.direct_refused.load(Ordering::Relaxed) {
            say!("wirevault: note: the file system refused O_DIRECT; wrote through the page cache instead");
            break;
        }
    }
    let (spills, spilled): (u64, u64) = writer_shared
        .iter()
        .fold((0, 0), |(n, b), w| (n + w.spills.load(Ordering::Relaxed), b + w.spilled_bytes.load(Ordering::Relaxed)));
    if spilled > 0 {
        say!(
            "wirevault: note: the disk fell behind {spills} time(s): {spilled} bytes went through the page cache while the arena was more than half full (`--spill-above off` turns this off)"
        );
    }
    if snap.deleted.files > 0 {
        say!("wirevault: {}", retention_said(snap.deleted, reading));
    }
    if !snap.balanced() {
        say!("wirevault: error: counters do not add up (a bug; please report it with the summary above)");
    }
    for pr in problems {
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
    Ok(if snap.balanced() { exit::OK } else { exit::ERROR })
}

/// What the summary says of retention: the files and bytes deleted, and
/// those of them (with the newest packet they held) this recording wrote.
/// Reading files, losing some of them is not what was asked: a warning.
fn retention_said(d: wv_store::catalog::Deleted, reading: bool) -> String {
    let (files, bytes, own) = (d.files, d.bytes, d.own_files);
    let all = format!("retention deleted the {files} oldest file(s), {bytes} bytes, to stay within --max-size");
    if own == 0 {
        return all;
    }
    let until = wv_store::layout::utc_rfc3339(d.own_last_ns);
    if reading {
        format!(
            "warning: {all}; {own} of them were written by this run: the input is larger than the budget, and its packets up to {until} are no longer in the store; give a larger --max-size (or a store of its own) to keep all of it"
        )
    } else {
        format!("{all}; {own} of them were written by this run (its packets up to {until})")
    }
}
