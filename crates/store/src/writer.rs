//! The writer thread of one stream: arena → files.
//!
//! It follows the producer's messages ([`Msg`]) in order. Data is written in
//! aligned chunks straight from the arena with io_uring (O_DIRECT where the
//! file system allows), several writes in flight. Ring space is released in
//! stream order as writes complete. On the way it walks every record of the
//! file (the capture thread does none of this): to feed the index builder and
//! to count packets. A file is closed by trimming the aligned tail
//! (`ftruncate`), `fsync`, renaming `NAME.part` to `NAME`, writing the index
//! and appending the catalog line.
//!
//! With [`WriterConfig::spill`] set, when the disk falls behind and the arena
//! fills past that fraction, the writes go through the page cache instead (a
//! second, buffered descriptor of the same file) until it drains below half
//! of that: buffered writers
//! such as tcpdump park a burst there, and a recorder must not drop what
//! they keep. A file that spilled is made durable (`fsync`, rename) by the
//! index thread, so the writer goes on while its page cache drains.
//!
//! A write error (ENOSPC, EIO) stops the stream cleanly: the file is cut at
//! its last complete record on disk and kept; every later packet is counted
//! as `dropped_write_error`, and the error is reported through [`WriterShared`].
//!
//! Until a file is catalogued, the stream's live file ([`crate::live`]) says
//! how much of it readers may read: up to the last record boundary of a
//! commit (a `Mark`) that every completed write (in submission order) covers.

use crate::catalog::{Catalog, Entry};
use crate::live::{LiveFiles, PUBLISH_EVERY};
use crate::stream::Msg;
use crate::{layout, FileIndexer, Format};
use crossbeam_queue::ArrayQueue;
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wv_sys::byte_ring::Consumer;
use wv_sys::uring::{self, Completion, DIRECT_ALIGN};
use wv_wire::{pcap, pcapng};

mod placement;
mod threads;
pub mod zerocopy;

use threads::{join_helpers, start_helpers, Finish};

/// Choices for one writer.
#[derive(Clone)]
pub struct WriterConfig {
    pub store: PathBuf,
    pub stream: usize,
    pub format: Format,
    /// Try O_DIRECT.
    pub direct: bool,
    /// io_uring queue depth (writes in flight).
    pub depth: u32,
    /// Largest single write.
    pub chunk: u64,
    /// Preallocate each file whole before its first write, or where that is
    /// refused in steps of this many bytes (0 = off; `wv_sys::fs::Prealloc`).
    pub prealloc_step: u64,
    /// Size at which files rotate: preallocation never goes past it (rounded to pages).
    pub file_size: u64,
    /// Build an index for every file (with the indexer type `run` is given).
    pub index: bool,
    /// The store's byte budget, enforced before each new file (shared by
    /// the writers of a store; it may change while they run).
    pub budget: Arc<crate::catalog::LiveBudget>,
    /// Bytes to keep free under the budget when a file opens: the most the
    /// files being written (one per stream) can add.
    pub reserve: u64,
    /// Where this stream's timestamps come from (the catalog's `timestamps`).
    pub timestamps: Option<crate::catalog::Stamps>,
    /// Several volumes (`record --volume`): each new file goes to the first
    /// volume still in rotation in this stream's order, and a volume that
    /// fails or fills is taken out for every writer. `None`: the store only.
    pub volumes: Option<Arc<crate::volume::Rotation>>,
    /// Spill to the page cache while the arena is fuller than this
    /// fraction, until it is half as full (O_DIRECT writers only; `None`:
    /// never, the command line's default; e.g. 0.5 for a volume known to fall
    /// behind for long).
    pub spill: Option<f64>,
    /// Per-stream state fed beside the indexer (the flow table); `None`: none.
    pub tap: Option<crate::TapMaker>,
}

/// What a writer reports while it runs (read by the status line and summary).
#[derive(Default)]
pub struct WriterShared {
    /// Packets in files closed successfully.
    pub written_packets: AtomicU64,
    /// Bytes the disk accepted (including aligned tails later trimmed).
    pub disk_bytes: AtomicU64,
    /// Bytes of closed files.
    pub file_bytes: AtomicU64,
    pub files_closed: AtomicU64,
    /// Files (and bytes) retention deleted to stay under the budget.
    pub retention_files: AtomicU64,
    pub retention_bytes: AtomicU64,
    /// Of them, files this recording wrote, and the newest packet they held.
    pub retention_own_files: AtomicU64,
    pub retention_own_last_ns: AtomicU64,
    /// Packets lost because a write failed.
    pub dropped_write_error: AtomicU64,
    /// Packets not stored because the store reached its budget with
    /// `--on-full stop`.
    pub dropped_budget: AtomicU64,
    /// Set when the stream stopped at the budget (`--on-full stop`).
    pub budget_reached: AtomicBool,
    /// O_DIRECT was refused by the file system; buffered writes are used.
    pub direct_refused: AtomicBool,
    /// Bytes written through the page cache because the arena was filling.
    pub spilled_bytes: AtomicU64,
    /// Times the writer started spilling.
    pub spills: AtomicU64,
    /// Set when the stream stopped because of a write error.
    pub failed: AtomicBool,
    /// The most writes that were in flight at once (the zero-copy path: ring blocks).
    pub writes_in_flight_max: AtomicU64,
    /// Flow records written to the store's flow files ([`crate::StreamTap`]).
    pub flows_written: AtomicU64,
    /// Of the flow records ended, those pushed out of the full flow table.
    pub flow_records_evicted: AtomicU64,
    /// Flow records an IPFIX exporter's full queue refused (`--flows-to ipfix=...`).
    pub ipfix_records_dropped: AtomicU64,
    /// The arena is registered with io_uring as fixed buffers (from the start, or once it
    /// was faulted in).
    pub arena_registered: AtomicBool,
    /// The error that stopped the stream, and whether it was "disk full".
    pub error: Mutex<Option<(String, bool)>>,
    /// Non-fatal problems (index could not be written, ...), reported once each.
    pub warnings: Mutex<Vec<String>>,
}

