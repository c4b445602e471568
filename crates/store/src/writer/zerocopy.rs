//! The zero-copy writer (`record --zero-copy`): the kernel's TPACKET_V3 ring
//! blocks, rewritten in place into pcapng ([`Block::rewrite_pcapng`](wv_sys::afpacket::Block::rewrite_pcapng)), go
//! to disk as they are, straight from the ring's memory.
//!
//! It runs on the capture thread: each block's write (one O_DIRECT write
//! straight from the ring mapping) is queued on the [`BlockWriter`]'s
//! io_uring with its file offset assigned at submission (the file grows by
//! each block's length), so writes complete in any order, several in flight;
//! the `BlockWriter` hands each block back to the kernel once its write
//! completed, in ring order. A file that rotates while its writes are in
//! flight is carried (kept open) until they complete, then closed in file
//! order. A file is a 4 KiB header (SHB,
//! IDB, a local-use block up to the page end) followed by ring blocks, each
//! cut at the 4 KiB boundary after its last packet; rotation happens between
//! blocks (size) or inside one (time: the block is written to both files,
//! each time with the other file's records turned into skip blocks). The
//! index, the catalog (with `path: "zero-copy"`), retention and the counters
//! are those of the copy path's writer, whose index and catalog threads it
//! shares.
//!
//! The first write from the ring is waited for: if the kernel refuses
//! O_DIRECT from the ring mapping (EFAULT, EINVAL), the writer says so once
//! and from then on copies each block into an aligned buffer and writes it
//! synchronously (the catalog then says `path: "copy"`). A failed or short
//! write stops the stream as on the copy path: its file is cut at the first
//! byte that did not reach the disk, walked again for its complete records
//! (counted; the rest are `dropped_write_error`) and kept without an index.
//! With several volumes (`record --volume`) the failed file's volume is taken
//! out of rotation instead, and the next block opens a file on another one
//! (`placement::Placement`).
//!
//! Until a file is catalogued, the stream's live file ([`crate::live`]) gives
//! readers its prefix up to the first write that has not completed
//! (`Written`): every write is whole ring blocks of records and skip
//! blocks, so that prefix always ends at a block boundary.

use super::placement::Placement;
use super::threads::{join_helpers, start_helpers, Finish};
use super::{Mark, WriterConfig, WriterShared};
use crate::catalog::{Catalog, Entry, WritePath};
use crate::{layout, FileIndexer, Format};
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use wv_sys::afpacket::{BlockId, BlockWriter, WriteDone, ZcRecord};
use wv_sys::mem::AlignedBuf;
use wv_sys::uring::DIRECT_ALIGN;
use wv_wire::pcapng;

/// What the zero-copy writer needs besides the copy path's [`WriterConfig`].
#[derive(Debug, Clone, Copy)]
pub struct ZcConfig {
    /// Close files at multiples of this many nanoseconds since the epoch.
    pub file_time_ns: Option<u64>,
    /// Close a file at its time boundary by the wall clock this long after it.
    pub clock_close_grace_ns: u64,
    pub linktype: u32,
    pub snaplen: u32,
    /// The stream directory's highest file number so far.
    pub last_seq: u64,
    /// Largest block that may have to be copied (the ring's block size).
    pub block_size: usize,
}

struct ZcFile<I> {
    /// Shared with the writes in flight, which keep it open until they complete.
    file: Arc<File>,
    /// The volume it is on (paths are beneath it) and its id.
    store: Arc<wv_sys::fs::Dir>,
    vol: u32,
    /// The file's number in the stream: the tag of its writes.
    seq: u64,
    part: PathBuf,
    part_rel: String,
    name: String,
    /// Bytes submitted (always a multiple of 4 KiB): the next write's offset.
    len: u64,
    first_ns: u64,
    min_ns: u64,
    max_ns: u64,
    /// Records handed to this file, and of them the ones written.
    packets: u64,
    stored: u64,
    boundary: u64,
    prealloc: wv_sys::fs::Prealloc,
    indexer: Option<I>,
    /// Records are written (false once the stream stopped: they are only counted).
    real: bool,
    /// A file was created (it keeps the records written before a failure).
    on_disk: bool,
    /// Every block went straight from the ring.
    zero_copy: bool,
    /// Writes of this file in flight.
    in_flight: u32,
    /// File offset of the first byte a failed or short write did not put there.
    failed_at: Option<u64>,
    /// Its live entry as it opened (no packet yet), and how far it is on disk.
    live_base: Entry,
    written: Written,
}

