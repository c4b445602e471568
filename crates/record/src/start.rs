//! How capture goes live: per stream an arena (its first blocks faulted in), a writer thread
//! and a capture thread. A live AF_PACKET interface goes live at once on a small ring, which
//! the kernel makes in milliseconds, while a thread of its own makes the full rings (the
//! kernel zeroes them: 0.75 s for the default 256 MiB here, 3 s for the zero-copy path's
//! 1 GiB); they take over by the packets' times (`wv_capture::handover`, DESIGN.md
//! "Start-up"). AF_XDP, hardware stamps, files and the generator open everything first.

use crate::config::{RecorderConfig as Plan, Source as SourcePlan, Tuning};
use crate::sources::{Live, Sources};
use crate::store;
use crate::{Error, Note, Result};
use crossbeam_queue::ArrayQueue;
use std::os::fd::OwnedFd;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use wv_capture::afpacket::AfPacketSource;
use wv_capture::handover::{Handover, HandoverTx, Window};
use wv_capture::worker::{Limits, Quota};
use wv_capture::zerocopy::ZcRing;
use wv_capture::{SharedCounts, Source};
use wv_store::catalog::{Catalog, LiveBudget, Stamps};
use wv_store::stream::{StreamConfig, StreamProducer};
use wv_store::writer::zerocopy::{ZcConfig, ZcWriter};
use wv_store::writer::{self, WriterConfig, WriterShared};
use wv_sys::afpacket::{BlockWriter, Fanout, FanoutMode, FilteredCounter, Ring, RingConfig};
use wv_sys::byte_ring::{Consumer, Gauge, Producer};
use wv_sys::mem::{AlignedBuf, Backing};

/// What every stream of a recording shares.
pub struct Shared {
    pub catalog: Arc<Catalog>,
    pub budget: Arc<LiveBudget>,
    pub rotation: Option<Arc<wv_store::volume::Rotation>>,
    pub stop: Arc<AtomicBool>,
    /// `-c N` shared by several streams.
    pub quota: Option<Arc<Quota>>,
    /// `--flows-to ipfix=...`: the exporters every stream's flow tap offers records to.
    pub exporters: Vec<Arc<wv_ipfix::Exporter>>,
    /// How many streams the recording has (capture threads take the first CPUs of `--cpus`,
    /// writers the next).
    pub streams: usize,
}

/// One running stream: its two threads and what they publish.
pub struct Stream {
    pub capture: JoinHandle<Result<wv_capture::Counts, wv_capture::CaptureError>>,
    /// The writer thread (none on the zero-copy path: the capture thread writes).
    pub writer: Option<JoinHandle<std::io::Result<()>>>,
    pub counts: Arc<SharedCounts>,
    pub writer_shared: Arc<WriterShared>,
    /// The file reader's input problems, sent when its capture thread ends.
    pub file_problems: Option<std::sync::mpsc::Receiver<(Vec<String>, Option<String>)>>,
    /// Its arena (none on the zero-copy path): the bytes faulted in before capture, whether
    /// in reserved hugepages, whether registered with io_uring.
    pub arena: Option<(u64, bool, bool)>,
}

/// How long after the full rings are made they take over: later than any packet the small
/// ring is handed meanwhile (the moment is read from the clock the packets are stamped by).
const HANDOVER_AFTER_NS: u64 = 10_000_000;

/// The full rings being made, and where they go once made.
pub struct Opening {
    pub opener: JoinHandle<Result<Made>>,
    to: HandTo,
    counter: Option<Arc<FilteredCounter>>,
    linktype: u32,
    stamps: Stamps,
    /// Keeps the kernel stamping packets as they arrive (`wv_sys::afpacket::receive_stamps`),
    /// so that both rings give a packet one time; held for the whole recording, so that the
    /// stamps mean the same moment throughout.
    pub stamping: OwnedFd,
    /// Set once the small ring is drained and closed: the full rings alone capture.
    pub handed: Arc<AtomicBool>,
}

/// The full rings, made (on the zero-copy path with their writes' io_uring).
pub enum Made {
    Copy(Vec<Ring>),
    ZeroCopy(Vec<BlockWriter>),
}