impl WriterShared {
    fn fail(&self, msg: String, disk_full: bool) {
        let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if e.is_none() {
            *e = Some((msg, disk_full));
        }
        self.failed.store(true, Ordering::Release);
    }

    /// Counts what retention deleted.
    fn deleted(&self, d: crate::catalog::Deleted) {
        self.retention_files.fetch_add(d.files, Ordering::Relaxed);
        self.retention_bytes.fetch_add(d.bytes, Ordering::Relaxed);
        self.retention_own_files.fetch_add(d.own_files, Ordering::Relaxed);
        self.retention_own_last_ns.fetch_max(d.own_last_ns, Ordering::Relaxed);
    }

    /// What retention deleted in this stream so far (what `WriterShared::deleted` counted).
    pub fn retention(&self) -> crate::catalog::Deleted {
        crate::catalog::Deleted {
            files: self.retention_files.load(Ordering::Relaxed),
            bytes: self.retention_bytes.load(Ordering::Relaxed),
            own_files: self.retention_own_files.load(Ordering::Relaxed),
            own_last_ns: self.retention_own_last_ns.load(Ordering::Relaxed),
        }
    }

    /// A warning for the log (said once, at the end or in the status).
    pub fn warn(&self, msg: String) {
        self.warnings.lock().unwrap_or_else(|p| p.into_inner()).push(msg);
    }
}

struct Pending {
    done: bool,
    /// The whole write reached the file.
    ok: bool,
    /// Ring position that may be released once this and all earlier writes are done.
    release_to: u64,
    /// File offset the write starts at.
    off: u64,
    /// Stream position where the data it writes ends (a tail page's zeros not counted).
    end: u64,
}

/// A record boundary of a file's stream (a commit's end), with the packets
/// before it and their min and max timestamp: what a live entry says of the
/// file's prefix up to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) pos: u64,
    pub(crate) packets: u64,
    pub(crate) min_ns: u64,
    pub(crate) max_ns: u64,
}

impl Mark {
    /// The prefix of no packet, ending at `pos`.
    pub(crate) fn empty(pos: u64) -> Mark {
        Mark { pos, packets: 0, min_ns: u64::MAX, max_ns: 0 }
    }

    /// `base` (the file's live entry when it opened) with this prefix, which
    /// ends `bytes` into the file.
    pub(crate) fn entry(&self, base: &Entry, bytes: u64) -> Entry {
        let (first_ns, last_ns) =
            if self.packets == 0 { (base.first_ns, base.first_ns) } else { (self.min_ns, self.max_ns) };
        Entry { first_ns, last_ns, packets: self.packets, bytes, ..base.clone() }
    }
}

/// How far the open file is on disk, for its live entry.
struct Progress {
    /// Commits the completed writes do not cover yet, oldest first.
    marks: VecDeque<Mark>,
    /// Stream position up to which every write submitted completed.
    done_to: u64,
    /// The valid prefix: the last commit the completed writes cover.
    valid: Mark,
    /// `valid` moved since the live file was given it.
    changed: bool,
    /// A write failed: the prefix stays where it was (the file is cut on close).
    failed: bool,
}

impl Progress {
    fn new(start: u64) -> Progress {
        Progress { marks: VecDeque::new(), done_to: start, valid: Mark::empty(start), changed: true, failed: false }
    }

    /// The writes up to stream position `end` completed (`ok`: whole).
    fn completed(&mut self, end: u64, ok: bool) {
        self.failed |= !ok;
        if self.failed {
            return;
        }
        self.done_to = self.done_to.max(end);
        while let Some(m) = self.marks.front().filter(|m| m.pos <= self.done_to) {
            self.valid = *m;
            self.changed = true;
            self.marks.pop_front();
        }
    }
}

struct CurFile<I> {
    file: File,
    part: PathBuf,
    /// `part` relative to the store.
    part_rel: String,
    name: String,
    start: u64,
    /// The first record's time (the file's name).
    first_ns: u64,
    /// The min and max timestamp of the records walked, as the file holds
    /// them (the catalog's first_ns/last_ns: times may go back).
    min_ns: u64,
    max_ns: u64,
    linktype: u32,
    snaplen: u32,
    /// Stream position up to which data has been submitted (4 KiB aligned).
    submitted: u64,
    /// Stream position of the next record to walk.
    parse_pos: u64,
    packets: u64,
    prealloc: wv_sys::fs::Prealloc,
    /// File offset of the first failed write.
    failed_at: Option<u64>,
    /// The same file opened without O_DIRECT, once the writer spilled into it.
    spill_file: Option<File>,
    /// Bytes submitted through `spill_file`.
    spilled: u64,
    indexer: Option<I>,
    /// False when the stream had already stopped: nothing is written, records are only counted.
    real: bool,
    /// Its live entry as it opened (no packet yet), and how far it is on disk.
    live_base: Entry,
    progress: Progress,
}