/// How far a zero-copy file is on disk: its writes in file order (they
/// complete in any order), and the prefix every completed one before the
/// first unfinished one makes.
struct Written {
    /// Queued writes not yet part of the prefix: file offset, the prefix the
    /// file has once it and all before it completed (`Mark::pos`: its end in
    /// the file), and whether it completed.
    queued: VecDeque<(u64, Mark, bool)>,
    /// The valid prefix (`pos`: its length).
    valid: Mark,
    /// `valid` moved since the live file was given it.
    changed: bool,
    /// A write failed or could not be queued: the prefix stays where it was.
    failed: bool,
}

impl Written {
    fn new() -> Written {
        Written { queued: VecDeque::new(), valid: Mark::empty(0), changed: true, failed: false }
    }

    /// A write at `off` was queued (`done`: it completed already, a copy written
    /// synchronously); with it, the file holds `upto`.
    fn queued(&mut self, off: u64, upto: Mark, done: bool) {
        self.queued.push_back((off, upto, done));
        self.advance();
    }

    /// The write at `off` completed (`ok`: whole).
    fn completed(&mut self, off: u64, ok: bool) {
        self.failed |= !ok;
        if let Some(w) = self.queued.iter_mut().find(|w| w.0 == off && !w.2) {
            w.2 = true;
        }
        self.advance();
    }

    fn advance(&mut self) {
        while !self.failed && self.queued.front().is_some_and(|w| w.2) {
            self.valid = self.queued.pop_front().expect("checked").1;
            self.changed = true;
        }
    }
}

/// One stream's zero-copy writer. See the module documentation.
pub struct ZcWriter<I: FileIndexer> {
    cfg: WriterConfig,
    zc: ZcConfig,
    catalog: Arc<Catalog>,
    shared: Arc<WriterShared>,
    /// The volume new files go on.
    place: Placement,
    finish_tx: Option<std::sync::mpsc::SyncSender<Finish<I>>>,
    recycled: std::sync::mpsc::Receiver<I>,
    work_tx: std::sync::mpsc::Sender<crate::IndexWork>,
    threads: Option<(JoinHandle<()>, JoinHandle<()>)>,
    cur: Option<ZcFile<I>>,
    /// Files closed while their writes were in flight, oldest first: each is finished (renamed,
    /// indexed, catalogued) once its writes completed and the ones before it are finished.
    closing: VecDeque<ZcFile<I>>,
    /// Completions reaped, to handle.
    done: Vec<WriteDone>,
    seq: u64,
    direct: bool,
    /// A write from the ring mapping completed (the kernel takes O_DIRECT from it); until then
    /// each one is waited for, to fall back to copying if it is refused.
    probed: bool,
    stopped: bool,
    budget_stopped: bool,
    /// The file header page: SHB, IDB, a skip block to 4 KiB (shared with its writes in flight).
    header: Arc<AlignedBuf>,
    /// Set once the kernel refused a write from the ring: blocks are copied here first.
    bounce: Option<AlignedBuf>,
    /// Records of the block being written that were indexed while it was rewritten
    /// ([`ZcWriter::index_ahead`]): its first ones, all in the current file.
    ahead: usize,
    /// The stream's live file.
    live: super::Live,
    /// Flow records of the stream. Here the capture thread is the writer and makes the index
    /// keys, so the flow table runs beside them on it (the copy path keeps both off it).
    tap: Option<Box<dyn crate::StreamTap>>,
}

/// Indexes a block's records into the current file while the block is rewritten
/// ([`ZcWriter::index_ahead`]), as long as they belong to it.
pub struct IndexAhead<'a, I> {
    ix: &'a mut I,
    /// The file offset the block will be written at.
    off: u64,
    /// The file's time boundary; 0 once a record reached it (none after is indexed here).
    boundary: u64,
    /// Records indexed so far, handed to the writer (`out`) when this is dropped.
    n: usize,
    out: &'a mut usize,
}

impl<I: FileIndexer> IndexAhead<'_, I> {
    /// Indexes record `r` of block bytes `block`, unless a record at or past the file's time
    /// boundary came before (that one and the rest go to `write_block`'s walk).
    #[inline]
    pub fn add(&mut self, block: &[u8], r: &ZcRecord) {
        if r.ts_ns < self.boundary {
            index_record(self.ix, self.off, block, r);
            self.n += 1;
        } else {
            self.boundary = 0;
        }
    }
}