/// Where stream 0's full ring goes.
enum HandTo {
    Copy(HandoverTx),
    ZeroCopy(Sender<ZcRing>, Arc<Window>),
}

/// The rings of a live interface as the plan shapes them: what the thread that makes them
/// needs (owned, to move there).
#[derive(Clone)]
struct RingSet {
    ifname: String,
    promisc: bool,
    prog: Option<Vec<libc::sock_filter>>,
    hw_stamps: bool,
    workers: usize,
    tuning: Tuning,
    zero_copy: bool,
}

impl RingSet {
    fn of(p: &Plan, live: &Live) -> RingSet {
        RingSet {
            ifname: live.ifname.clone(),
            promisc: live.promisc,
            prog: live.prog.clone(),
            hw_stamps: live.hw_stamps,
            workers: p.workers,
            tuning: p.tuning,
            zero_copy: p.zero_copy,
        }
    }

    /// One ring: of `blocks` ring blocks of `block_size` bytes, in the fanout group `fanout`
    /// if any, for the zero-copy path if `zero_copy`.
    fn ring(&self, (block_size, blocks): (usize, usize), fanout: Option<Fanout>, zero_copy: bool) -> Result<Ring> {
        let cfg = RingConfig {
            block_size,
            block_count: blocks,
            retire_tov_ms: self.tuning.ring_retire_ms,
            promisc: self.promisc,
            fanout,
            filter: self.prog.clone(),
        };
        let ring = if zero_copy { Ring::open_zero_copy(&self.ifname, &cfg) } else { Ring::open(&self.ifname, &cfg) };
        let ring = ring.map_err(|e| Error::failed(e.to_string()))?;
        if self.hw_stamps {
            ring.request_hw_timestamps().map_err(|e| Error::failed(e.to_string()))?;
        }
        Ok(ring)
    }

    /// The full rings, one per worker (a fanout group when there are several).
    fn full(&self) -> Result<Vec<Ring>> {
        let group_id = (std::process::id() & 0xffff) as u16;
        let fanout = (self.workers > 1).then_some(Fanout { group_id, mode: FanoutMode::Hash });
        let shape = (self.tuning.ring_block_size, self.tuning.ring_blocks);
        (0..self.workers).map(|_| self.ring(shape, fanout, self.zero_copy)).collect()
    }
}

/// The counter of the packets a live interface's filter rejects (see
/// `wv_sys::afpacket::FilteredCounter`), opened before the rings so that it covers their life;
/// stream 0 reads it.
fn open_counter(live: &Live) -> Result<Option<Arc<FilteredCounter>>> {
    match (live.filtered, live.prog.as_deref().and_then(wv_sys::bpf::invert)) {
        (true, Some(inv)) => {
            Ok(Some(Arc::new(FilteredCounter::open(&live.ifname, &inv).map_err(|e| Error::failed(e.to_string()))?)))
        }
        _ => Ok(None),
    }
}