struct Writer<I> {
    finish_tx: Option<std::sync::mpsc::SyncSender<Finish<I>>>,
    /// Indexers the finisher is done with, to reuse.
    recycled: std::sync::mpsc::Receiver<I>,
    /// The sort thread's queue, for new indexers.
    work_tx: std::sync::mpsc::Sender<crate::IndexWork>,
    ring: Consumer,
    queue: Arc<ArrayQueue<Msg>>,
    cfg: WriterConfig,
    catalog: Arc<Catalog>,
    shared: Arc<WriterShared>,
    io: uring::Writer,
    direct: bool,
    pending: VecDeque<Pending>,
    /// Sequence number of `pending[0]`.
    pending_base: u64,
    completions: Vec<Completion>,
    cur: Option<CurFile<I>>,
    /// After a write error: walk records only to count them as dropped.
    stopped: bool,
    /// Frame bytes of a record that wraps around the ring end, for the indexer.
    scratch: Vec<u8>,
    /// The volume the current file is on.
    place: placement::Placement,
    /// Stopped at the budget (`--on-full stop`): later packets count as `budget`.
    budget_stopped: bool,
    /// Writes go through the page cache (the arena passed `cfg.spill`).
    spilling: bool,
    /// The stream's live file.
    live: Live,
    /// Fed with every record of the files written (`cfg.tap`).
    tap: Option<Box<dyn crate::StreamTap>>,
}

/// The writer's io_uring for `arena` with `depth` writes in flight, the arena's blocks its
/// fixed buffers where the kernel allows (each write then skips pinning its pages;
/// `uring::Writer::register_arena`), the first `faulted` of them registered now, and whether
/// it could. Made before the recorder drops its privileges: an unprivileged user's
/// locked-memory limit refuses a large arena.
pub fn arena_writer(arena: &Consumer, depth: u32, faulted: u32) -> io::Result<(uring::Writer, bool)> {
    let mut io = uring::Writer::new(depth.max(2))?;
    let fixed = io.register_arena(arena, faulted).is_ok();
    Ok((io, fixed))
}

/// Runs the writer until the producer sends [`Msg::Done`], indexing every
/// file with an `I` when [`WriterConfig::index`] says so; `io` is the ring's
/// [`arena_writer`].
pub fn run<I: FileIndexer>(
    ring: Consumer,
    io: uring::Writer,
    queue: Arc<ArrayQueue<Msg>>,
    cfg: WriterConfig,
    catalog: Arc<Catalog>,
    shared: Arc<WriterShared>,
) -> io::Result<()> {
    let place = placement::Placement::new(&cfg)?;
    let h = start_helpers::<I>(&cfg, &catalog, &shared)?;
    shared.arena_registered.store(io.ring_registered(), Ordering::Relaxed);
    let live = Live::open(&cfg, &shared);
    let tap = cfg.tap.as_ref().map(|make| make(cfg.stream, shared.clone(), catalog.clone()));
    let mut w = Writer {
        live,
        tap,
        finish_tx: Some(h.finish_tx),
        recycled: h.recycled,
        work_tx: h.work_tx,
        ring,
        queue,
        direct: cfg.direct,
        cfg,
        catalog,
        shared,
        io,
        pending: VecDeque::new(),
        pending_base: 0,
        completions: Vec::new(),
        cur: None,
        stopped: false,
        scratch: Vec::new(),
        place,
        budget_stopped: false,
        spilling: false,
    };
    w.run();
    if let Some(t) = w.tap.as_mut() {
        t.stop();
    }
    drop(w.finish_tx.take());
    drop(w);
    join_helpers(h.index, h.sort)
}

/// The longest the writer sleeps between messages when no write is in flight.
const IDLE_PARK: Duration = Duration::from_secs(1);

impl<I: FileIndexer> Writer<I> {
    fn run(&mut self) {
        loop {
            match self.queue.pop() {
                Some(Msg::Done) => break,
                Some(m) => self.handle(m),
                None => {
                    if self.io.in_flight() > 0 {
                        self.reap(1);
                    } else {
                        // Idle: readers get what is on disk now, not at the next write.
                        self.live_tick(true);
                        // The producer unparks this thread with every message it queues
                        // (`StreamProducer::set_writer`), so the timeout is only a safety net.
                        // It was 5 ms: 200 wake-ups a second, 5.6 ms of CPU a second on this VM
                        // (each a timer and a futex round trip) even with no traffic at all.
                        std::thread::park_timeout(IDLE_PARK);
                    }
                }
            }
        }
        // A producer always closes its file before Done; be safe anyway.
        if let Some(c) = self.cur.as_ref() {
            let end = c.parse_pos;
            self.close(end);
        }
        self.reap(usize::MAX);
    }

    fn handle(&mut self, m: Msg) {
        match m {
            Msg::Open { pos, seq, first_ns, linktype, snaplen } => self.open(pos, seq, first_ns, linktype, snaplen),
            Msg::Commit { end, flush } => {
                self.walk(end);
                self.mark();
                self.submit(end, flush);
                self.release_ready();
            }
            Msg::Close { end, .. } => self.close(end),
            Msg::Done => {}
        }
    }

