//! File output for the writer: O_DIRECT files and an io_uring with several
//! writes in flight.
//!
//! O_DIRECT bypasses the page cache (no double copy, no write-back storms),
//! but needs buffer address, file offset and length aligned to the logical
//! block size; the arena guarantees 4 KiB alignment. Where the file system
//! refuses O_DIRECT (tmpfs, some FUSE/ZFS setups) [`crate::fs::create_output`] falls back to
//! buffered I/O and says so through its return value.

use io_uring::{opcode, types, IoUring};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};

use crate::byte_ring::Consumer;

/// Alignment wirevault uses for O_DIRECT (covers 512 and 4096-byte sectors).
pub const DIRECT_ALIGN: u64 = 4096;

/// A completed write.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub user_data: u64,
    /// Bytes written, or a negative errno.
    pub result: i32,
}

/// One O_DIRECT-aligned page the writer owns, for the last, partial page of
/// a file: its bytes after the data are zeros, never older arena bytes.
#[repr(C, align(4096))]
struct TailPage([u8; DIRECT_ALIGN as usize]);

/// An io_uring used only for file writes.
pub struct Writer {
    ring: IoUring,
    in_flight: usize,
    tail: Box<TailPage>,
    /// `user_data` of the write from `tail` still in flight.
    tail_busy: Option<u64>,
    /// Writes are queued without a submit until [`Writer::flush`] or a wait ([`Writer::defer`]).
    deferred: bool,
    /// The arena's blocks as fixed buffers ([`Writer::register_arena`]): fixed buffer `i` is
    /// arena block `i`, registered the first time a write needs it.
    fixed: Option<FixedBlocks>,
}

/// The fixed-buffer table of an arena: one entry per block, filled as blocks come into use.
struct FixedBlocks {
    /// The arena's mapping (its base address and block size), for the entries' iovecs.
    base: usize,
    block: u64,
    /// Entry `i` holds block `i`.
    registered: Vec<bool>,
    /// The kernel refused an entry (a locked-memory limit): the blocks not registered yet are
    /// written without (each write pins its pages).
    refused: bool,
}

/// The most fixed buffers one io_uring may have (the kernel's `IORING_MAX_REG_BUFFERS`).
const MAX_FIXED: u64 = 1 << 14;

impl AsRawFd for Writer {
    /// The io_uring's descriptor: readable (`poll`) when completions are waiting.
    fn as_raw_fd(&self) -> RawFd {
        self.ring.as_raw_fd()
    }
}

impl Writer {
    pub fn new(depth: u32) -> io::Result<Writer> {
        Ok(Writer {
            ring: IoUring::new(depth)?,
            in_flight: 0,
            tail: Box::new(TailPage([0; DIRECT_ALIGN as usize])),
            tail_busy: None,
            deferred: false,
            fixed: None,
        })
    }

    /// From now on, queue writes without submitting them: [`Writer::flush`] (or a wait for
    /// completions) submits every write queued, in one system call. The caller flushes before it
    /// sleeps. Several writes submitted together go to the block layer under one plug (the
    /// kernel plugs from three on), so the disk is notified once for all of them: on a virtual
    /// machine each notification is a VM exit.
    pub fn defer(&mut self) {
        self.deferred = true;
    }

    /// Submits the writes queued and not yet submitted (see [`Writer::defer`]).
    pub fn flush(&mut self) {
        if self.queued() > 0 {
            // An error of the ring itself shows again in `wait`; what the kernel did not take
            // stays queued, and the next flush or wait submits it.
            let _ = self.ring.submit();
        }
    }

    /// Writes queued and not yet submitted (the submission queue's entries the kernel has not
    /// taken: none unless [`Writer::defer`]).
    pub fn queued(&mut self) -> usize {
        self.ring.submission().len()
    }