/// Goes live on a small ring at once (stream 0 captures everything on it) and starts the
/// thread that makes the full rings; [`hand_over`] gives them their streams once made.
pub fn go_live(
    p: &Plan,
    live: Live,
    stamps: Stamps,
    shared: &Shared,
    prefault: &crate::prefault::Prefault,
    streams: &mut Vec<Stream>,
) -> Result<Opening> {
    if p.zero_copy && live.linktype != wv_wire::linktype::ETHERNET {
        return Err(zero_copy_ethernet_only());
    }
    let stamping = wv_sys::afpacket::receive_stamps().map_err(|e| Error::failed(e.to_string()))?;
    let counter = open_counter(&live)?;
    let set = RingSet::of(p, &live);
    // The small ring is the copy path's on the zero-copy path too: into an arena (as large as
    // the zero-copy ring's share of --buffer, and faulted in only as far as it is used), which
    // holds a burst while the kernel makes the full ring; a small zero-copy ring would be the
    // only buffer meanwhile.
    let warm = set.ring(p.tuning.warm_ring, None, false)?;
    let window = Window::from(0);
    let arena = alloc_arena(p, prefault)?;
    let src = Box::new(AfPacketSource::new(warm, live.linktype, p.snaplen, counter.clone()).within(window.clone()));
    let parts = Parts { src, is_file: false, arena, stamps };
    let handed = Arc::new(AtomicBool::new(false));
    let to = if p.zero_copy {
        let (tx, next) = std::sync::mpsc::channel();
        streams.push(start_stream(p, 0, parts, Some((next, window.clone(), handed.clone())), shared)?);
        HandTo::ZeroCopy(tx, window)
    } else {
        let (h, tx) = Handover::new(parts.src, window);
        let flag = h.handed_flag();
        streams.push(start_stream(p, 0, Parts { src: Box::new(h), ..parts }, None, shared)?);
        return opening(set, HandTo::Copy(tx), (counter, live.linktype, stamps, stamping), flag);
    };
    // At background priority: the kernel zeroes the rings on this thread's time, which the
    // capture thread, the writer and the traffic's sender need more meanwhile (at normal
    // priority, the zero-copy path's small ring overflowed while two 512 MiB rings were made).
    opening(set, to, (counter, live.linktype, stamps, stamping), handed)
}

/// Starts the thread that makes the full rings `set`, which go to `to`.
fn opening(
    set: RingSet,
    to: HandTo,
    (counter, linktype, stamps, stamping): (Option<Arc<FilteredCounter>>, u32, Stamps, OwnedFd),
    handed: Arc<AtomicBool>,
) -> Result<Opening> {
    let opener = std::thread::Builder::new()
        .name("wv-rings".into())
        .spawn(move || {
            wv_sys::cpu::background_priority_current_thread();
            let rings = set.full()?;
            if !set.zero_copy {
                return Ok(Made::Copy(rings));
            }
            let writers = rings.into_iter().map(|r| zc_writer(r, set.tuning.zc_inflight));
            Ok(Made::ZeroCopy(writers.collect::<Result<_>>()?))
        })
        .map_err(|e| Error::failed(format!("cannot start the thread that makes the capture rings: {e}")))?;
    Ok(Opening { opener, to, counter, linktype, stamps, stamping, handed })
}

/// The full rings are made: stream 0 moves to its ring, the other streams start on theirs,
/// from a moment just after now; then the privileges go (`--user`). Returns what keeps the
/// kernel's receive stamps on, and what the hand-over of the store to `--user` left alone.
pub fn hand_over(
    p: &Plan,
    o: Opening,
    shared: &Shared,
    prefault: &crate::prefault::Prefault,
    streams: &mut Vec<Stream>,
) -> Result<(OwnedFd, Vec<Note>)> {
    let made = o.opener.join().map_err(|_| Error::failed("the thread that makes the capture rings panicked"))??;
    // The small ring stops first: every full ring takes packets already, and the moment must
    // come after this (later work here, an arena faulted in, takes longer).
    let at = wv_capture::worker::now_ns() + HANDOVER_AFTER_NS;
    match &o.to {
        HandTo::Copy(tx) => tx.close_at(at),
        HandTo::ZeroCopy(_, warm) => warm.close_at(at),
    }
    let mut to = Some(o.to);
    let counter = |id| if id == 0 { o.counter.clone() } else { None };
    match made {
        Made::ZeroCopy(rings) => {
            for (id, ring) in rings.into_iter().enumerate() {
                let zc = ZcRing { ring, counter: counter(id), linktype: o.linktype, window: Some(Window::from(at)) };
                match to.take() {
                    Some(HandTo::ZeroCopy(tx, _)) => {
                        let _ = tx.send(zc);
                    }
                    _ => streams.push(start_zc_stream(p, id, zc, o.stamps, shared)?),
                }
            }
        }
        Made::Copy(rings) => {
            for (id, ring) in rings.into_iter().enumerate() {
                let src = AfPacketSource::new(ring, o.linktype, p.snaplen, counter(id)).within(Window::from(at));
                match to.take() {
                    Some(HandTo::Copy(tx)) => tx.hand_over(Box::new(src)),
                    _ => {
                        let arena = alloc_arena(p, prefault)?;
                        let parts = Parts { src: Box::new(src), is_file: false, arena, stamps: o.stamps };
                        streams.push(start_stream(p, id, parts, None, shared)?);
                    }
                }
            }
        }
    }
    let notes = drop_privileges(p)?;
    Ok((o.stamping, notes))
}