    fn open(&mut self, pos: u64, seq: u64, first_ns: u64, linktype: u32, snaplen: u32) {
        let name = layout::file_name(first_ns, seq, self.cfg.format.extension());
        self.resume();
        if !self.stopped {
            if let Err(budget) = make_room(&self.cfg, &self.catalog, &self.shared, 0) {
                self.budget_stopped = budget;
                self.stopped = true;
            }
        }
        let part_rel = format!("{}/{name}{}", self.place.rel_dir, layout::PART);
        let mut file = None;
        loop {
            self.resume();
            if !self.stopped {
                self.choose_volume();
            }
            if self.stopped {
                break;
            }
            match self.place.store.create_output(&part_rel, self.direct) {
                Ok((f, direct)) => {
                    if self.direct && !direct {
                        self.direct = false;
                        self.shared.direct_refused.store(true, Ordering::Relaxed);
                    }
                    file = Some(f);
                    break;
                }
                Err(e) => {
                    let full = e.raw_os_error() == Some(libc::ENOSPC);
                    let msg = format!("cannot create {}: {e}", self.place.store.display(&part_rel).display());
                    if !self.volume_out(&msg) {
                        self.shared.fail(msg, full);
                    }
                    self.stopped = true;
                }
            }
        }
        let part = self.place.dir.join(format!("{name}{}", layout::PART));
        // Even when stopped we walk the stream to count what is dropped.
        let real = file.is_some();
        let indexer = (self.cfg.index && real).then(|| new_indexer(&self.recycled, &self.work_tx, linktype));
        let Some(file) = file.or_else(|| File::open("/dev/null").ok()) else {
            return;
        };
        if let Some(t) = self.tap.as_mut().filter(|_| real) {
            t.open(&crate::volume::on_volume(self.place.vol, &format!("{}/{name}", self.place.rel_dir)), linktype);
        }
        let live_base = Entry {
            stream: self.cfg.stream,
            file: crate::volume::on_volume(self.place.vol, &part_rel),
            index: None,
            format: Some(self.cfg.format),
            linktype,
            snaplen,
            first_ns,
            last_ns: first_ns,
            packets: 0,
            bytes: 0,
            timestamps: self.cfg.timestamps,
            path: Some(crate::catalog::WritePath::Copy),
        };
        self.cur = Some(CurFile {
            live_base,
            progress: Progress::new(pos),
            file,
            part,
            part_rel,
            name,
            start: pos,
            first_ns,
            min_ns: u64::MAX,
            max_ns: 0,
            linktype,
            snaplen,
            submitted: pos,
            parse_pos: pos + self.cfg.format.preamble_len() as u64,
            packets: 0,
            prealloc: wv_sys::fs::Prealloc::new(self.direct),
            failed_at: None,
            spill_file: None,
            spilled: 0,
            indexer,
            real,
        });
        // At once: a reader then knows the new file is being written (and
        // finds the one just closed whole) instead of leaving it out.
        self.live_tick(true);
    }

    /// Walks complete records in `[parse_pos, end)`: index and count them.
    /// The committed range is borrowed two arena blocks at a time (one or two
    /// slices: consecutive stretches of the stream lie in any blocks); only a
    /// record straddling two blocks is copied.
    fn walk(&mut self, end: u64) {
        loop {
            let Some(at) = self.cur.as_ref().map(|c| c.parse_pos) else { return };
            let reach = end.min(self.ring.reach(at));
            let long = self.walk_lent(reach, end);
            let now = self.cur.as_ref().map_or(at, |c| c.parse_pos);
            if !long && (now == at || reach == end) {
                return;
            }
        }
    }

