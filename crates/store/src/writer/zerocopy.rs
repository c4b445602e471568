//! The zero-copy writer (`record --zero-copy`): the kernel's TPACKET_V3 ring
//! blocks, rewritten in place into pcapng ([`Block::rewrite_pcapng`]), go
//! to disk as they are, straight from the ring's memory.
//!
//! It runs on the capture thread: a block is written with one O_DIRECT
//! `pwrite` from the ring mapping and handed back to the kernel (dropped by
//! the caller) only after the write returned. A file is a 4 KiB header (SHB,
//! IDB, a local-use block up to the page end) followed by ring blocks, each
//! cut at the 4 KiB boundary after its last packet; rotation happens between
//! blocks (size) or inside one (time: the block is written to both files,
//! each time with the other file's records turned into skip blocks). The
//! index, the catalog (with `path: "zero-copy"`), retention and the counters
//! are those of the copy path's writer, whose index and catalog threads it
//! shares.
//!
//! If the kernel refuses O_DIRECT from the ring mapping (EFAULT, EINVAL), the
//! writer says so once and copies each block into an aligned buffer first
//! (the catalog then says `path: "copy"`).

use super::threads::{join_helpers, start_helpers, Finish};
use super::{WriterConfig, WriterShared};
use crate::catalog::{Catalog, Entry, WritePath};
use crate::{layout, FileIndexer, Format};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use wv_sys::afpacket::{Block, ZcRecord};
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
    file: File,
    part: PathBuf,
    part_rel: String,
    name: String,
    /// Bytes written (always a multiple of 4 KiB).
    len: u64,
    first_ns: u64,
    min_ns: u64,
    max_ns: u64,
    /// Records handed to this file, and of them the ones written.
    packets: u64,
    stored: u64,
    boundary: u64,
    allocated: u64,
    indexer: Option<I>,
    /// Records are written (false once the stream stopped: they are only counted).
    real: bool,
    /// A file was created (it keeps the records written before a failure).
    on_disk: bool,
    /// Every block went straight from the ring.
    zero_copy: bool,
}

/// One stream's zero-copy writer. See the module documentation.
pub struct ZcWriter<I: FileIndexer> {
    cfg: WriterConfig,
    zc: ZcConfig,
    catalog: Arc<Catalog>,
    shared: Arc<WriterShared>,
    store: Arc<wv_sys::fs::Dir>,
    dir: PathBuf,
    rel_dir: String,
    finish_tx: Option<std::sync::mpsc::SyncSender<Finish<I>>>,
    recycled: std::sync::mpsc::Receiver<I>,
    work_tx: std::sync::mpsc::Sender<crate::IndexWork>,
    threads: Option<(JoinHandle<()>, JoinHandle<()>)>,
    cur: Option<ZcFile<I>>,
    seq: u64,
    direct: bool,
    stopped: bool,
    budget_stopped: bool,
    /// The file header page: SHB, IDB, a skip block to 4 KiB.
    header: AlignedBuf,
    /// Set once the kernel refused a write from the ring: blocks are copied here first.
    bounce: Option<AlignedBuf>,
}

impl<I: FileIndexer> ZcWriter<I> {
    /// Creates the stream directory and the index and sort threads.
    pub fn new(cfg: WriterConfig, zc: ZcConfig, catalog: Arc<Catalog>, shared: Arc<WriterShared>) -> io::Result<Self> {
        let rel_dir = layout::stream_dir(cfg.stream);
        let dir = cfg.store.join(&rel_dir);
        let store = Arc::new(wv_sys::fs::Dir::open(&cfg.store)?);
        store.mkdir(&rel_dir).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        let helpers = start_helpers::<I>(&cfg, &catalog, &shared)?;
        let mut header = AlignedBuf::new(DIRECT_ALIGN as usize, false)?;
        let h = header.as_mut_slice();
        let mut pre = [0u8; pcapng::PREAMBLE_LEN];
        pcapng::emit_preamble(&mut pre, zc.snaplen, zc.linktype);
        h[..pre.len()].copy_from_slice(&pre);
        let (from, to) = (pre.len(), DIRECT_ALIGN as usize);
        h[from..from + 4].copy_from_slice(&pcapng::BT_LOCAL_SKIP.to_le_bytes());
        h[from + 4..from + 8].copy_from_slice(&((to - from) as u32).to_le_bytes());
        h[to - 4..to].copy_from_slice(&((to - from) as u32).to_le_bytes());
        Ok(ZcWriter {
            direct: cfg.direct,
            cfg,
            seq: zc.last_seq,
            zc,
            catalog,
            shared,
            store,
            dir,
            rel_dir,
            finish_tx: Some(helpers.finish_tx),
            recycled: helpers.recycled,
            work_tx: helpers.work_tx,
            threads: Some((helpers.index, helpers.sort)),
            cur: None,
            stopped: false,
            budget_stopped: false,
            header,
            bounce: None,
        })
    }

