//! Ring blocks held past the next one and written to files with io_uring
//! straight from the ring's mapping (the zero-copy path): several writes in
//! flight, each block handed back to the kernel once ITS writes completed, in
//! ring order.
//!
//! Why in ring order: the kernel fills blocks strictly in order and, when the
//! next one is still user space's, freezes the ring and drops until exactly
//! that block comes back (`prb_queue_frozen`); a later block handed back early
//! would not be used any sooner. So a block whose write completed early waits
//! for the ones before it, which costs nothing.
//!
//! Why the writes live here and not in the store: the kernel reads a block's
//! memory until the write's completion is reaped, so the mapping must outlive
//! every write in flight. [`BlockWriter`] owns both the [`Ring`] and the
//! io_uring, keeps each file open (an `Arc<File>`) until its write completed,
//! and its `Drop` reaps every write before the ring is unmapped.

use super::*;
use crate::mem::AlignedBuf;
use crate::uring;
use std::collections::VecDeque;
use std::fs::File;
use std::sync::Arc;

/// A block taken with [`BlockWriter::take`]. Ids are unique for the writer's life (a serial
/// number beside the block's index), so a stale id is refused, not taken for a newer lap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockId {
    idx: usize,
    serial: u64,
}

/// What [`BlockWriter::take`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The next block, now held.
    Block(BlockId),
    /// Writes completed (their blocks went back; [`BlockWriter::reap`] gives the results).
    Completed,
    /// Nothing within the timeout (or a signal).
    Idle,
}

/// A completed write of a held block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteDone {
    /// The caller's tag given to [`BlockWriter::write`].
    pub tag: u64,
    /// File offset and length of the write.
    pub offset: u64,
    pub len: u32,
    /// Bytes written, or a negative errno.
    pub result: i32,
}

impl WriteDone {
    /// The whole write reached the file.
    pub fn complete(&self) -> bool {
        self.result >= 0 && self.result as u32 == self.len
    }
}

/// Longest wait for a write completion while a quarter of the ring or more is held, in
/// milliseconds: how late a block the kernel hands over meanwhile is taken, at most (a quarter
/// of record's 40 ms block retire timeout, the latency a quiet link already has). A drain after
/// a stop waits for `afpacket::Drain`, not for a number of these waits.
const HELD_WAIT_MS: i32 = 10;

/// While blocks are held, and fewer than this share of the ring (1/4), `take` sleeps for about
/// [`PACE_BLOCKS`] blocks' time instead of waking for each write completion; from this share
/// on it waits for the completions, to give blocks back sooner.
const PACE_HELD_DIV: usize = 4;

/// Blocks a paced sleep lasts for, at the recent rate (see [`Pace`]). The moving average
/// weighs the short gaps between blocks taken in one turn, so it reads low when turns take
/// several blocks: about three blocks' time in practice.
const PACE_BLOCKS: u64 = 4;

/// Writes queued while blocks are taken without a sleep between them (catching up) are
/// submitted once this many are queued: io_uring plugs from three on, so four go to the disk
/// with one notification.
const FLUSH_QUEUED: usize = 4;

/// Shortest and longest paced sleep, in nanoseconds. The longest is how late a block handed
/// over during the sleep is taken, at most: record's 40 ms block retire timeout, the latency
/// sparse traffic already has (at 10 Gb/s that is 50 MB the ring holds meanwhile, and a faster
/// link shortens the sleep). It is longer than a block of 64-byte frames from one generator
/// core takes to fill (~30 ms), so that such a block costs one wake-up, not two (one at the
/// end of a shorter sleep, with nothing new, then one for the block).
const PACE_MIN_NS: u64 = 1_000_000;
const PACE_MAX_NS: u64 = 40_000_000;