impl<I> Drop for IndexAhead<'_, I> {
    fn drop(&mut self) {
        *self.out = self.n;
    }
}

/// The first and last stamps of `recs` ((u64::MAX, 0) if none), in one pass.
fn time_span(recs: &[ZcRecord]) -> (u64, u64) {
    recs.iter().fold((u64::MAX, 0), |(lo, hi), r| (lo.min(r.ts_ns), hi.max(r.ts_ns)))
}

/// Indexes record `r` of a block that is written at file offset `off`.
#[inline]
fn index_record<I: FileIndexer>(ix: &mut I, off: u64, block: &[u8], r: &ZcRecord) {
    let d = r.data();
    ix.add(r.ts_ns, off + u64::from(r.epb), &block[d..d + r.caplen as usize], r.origlen);
}

/// The first page of every zero-copy file: SHB, IDB and a local-use block up to the page's
/// end, whose body starts with `path`'s mark ([`WritePath::mark`]; readers skip the block).
fn header_page(zc: &ZcConfig, path: WritePath) -> io::Result<AlignedBuf> {
    let mut header = AlignedBuf::new(DIRECT_ALIGN as usize, false)?;
    let h = header.as_mut_slice();
    let mut pre = [0u8; pcapng::PREAMBLE_LEN];
    pcapng::emit_preamble(&mut pre, zc.snaplen, zc.linktype);
    h[..pre.len()].copy_from_slice(&pre);
    let (from, to) = (pre.len(), DIRECT_ALIGN as usize);
    h[from..from + 4].copy_from_slice(&pcapng::BT_LOCAL_SKIP.to_le_bytes());
    h[from + 4..from + 8].copy_from_slice(&((to - from) as u32).to_le_bytes());
    let mark = path.mark();
    h[from + 8..from + 8 + mark.len()].copy_from_slice(mark);
    h[to - 4..to].copy_from_slice(&((to - from) as u32).to_le_bytes());
    Ok(header)
}

impl<I: FileIndexer> ZcWriter<I> {
    /// Creates the stream directory and the index and sort threads.
    pub fn new(cfg: WriterConfig, zc: ZcConfig, catalog: Arc<Catalog>, shared: Arc<WriterShared>) -> io::Result<Self> {
        let place = Placement::new(&cfg)?;
        let helpers = start_helpers::<I>(&cfg, &catalog, &shared)?;
        let header = Arc::new(header_page(&zc, WritePath::ZeroCopy)?);
        let live = super::Live::open(&cfg, &shared);
        let tap = cfg.tap.as_ref().map(|make| make(cfg.stream, shared.clone(), catalog.clone()));
        Ok(ZcWriter {
            tap,
            live,
            direct: cfg.direct,
            cfg,
            seq: zc.last_seq,
            zc,
            catalog,
            shared,
            place,
            finish_tx: Some(helpers.finish_tx),
            recycled: helpers.recycled,
            work_tx: helpers.work_tx,
            threads: Some((helpers.index, helpers.sort)),
            cur: None,
            closing: VecDeque::new(),
            done: Vec::new(),
            probed: false,
            stopped: false,
            budget_stopped: false,
            header,
            bounce: None,
            ahead: 0,
        })
    }