    /// Writes the first `len` bytes of `block`, rewritten by `rewrite_pcapng` into `recs`
    /// (every record in it that is not turned into a skip block; all of them are stored or
    /// counted as dropped by the writer). Returns when the data is on its way to the disk
    /// (O_DIRECT: written), so the caller may hand the block back to the kernel.
    pub fn write_block(&mut self, block: &mut Block<'_>, recs: &[ZcRecord], len: usize) {
        let mut i = 0;
        while i < recs.len() {
            let ts = recs[i].ts_ns;
            if let Some(f) = &self.cur {
                if ts >= f.boundary || (f.packets > 0 && f.len + len as u64 > self.cfg.file_size) {
                    self.close_file();
                }
            }
            if self.cur.is_none() {
                self.open_file(ts);
            }
            let boundary = self.cur.as_ref().map_or(u64::MAX, |f| f.boundary);
            let j = recs[i..].iter().position(|r| r.ts_ns >= boundary).map_or(recs.len(), |k| i + k);
            let split = i > 0 || j < recs.len();
            if split {
                for (k, r) in recs.iter().enumerate() {
                    block.set_skipped(r, k < i || k >= j);
                }
            }
            self.write_records(block, &recs[i..j], len);
            i = j;
        }
    }

    fn write_records(&mut self, block: &mut Block<'_>, recs: &[ZcRecord], len: usize) {
        let Some(c) = self.cur.as_mut() else { return };
        if !c.real || self.stopped {
            c.packets += recs.len() as u64;
            return;
        }
        let off = c.len;
        if self.cfg.prealloc_step > 0 && off + len as u64 > c.allocated {
            let step = self.cfg.prealloc_step;
            let cap = self.cfg.file_size.next_multiple_of(DIRECT_ALIGN).max((off + len as u64).next_multiple_of(step));
            let to = (off + len as u64).next_multiple_of(step).min(cap);
            let _ = wv_sys::fs::fallocate_extend(&c.file, c.allocated, to - c.allocated);
            c.allocated = to;
        }
        let data = &block.bytes()[..len];
        let mut r = match self.bounce.as_mut() {
            None => c.file.write_all_at(data, off),
            Some(b) => {
                b.as_mut_slice()[..len].copy_from_slice(data);
                c.file.write_all_at(&b.as_mut_slice()[..len], off)
            }
        };
        if self.bounce.is_none()
            && self.direct
            && r.as_ref().is_err_and(|e| matches!(e.raw_os_error(), Some(libc::EFAULT) | Some(libc::EINVAL)))
        {
            let e = r.as_ref().err().map(|e| e.to_string()).unwrap_or_default();
            match AlignedBuf::new(self.zc.block_size, false) {
                Ok(mut b) => {
                    self.shared.warn(format!(
                        "the kernel refused O_DIRECT writes straight from the capture ring ({e}); each block is copied to an aligned buffer first (the catalog says path \"copy\")"
                    ));
                    b.as_mut_slice()[..len].copy_from_slice(data);
                    r = c.file.write_all_at(&b.as_mut_slice()[..len], off);
                    self.bounce = Some(b);
                }
                Err(e2) => r = Err(e2),
            }
        }
        if self.bounce.is_some() {
            c.zero_copy = false;
        }
        if let Err(e) = r {
            // Cut at the last whole block: what is before it is complete records.
            let _ = c.file.set_len(off);
            c.packets += recs.len() as u64;
            let full = matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT));
            let what = if full { "the disk is full" } else { "a write failed" };
            self.shared.fail(format!("{what} while writing {}: {e}", c.part.display()), full);
            self.stopped = true;
            // Later records of this file are counted as dropped at its close.
            c.real = false;
            return;
        }
        self.shared.disk_bytes.fetch_add(len as u64, Ordering::Relaxed);
        c.len += len as u64;
        for r in recs {
            if let Some(ix) = c.indexer.as_mut() {
                let d = r.data();
                ix.add(r.ts_ns, off + u64::from(r.epb), &data[d..d + r.caplen as usize], r.origlen);
            }
            c.min_ns = c.min_ns.min(r.ts_ns);
            c.max_ns = c.max_ns.max(r.ts_ns);
        }
        c.packets += recs.len() as u64;
        c.stored += recs.len() as u64;
    }

    fn open_file(&mut self, first_ns: u64) {
        self.seq += 1;
        let name = layout::file_name(first_ns, self.seq, Format::Pcapng.extension());
        let part = self.dir.join(format!("{name}{}", layout::PART));
        let part_rel = format!("{}/{name}{}", self.rel_dir, layout::PART);
        if !self.stopped {
            if let Err(budget) = super::make_room(&self.cfg, &self.catalog, &self.shared) {
                self.budget_stopped = budget;
                self.stopped = true;
            }
        }
        let mut file = None;
        if !self.stopped {
            match self.store.create_output(&part_rel, self.direct) {
                Ok((f, direct)) => {
                    if self.direct && !direct {
                        self.direct = false;
                        self.shared.direct_refused.store(true, Ordering::Relaxed);
                    }
                    match f.write_all_at(&self.header.as_slice()[..DIRECT_ALIGN as usize], 0) {
                        Ok(()) => file = Some(f),
                        Err(e) => {
                            let full = e.raw_os_error() == Some(libc::ENOSPC);
                            self.shared.fail(format!("cannot write {}: {e}", part.display()), full);
                            self.stopped = true;
                            let _ = self.store.unlink(&part_rel);
                        }
                    }
                }
                Err(e) => {
                    let full = e.raw_os_error() == Some(libc::ENOSPC);
                    self.shared.fail(format!("cannot create {}: {e}", part.display()), full);
                    self.stopped = true;
                }
            }
        }
        let real = file.is_some();
        let indexer =
            (self.cfg.index && real).then(|| super::new_indexer(&self.recycled, &self.work_tx, self.zc.linktype));
        let Some(file) = file.or_else(|| File::open("/dev/null").ok()) else {
            return;
        };
        let boundary = match self.zc.file_time_ns {
            Some(t) if t > 0 => (first_ns / t).saturating_add(1).saturating_mul(t),
            _ => u64::MAX,
        };
        self.cur = Some(ZcFile {
            file,
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
            allocated: 0,
            indexer,
            real,
            on_disk: real,
            zero_copy: self.bounce.is_none(),
        });
    }

    /// Called between blocks with the wall clock: closes the file at its time boundary.
    pub fn tick(&mut self, now_ns: u64) {
        if self.cur.as_ref().is_some_and(|f| now_ns >= f.boundary.saturating_add(self.zc.clock_close_grace_ns)) {
            self.close_file();
        }
    }

    /// Closes the open file: length, fsync, rename, index and catalog line.
    pub fn close_file(&mut self) {
        let Some(c) = self.cur.take() else { return };
        let to = if self.budget_stopped { &self.shared.dropped_budget } else { &self.shared.dropped_write_error };
        to.fetch_add(c.packets - c.stored, Ordering::Relaxed);
        if c.on_disk {
            let stored = c.stored;
            self.finish_file(c, stored);
        }
    }

    fn finish_file(&mut self, c: ZcFile<I>, packets: u64) {
        if packets == 0 {
            drop(c.file);
            let _ = self.store.unlink(&c.part_rel);
            return;
        }
        let final_rel = format!("{}/{}", self.rel_dir, c.name);
        let r = c.file.set_len(c.len).and_then(|()| self.store.persist(&c.file, &c.part_rel, &final_rel));
        drop(c.file);
        if let Err(e) = r {
            let full = e.raw_os_error() == Some(libc::ENOSPC);
            self.shared.fail(format!("cannot close {}: {e}", c.part.display()), full);
            self.stopped = true;
            self.shared.dropped_write_error.fetch_add(packets, Ordering::Relaxed);
            return;
        }
        let index_rel = layout::index_rel(&final_rel);
        let entry = Entry {
            stream: self.cfg.stream,
            file: final_rel,
            index: None,
            format: Some(Format::Pcapng),
            linktype: self.zc.linktype,
            snaplen: self.zc.snaplen,
            first_ns: if c.min_ns == u64::MAX { c.first_ns } else { c.min_ns },
            last_ns: if c.min_ns == u64::MAX { c.first_ns } else { c.max_ns },
            packets,
            bytes: c.len,
            timestamps: self.cfg.timestamps,
            path: Some(if c.zero_copy { WritePath::ZeroCopy } else { WritePath::Copy }),
        };
        let job = Finish { indexer: c.indexer, index_rel, entry, dir: self.store.clone(), persist: None };
        super::catalog_file(job, self.finish_tx.as_ref(), &self.catalog, &self.shared);
        self.shared.written_packets.fetch_add(packets, Ordering::Relaxed);
        self.shared.file_bytes.fetch_add(c.len, Ordering::Relaxed);
        self.shared.files_closed.fetch_add(1, Ordering::Relaxed);
    }

    /// Closes the open file and waits for its index and catalog line.
    pub fn finish(mut self) -> io::Result<()> {
        self.close_file();
        drop(self.finish_tx.take());
        let threads = self.threads.take();
        drop(self);
        match threads {
            Some((index, sort)) => join_helpers(index, sort),
            None => Ok(()),
        }
    }
}