/// The recent time between blocks, to pace the waits while blocks are held.
///
/// Why: poll(2) on the socket cannot wait for the next block while one is held (it reports
/// readable at once), so `take` used to wait for the next write completion instead: 2.2
/// wake-ups per block with 1514-byte frames (one for the completion, one for the block), each
/// a context switch and, on a virtual machine, a halted vCPU woken by the host. A completion
/// need not be reaped at once when the ring has free blocks: `take` sleeps for about
/// [`PACE_BLOCKS`] blocks' time (at most [`PACE_MAX_NS`]), then takes every block ready, reaps
/// every completion, and submits the turn's writes together (`uring::Writer::defer`: one
/// notification of the disk for all of them). Measured with bench/live.sh, 1514-byte frames,
/// `--zero-copy`, ten alternated runs each: about 0.8 wake-ups per block instead of 2.2
/// (context switches over the run), 88 ns of CPU per stored packet instead of 136 (medians;
/// DESIGN.md, "Zero-copy block path").
#[derive(Debug, Default)]
struct Pace {
    /// When the last block was taken (0: none yet).
    last_ns: u64,
    /// Moving average of the time between blocks (1/8 weight to the newest), each gap counted
    /// at most [`PACE_MAX_NS`].
    gap_ns: u64,
}

impl Pace {
    fn block(&mut self, now_ns: u64) {
        if self.last_ns != 0 {
            let gap = now_ns.saturating_sub(self.last_ns).min(PACE_MAX_NS);
            self.gap_ns = self.gap_ns - self.gap_ns / 8 + gap / 8;
        }
        self.last_ns = now_ns;
    }

    /// How long to sleep while blocks are held and `free` blocks of the ring are not: about
    /// [`PACE_BLOCKS`] blocks' time, within [`PACE_MIN_NS`] and `timeout_ms` (at most
    /// [`PACE_MAX_NS`]). A ring too small to take twice that many blocks meanwhile (`free`
    /// under 2 x [`PACE_BLOCKS`]) sleeps at most half its free blocks' time and
    /// [`HELD_WAIT_MS`], as the completions woke it before: the moving average lags a burst
    /// after slow traffic, and a small ring would fill during a long sleep.
    fn sleep_ns(&self, timeout_ms: i32, free: usize) -> u64 {
        let mut most = (timeout_ms.max(0) as u64 * 1_000_000).min(PACE_MAX_NS);
        let blocks = PACE_BLOCKS.min(free as u64 / 2);
        if blocks < PACE_BLOCKS {
            most = most.min(HELD_WAIT_MS as u64 * 1_000_000);
        }
        (self.gap_ns * blocks).max(PACE_MIN_NS).min(most)
    }
}

struct Held {
    id: BlockId,
    /// Writes of this block in flight.
    writes: u32,
    /// The caller submits no more writes for it ([`BlockWriter::seal`]).
    sealed: bool,
}

struct Slot {
    /// The held block written from (none: a buffer of the caller's).
    serial: Option<u64>,
    /// Kept open and alive until the completion is reaped.
    _file: Arc<File>,
    _buf: Option<Arc<AlignedBuf>>,
    tag: u64,
    offset: u64,
    len: u32,
}

/// A TPACKET_V3 ring whose blocks user space holds until their O_DIRECT writes completed. See
/// the module documentation.
pub struct BlockWriter {
    io: uring::Writer,
    /// Blocks taken and not yet handed back, in ring order.
    held: VecDeque<Held>,
    serial: u64,
    slots: Vec<Option<Slot>>,
    free: Vec<usize>,
    depth: usize,
    cqes: Vec<uring::Completion>,
    /// Completions reaped and not yet given to the caller.
    done: Vec<WriteDone>,
    /// Each block is registered as the io_uring fixed buffer of its index.
    fixed: bool,
    pace: Pace,
    // Dropped last (after `Drop::drop` reaped every write): unmaps the ring.
    ring: Ring,
}

impl std::fmt::Debug for BlockWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockWriter")
            .field("ring", &self.ring)
            .field("held", &self.held.len())
            .field("in_flight", &self.io.in_flight())
            .finish()
    }
}