/// Opens every source and starts every stream on it: the recordings that do not go live on
/// a small ring first (AF_XDP, hardware stamps, files, the generator). Returns what the
/// hand-over of the store to `--user` left alone.
pub fn open_all(
    p: &Plan,
    sources: &mut Sources,
    shared: &Shared,
    prefault: &crate::prefault::Prefault,
    streams: &mut Vec<Stream>,
) -> Result<Vec<Note>> {
    let nstreams = sources.streams(p);
    let mut arenas = Vec::new();
    if !p.zero_copy {
        for _ in 0..nstreams {
            arenas.push(alloc_arena(p, prefault)?);
        }
    }
    let mut zc_rings = Vec::new();
    if let Some(mut live) = sources.live.take() {
        let counter = open_counter(&live)?;
        if p.zero_copy {
            if live.linktype != wv_wire::linktype::ETHERNET {
                return Err(zero_copy_ethernet_only());
            }
            for (id, ring) in RingSet::of(p, &live).full()?.into_iter().enumerate() {
                let counter = if id == 0 { counter.clone() } else { None };
                let ring = zc_writer(ring, p.tuning.zc_inflight)?;
                zc_rings.push(ZcRing { ring, counter, linktype: live.linktype, window: None });
            }
        } else {
            sources.list = match live.xdp.take() {
                Some(filter) => crate::sources::open_xsks(p, live, filter, &mut sources.notes)?,
                None => {
                    let rings = RingSet::of(p, &live).full()?;
                    let (linktype, snaplen) = (live.linktype, p.snaplen);
                    rings
                        .into_iter()
                        .enumerate()
                        .map(|(id, ring)| {
                            let c = if id == 0 { counter.clone() } else { None };
                            Box::new(AfPacketSource::new(ring, linktype, snaplen, c)) as Box<dyn Source>
                        })
                        .collect()
                }
            };
        }
    }
    // Opening the rings needs the privileges; nothing after it does.
    let notes = drop_privileges(p)?;
    for (id, zc) in zc_rings.into_iter().enumerate() {
        streams.push(start_zc_stream(p, id, zc, sources.stamps, shared)?);
    }
    for ((id, src), arena) in std::mem::take(&mut sources.list).into_iter().enumerate().zip(arenas) {
        let is_file = sources.file_source == Some(id);
        streams.push(start_stream(p, id, Parts { src, is_file, arena, stamps: sources.stamps }, None, shared)?);
    }
    Ok(notes)
}

fn zero_copy_ethernet_only() -> Error {
    Error::config("--zero-copy stores Ethernet interfaces only; record this one without it".to_string())
}

/// The zero-copy path's writes from `ring` (an io_uring with up to `inflight` of the ring's
/// blocks in flight).
fn zc_writer(ring: Ring, inflight: u32) -> Result<BlockWriter> {
    BlockWriter::new(ring, inflight)
        .map_err(|e| Error::failed(format!("cannot set up the zero-copy writes (io_uring): {e}")))
}

/// `--user`: the store (and its volumes) handed over, then the process switches to the user;
/// what was left with its owner, as notes.
fn drop_privileges(p: &Plan) -> Result<Vec<Note>> {
    let mut notes = Vec::new();
    if let Some(u) = &p.user {
        for v in &p.volumes {
            store::drop_privileges_of_volume(u, v, &mut notes)?;
        }
        store::drop_privileges(u, &p.store, &mut notes)?;
    }
    Ok(notes)
}

/// One stream's arena: its first blocks faulted in, the rest left to the prefault thread,
/// and the writer's io_uring, made while the privileges last, with the faulted blocks
/// registered as its fixed buffers when `fixed`.
struct Arena {
    prod: Producer,
    cons: Consumer,
    /// In reserved hugepages.
    hugetlb: bool,
    io: wv_sys::uring::Writer,
    fixed: bool,
    /// Bytes faulted in before capture.
    faulted: u64,
}