    /// Writes handed to the ring and not yet reaped: submitted, or queued (see
    /// [`Writer::defer`]).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Queues (and, unless [`Writer::defer`], submits) one write of `len` bytes from `ptr` to `fd`
    /// at `offset`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid and unchanged until the completion with
    /// `user_data` has been returned by [`Writer::wait`], and `fd` must stay open
    /// until then.
    pub unsafe fn write(&mut self, fd: RawFd, ptr: *const u8, len: u32, offset: u64, user_data: u64) -> io::Result<()> {
        let sqe = opcode::Write::new(types::Fd(fd), ptr, len).offset(offset).build().user_data(user_data);
        // SAFETY: the caller keeps the buffer and fd alive until completion.
        unsafe { self.push(&sqe) }
    }

    /// Registers `bufs` as the ring's fixed buffers (`IORING_REGISTER_BUFFERS`): the kernel
    /// pins their pages once, so [`Writer::write_fixed`] skips pinning them for every write.
    ///
    /// # Safety
    /// Every buffer must stay mapped until this `Writer` is dropped.
    pub unsafe fn register_buffers(&mut self, bufs: &[libc::iovec]) -> io::Result<()> {
        // SAFETY: the caller keeps the buffers mapped for the ring's life.
        unsafe { self.ring.submitter().register_buffers(bufs) }
    }