impl BlockWriter {
    /// Takes over `ring` (opened with [`Ring::open_zero_copy`]) with up to `depth` writes in
    /// flight (at least 1).
    pub fn new(ring: Ring, depth: u32) -> io::Result<BlockWriter> {
        let depth = depth.max(1);
        let mut io = uring::Writer::new(depth.next_power_of_two().max(2))?;
        // The blocks taken in one turn are submitted together when `take` next sleeps.
        io.defer();
        // Pin the ring's pages once for every write (else each O_DIRECT write pins its block's
        // 4 KiB pages again: ~9% of the capture thread's time at 1514 B). Optional: without it
        // (a kernel that refuses, the locked-memory limit) the writes pin as they go.
        let fixed = ring.block_count <= usize::from(u16::MAX) && {
            let iov: Vec<libc::iovec> = (0..ring.block_count)
                .map(|i| libc::iovec {
                    // SAFETY: `i < block_count`: the block lies inside the mapping.
                    iov_base: unsafe { ring.map.ptr.as_ptr().add(i * ring.block_size) }.cast(),
                    iov_len: ring.block_size,
                })
                .collect();
            // SAFETY: the mapping outlives `io`: `ring` is the last field (dropped after `io`)
            // and `Drop` reaps every write before either goes.
            unsafe { io.register_buffers(&iov) }.is_ok()
        };
        Ok(BlockWriter {
            io,
            fixed,
            pace: Pace::default(),
            held: VecDeque::with_capacity(ring.block_count),
            serial: 0,
            slots: Vec::with_capacity(depth as usize),
            free: Vec::new(),
            depth: depth as usize,
            cqes: Vec::with_capacity(depth as usize),
            done: Vec::with_capacity(depth as usize),
            ring,
        })
    }

    /// The ring (counters, stopping the intake).
    pub fn ring(&self) -> &Ring {
        &self.ring
    }

    /// The ring's blocks are registered with the io_uring (pinned once, not per write).
    pub fn fixed_buffers(&self) -> bool {
        self.fixed
    }

    /// Writes in flight: submitted, or queued for the next submit (see `take`).
    pub fn in_flight(&self) -> usize {
        self.io.in_flight()
    }