/// Allocates a stream's arena (`--buffer` split between the workers) in blocks of
/// `--block-size` and faults in its first [`Tuning::arena_first`] bytes; the prefault thread
/// keeps it faulted in ahead of its use.
fn alloc_arena(p: &Plan, prefault: &crate::prefault::Prefault) -> Result<Arena> {
    let arena = p.stream.arena_per_worker;
    let first = p.tuning.arena_first.max(2 * p.stream.block_size).min(arena);
    let (buf, rest) = AlignedBuf::new_partly(arena as usize, true, first as usize)
        .map_err(|e| Error::failed(format!("cannot allocate a {arena} byte arena ({e}); lower --buffer")))?;
    let hugetlb = buf.backing() == Backing::HugeTlb;
    let len = buf.len() as u64;
    let (prod, cons) = wv_sys::byte_ring::byte_ring_blocks(buf, p.stream.block_size);
    let faulted = rest.as_ref().map_or(len, |r| r.faulted() as u64);
    let (io, fixed) = writer::arena_writer(&cons, p.tuning.write_depth, (faulted / cons.block_size()) as u32)
        .map_err(|e| Error::failed(format!("cannot set up the writer's io_uring: {e}")))?;
    let gauge: Gauge = cons.gauge();
    prefault.add(rest, gauge);
    Ok(Arena { prod, cons, hugetlb, io, fixed, faulted: faulted.min(arena) })
}

/// What one stream is made of before it starts.
struct Parts {
    src: Box<dyn Source>,
    /// The source reads files (`--read`): its input problems are reported at the end.
    is_file: bool,
    arena: Arena,
    /// Where its timestamps come from (into the catalog).
    stamps: Stamps,
}

/// What stops a worker besides its source: `-c` (its own count, or the
/// one the workers share) and `-s`.
fn limits(p: &Plan, quota: &Option<Arc<Quota>>) -> wv_capture::worker::Limits {
    let max_packets = if quota.is_some() { None } else { p.count };
    wv_capture::worker::Limits { max_packets, quota: quota.clone(), snaplen: p.snaplen }
}

/// The CPU of `--cpus` for thread `n` (capture threads `0..streams`, writers after them).
fn cpu(p: &Plan, n: usize) -> Option<usize> {
    p.cpus.as_ref().map(|c| c[n % c.len()])
}