    /// Walks the complete records in `[parse_pos, reach)`, the range the arena lends at once
    /// (two blocks), and a record that starts there but goes on past `reach` (one longer than
    /// a block: `--block-size` below the snap length), copied out, if it ends by `end`. Returns
    /// whether it walked such a record.
    fn walk_lent(&mut self, reach: u64, end: u64) -> bool {
        let Writer { cur, ring, scratch, cfg, tap, .. } = self;
        let Some(c) = cur.as_mut() else { return false };
        let mut tap = tap.as_deref_mut().filter(|_| c.real);
        let Some((a, b)) = ring.slices(c.parse_pos, reach) else { return false };
        let fmt = cfg.format;
        let hdr_len = match fmt {
            Format::Pcap => pcap::RECORD_HEADER_LEN,
            Format::Pcapng => pcapng::EPB_HEADER_LEN,
        };
        let total = a.len() + b.len();
        let mut off = 0usize;
        // Bytes [from, to) of the logical range a ++ b, borrowed when they do
        // not straddle the two slices, else copied into `buf`.
        #[inline(always)]
        fn span<'x>(a: &'x [u8], b: &'x [u8], from: usize, to: usize, buf: &'x mut Vec<u8>) -> &'x [u8] {
            if to <= a.len() {
                &a[from..to]
            } else if from >= a.len() {
                &b[from - a.len()..to - a.len()]
            } else {
                buf.clear();
                buf.extend_from_slice(&a[from..]);
                buf.extend_from_slice(&b[..to - a.len()]);
                buf
            }
        }
        while off + hdr_len <= total {
            // Parsed where it lies (a copy of a length known only at run
            // time was a `memmove` call per record: 9% of the recorder's CPU
            // with 64-byte frames). The stream holds only records the
            // capture thread wrote, so the headers parse (and their lengths
            // were checked there).
            let hb = span(a, b, off, off + hdr_len, scratch);
            let rec = match fmt {
                Format::Pcap => pcap::RecordHeader::parse(&mut wv_wire::octets::Octets::le(hb), pcap::Precision::Nano),
                Format::Pcapng => hb
                    .try_into()
                    .ok()
                    .and_then(pcapng::EnhancedPacket::parse_block)
                    .map(|(_, e)| pcap::RecordHeader { ts_ns: e.ts, caplen: e.caplen, origlen: e.origlen }),
            };
            let Some(pcap::RecordHeader { ts_ns, caplen, origlen }) = rec else { break };
            let rec_len = fmt.record_len(caplen) as usize;
            if off + rec_len > total {
                let at = c.parse_pos + off as u64;
                if at + rec_len as u64 > end || !ring.copy_out(at, at + rec_len as u64, scratch) {
                    break;
                }
                if let Some(ix) = c.indexer.as_mut() {
                    ix.add(ts_ns, at - c.start, &scratch[hdr_len..hdr_len + caplen as usize], origlen);
                }
                if let Some(t) = &mut tap {
                    t.add(ts_ns, &scratch[hdr_len..hdr_len + caplen as usize], origlen);
                }
                c.packets += 1;
                c.min_ns = c.min_ns.min(ts_ns);
                c.max_ns = c.max_ns.max(ts_ns);
                c.parse_pos = at + rec_len as u64;
                return true;
            }
            // The capture thread wrote these records on another core (or long
            // enough ago to be out of this core's caches), and records a few
            // hundred bytes apart or more defeat the hardware prefetcher
            // (small ones sit on consecutive lines, which it follows): each
            // header would be a full memory miss. Ask for the header and
            // frame head of the next record (known now) and of the record
            // four ahead if the records keep this length (common: floods,
            // bulk transfers at the MTU). Only hints; positions may be wrong.
            if rec_len >= 256 {
                for ahead in [off + rec_len, off + 4 * rec_len] {
                    let p = a.as_ptr().wrapping_add(ahead);
                    wv_sys::mem::prefetch(p);
                    wv_sys::mem::prefetch(p.wrapping_add(hdr_len + 40));
                }
            }
            if c.indexer.is_some() || tap.is_some() {
                let d = off + hdr_len;
                let frame = span(a, b, d, d + caplen as usize, scratch);
                if let Some(ix) = c.indexer.as_mut() {
                    ix.add(ts_ns, c.parse_pos + off as u64 - c.start, frame, origlen);
                }
                if let Some(t) = &mut tap {
                    t.add(ts_ns, frame, origlen);
                }
            }
            c.packets += 1;
            c.min_ns = c.min_ns.min(ts_ns);
            c.max_ns = c.max_ns.max(ts_ns);
            off += rec_len;
        }
        c.parse_pos += off as u64;
        false
    }

    /// After a commit's walk: its end (a record boundary) is a prefix a live
    /// entry may give once the writes reach it.
    fn mark(&mut self) {
        if self.live.files.is_none() || self.stopped {
            return;
        }
        if let Some(c) = self.cur.as_mut().filter(|c| c.real && c.failed_at.is_none()) {
            c.progress.marks.push_back(Mark {
                pos: c.parse_pos,
                packets: c.packets,
                min_ns: c.min_ns,
                max_ns: c.max_ns,
            });
        }
    }

    /// Gives the live file the open file's valid prefix if it moved, and
    /// writes it if anything changed: at most every [`PUBLISH_EVERY`], or
    /// `now` (the writer goes idle).
    fn live_tick(&mut self, now: bool) {
        let moved = self.cur.as_ref().is_some_and(|c| c.real && c.progress.changed);
        let Some(live) = self.live.due(moved, now) else { return };
        if let Some(c) = self.cur.as_mut().filter(|c| c.real && c.progress.changed) {
            c.progress.changed = false;
            let v = c.progress.valid;
            live.set(v.entry(&c.live_base, v.pos - c.start));
        }
        self.live.publish(&self.shared);
    }

    /// Submits writes for data up to `end`: whole aligned pages, or with
    /// `flush` also the partial last page (rewritten later).
    fn submit(&mut self, end: u64, flush: bool) {
        let Some(c) = self.cur.as_ref() else { return };
        if self.stopped || c.failed_at.is_some() {
            return;
        }
        let full_end = end / DIRECT_ALIGN * DIRECT_ALIGN;
        let from = c.submitted;
        if full_end > from {
            self.write_range(from, full_end, full_end);
            if let Some(c) = self.cur.as_mut() {
                c.submitted = full_end;
            }
        }
        if flush && end > full_end {
            self.write_tail(full_end, end, full_end);
            // The partial page will be written again: wait for this write so
            // the two can never complete out of order.
            self.reap(usize::MAX);
        }
    }

    /// Writes arena `[from, to)` to the current file, in chunks that neither
    /// exceed the chunk size nor cross the end of an arena block (the next
    /// stretch of the stream lies in another block). The last chunk may
    /// release up to `release_last` only.
    fn write_range(&mut self, from: u64, to: u64, release_last: u64) {
        let block = self.ring.block_size();
        let mut pos = from;
        while pos < to {
            let to_block_end = block - pos % block;
            let len = (to - pos).min(self.cfg.chunk).min(to_block_end);
            let release_to = if pos + len == to { release_last.min(pos + len) } else { pos + len };
            self.write_one(pos, len, release_to);
            pos += len;
        }
    }

    fn write_one(&mut self, pos: u64, len: u64, release_to: u64) {
        self.write_at(pos, len, release_to, None);
    }

    /// Writes the partial last page `[start, end)` (start page-aligned) from
    /// a copy whose bytes after `end` are zeros: a crash before the file is
    /// cut to its length then leaves zeros after the last record, not older
    /// arena bytes that could pass for records.
    fn write_tail(&mut self, start: u64, end: u64, release_to: u64) {
        self.write_at(start, DIRECT_ALIGN, release_to, Some(end));
    }

    /// One write of ring `[pos, pos + len)` to the current file, or with
    /// `tail_end` of the zero-padded copy of `[pos, tail_end)`.
    fn write_at(&mut self, pos: u64, len: u64, release_to: u64, tail_end: Option<u64>) {
        while self.io.in_flight() >= self.cfg.depth as usize {
            self.reap(1);
        }
        let Some(c) = self.cur.as_mut() else { return };
        let off = pos - c.start;
        // Never past one file size (rounded to pages) unless the data is.
        c.prealloc.ensure(&c.file, off + len, self.cfg.file_size, self.cfg.prealloc_step);
        let id = self.pending_base + self.pending.len() as u64;
        let user_data = id << 32 | len;
        // The partial last page always goes O_DIRECT (it is rewritten, and
        // waited for, right after).
        let spill =
            tail_end.is_none() && spill_now(&mut self.spilling, &self.cfg, self.direct, &self.ring, &self.shared);
        if spill && c.spill_file.is_none() {
            c.spill_file = self.place.store.open_file(&c.part_rel, wv_sys::fs::Open::ReadWrite, 0).ok();
        }
        // Through io_uring like the direct writes: its worker threads copy
        // into the page cache while this thread goes on reaping (a plain
        // pwrite here stored less: bench/throttled.sh, DESIGN.md).
        let file = match c.spill_file.as_ref() {
            Some(f) if spill => {
                c.spilled += len;
                self.shared.spilled_bytes.fetch_add(len, Ordering::Relaxed);
                f
            }
            _ => &c.file,
        };
        let r = match tail_end {
            Some(end) => self.io.write_tail(file, &self.ring, pos, end, off, user_data),
            None => self.io.write_ring(file, &self.ring, pos, len as u32, off, user_data),
        };
        // A block the kernel would not pin as a fixed buffer (a locked-memory limit): said once.
        if self.shared.arena_registered.load(Ordering::Relaxed) && !self.io.ring_registered() {
            self.shared.arena_registered.store(false, Ordering::Relaxed);
            self.shared.warn(format!(
                "the kernel refused to pin more than {} MiB of the arena for io_uring (the locked-memory limit, `ulimit -l`); the rest is written without (each write pins its pages: slower on fast disks)",
                self.io.fixed_bytes() >> 20
            ));
        }
        let end = tail_end.unwrap_or(pos + len);
        match r {
            Ok(()) => self.pending.push_back(Pending { done: false, ok: true, release_to, off, end }),
            Err(e) => {
                self.pending.push_back(Pending { done: true, ok: false, release_to, off, end });
                self.write_failed(off, e);
            }
        }
    }

    /// Reaps completions until at least `min` arrived (`usize::MAX`: all in flight).
    fn reap(&mut self, min: usize) {
        let min = if min == usize::MAX { self.io.in_flight() } else { min };
        let mut got = 0;
        loop {
            self.completions.clear();
            let want = if got >= min { 0 } else { 1 };
            if let Err(e) = self.io.wait(want, &mut self.completions) {
                self.shared.fail(format!("io_uring wait failed: {e}"), false);
                self.stopped = true;
                return;
            }
            let n = self.completions.len();
            for i in 0..n {
                let c = self.completions[i];
                let id = c.user_data >> 32;
                let len = c.user_data & 0xffff_ffff;
                let mut off = u64::MAX;
                let failed = c.result < 0 || (c.result as u64) < len;
                if let Some(p) = id.checked_sub(self.pending_base).and_then(|i| self.pending.get_mut(i as usize)) {
                    p.done = true;
                    p.ok = !failed;
                    off = p.off;
                }
                if failed {
                    let err = if c.result < 0 {
                        io::Error::from_raw_os_error(-c.result)
                    } else {
                        io::Error::from_raw_os_error(libc::ENOSPC)
                    };
                    // The file holds complete data only up to what this write
                    // put there (later writes may have landed after a gap).
                    self.write_failed(off.saturating_add(c.result.max(0) as u64), err);
                } else {
                    self.shared.disk_bytes.fetch_add(len, Ordering::Relaxed);
                }
            }
            got += n;
            if got >= min || self.io.in_flight() == 0 {
                break;
            }
        }
        self.release_ready();
    }

    fn write_failed(&mut self, off: u64, e: io::Error) {
        let full = e.raw_os_error() == Some(libc::ENOSPC) || e.raw_os_error() == Some(libc::EDQUOT);
        if let Some(c) = self.cur.as_mut() {
            c.failed_at = Some(c.failed_at.map_or(off, |x| x.min(off)));
            let what = if full { "the disk is full" } else { "a write failed" };
            let msg = format!("{what} while writing {}: {e}", c.part.display());
            if !self.volume_out(&msg) {
                self.shared.fail(msg, full);
            }
        }
        self.stopped = true;
    }

    /// Goes on after a volume failure (the next file goes to another volume).
    fn resume(&mut self) {
        if self.place.resume() {
            self.stopped = false;
        }
    }

    /// With several volumes, before each new file: the volume it goes on
    /// ([`placement::Placement::choose`]); the stream stops when none is left.
    fn choose_volume(&mut self) {
        if !self.place.choose(&self.cfg, &self.shared, &self.catalog) {
            self.stopped = true;
        }
    }

    /// A write, create or close on the current volume failed (`why`): with
    /// other volumes in rotation, takes this one out (saying so once) and
    /// returns true, the stream going on on another from its next file.
    /// False with one volume, or none left: the stream stops as it always did.
    fn volume_out(&mut self, why: &str) -> bool {
        let vol = self.place.vol;
        self.place.out(&self.cfg, vol, why)
    }

    /// Releases ring space up to the newest write whose predecessors are all
    /// done, but never past a record not walked yet.
    fn release_ready(&mut self) {
        let mut upto = None;
        while let Some(p) = self.pending.front() {
            if !p.done {
                break;
            }
            upto = Some(p.release_to);
            // Every write in flight is the open file's (a file's are reaped before it closes).
            if let Some(c) = self.cur.as_mut() {
                c.progress.completed(p.end, p.ok);
            }
            self.pending.pop_front();
            self.pending_base += 1;
        }
        if let Some(mut u) = upto {
            if let Some(c) = self.cur.as_ref() {
                u = u.min(c.parse_pos);
            }
            self.ring.release(u);
            self.live_tick(false);
        }
    }

    fn close(&mut self, end: u64) {
        self.walk(end);
        let Some(c) = self.cur.as_ref() else { return };
        let (start, walked_all) = (c.start, c.parse_pos == end);
        if c.real && !self.stopped && c.failed_at.is_none() {
            let from = c.submitted;
            let full_end = end / DIRECT_ALIGN * DIRECT_ALIGN;
            if full_end > from {
                self.write_range(from, full_end, full_end);
            }
            // (`submitted` only ever holds page boundaries up to the data: from <= full_end.)
            if end > full_end {
                self.write_tail(full_end, end, end.next_multiple_of(DIRECT_ALIGN));
            }
        }
        self.reap(usize::MAX);
        let c = self.cur.take().expect("checked above");
        let next = end.next_multiple_of(DIRECT_ALIGN);
        if !c.real {
            // Opened after the stream stopped: nothing was written.
            let to = if self.budget_stopped { &self.shared.dropped_budget } else { &self.shared.dropped_write_error };
            to.fetch_add(c.packets, Ordering::Relaxed);
        } else {
            let catalogued = self.finish_file(c, end - start, walked_all);
            if let Some(t) = self.tap.as_mut() {
                t.close(catalogued);
            }
        }
        self.ring.release(next);
    }

    /// Closes the file and hands it to the index thread; false when it is not to be
    /// catalogued (nothing of it reached the disk, or it could not be closed).
    fn finish_file(&mut self, c: CurFile<I>, len: u64, walked_all: bool) -> bool {
        debug_assert!(walked_all, "producer closes files at record boundaries");
        let failed = c.failed_at.is_some() || self.stopped;
        let (len, packets, first_ns, last_ns) = if failed {
            // Keep what reached the disk before the first failed write, cut
            // at the last complete record.
            drop(c.file.set_len(len.min(file_len(&c.file)).min(c.failed_at.unwrap_or(u64::MAX))));
            let reopened = self.place.store.open_file(&c.part_rel, wv_sys::fs::Open::Read, 0);
            match reopened.and_then(|f| crate::recover::valid_prefix_of(f, self.cfg.format, true)) {
                Ok(v) => (v.len, v.packets, v.first_ns.unwrap_or(c.first_ns), v.last_ns.unwrap_or(c.first_ns)),
                Err(_) => (0, 0, c.first_ns, c.first_ns),
            }
        } else if c.packets == 0 {
            (len, 0, c.first_ns, c.first_ns)
        } else {
            (len, c.packets, c.min_ns, c.max_ns)
        };
        self.shared.dropped_write_error.fetch_add(c.packets - packets.min(c.packets), Ordering::Relaxed);
        if packets == 0 && failed {
            let _ = self.place.store.unlink(&c.part_rel);
            self.live.gone(&c.live_base.file);
            return false;
        }
        // Whole now (every write completed): readers get all of it at once, not after the
        // fsync and rename below (which a busy disk can hold for seconds) and the next
        // publication; until its catalog line is written, they find it through the live file.
        self.live.set(Mark { pos: len, packets, min_ns: first_ns, max_ns: last_ns }.entry(&c.live_base, len));
        self.live.publish_now(&self.shared);
        let final_rel = format!("{}/{}", self.place.rel_dir, c.name);
        // A file that spilled may have gigabytes in the page cache: its fsync
        // and rename go to the index thread, before its index and catalog line.
        let spilled = c.spilled > 0;
        let r = if spilled {
            c.file.set_len(len)
        } else {
            c.file.set_len(len).and_then(|()| self.place.store.persist(&c.file, &c.part_rel, &final_rel))
        };
        let persist = spilled.then(|| threads::Persist {
            file: Arc::new(c.file),
            part_rel: c.part_rel.clone(),
            final_rel: final_rel.clone(),
            packets,
        });
        drop(c.spill_file);
        if let Err(e) = r {
            let full = e.raw_os_error() == Some(libc::ENOSPC);
            let msg = format!("cannot close {}: {e}", c.part.display());
            if !self.volume_out(&msg) {
                self.shared.fail(msg, full);
            }
            self.stopped = true;
            self.shared.dropped_write_error.fetch_add(packets, Ordering::Relaxed);
            self.live.gone(&c.live_base.file);
            return false;
        }
        let rel = crate::volume::on_volume(self.place.vol, &final_rel);
        let entry = Entry {
            stream: self.cfg.stream,
            file: rel,
            index: None,
            format: Some(self.cfg.format),
            linktype: c.linktype,
            snaplen: c.snaplen,
            first_ns,
            last_ns,
            packets,
            bytes: len,
            timestamps: self.cfg.timestamps,
            path: Some(crate::catalog::WritePath::Copy),
        };
        let index_rel = layout::index_rel(&final_rel);
        let indexer = c.indexer.filter(|_| !failed);
        // Counted first: the index thread takes them back if a spilled file cannot be persisted.
        self.shared.written_packets.fetch_add(packets, Ordering::Relaxed);
        self.shared.file_bytes.fetch_add(len, Ordering::Relaxed);
        self.shared.files_closed.fetch_add(1, Ordering::Relaxed);
        let live = self.live.files.clone();
        catalog_file(
            Finish { indexer, index_rel, entry, dir: self.place.store.clone(), persist, budget: None, live },
            self.finish_tx.as_ref(),
            &self.catalog,
            &self.shared,
        );
        true
    }
}