    /// Blocks held (taken and not handed back yet).
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Waits (at most `timeout_ms`) for the next block the kernel hands over and holds it.
    /// While blocks are held it sleeps for a few blocks' time (`Pace`), first submitting the
    /// writes queued since it last slept; from a quarter of the ring held on it returns early
    /// when writes completed; when every block of the ring is held it only waits for a write to
    /// complete.
    pub fn take(&mut self, timeout_ms: i32) -> Result<Next, Error> {
        let before = self.done.len();
        let reaped = |r: io::Result<()>, done: usize| match r {
            Err(source) => Err(Error::Os { what: "waiting for block writes", source }),
            Ok(()) if done > before => Ok(Next::Completed),
            Ok(()) => Ok(Next::Idle),
        };
        if self.held.len() >= self.ring.block_count {
            // The next block in ring order is the oldest held one: wait for writes instead.
            let r = self.collect(usize::from(self.io.in_flight() > 0));
            return reaped(r, self.done.len());
        }
        let ready = if self.io.in_flight() == 0 {
            // Nothing held (sealed blocks without writes went back): poll(2) waits.
            self.ring.next_ready(timeout_ms)?
        } else if let Some(r) = self.ring.ready_now() {
            Some(r)
        } else if self.mostly_free() {
            // Blocks held, the ring mostly free: sleep for a few blocks' time, not woken by the
            // completions (see `Pace`); what completed is reaped below or in the next turn.
            self.io.flush();
            let free = self.ring.block_count - self.held.len();
            super::tx::sleep_until_ns(super::tx::monotonic_ns() + self.pace.sleep_ns(timeout_ms, free));
            self.ring.ready_now()
        } else {
            // poll(2) on the socket would return at once while blocks are held (see
            // `Ring::next_ready`): wait for a write to complete instead, at most HELD_WAIT_MS.
            // A block the kernel hands over meanwhile waits that long at most; the ring's free
            // blocks take the traffic.
            self.io.flush();
            let mut pfd = libc::pollfd { fd: self.io.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid, exclusively borrowed pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms.clamp(0, HELD_WAIT_MS)) };
            if rc < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                return Err(Error::os("waiting for block writes (poll)"));
            }
            self.ring.ready_now()
        };
        let Some((idx, _status)) = ready else {
            let r = self.collect(0);
            return reaped(r, self.done.len());
        };
        // Catching up (blocks ready one after the other, no sleep between): the writes queued
        // go to the disk once a plug's worth is queued, or at once when the ring fills up, not
        // only when the thread next sleeps.
        if self.io.queued() >= FLUSH_QUEUED || !self.mostly_free() {
            self.io.flush();
        }
        let id = BlockId { idx, serial: self.serial };
        self.serial += 1;
        self.pace.block(super::tx::monotonic_ns());
        self.held.push_back(Held { id, writes: 0, sealed: false });
        Ok(Next::Block(id))
    }

    /// Fewer than a quarter of the ring's blocks are held: `take` paces its sleeps (see [`Pace`])
    /// and leaves the writes queued until it sleeps.
    fn mostly_free(&self) -> bool {
        self.held.len() * PACE_HELD_DIV < self.ring.block_count
    }

    /// The bytes of held block `id`, to rewrite and read. Waits first for the block's writes in
    /// flight (the kernel reads them until they complete). `None` if `id` is not held.
    pub fn block(&mut self, id: BlockId) -> Option<Block<'_>> {
        while self.find(id)?.writes > 0 {
            if self.collect(1).is_err() {
                return None;
            }
        }
        // SAFETY: `id` is held, so `idx < block_count` and the offset stays inside the mapping.
        let ptr = unsafe { self.ring.map.ptr.add(id.idx * self.ring.block_size) };
        Some(Block { ptr, len: self.ring.block_size, status: libc::TP_STATUS_USER, release: false, _ring: PhantomData })
    }

    /// Queues an O_DIRECT (or buffered, as `file` was opened) write of the first `len` bytes of
    /// held block `id` to `file` at `offset`. Waits first while `depth` writes are in flight.
    /// The block must not be sealed. `tag` comes back with the completion.
    pub fn write(&mut self, id: BlockId, len: usize, file: &Arc<File>, offset: u64, tag: u64) -> io::Result<()> {
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidInput, m.to_string());
        if len == 0 || len > self.ring.block_size {
            return Err(bad("a block write of 0 bytes or more than the block"));
        }
        match self.find(id) {
            Some(h) if !h.sealed => {}
            _ => return Err(bad("a write of a block that is not held")),
        }
        let slot = self.slot()?;
        let file = file.clone();
        let fd = file.as_raw_fd();
        self.slots[slot] =
            Some(Slot { serial: Some(id.serial), _file: file, _buf: None, tag, offset, len: len as u32 });
        // SAFETY: `id` is held, so the range lies inside the mapping. The block stays held (not
        // handed back to the kernel, which would refill it) until this completion is reaped
        // (`writes` > 0 keeps it), no `Block` view of it is created meanwhile (`block` waits),
        // and the mapping is unmapped only after `Drop` reaped every write. The slot keeps the
        // file open until then.
        let r = unsafe {
            let ptr = self.ring.map.ptr.as_ptr().add(id.idx * self.ring.block_size);
            if self.fixed {
                // Fixed buffer `idx` is this block (registered in `new`; idx fits in u16 then).
                self.io.write_fixed(fd, ptr, len as u32, offset, id.idx as u16, slot as u64)
            } else {
                self.io.write(fd, ptr, len as u32, offset, slot as u64)
            }
        };
        self.queued(slot, r)?;
        if let Some(h) = self.find_mut(id) {
            h.writes += 1;
        }
        Ok(())
    }

    /// Queues a write of the first `len` bytes of `buf` (aligned for O_DIRECT) to `file` at
    /// `offset`, like [`BlockWriter::write`] (a file's header page, written in order with its
    /// blocks). `buf` stays alive and unchanged (it is shared) until the completion is reaped.
    pub fn write_buf(
        &mut self,
        buf: &Arc<AlignedBuf>,
        len: usize,
        file: &Arc<File>,
        offset: u64,
        tag: u64,
    ) -> io::Result<()> {
        if len == 0 || len > buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a buffer write of 0 bytes or more than the buffer",
            ));
        }
        let slot = self.slot()?;
        let (file, buf) = (file.clone(), buf.clone());
        let (fd, ptr) = (file.as_raw_fd(), buf.as_ptr());
        self.slots[slot] = Some(Slot { serial: None, _file: file, _buf: Some(buf), tag, offset, len: len as u32 });
        // SAFETY: `ptr..ptr + len` lies inside `buf`, which the slot keeps alive until this
        // completion is reaped (`Drop` reaps every write); behind an `Arc` nobody can change
        // it meanwhile. The slot keeps the file open.
        let r = unsafe { self.io.write(fd, ptr, len as u32, offset, slot as u64) };
        self.queued(slot, r)
    }

    /// `r`, the result of queuing the write of `slot`; a write that could not be queued gives
    /// its slot back (no completion will).
    fn queued(&mut self, slot: usize, r: io::Result<()>) -> io::Result<()> {
        if r.is_err() {
            self.slots[slot] = None;
            self.free.push(slot);
        }
        r
    }

    /// A free write slot, waiting first while `depth` writes are in flight.
    fn slot(&mut self) -> io::Result<usize> {
        while self.io.in_flight() >= self.depth {
            self.collect(1)?;
        }
        Ok(match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(None);
                self.slots.len() - 1
            }
        })
    }

    /// No more writes of block `id` follow: it goes back to the kernel once its writes
    /// completed and every block before it went back.
    pub fn seal(&mut self, id: BlockId) {
        if let Some(h) = self.find_mut(id) {
            h.sealed = true;
        }
        self.release_ready();
    }

    /// Gives the completions reaped so far (waiting for at least one first when `wait` and a
    /// write is in flight) and hands back the blocks that are done.
    pub fn reap(&mut self, wait: bool, out: &mut Vec<WriteDone>) -> io::Result<()> {
        let r = self.collect(usize::from(wait && self.done.is_empty()));
        out.append(&mut self.done);
        r
    }

    /// Waits until every write in flight completed (their results go to the next `reap`).
    pub fn drain(&mut self) -> io::Result<()> {
        while self.io.in_flight() > 0 {
            self.collect(1)?;
        }
        Ok(())
    }

    fn find(&self, id: BlockId) -> Option<&Held> {
        self.held.iter().rev().find(|h| h.id == id)
    }

    fn find_mut(&mut self, id: BlockId) -> Option<&mut Held> {
        self.held.iter_mut().rev().find(|h| h.id == id)
    }

    /// Reaps completions (waiting for `min`), then hands back the blocks that are done.
    fn collect(&mut self, min: usize) -> io::Result<()> {
        self.cqes.clear();
        let r = self.io.wait(min, &mut self.cqes);
        for k in 0..self.cqes.len() {
            let c = self.cqes[k];
            let Some(s) = self.slots.get_mut(c.user_data as usize).and_then(Option::take) else { continue };
            self.free.push(c.user_data as usize);
            if let Some(h) = self.held.iter_mut().find(|h| Some(h.id.serial) == s.serial) {
                h.writes -= 1;
            }
            self.done.push(WriteDone { tag: s.tag, offset: s.offset, len: s.len, result: c.result });
        }
        self.release_ready();
        r
    }

    fn release_ready(&mut self) {
        while let Some(h) = self.held.front() {
            if !h.sealed || h.writes > 0 {
                break;
            }
            // Release orders our reads and the kernel's completed reads of the block before the
            // kernel can see it as its own again (see `Block`'s drop).
            self.ring.status(h.id.idx).store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.held.pop_front();
        }
    }
}