/// Starts stream `id` on its arena: the hand-off queue, the writer thread and the capture
/// thread. With `then` (the zero-copy path's stream 0 at start-up: the receiver of its full
/// ring and the small ring's window), the capture thread, once its small ring is drained,
/// waits for the writer and goes on with the full zero-copy ring, as [`start_zc_stream`]'s
/// thread does.
fn start_stream(
    p: &Plan,
    id: usize,
    parts: Parts,
    then: Option<(Receiver<ZcRing>, Arc<Window>, Arc<AtomicBool>)>,
    shared: &Shared,
) -> Result<Stream> {
    let Parts { src, is_file, arena, stamps } = parts;
    let Arena { prod, cons, hugetlb, io, fixed, faulted } = arena;
    let queue = Arc::new(ArrayQueue::new(p.tuning.queue_segments));
    let writer_shared = Arc::new(WriterShared::default());
    let wcfg = writer_config(p, id, shared, stamps);
    let (q2, c2, s2) = (queue.clone(), shared.catalog.clone(), writer_shared.clone());
    let writer = spawn_pinned(format!("wv-writer-{id}"), cpu(p, shared.streams + id), move || {
        writer::run::<wv_index::Builder>(cons, io, q2, wcfg, c2, s2)
    })
    .map_err(|e| Error::failed(format!("cannot start a writer thread: {e}")))?;
    let mut sp = StreamProducer::new(
        prod,
        queue,
        StreamConfig {
            format: p.stream.format,
            file_size: p.stream.file_size,
            file_time_ns: p.stream.file_time_ns,
            block_size: p.stream.block_size,
            flush_after_ns: p.tuning.flush_after_ns,
            clock_close_grace_ns: (!matches!(p.source, SourcePlan::Read { .. }))
                .then_some(p.tuning.clock_close_grace_ns),
        },
    );
    sp.set_writer(writer.thread().clone());
    sp.set_last_seq(last_seq(p, id));
    let counts = Arc::new(SharedCounts::default());
    let (stop2, sc2) = (shared.stop.clone(), counts.clone());
    let limits = limits(p, &shared.quota);
    // Allocated and touched here, before capture starts.
    let reduce = p.reduce.build();
    let (ptx, prx) = std::sync::mpsc::channel::<(Vec<String>, Option<String>)>();
    let Some((then, window, handed)) = then else {
        let mut src = src;
        let capture = spawn_pinned(format!("wv-capture-{id}"), cpu(p, id), move || {
            let r = wv_capture::worker::run(src.as_mut(), &mut sp, &stop2, &sc2, limits, reduce);
            if is_file {
                let _ = ptx.send((src.problems(), src.unread()));
            }
            r
        })
        .map_err(|e| Error::failed(format!("cannot start a capture thread: {e}")))?;
        return Ok(Stream {
            capture,
            writer: Some(writer),
            counts,
            writer_shared,
            file_problems: is_file.then_some(prx),
            arena: Some((faulted, hugetlb, fixed)),
        });
    };
    // The zero-copy path's start-up: the small ring on the copy path, then the full ring.
    let mut warm = Handover::alone(src, window);
    let zc = zc_config(p, id, stamps, shared);
    let writer_shared2 = writer_shared.clone();
    let reduce_then = p.reduce;
    let capture = spawn_pinned(format!("wv-capture-{id}"), cpu(p, id), move || {
        let first = wv_capture::worker::run(&mut warm, &mut sp, &stop2, &sc2, limits.clone(), reduce);
        // The writer writes out what the small ring's stream holds first, whatever happened.
        let wrote = writer.join().unwrap_or_else(|_| Err(std::io::Error::other("the writer thread panicked")));
        let first = first?;
        wrote.map_err(|e| wv_capture::CaptureError::Other(format!("writer: {e}")))?;
        // Stopped (a signal, -c) before the full ring took over: that is all.
        let Some(mut ring) = then.recv().ok().filter(|_| warm.handed_over()) else { return Ok(first) };
        let (wcfg, zcfg, catalog) = zc();
        let mut w = ZcWriter::<wv_index::Builder>::new(wcfg, zcfg, catalog, writer_shared2)
            .map_err(|e| wv_capture::CaptureError::Other(format!("cannot start the zero-copy writer: {e}")))?;
        let limits = Limits { max_packets: limits.max_packets.map(|n| n.saturating_sub(first.stored)), ..limits };
        handed.store(true, std::sync::atomic::Ordering::Release);
        let r = wv_capture::zerocopy::run(&mut ring, &mut w, &stop2, &sc2, (limits, reduce_then.build()), first);
        let f = w.finish().map_err(|e| wv_capture::CaptureError::Other(format!("writer: {e}")));
        r.and_then(|c| f.map(|()| c))
    })
    .map_err(|e| Error::failed(format!("cannot start a capture thread: {e}")))?;
    Ok(Stream {
        capture,
        writer: None,
        counts,
        writer_shared,
        file_problems: None,
        arena: Some((faulted, hugetlb, fixed)),
    })
}

/// What a zero-copy writer of stream `id` is made of, made when it is needed (the stream's
/// highest file number then, after the files its start-up wrote on the copy path).
fn zc_config(
    p: &Plan,
    id: usize,
    stamps: Stamps,
    shared: &Shared,
) -> impl FnOnce() -> (WriterConfig, ZcConfig, Arc<Catalog>) + Send + 'static {
    let wcfg = writer_config(p, id, shared, stamps);
    let (store, volumes) = (p.store.clone(), p.volumes.clone());
    let (file_time_ns, grace, snaplen, block_size) =
        (p.stream.file_time_ns, p.tuning.clock_close_grace_ns, p.snaplen, p.tuning.ring_block_size);
    let catalog = shared.catalog.clone();
    move || {
        let zc = ZcConfig {
            file_time_ns,
            clock_close_grace_ns: grace,
            linktype: wv_wire::linktype::ETHERNET,
            snaplen,
            last_seq: max_seq(&store, &volumes, id),
            block_size,
        };
        (wcfg, zc, catalog)
    }
}