/// Before a new file: retention deletes the oldest files until the store's budget has room
/// for it and for `closing` bytes of closed files not yet handed to the index thread (the
/// zero-copy path's, whose writes are in flight). `Err(budget)` when the stream must stop (the
/// reason went to `shared`): `true` when the budget is reached with `--on-full stop`, `false`
/// when retention failed.
fn make_room(cfg: &WriterConfig, catalog: &Catalog, shared: &WriterShared, closing: u64) -> Result<(), bool> {
    let Some(b) = cfg.budget.get() else { return Ok(()) };
    match catalog.make_room(&b, cfg.reserve.saturating_add(closing)) {
        Ok(d) => {
            shared.deleted(d);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::StorageFull => {
            shared.budget_reached.store(true, Ordering::Release);
            shared.fail(
                format!("the store reached its --max-size budget of {} bytes (--on-full stop)", b.max_bytes),
                true,
            );
            Err(true)
        }
        Err(e) => {
            shared.fail(format!("retention could not delete old files: {e}"), false);
            Err(false)
        }
    }
}

/// An indexer for a new file of `linktype`: one the index thread is done with, or a new one
/// that hands its background work to the sort thread through `work_tx`.
fn new_indexer<I: FileIndexer>(
    recycled: &std::sync::mpsc::Receiver<I>,
    work_tx: &std::sync::mpsc::Sender<crate::IndexWork>,
    linktype: u32,
) -> I {
    match recycled.try_recv() {
        Ok(mut ix) => {
            ix.reset(linktype);
            ix
        }
        Err(_) => {
            let work_tx = work_tx.clone();
            // A work the sort thread can no longer take is dropped, and
            // the indexer's work does itself when dropped.
            I::new(linktype, Box::new(move |work| drop(work_tx.send(work))))
        }
    }
}

/// Catalogs a closed file through the index thread, indexed or not (its
/// index is written first when it has an indexer), so that a stream's lines
/// reach the catalog in file order: a file cut by a write error must not
/// overtake the one before it, still being indexed. Without an index
/// thread (or when it is gone), appended here.
fn catalog_file<I>(
    mut job: Finish<I>,
    finish_tx: Option<&std::sync::mpsc::SyncSender<Finish<I>>>,
    catalog: &Arc<Catalog>,
    shared: &WriterShared,
) {
    // Until its line is written, retention counts the file apart (the
    // budget's reserve covers the files being written only).
    job.budget = Some(catalog.uncataloged(job.entry.bytes));
    let job = match finish_tx {
        Some(tx) => match tx.send(job) {
            Ok(()) => None,
            Err(std::sync::mpsc::SendError(job)) => Some(job),
        },
        None => Some(job),
    };
    if let Some(mut job) = job {
        if threads::persist(&mut job, shared) {
            if let Err(e) = catalog.append(&job.entry) {
                threads::catalog_failed(catalog, &job.entry, &e, shared);
            }
        }
        job.out_of_live();
    }
}

/// A writer's live file ([`crate::live`]) and when it may be written next.
pub(crate) struct Live {
    /// `None`: it could not be written (said once); the stream's packets are
    /// then queryable once each file is catalogued.
    pub(crate) files: Option<Arc<LiveFiles>>,
    next: Instant,
}

impl Live {
    /// The stream's live file, written once to see that it can be.
    pub(crate) fn open(cfg: &WriterConfig, shared: &WriterShared) -> Live {
        let files = match LiveFiles::create(&cfg.store, cfg.stream) {
            Ok(l) => Some(Arc::new(l)),
            Err(e) => {
                shared.warn(Live::failed(&cfg.store.join(crate::live::file_name(cfg.stream)), &e));
                None
            }
        };
        Live { files, next: Instant::now() }
    }

    fn failed(path: &std::path::Path, e: &io::Error) -> String {
        format!(
            "cannot write {}: {e}; this stream's packets are queryable only once each file is closed",
            path.display()
        )
    }

    /// The live file to give the prefixes that moved (`moved`: some did), when it is to be
    /// written now: something changed, and [`PUBLISH_EVERY`] passed since it last was, or `now`.
    pub(crate) fn due(&mut self, moved: bool, now: bool) -> Option<Arc<LiveFiles>> {
        let live = self.files.as_ref()?;
        if !moved && !live.dirty() {
            return None;
        }
        let t = Instant::now();
        if !now && t < self.next {
            return None;
        }
        self.next = t + PUBLISH_EVERY;
        Some(live.clone())
    }

    /// Writes the live file; one that cannot be written is given up, with a warning.
    pub(crate) fn publish(&mut self, shared: &WriterShared) {
        let Some(live) = &self.files else { return };
        if let Err(e) = live.publish() {
            shared.warn(Live::failed(&live.path(), &e));
            self.files = None;
        }
    }

    /// Writes the live file now (a file closed: once per file).
    pub(crate) fn publish_now(&mut self, shared: &WriterShared) {
        if self.due(true, true).is_some() {
            self.publish(shared);
        }
    }

    /// What a file is now (`e.file`: its `.part` name), for the next write.
    pub(crate) fn set(&self, e: Entry) {
        if let Some(l) = &self.files {
            l.set(e);
        }
    }

    /// A file that will not be catalogued (removed, or left for `repair`): out of the live file.
    pub(crate) fn gone(&self, file: &str) {
        if let Some(l) = &self.files {
            l.remove(file);
        }
    }
}

/// Whether the next write spills to the page cache: on above `cfg.spill`,
/// off again below half of it (O_DIRECT writers only).
fn spill_now(spilling: &mut bool, cfg: &WriterConfig, direct: bool, ring: &Consumer, shared: &WriterShared) -> bool {
    let Some(above) = cfg.spill.filter(|_| direct) else { return false };
    let fill = ring.fill();
    if !*spilling && (fill > above || above == 0.0) {
        *spilling = true;
        shared.spills.fetch_add(1, Ordering::Relaxed);
    } else if *spilling && fill < above / 2.0 {
        *spilling = false;
    }
    *spilling
}

fn file_len(f: &File) -> u64 {
    f.metadata().map_or(0, |m| m.len())
}