    /// Before a block is rewritten: an indexer for its records as the rewrite writes them, when
    /// they will go to the current file from the first on (a file is open and written, and even
    /// a whole ring block keeps it within `--file-size`; a time boundary inside the block stops
    /// it there). The caller then passes every record of the block to [`ZcWriter::write_block`]
    /// (no count limit or reduction leaves any out), which indexes only the rest; if the block
    /// is not written after all, [`ZcWriter::index_ahead_unwritten`].
    pub fn index_ahead(&mut self) -> Option<IndexAhead<'_, I>> {
        self.ahead = 0;
        let (stopped, file_size, block) = (self.stopped, self.cfg.file_size, self.zc.block_size as u64);
        let c = self.cur.as_mut().filter(|c| c.real && !stopped && c.len + block <= file_size)?;
        let ix = c.indexer.as_mut()?;
        Some(IndexAhead { ix, off: c.len, boundary: c.boundary, n: 0, out: &mut self.ahead })
    }

    /// The block whose records [`ZcWriter::index_ahead`] indexed is not written (cannot happen:
    /// the rewrite takes back records it handed over only if the block's last gap cannot be
    /// covered, and a record always precedes it): the file's index would list records it does
    /// not hold, so the file is kept without one.
    pub fn index_ahead_unwritten(&mut self) {
        if std::mem::take(&mut self.ahead) > 0 {
            if let Some(c) = self.cur.as_mut() {
                c.indexer = None;
            }
        }
    }

    /// Writes the first `len` bytes of held block `id`, rewritten by `rewrite_pcapng` into
    /// `recs` (every record in it that is not turned into a skip block; all of them are stored
    /// or counted as dropped by the writer). The write is queued; the caller seals the block
    /// afterwards and `bw` hands it back once the write completed.
    pub fn write_block(&mut self, bw: &mut BlockWriter, id: BlockId, recs: &[ZcRecord], len: usize) {
        // Records indexed while the block was rewritten: the first ones, in the current file.
        let mut ahead = std::mem::take(&mut self.ahead);
        // The records' time range, in one pass (a boundary inside the block is looked for only
        // when the last stamp reaches it).
        let span = time_span(recs);
        let mut i = 0;
        while i < recs.len() {
            let ts = recs[i].ts_ns;
            if let Some(f) = &self.cur {
                if ts >= f.boundary || (f.packets > 0 && f.len + len as u64 > self.cfg.file_size) {
                    self.close_file(bw);
                }
            }
            if self.cur.is_none() {
                self.open_file(bw, ts);
            }
            let boundary = self.cur.as_ref().map_or(u64::MAX, |f| f.boundary);
            let j = if span.1 < boundary {
                recs.len()
            } else {
                recs[i..].iter().position(|r| r.ts_ns >= boundary).map_or(recs.len(), |k| i + k)
            };
            if i > 0 || j < recs.len() {
                // A time boundary inside the block: the records of the other file become skip
                // blocks (waiting first for the block's write to the previous file).
                let Some(mut block) = bw.block(id) else { return };
                for (k, r) in recs.iter().enumerate() {
                    block.set_skipped(r, k < i || k >= j);
                }
            }
            let whole = (i == 0 && j == recs.len()).then_some(span);
            self.write_records(bw, id, &recs[i..j], len, std::mem::take(&mut ahead).min(j - i), whole);
            i = j;
        }
    }

    /// Writes the block for `recs`, indexing those after the first `indexed`; `span`: their
    /// first and last stamps, when known.
    fn write_records(
        &mut self,
        bw: &mut BlockWriter,
        id: BlockId,
        recs: &[ZcRecord],
        len: usize,
        indexed: usize,
        span: Option<(u64, u64)>,
    ) {
        let stopped = self.stopped;
        let Some(c) = self.cur.as_mut() else { return };
        if !c.real || stopped {
            c.packets += recs.len() as u64;
            return;
        }
        let off = c.len;
        c.prealloc.ensure(&c.file, off + len as u64, self.cfg.file_size, self.cfg.prealloc_step);
        // Index the records while the block is ours (no write of it in flight).
        let Some(block) = bw.block(id) else { return };
        let data = &block.bytes()[..len];
        if let Some(ix) = c.indexer.as_mut() {
            for r in &recs[indexed..] {
                index_record(ix, off, data, r);
            }
        }
        if let Some(t) = self.tap.as_mut() {
            for r in recs {
                let d = r.data();
                t.add(r.ts_ns, &data[d..d + r.caplen as usize], r.origlen);
            }
        }
        let (lo, hi) = span.unwrap_or_else(|| time_span(recs));
        c.min_ns = c.min_ns.min(lo);
        c.max_ns = c.max_ns.max(hi);
        c.packets += recs.len() as u64;
        c.stored += recs.len() as u64;
        c.len += len as u64;
        let upto = Mark { pos: c.len, packets: c.stored, min_ns: c.min_ns, max_ns: c.max_ns };
        let r = if let Some(b) = self.bounce.as_mut() {
            // The fallback: a copy, written synchronously.
            c.zero_copy = false;
            b.as_mut_slice()[..len].copy_from_slice(data);
            let r = c.file.write_all_at(&b.as_slice()[..len], off);
            drop(block);
            if r.is_ok() {
                self.shared.disk_bytes.fetch_add(len as u64, Ordering::Relaxed);
                c.written.queued(off, upto, true);
            }
            r
        } else {
            drop(block);
            let r = bw.write(id, len, &c.file, off, c.seq);
            if r.is_ok() {
                c.in_flight += 1;
                c.written.queued(off, upto, false);
                self.shared.writes_in_flight_max.fetch_max(bw.in_flight() as u64, Ordering::Relaxed);
            }
            r
        };
        let seq = c.seq;
        match r {
            Err(e) => self.write_failed(seq, off, &e),
            Ok(()) if self.bounce.is_none() && !self.probed => self.probe(bw, id, len, off),
            Ok(()) => {}
        }
    }

    /// Waits for the first write from the ring: if the kernel refused O_DIRECT from the
    /// mapping, says so once and writes the block (and every later one) from a copy.
    fn probe(&mut self, bw: &mut BlockWriter, id: BlockId, len: usize, off: u64) {
        let _ = bw.drain();
        let _ = bw.reap(false, &mut self.done);
        let seq = self.cur.as_ref().map_or(0, |c| c.seq);
        let Some(k) = self.done.iter().position(|d| d.tag == seq && d.offset == off) else { return };
        let d = self.done[k];
        let refused = self.direct && matches!(-d.result, libc::EFAULT | libc::EINVAL);
        if !refused {
            self.probed = d.complete();
            return self.handle_done();
        }
        self.done.swap_remove(k);
        let why = io::Error::from_raw_os_error(-d.result);
        let Some(c) = self.cur.as_mut() else { return };
        c.in_flight -= 1;
        let r = match (AlignedBuf::new(self.zc.block_size, false), bw.block(id)) {
            (Ok(mut b), Some(block)) => {
                self.shared.warn(format!(
                    "the kernel refused O_DIRECT writes straight from the capture ring ({why}); each block is copied to an aligned buffer first (the catalog says path \"copy\")"
                ));
                b.as_mut_slice()[..len].copy_from_slice(&block.bytes()[..len]);
                let r = c.file.write_all_at(&b.as_slice()[..len], off);
                self.bounce = Some(b);
                c.zero_copy = false;
                // This file's first page (written: every write was drained above) and every
                // later file's say so too, for `repair` (the header is the same otherwise).
                r.and_then(|()| {
                    let h = header_page(&self.zc, WritePath::Copy)?;
                    c.file.write_all_at(h.as_slice(), 0)?;
                    self.header = Arc::new(h);
                    Ok(())
                })
            }
            (Err(e), _) => Err(e),
            (_, None) => Err(why),
        };
        match r {
            Ok(()) => {
                self.shared.disk_bytes.fetch_add(len as u64, Ordering::Relaxed);
                c.written.completed(off, true);
            }
            Err(e) => {
                let seq = c.seq;
                self.write_failed(seq, off, &e);
            }
        }
        self.handle_done();
    }

    /// Reaps the writes that completed (waiting for one when `wait`), then finishes the closed
    /// files whose writes are all done. Call it between blocks.
    pub fn reap(&mut self, bw: &mut BlockWriter, wait: bool) {
        if let Err(e) = bw.reap(wait, &mut self.done) {
            self.shared.fail(format!("waiting for the writes of stream {} failed: {e}", self.cfg.stream), false);
            self.stopped = true;
        }
        self.handle_done();
    }

    fn handle_done(&mut self) {
        for k in 0..self.done.len() {
            let d = self.done[k];
            if let Some(c) = self.file_of(d.tag) {
                c.in_flight = c.in_flight.saturating_sub(1);
                c.written.completed(d.offset, d.complete());
            }
            if d.complete() {
                self.shared.disk_bytes.fetch_add(u64::from(d.len), Ordering::Relaxed);
            } else {
                let e = if d.result < 0 {
                    io::Error::from_raw_os_error(-d.result)
                } else {
                    io::Error::new(io::ErrorKind::WriteZero, format!("short write: {} of {} bytes", d.result, d.len))
                };
                self.write_failed(d.tag, d.offset + d.result.max(0) as u64, &e);
            }
        }
        self.done.clear();
        while self.closing.front().is_some_and(|c| c.in_flight == 0) {
            let c = self.closing.pop_front().expect("checked");
            self.finish_file(c);
        }
    }

    /// The open or carried file number `seq` (the tag of its writes).
    fn file_of(&mut self, seq: u64) -> Option<&mut ZcFile<I>> {
        match self.cur.as_mut().filter(|c| c.seq == seq) {
            Some(c) => Some(c),
            None => self.closing.iter_mut().find(|c| c.seq == seq),
        }
    }

    /// A write to file `seq` failed: it keeps what precedes `at`. With other volumes in
    /// rotation, its volume is taken out and the stream goes on from a new file on another;
    /// otherwise the stream stops.
    fn write_failed(&mut self, seq: u64, at: u64, e: &io::Error) {
        let (part, vol) = match self.file_of(seq) {
            Some(c) => {
                c.failed_at = Some(c.failed_at.map_or(at, |x| x.min(at)));
                c.written.failed = true;
                (c.part.display().to_string(), Some(c.vol))
            }
            None => (format!("a file of stream {}", self.cfg.stream), None),
        };
        let full = matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT));
        let what = if full { "the disk is full" } else { "a write failed" };
        let msg = format!("{what} while writing {part}: {e}");
        if vol.is_some_and(|v| self.place.out(&self.cfg, v, &msg)) {
            // The open file, if it is on that volume, ends here: the next block opens one on
            // another volume.
            if self.cur.as_ref().is_some_and(|c| Some(c.vol) == vol) {
                let c = self.cur.take().expect("checked");
                self.closing.push_back(c);
            }
            return;
        }
        self.shared.fail(msg, full);
        self.stopped = true;
    }

    fn open_file(&mut self, bw: &mut BlockWriter, first_ns: u64) {
        self.seq += 1;
        let name = layout::file_name(first_ns, self.seq, Format::Pcapng.extension());
        let part_rel = format!("{}/{name}{}", self.place.rel_dir, layout::PART);
        if !self.stopped {
            // Closed files whose writes are still in flight (up to one per block in flight)
            // are in neither the catalog nor the reserve's one waiting file: count them.
            let closing: u64 = self.closing.iter().map(|c| c.len).sum();
            if let Err(budget) = super::make_room(&self.cfg, &self.catalog, &self.shared, closing) {
                self.budget_stopped = budget;
                self.stopped = true;
            }
        }
        let mut file = None;
        while !self.stopped {
            self.place.resume();
            if !self.place.choose(&self.cfg, &self.shared, &self.catalog) {
                if self.place.resume() {
                    // That volume failed and is out: the next one.
                    continue;
                }
                self.stopped = true;
                break;
            }
            let shown = self.place.store.display(&part_rel);
            let failed = match self.place.store.create_output(&part_rel, self.direct) {
                Ok((f, direct)) => {
                    if self.direct && !direct {
                        self.direct = false;
                        self.shared.direct_refused.store(true, Ordering::Relaxed);
                    }
                    // Queued like the blocks: a synchronous write here would wait behind them.
                    let f = Arc::new(f);
                    match bw.write_buf(&self.header, DIRECT_ALIGN as usize, &f, 0, self.seq) {
                        Ok(()) => {
                            file = Some(f);
                            break;
                        }
                        Err(e) => {
                            let _ = self.place.store.unlink(&part_rel);
                            (format!("cannot write {}: {e}", shown.display()), e)
                        }
                    }
                }
                Err(e) => (format!("cannot create {}: {e}", shown.display()), e),
            };
            let (msg, e) = failed;
            let vol = self.place.vol;
            if !self.place.out(&self.cfg, vol, &msg) {
                self.shared.fail(msg, e.raw_os_error() == Some(libc::ENOSPC));
                self.stopped = true;
            }
        }
        let part = self.place.dir.join(format!("{name}{}", layout::PART));
        let real = file.is_some();
        let indexer =
            (self.cfg.index && real).then(|| super::new_indexer(&self.recycled, &self.work_tx, self.zc.linktype));
        let Some(file) = file.or_else(|| File::open("/dev/null").ok().map(Arc::new)) else {
            return;
        };
        let boundary = match self.zc.file_time_ns {
            Some(t) if t > 0 => (first_ns / t).saturating_add(1).saturating_mul(t),
            _ => u64::MAX,
        };
        let mut written = Written::new();
        if real {
            // The header page, queued above.
            written.queued(0, Mark::empty(DIRECT_ALIGN), false);
            if let Some(t) = self.tap.as_mut() {
                t.open(
                    &crate::volume::on_volume(self.place.vol, &format!("{}/{name}", self.place.rel_dir)),
                    self.zc.linktype,
                );
            }
        }
        let live_base = Entry {
            stream: self.cfg.stream,
            file: crate::volume::on_volume(self.place.vol, &part_rel),
            index: None,
            format: Some(Format::Pcapng),
            linktype: self.zc.linktype,
            snaplen: self.zc.snaplen,
            first_ns,
            last_ns: first_ns,
            packets: 0,
            bytes: 0,
            timestamps: self.cfg.timestamps,
            path: Some(if self.bounce.is_none() { WritePath::ZeroCopy } else { WritePath::Copy }),
        };
        self.cur = Some(ZcFile {
            live_base,
            written,
            file,
            store: self.place.store.clone(),
            vol: self.place.vol,
            seq: self.seq,
            part,
            part_rel,
            name,
            len: DIRECT_ALIGN,
            first_ns,
            min_ns: u64::MAX,
            max_ns: 0,
            packets: 0,
            stored: 0,
            boundary,
            prealloc: wv_sys::fs::Prealloc::new(self.direct),
            indexer,
            real,
            on_disk: real,
            zero_copy: self.bounce.is_none(),
            in_flight: u32::from(real),
            failed_at: None,
        });
        // At once: a reader then knows the new file is being written (and
        // finds the one just closed whole) instead of leaving it out.
        self.live_tick(true);
    }

    /// Called between blocks with the wall clock: closes the file at its time boundary, and
    /// gives readers what is on disk now (at most every [`PUBLISH_EVERY`](crate::live::PUBLISH_EVERY)).
    pub fn tick(&mut self, bw: &mut BlockWriter, now_ns: u64) {
        if self.cur.as_ref().is_some_and(|f| now_ns >= f.boundary.saturating_add(self.zc.clock_close_grace_ns)) {
            self.close_file(bw);
        }
        self.live_tick(false);
    }

    /// Gives the live file the valid prefix of every file being written whose prefix moved,
    /// and writes it if anything changed, at most every [`PUBLISH_EVERY`](crate::live::PUBLISH_EVERY) unless `now`.
    fn live_tick(&mut self, now: bool) {
        let moved = self.cur.iter().chain(&self.closing).any(|c| c.real && c.written.changed);
        let Some(live) = self.live.due(moved, now) else { return };
        for c in self.cur.iter_mut().chain(self.closing.iter_mut()).filter(|c| c.real && c.written.changed) {
            c.written.changed = false;
            let v = c.written.valid;
            live.set(v.entry(&c.live_base, v.pos));
        }
        self.live.publish(&self.shared);
    }

    /// Closes the open file: it is finished (length, fsync, rename, index and catalog line)
    /// once its writes in flight completed; until then it is carried.
    pub fn close_file(&mut self, bw: &mut BlockWriter) {
        let Some(c) = self.cur.take() else { return };
        // The tap's files open and close one at a time, as the stream's do; this one is not
        // finished yet but will be catalogued unless every write of it fails (its flow records
        // then name a file the catalog lacks, as after a crash).
        if let Some(t) = self.tap.as_mut().filter(|_| c.real) {
            t.close(c.stored > 0);
        }
        self.closing.push_back(c);
        self.reap(bw, false);
    }

    /// Closes the open file and waits until every write completed and every file is finished.
    pub fn drain(&mut self, bw: &mut BlockWriter) {
        self.close_file(bw);
        if let Err(e) = bw.drain() {
            self.shared.fail(format!("waiting for the writes of stream {} failed: {e}", self.cfg.stream), false);
            self.stopped = true;
        }
        self.reap(bw, false);
        // Only if the wait itself failed: what reached the disk is walked again.
        while let Some(mut c) = self.closing.pop_front() {
            c.failed_at.get_or_insert(u64::MAX);
            c.in_flight = 0;
            self.finish_file(c);
        }
    }

    /// Finishes a closed file whose writes completed: with a failed write, the file is cut
    /// there and its complete records counted again (no index); then length, fsync, rename,
    /// index and catalog line. Packets not written are counted as dropped.
    fn finish_file(&mut self, c: ZcFile<I>) {
        let budget = if self.budget_stopped { &self.shared.dropped_budget } else { &self.shared.dropped_write_error };
        if !c.on_disk {
            budget.fetch_add(c.packets, Ordering::Relaxed);
            return;
        }
        let (mut len, mut stored, mut first_ns, mut last_ns, mut indexer) =
            (c.len, c.stored, c.min_ns, c.max_ns, c.indexer);
        if c.min_ns == u64::MAX {
            (first_ns, last_ns) = (c.first_ns, c.first_ns);
        }
        if let Some(at) = c.failed_at {
            indexer = None;
            let cut = len.min(at);
            let walked = c
                .file
                .set_len(cut)
                .and_then(|()| c.store.open_file(&c.part_rel, wv_sys::fs::Open::Read, 0))
                .and_then(|f| crate::recover::valid_prefix_of(f, Format::Pcapng, true));
            (len, stored, first_ns, last_ns) = match walked {
                Ok(v) => (v.len, v.packets, v.first_ns.unwrap_or(c.first_ns), v.last_ns.unwrap_or(c.first_ns)),
                Err(_) => (0, 0, c.first_ns, c.first_ns),
            };
            stored = stored.min(c.packets);
            self.shared.dropped_write_error.fetch_add(c.packets - stored, Ordering::Relaxed);
        } else {
            budget.fetch_add(c.packets - c.stored, Ordering::Relaxed);
        }
        let file = c.file;
        if stored == 0 {
            drop(file);
            let _ = c.store.unlink(&c.part_rel);
            self.live.gone(&c.live_base.file);
            return;
        }
        let final_rel = format!("{}/{}", self.place.rel_dir, c.name);
        // The fsync and rename go to the index thread (before the index and catalog line),
        // as for a spilled file of the copy path: on a slow disk the fsync waits behind other
        // writes, and this is the capture thread.
        let r = file.set_len(len);
        let persist = super::threads::Persist {
            file,
            part_rel: c.part_rel.clone(),
            final_rel: final_rel.clone(),
            packets: stored,
        };
        if let Err(e) = r {
            let full = e.raw_os_error() == Some(libc::ENOSPC);
            let msg = format!("cannot close {}: {e}", c.part.display());
            if !self.place.out(&self.cfg, c.vol, &msg) {
                self.shared.fail(msg, full);
                self.stopped = true;
            }
            self.shared.dropped_write_error.fetch_add(stored, Ordering::Relaxed);
            self.live.gone(&c.live_base.file);
            return;
        }
        let index_rel = layout::index_rel(&final_rel);
        let entry = Entry {
            stream: self.cfg.stream,
            file: crate::volume::on_volume(c.vol, &final_rel),
            index: None,
            format: Some(Format::Pcapng),
            linktype: self.zc.linktype,
            snaplen: self.zc.snaplen,
            first_ns,
            last_ns,
            packets: stored,
            bytes: len,
            timestamps: self.cfg.timestamps,
            path: Some(if c.zero_copy { WritePath::ZeroCopy } else { WritePath::Copy }),
        };
        // Whole now: readers get all of it at once, not after its fsync on the index thread;
        // until its catalog line is written, they find it through the live file.
        self.live.set(Entry { file: c.live_base.file, ..entry.clone() });
        self.live.publish_now(&self.shared);
        // Counted first: the index thread takes them back if the file cannot be persisted.
        self.shared.written_packets.fetch_add(stored, Ordering::Relaxed);
        self.shared.file_bytes.fetch_add(len, Ordering::Relaxed);
        self.shared.files_closed.fetch_add(1, Ordering::Relaxed);
        let live = self.live.files.clone();
        let job =
            Finish { indexer, index_rel, entry, dir: c.store.clone(), persist: Some(persist), budget: None, live };
        super::catalog_file(job, self.finish_tx.as_ref(), &self.catalog, &self.shared);
    }

    /// Waits for the index and catalog threads (after [`ZcWriter::drain`]).
    pub fn finish(mut self) -> io::Result<()> {
        while let Some(mut c) = self.closing.pop_front() {
            c.failed_at.get_or_insert(u64::MAX);
            self.finish_file(c);
        }
        if let Some(mut c) = self.cur.take() {
            if let Some(t) = self.tap.as_mut().filter(|_| c.real) {
                t.close(c.stored > 0);
            }
            if c.in_flight > 0 {
                c.failed_at.get_or_insert(u64::MAX);
            }
            self.finish_file(c);
        }
        if let Some(t) = self.tap.as_mut() {
            t.stop();
        }
        drop(self.finish_tx.take());
        let threads = self.threads.take();
        drop(self);
        match threads {
            Some((index, sort)) => join_helpers(index, sort),
            None => Ok(()),
        }
    }
}