/// Starts zero-copy stream `id`: one thread that takes the ring's blocks, rewrites them
/// into pcapng and writes them (see `wv_capture::zerocopy`).
fn start_zc_stream(p: &Plan, id: usize, mut src: ZcRing, stamps: Stamps, shared: &Shared) -> Result<Stream> {
    let writer_shared = Arc::new(WriterShared::default());
    let (wcfg, zc, catalog) = zc_config(p, id, stamps, shared)();
    let mut w = ZcWriter::<wv_index::Builder>::new(wcfg, zc, catalog, writer_shared.clone())
        .map_err(|e| Error::failed(format!("cannot start the writer of stream {id}: {e}")))?;
    let counts = Arc::new(SharedCounts::default());
    let (stop2, sc2) = (shared.stop.clone(), counts.clone());
    let limits = limits(p, &shared.quota);
    // Allocated and touched here, before capture starts.
    let reduce = p.reduce.build();
    let capture = spawn_pinned(format!("wv-capture-{id}"), cpu(p, id), move || {
        let r = wv_capture::zerocopy::run(&mut src, &mut w, &stop2, &sc2, (limits, reduce), Default::default());
        let f = w.finish().map_err(|e| wv_capture::CaptureError::Other(format!("writer: {e}")));
        r.and_then(|c| f.map(|()| c))
    })
    .map_err(|e| Error::failed(format!("cannot start a capture thread: {e}")))?;
    Ok(Stream { capture, writer: None, counts, writer_shared, file_problems: None, arena: None })
}

/// The highest file number stream `id` has on any volume of the store.
fn last_seq(p: &Plan, id: usize) -> u64 {
    max_seq(&p.store, &p.volumes, id)
}

/// [`last_seq`] of a store and its volumes.
fn max_seq(store: &std::path::Path, volumes: &[std::path::PathBuf], id: usize) -> u64 {
    let sdir = wv_store::layout::stream_dir(id);
    let roots = std::iter::once(store).chain(volumes.iter().map(|v| v.as_path()));
    roots.map(|r| wv_store::layout::max_seq(&r.join(&sdir))).max().unwrap_or(0)
}

/// The writer's settings for stream `id`.
fn writer_config(p: &Plan, id: usize, shared: &Shared, stamps: Stamps) -> WriterConfig {
    WriterConfig {
        store: p.store.clone(),
        stream: id,
        format: p.stream.format,
        direct: p.direct,
        depth: p.tuning.write_depth,
        chunk: p.stream.block_size,
        prealloc_step: p.tuning.prealloc_step,
        file_size: p.stream.file_size,
        index: p.index,
        budget: shared.budget.clone(),
        reserve: p.reserve(),
        timestamps: Some(stamps),
        volumes: shared.rotation.clone(),
        spill: p.spill,
        tap: p.flows.map(|table| {
            wv_flows::tap::maker(wv_flows::tap::TapConfig {
                table,
                store: p.store.clone(),
                node: wv_flows::tap::host_name(),
                sinks: shared.exporters.iter().map(|e| e.clone() as Arc<dyn wv_flows::tap::FlowSink>).collect(),
            })
        }),
    }
}

/// Starts a named thread, pinned to `cpu` if given (a failure to pin is not
/// an error: the thread runs unpinned).
fn spawn_pinned<T: Send + 'static>(
    name: String,
    cpu: Option<usize>,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<JoinHandle<T>> {
    std::thread::Builder::new().name(name).spawn(move || {
        if let Some(c) = cpu {
            let _ = wv_sys::cpu::pin_current_thread(c);
        }
        f()
    })
}