    /// Makes the blocks of `arena` this ring's fixed buffers (`IORING_REGISTER_BUFFERS`,
    /// sparse: entry `i` is block `i`), so that [`Writer::write_ring`] writes with
    /// `IORING_OP_WRITE_FIXED`: the kernel pins a block once instead of pinning it for every
    /// write (DESIGN.md, "Fixed buffers": a few percent of a fast disk's throughput). Only
    /// its first `now` blocks are registered here (pinning faults pages in); each other block
    /// when a write first needs it, by then written, and so faulted in, by the capture
    /// thread. Fails where the kernel refuses (locked-memory limit of an unprivileged user, an
    /// arena of more than 16,384 blocks); the writes then go as before.
    pub fn register_arena(&mut self, arena: &Consumer, now: u32) -> io::Result<()> {
        let (base, block, blocks) =
            (arena.buffer().as_ptr() as usize, arena.block_size(), arena.capacity() / arena.block_size());
        if blocks > MAX_FIXED {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "too many arena blocks to register"));
        }
        self.ring.submitter().register_buffers_sparse(blocks as u32)?;
        let mut fixed = FixedBlocks { base, block, registered: vec![false; blocks as usize], refused: false };
        for b in 0..u64::from(now).min(blocks) {
            fixed.register(&self.ring, b as u32)?;
        }
        self.fixed = Some(fixed);
        Ok(())
    }

    /// Bytes of the arena registered as fixed buffers so far.
    pub fn fixed_bytes(&self) -> u64 {
        self.fixed.as_ref().map_or(0, |f| f.registered.iter().filter(|&&r| r).count() as u64 * f.block)
    }

    /// The arena's blocks are this ring's fixed buffers ([`Writer::register_arena`] succeeded),
    /// and the kernel has refused none of them.
    pub fn ring_registered(&self) -> bool {
        self.fixed.as_ref().is_some_and(|f| !f.refused)
    }

    /// [`Writer::write`] from fixed buffer `buf_index` (`IORING_OP_WRITE_FIXED`).
    ///
    /// # Safety
    /// As for [`Writer::write`], and `ptr..ptr+len` lies inside registered buffer `buf_index`.
    pub unsafe fn write_fixed(
        &mut self,
        fd: RawFd,
        ptr: *const u8,
        len: u32,
        offset: u64,
        buf_index: u16,
        user_data: u64,
    ) -> io::Result<()> {
        let sqe =
            opcode::WriteFixed::new(types::Fd(fd), ptr, len, buf_index).offset(offset).build().user_data(user_data);
        // SAFETY: the caller keeps the buffer and fd alive until completion.
        unsafe { self.push(&sqe) }
    }

    /// Queues `sqe` and submits it.
    ///
    /// # Safety
    /// What `sqe` points to must stay valid until its completion is reaped.
    unsafe fn push(&mut self, sqe: &io_uring::squeue::Entry) -> io::Result<()> {
        loop {
            // SAFETY: the caller keeps what the entry points to alive until completion.
            let pushed = unsafe { self.ring.submission().push(sqe) }.is_ok();
            if pushed {
                break;
            }
            // Submission queue full: hand what is queued to the kernel first.
            self.ring.submit()?;
        }
        // Queued: the kernel will run it (now, or with the next submit in
        // `wait` or `flush`), so it is in flight whatever this submit says; an
        // error of the ring itself shows again in `wait`.
        self.in_flight += 1;
        if !self.deferred {
            self.flush();
        }
        Ok(())
    }

    /// Queues (and, unless [`Writer::defer`], submits) a write of `len` bytes of the arena, starting at
    /// stream position `start` (which must not wrap around the ring end), to
    /// `file` at `offset`.
    ///
    /// The kernel reads the arena memory until the completion with
    /// `user_data` is reaped; the caller must not release that region of the
    /// ring before then, or the file may receive newer bytes. That is a
    /// correctness rule of the store, not a memory-safety one: the mapping
    /// outlives the ring ends, and the kernel only reads it.
    pub fn write_ring(
        &mut self,
        file: &File,
        ring: &Consumer,
        start: u64,
        len: u32,
        offset: u64,
        user_data: u64,
    ) -> io::Result<()> {
        let (ptr, room, block) = ring.addr_of(start);
        if u64::from(len) > room {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "write crosses the end of an arena block"));
        }
        // A write within one block goes from its fixed buffer, registered now if it is not yet.
        let fixed = self.fixed.as_mut().is_some_and(|f| f.ensure(&self.ring, block)).then_some(block as u16);
        // SAFETY: ptr..ptr+len lies inside one block of the arena's mapping (checked above),
        // which is only unmapped when the last end is dropped; the store keeps the consumer
        // alive until it has reaped every write. A fixed write's range lies inside
        // registered buffer `block`, which is that block.
        unsafe {
            match fixed {
                Some(i) => self.write_fixed(file.as_raw_fd(), ptr, len, offset, i, user_data),
                None => self.write(file.as_raw_fd(), ptr, len, offset, user_data),
            }
        }
    }

    /// Writes one whole page to `file` at `offset` (aligned) holding the
    /// arena bytes `[start, end)` (`start` page-aligned, less than a page)
    /// followed by zeros. The bytes are copied, so the ring region may be
    /// released at once; the copy is busy until the completion with
    /// `user_data` is reaped, and a second tail write before that is refused.
    pub fn write_tail(
        &mut self,
        file: &File,
        ring: &Consumer,
        start: u64,
        end: u64,
        offset: u64,
        user_data: u64,
    ) -> io::Result<()> {
        if self.tail_busy.is_some() {
            return Err(io::Error::other("the tail page is still being written"));
        }
        let bad = || io::Error::new(io::ErrorKind::InvalidInput, "tail write outside one committed page");
        if !start.is_multiple_of(DIRECT_ALIGN) || end <= start || end - start >= DIRECT_ALIGN {
            return Err(bad());
        }
        let (a, b) = ring.slices(start, end).ok_or_else(bad)?;
        let page = &mut self.tail.0;
        page[..a.len()].copy_from_slice(a);
        page[a.len()..a.len() + b.len()].copy_from_slice(b);
        page[a.len() + b.len()..].fill(0);
        let ptr = page.as_ptr();
        // SAFETY: the page is owned by self and lives as long as the ring;
        // it is not written again until this completion is reaped (tail_busy).
        unsafe { self.write(file.as_raw_fd(), ptr, DIRECT_ALIGN as u32, offset, user_data)? };
        self.tail_busy = Some(user_data);
        Ok(())
    }

    /// Waits until at least `min` completions are available (0 = just reap)
    /// and returns all that are.
    pub fn wait(&mut self, min: usize, out: &mut Vec<Completion>) -> io::Result<()> {
        let min = min.min(self.in_flight);
        if min > 0 {
            loop {
                match self.ring.submit_and_wait(min) {
                    Ok(_) => break,
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        for cqe in self.ring.completion() {
            if self.tail_busy == Some(cqe.user_data()) {
                self.tail_busy = None;
            }
            out.push(Completion { user_data: cqe.user_data(), result: cqe.result() });
            self.in_flight -= 1;
        }
        Ok(())
    }
}

impl FixedBlocks {
    /// Registers block `b` as fixed buffer `b`.
    fn register(&mut self, ring: &IoUring, b: u32) -> io::Result<()> {
        let iov = libc::iovec {
            iov_base: (self.base + (u64::from(b) * self.block) as usize) as *mut libc::c_void,
            iov_len: self.block as usize,
        };
        // SAFETY: the iovec is one block of the arena's mapping, which outlives the ring (the
        // writer owns both and drops the ring first); the kernel holds its own reference to
        // every page it pins until the entry is replaced or the ring is closed, so a write
        // never reads freed memory.
        unsafe { ring.submitter().register_buffers_update(b, std::slice::from_ref(&iov), None)? };
        self.registered[b as usize] = true;
        Ok(())
    }

    /// Whether block `b` is a fixed buffer, registering it if it is not yet (once the kernel
    /// refused one, no more are tried).
    fn ensure(&mut self, ring: &IoUring, b: u32) -> bool {
        match self.registered.get(b as usize) {
            Some(true) => true,
            Some(false) if !self.refused => {
                self.refused = self.register(ring, b).is_err();
                !self.refused
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::create_output;
    use crate::mem::AlignedBuf;
    use std::path::PathBuf;

    /// A new directory `wv-TAG-PID` under the system's temporary one, and the path of an output
    /// file `f` in it, opened as the writer opens its files (O_DIRECT where the file system
    /// allows).
    fn scratch(tag: &str) -> (PathBuf, PathBuf, File) {
        let dir = std::env::temp_dir().join(format!("wv-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let (f, _direct) = create_output(&path, true).unwrap();
        (dir, path, f)
    }

    /// The last partial page goes to the file zero-padded, not with the
    /// bytes an older lap of the ring left after the data; and a second tail
    /// write is refused until the first one is reaped.
    #[test]
    fn tail_page_is_zero_padded_not_older_ring_bytes() {
        let buf = AlignedBuf::new(1, false).unwrap();
        let cap = buf.len() as u64;
        let (mut p, mut c) = crate::byte_ring::byte_ring(buf);
        let lap = vec![0xabu8; 64 << 10];
        for _ in 0..cap / lap.len() as u64 {
            assert!(p.has_room(lap.len() as u64) && p.write(&lap));
            p.publish();
            c.release(p.head());
        }
        assert!(p.has_room(100) && p.write(&[0xcd; 100]));
        p.publish();
        let (dir, path, f) = scratch("tail");
        let mut w = Writer::new(4).unwrap();
        w.write_tail(&f, &c, cap, cap + 100, 0, 7).unwrap();
        assert!(w.write_tail(&f, &c, cap, cap + 100, 0, 8).is_err(), "busy until reaped");
        let mut done = Vec::new();
        w.wait(1, &mut done).unwrap();
        assert_eq!((done[0].user_data, done[0].result), (7, DIRECT_ALIGN as i32));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), DIRECT_ALIGN as usize);
        assert!(bytes[..100].iter().all(|&b| b == 0xcd));
        assert!(bytes[100..].iter().all(|&b| b == 0), "older ring bytes reached the file");
        // Not page-aligned, or a whole page: refused.
        assert!(w.write_tail(&f, &c, cap + 1, cap + 100, 0, 9).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// With the arena registered, writes go from the fixed buffer of their block (registered
    /// when a write first needs it) and carry the arena's bytes, whichever block a stretch of
    /// the stream landed in.
    #[test]
    fn registered_blocks_write_the_arena_bytes() {
        let buf = AlignedBuf::new(4 << 20, false).unwrap();
        let (mut p, mut c) = crate::byte_ring::byte_ring_blocks(buf, 1 << 20);
        let block = c.block_size();
        let mut w = Writer::new(4).unwrap();
        w.register_arena(&c, 1).unwrap();
        assert!(w.ring_registered());
        assert_eq!(w.fixed.as_ref().unwrap().registered, [true, false, false, false]);
        let (dir, _, f) = scratch("fixed");
        let mut done = Vec::new();
        for lap in 0..6u8 {
            let page = vec![lap + 1; DIRECT_ALIGN as usize];
            let mut start = p.head();
            // The last page of a block: the write ends at the block's end.
            while start % block != block - DIRECT_ALIGN {
                assert!(p.has_room(DIRECT_ALIGN) && p.write(&page));
                start = p.head();
            }
            assert!(p.has_room(DIRECT_ALIGN) && p.write(&page));
            p.publish();
            w.write_ring(&f, &c, start, DIRECT_ALIGN as u32, u64::from(lap) * DIRECT_ALIGN, u64::from(lap)).unwrap();
            assert!(w.write_ring(&f, &c, start, 2 * DIRECT_ALIGN as u32, 0, 99).is_err(), "across a block's end");
            w.wait(1, &mut done).unwrap();
            // Lap 2 on: the writer keeps up with one block in hand.
            if lap >= 1 {
                c.release(p.head() - block);
            }
        }
        assert!(done.iter().all(|d| d.result == DIRECT_ALIGN as i32), "{done:?}");
        assert_eq!(
            w.fixed.as_ref().unwrap().registered,
            [true, true, false, false],
            "block 1 when first used, then 0 again"
        );
        let bytes = std::fs::read(dir.join("f")).unwrap();
        for lap in 0..6u8 {
            let at = lap as usize * DIRECT_ALIGN as usize;
            assert!(bytes[at..at + DIRECT_ALIGN as usize].iter().all(|&b| b == lap + 1), "lap {lap}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn direct_write_round_trip() {
        let (dir, path, f) = scratch("uring");
        let buf = AlignedBuf::new(1, false).unwrap();
        // SAFETY: buf is 2 MiB and only used here.
        unsafe { std::ptr::write_bytes(buf.as_ptr(), 0x5a, 8192) };
        let mut w = Writer::new(8).unwrap();
        // SAFETY: buf outlives the wait below; f stays open.
        unsafe {
            w.write(f.as_raw_fd(), buf.as_ptr(), 4096, 0, 1).unwrap();
            w.write(f.as_raw_fd(), buf.as_ptr().add(4096), 4096, 4096, 2).unwrap();
        }
        let mut done = Vec::new();
        while done.len() < 2 {
            w.wait(1, &mut done).unwrap();
        }
        assert!(done.iter().all(|c| c.result == 4096));
        f.set_len(5000).unwrap();
        drop(f);
        let data = std::fs::read(&path).unwrap();
        assert_eq!(data.len(), 5000);
        assert!(data.iter().all(|&x| x == 0x5a));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Deferred writes reach the kernel only with `flush` (or a wait for completions): none
    /// completes before, all three complete after, and they count as in flight meanwhile.
    #[test]
    fn deferred_writes_wait_for_the_flush() {
        let (dir, path, f) = scratch("uring-defer");
        let buf = AlignedBuf::new(1, false).unwrap();
        // SAFETY: buf is 2 MiB and only used here.
        unsafe { std::ptr::write_bytes(buf.as_ptr(), 0x6b, 3 * 4096) };
        let mut w = Writer::new(8).unwrap();
        w.defer();
        for i in 0..3u64 {
            // SAFETY: buf outlives the waits below; f stays open.
            unsafe { w.write(f.as_raw_fd(), buf.as_ptr().add(i as usize * 4096), 4096, i * 4096, i).unwrap() };
        }
        assert_eq!((w.in_flight(), w.queued()), (3, 3));
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut done = Vec::new();
        w.wait(0, &mut done).unwrap();
        assert!(done.is_empty(), "a deferred write completed before the flush: {done:?}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        w.flush();
        assert_eq!(w.queued(), 0);
        let t0 = std::time::Instant::now();
        while done.len() < 3 && t0.elapsed() < std::time::Duration::from_secs(10) {
            std::thread::sleep(std::time::Duration::from_millis(1));
            w.wait(0, &mut done).unwrap();
        }
        assert_eq!(done.len(), 3, "the flush did not submit every deferred write");
        assert!(done.iter().all(|c| c.result == 4096));
        assert_eq!(w.in_flight(), 0);
        assert_eq!(std::fs::read(&path).unwrap(), vec![0x6b; 3 * 4096]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