impl Drop for BlockWriter {
    fn drop(&mut self) {
        if self.drain().is_err() {
            // Writes may still read the mapping: leave it mapped (and the socket open) rather
            // than let the kernel read memory that could be reused.
            let ring = std::mem::replace(&mut self.ring.map, Mapping { ptr: NonNull::dangling(), len: 0 });
            std::mem::forget(ring);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    /// The paced sleep follows the time between blocks (about PACE_BLOCKS of them), within its
    /// bounds and the caller's timeout; a long idle gap counts as PACE_MAX_NS only.
    #[test]
    fn pace_sleeps_for_a_few_blocks_within_bounds() {
        let mut p = Pace::default();
        assert_eq!(p.sleep_ns(50, 64), PACE_MIN_NS, "no block yet: the shortest sleep");
        let mut t = 1_000_000_000;
        for _ in 0..200 {
            p.block(t);
            t += 2_000_000;
        }
        let s = p.sleep_ns(50, 64);
        assert!((7_500_000..=8_000_000).contains(&s), "2 ms between blocks: {s} ns");
        assert_eq!(p.sleep_ns(5, 64), 5_000_000, "the caller's timeout bounds it");
        assert_eq!(p.sleep_ns(0, 64), 0);
        for _ in 0..200 {
            p.block(t);
            t += 50_000;
        }
        assert_eq!(p.sleep_ns(50, 64), PACE_MIN_NS, "50 us between blocks: the shortest sleep");
        p.block(t + 3_600_000_000_000);
        assert!(p.sleep_ns(50, 64) <= PACE_MAX_NS);
        for _ in 0..200 {
            p.block(t);
            t += 30_000_000;
        }
        assert_eq!(p.sleep_ns(50, 64), PACE_MAX_NS, "slow blocks: the longest sleep");
        // A small ring: half its free blocks' time, and HELD_WAIT_MS at most.
        assert_eq!(p.sleep_ns(50, 7), HELD_WAIT_MS as u64 * 1_000_000);
        for _ in 0..200 {
            p.block(t);
            t += 2_000_000;
        }
        let s = p.sleep_ns(50, 7);
        assert!((5_600_000..=6_100_000).contains(&s), "3 blocks of 2 ms: {s} ns");
        assert_eq!(p.sleep_ns(50, 1), PACE_MIN_NS, "no block to spare: the shortest sleep");
    }

    /// On loopback (needs root): the ring's blocks are registered as fixed buffers, a block
    /// written from the ring reaches the file byte for byte, and the block goes back to the
    /// kernel only once its write completed and it was sealed.
    #[test]
    fn a_held_block_is_written_then_handed_back() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIP a_held_block_is_written_then_handed_back: needs root (AF_PACKET)");
            return;
        }
        let cfg = RingConfig {
            block_size: 1 << 16,
            block_count: 4,
            retire_tov_ms: 10,
            promisc: false,
            fanout: None,
            filter: None,
        };
        let ring = Ring::open_zero_copy("lo", &cfg).unwrap();
        let mut bw = BlockWriter::new(ring, 4).unwrap();
        assert!(bw.fixed_buffers(), "the kernel refused to register the ring's blocks");
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = sock.local_addr().unwrap();
        for _ in 0..20 {
            sock.send_to(&[0x5a; 300], to).unwrap();
        }
        let id = loop {
            match bw.take(1000).unwrap() {
                Next::Block(id) => break id,
                Next::Completed => {}
                Next::Idle => panic!("no block within a second"),
            }
        };
        let want = bw.block(id).unwrap().bytes()[..8192].to_vec();
        let dir = std::env::temp_dir().join(format!("wv-held-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let (f, _direct) = crate::fs::create_output(&path, true).unwrap();
        let f = Arc::new(f);
        bw.write(id, 8192, &f, 4096, 7).unwrap();
        assert_eq!((bw.in_flight(), bw.held()), (1, 1));
        let mut done = Vec::new();
        while done.is_empty() {
            bw.reap(true, &mut done).unwrap();
        }
        assert_eq!(done, [WriteDone { tag: 7, offset: 4096, len: 8192, result: 8192 }]);
        assert_eq!(bw.held(), 1, "not sealed: still held");
        bw.seal(id);
        assert_eq!(bw.held(), 0, "sealed and written: handed back");
        assert!(bw.write(id, 8192, &f, 0, 8).is_err(), "a block handed back cannot be written");
        let got = std::fs::read(&path).unwrap();
        assert_eq!(&got[4096..], &want[..]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
