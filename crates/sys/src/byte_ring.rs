//! The arena: a single-producer single-consumer byte stream over the blocks
//! of an [`AlignedBuf`].
//!
//! The capture worker (producer) appends file bytes at `head`; the writer
//! (consumer) hands committed regions to the kernel and then *releases* them,
//! which lets the producer reuse the space. Positions are monotonic `u64`
//! stream offsets. The stream is cut into stretches of one block each
//! (stream block `L` holds positions `[L·B, (L+1)·B)`), and each stretch lives
//! in whichever block of the arena the producer took for it: the free block
//! with the lowest address. A released stretch's block goes back to the free
//! set. So a writer that keeps up reuses the same few blocks, lap after lap,
//! and the rest of a large arena is never touched unless the disk falls
//! behind: only the blocks ever taken (the high-water mark, [`Gauge::high_water`])
//! cost memory and the CPU of faulting them in (DESIGN.md, "The arena").
//! A ring instead walked every byte of the arena each lap.
//!
//! Shared between the two sides, each written by one side only:
//! * `committed` (producer stores with Release, consumer loads with Acquire):
//!   every byte before it is written and will not change until released;
//! * `released` (consumer stores with Release, producer loads with Acquire):
//!   the producer may write every stream position below
//!   `⌊released / B⌋·B + capacity` (whole blocks only are given back);
//! * the block map (slot `L mod n` names the arena block of stream block
//!   `L`): the producer stores it before it publishes a byte of `L`; the
//!   consumer reads it after loading `committed`;
//! * the free set (one bit per arena block): the consumer sets a block's bit
//!   before it publishes the `released` that passes the block; the producer
//!   clears it when it takes the block.
//!
//! The consumer's API is safe: it lends out only bytes in
//! `[released, committed)`, and `release` needs `&mut self`, so no borrow can
//! outlive the release of the bytes it points to.

use crate::mem::AlignedBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

struct Shared {
    buf: AlignedBuf,
    /// Block size (a multiple of 4 KiB) and the number of blocks.
    block: u64,
    blocks: u32,
    /// Everything before this stream position may be overwritten.
    released: AtomicU64,
    /// Everything before this stream position is written and stable.
    committed: AtomicU64,
    /// Slot `L % blocks`: the arena block holding stream block `L`.
    map: Box<[AtomicU32]>,
    /// Bit `b` of word `b / 64` set: arena block `b` is free.
    free: Box<[AtomicU64]>,
    /// One more than the highest arena block ever taken.
    high: AtomicU32,
}

/// Writes of at most this many bytes are copied inline ([`copy_small`]):
/// 64-byte frames, and TCP acknowledgements with options (66-86 bytes).
const SMALL: usize = 128;

/// Copies `src` (at most [`SMALL`] bytes) to `dst` with two to four
/// fixed-size, possibly overlapping, copies, which the compiler turns into
/// a few vector or integer moves: a call to `memcpy`
/// for a 64-byte frame or a 4-byte pcapng trailer cost more than the copy
/// (a quarter of a 64-byte packet's append on this VM's cores).
///
/// # Safety
/// `dst` must be valid for `src.len()` bytes of writes and not overlap `src`.
#[inline(always)]
unsafe fn copy_small(src: &[u8], dst: *mut u8) {
    /// Copies [0, K) and [n - K, n) (they overlap when n < 2K).
    #[inline(always)]
    unsafe fn two<const K: usize>(src: &[u8], dst: *mut u8) {
        let n = src.len();
        // SAFETY: K <= n, so both K-byte windows, [0, K) and [n - K, n), are
        // inside `src` and (the caller's promise) inside `dst`.
        unsafe {
            let a: [u8; K] = *src.as_ptr().cast::<[u8; K]>();
            let b: [u8; K] = *src.as_ptr().add(n - K).cast::<[u8; K]>();
            dst.cast::<[u8; K]>().write_unaligned(a);
            dst.add(n - K).cast::<[u8; K]>().write_unaligned(b);
        }
    }
    let n = src.len();
    debug_assert!(n <= SMALL);
    // SAFETY: each branch reads and writes within [0, n) (see `two`).
    unsafe {
        match n {
            65..=SMALL => {
                // [0, 64) and [n - 64, n), 32 bytes at a time.
                two::<32>(&src[..64], dst);
                two::<32>(&src[n - 64..], dst.add(n - 64));
            }
            32..=64 => two::<32>(src, dst),
            16..=31 => two::<16>(src, dst),
            8..=15 => two::<8>(src, dst),
            4..=7 => two::<4>(src, dst),
            _ => {
                for (i, &b) in src.iter().enumerate() {
                    dst.add(i).write(b);
                }
            }
        }
    }
}

/// A cache line.
const LINE: u64 = 64;
/// The furthest [`Producer::prefetch_ahead`] asks ahead.
const PREFETCH_MAX: u64 = 64 << 10;

/// [`Producer::prefetch_ahead`] asks for lines this many bytes at a time.
const PREFETCH_STEP: u64 = 512;

/// The arena's block when the caller names none ([`byte_ring`]): the writer's default write
/// (`record --block-size`), so that a block is one write.
pub const DEFAULT_BLOCK: u64 = 4 << 20;
/// Blocks are multiples of this (O_DIRECT's alignment; a cache line divides it).
const BLOCK_UNIT: u64 = 4096;

/// Splits an aligned buffer into the two ends of an arena of [`DEFAULT_BLOCK`] blocks, or of
/// an eighth of the buffer where that is smaller (a stream needs two blocks at least: the
/// consumer gives whole blocks back).
pub fn byte_ring(buf: AlignedBuf) -> (Producer, Consumer) {
    let block = DEFAULT_BLOCK.min(buf.len() as u64 / 8);
    byte_ring_blocks(buf, block)
}

/// Splits an aligned buffer into the two ends of an arena of `block`-byte blocks (rounded
/// down to a multiple of 4 KiB, at most the buffer): its capacity is the blocks that fit.
pub fn byte_ring_blocks(buf: AlignedBuf, block: u64) -> (Producer, Consumer) {
    let len = buf.len() as u64;
    let block = (block.min(len) / BLOCK_UNIT).max(1) * BLOCK_UNIT;
    assert!(len >= block, "an arena of {len} bytes");
    let blocks = u32::try_from(len / block).expect("fewer than 2^32 blocks");
    let cap = u64::from(blocks) * block;
    let free = (0..blocks.div_ceil(64))
        .map(|w| {
            let n = (blocks - w * 64).min(64);
            AtomicU64::new(if n == 64 { u64::MAX } else { (1u64 << n) - 1 })
        })
        .collect();
    let base = buf.as_ptr();
    let shared = Arc::new(Shared {
        buf,
        block,
        blocks,
        released: AtomicU64::new(0),
        committed: AtomicU64::new(0),
        map: (0..blocks).map(|_| AtomicU32::new(NONE)).collect(),
        free,
        high: AtomicU32::new(0),
    });
    let producer = Producer {
        shared: shared.clone(),
        base,
        block,
        blocks: u64::from(blocks),
        cap,
        head: 0,
        ptr: base,
        end: 0,
        limit: cap,
        prefetched: 0,
        taken: vec![(u64::MAX, 0); blocks as usize].into_boxed_slice(),
        holds: vec![u64::MAX; blocks as usize].into_boxed_slice(),
    };
    (producer, Consumer { shared, base, block, blocks: u64::from(blocks), cap, released: 0 })
}

/// A block map slot that names no block.
const NONE: u32 = u32::MAX;

/// How much of an arena was ever used, for whoever reports on it or faults it in ahead of
/// need; it keeps the arena's memory alive.
#[derive(Clone)]
pub struct Gauge(Arc<Shared>);

impl Gauge {
    /// Bytes of the arena ever written: its lowest blocks up to the highest one ever taken.
    pub fn high_water(&self) -> u64 {
        u64::from(self.0.high.load(Ordering::Relaxed)) * self.0.block
    }

    pub fn capacity(&self) -> u64 {
        u64::from(self.0.blocks) * self.0.block
    }

    pub fn block_size(&self) -> u64 {
        self.0.block
    }
}

/// The writing end, owned by one capture worker. Hot path: no atomics unless
/// the cached free space runs out or a write crosses into the next block.
pub struct Producer {
    shared: Arc<Shared>,
    base: *mut u8,
    block: u64,
    blocks: u64,
    cap: u64,
    head: u64,
    /// Where `head`'s byte goes while `head < end`: the place in the arena block of the
    /// current stream block (kept up to date instead of computed per write).
    ptr: *mut u8,
    /// The end of the stream block `ptr` lies in (0 before the first write): a write that
    /// reaches it takes the next block.
    end: u64,
    /// Cached `⌊released / B⌋·B + capacity`: the producer may write below this position.
    limit: u64,
    /// Every arena line before this stream position was asked for by
    /// [`Producer::prefetch_ahead`] (a multiple of [`LINE`]).
    prefetched: u64,
    /// This side's copy of the block map (slot: the stream block and its arena block), and
    /// for each arena block the stream block it holds now (`u64::MAX`: none), for
    /// [`Producer::written`].
    taken: Box<[(u64, u32)]>,
    holds: Box<[u64]>,
}

// SAFETY: the producer is the only writer of the blocks it took and has not
// published; moving it to another thread moves that right with it.
unsafe impl Send for Producer {}

impl Producer {
    /// Stream position of the next byte to be written.
    #[inline]
    pub fn head(&self) -> u64 {
        self.head
    }

    pub fn capacity(&self) -> u64 {
        self.cap
    }

    /// The arena's use, for reports and the thread that faults it in ahead of need.
    pub fn gauge(&self) -> Gauge {
        Gauge(self.shared.clone())
    }

    /// True if `n` more bytes fit without overwriting unreleased data.
    #[inline]
    pub fn has_room(&mut self, n: u64) -> bool {
        if self.head + n <= self.limit {
            return true;
        }
        let released = self.shared.released.load(Ordering::Acquire);
        self.limit = released / self.block * self.block + self.cap;
        self.head + n <= self.limit
    }

    /// Fraction of the arena holding data not yet released, in 0..=1.
    pub fn fill(&self) -> f64 {
        let released = self.shared.released.load(Ordering::Relaxed);
        self.head.saturating_sub(released) as f64 / self.cap as f64
    }

    /// Appends `bytes` at `head`, in the next block where they reach the end of this one.
    ///
    /// The caller must have checked [`Producer::has_room`] for at least
    /// `bytes.len()`; this is asserted in debug builds and, in release builds,
    /// enforced by refusing the write (returns false) rather than corrupting
    /// data the consumer still uses.
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        let n = bytes.len() as u64;
        if self.head + n > self.limit {
            debug_assert!(false, "arena overrun");
            return false;
        }
        if self.head + n <= self.end {
            // SAFETY: [head, head + n) lies in the current stream block, whose arena block
            // holds ptr..ptr + n; it is below `limit`, so the consumer has released it (or
            // never had it) and will not read it until the producer commits it again.
            unsafe {
                if bytes.len() <= SMALL {
                    copy_small(bytes, self.ptr);
                } else {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr, bytes.len());
                }
            }
            self.advance(n);
            return true;
        }
        self.write_across(bytes);
        true
    }

    /// [`Producer::write`] of bytes that reach the end of the current block (or come first):
    /// each piece goes into the block of its stream block, taken as the head reaches it.
    #[inline(never)]
    fn write_across(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.head >= self.end {
                self.take_block();
            }
            let k = ((self.end - self.head) as usize).min(bytes.len());
            // SAFETY: as in `write`: [head, head + k) lies in the current stream block, below
            // `limit` (the caller checked the whole write), and ptr..ptr + k in its arena block.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr, k) };
            self.advance(k as u64);
            bytes = &bytes[k..];
        }
    }

    /// Takes the free arena block with the lowest address for the stream block holding
    /// `head`. There is one: `head` is below `limit`, so at most `blocks` stream blocks are
    /// held, and the consumer gave back every block below the `released` that `limit` came
    /// from before it published it.
    fn take_block(&mut self) {
        let s = &*self.shared;
        let (w, word) = s
            .free
            .iter()
            .enumerate()
            .find_map(|(w, f)| Some((w, f.load(Ordering::Acquire))).filter(|&(_, v)| v != 0))
            .expect("a free arena block below the room limit");
        let bit = word.trailing_zeros();
        s.free[w].fetch_and(!(1u64 << bit), Ordering::Relaxed);
        let b = w as u32 * 64 + bit;
        let l = self.head / self.block;
        let slot = (l % self.blocks) as usize;
        // Published to the consumer with the first `committed` that covers a byte of `l`.
        s.map[slot].store(b, Ordering::Release);
        s.high.fetch_max(b + 1, Ordering::Relaxed);
        self.taken[slot] = (l, b);
        self.holds[b as usize] = l;
        self.end = (l + 1) * self.block;
        // SAFETY: block b lies inside the mapping, and head - l·B < B.
        self.ptr = unsafe { self.base.add((u64::from(b) * self.block + self.head - l * self.block) as usize) };
    }

    /// [`Producer::write`] of a few bytes whose number is known at compile
    /// time (a record header): away from the block's end, a fixed-size copy
    /// the compiler inlines (two vector stores), not a call to `memcpy`.
    #[inline]
    pub fn write_array<const N: usize>(&mut self, bytes: &[u8; N]) -> bool {
        if self.head + N as u64 > self.end || self.head + N as u64 > self.limit {
            return self.write(bytes);
        }
        // SAFETY: as in `write`: [head, head + N) lies below `limit` and in the current
        // block, whose arena block holds ptr..ptr + N.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr, N) };
        self.advance(N as u64);
        true
    }

    /// Asks for every arena line up to `ahead` bytes (at most
    /// `PREFETCH_MAX`, not past what the consumer still holds, nor past the
    /// current block, whose successor is not taken yet) past the head that no
    /// earlier call asked for: each line once a lap, about `ahead` bytes
    /// before the records reach it, `PREFETCH_STEP` bytes of lines or more at
    /// a time (an `ahead` below that asks only for lines the head has
    /// reached; lines a jump of the head skips are not asked for). The
    /// arena's lines were last written a lap ago and, read by the disk since,
    /// are in no cache; a store into one that was not asked for waits for it
    /// (a 1514-byte record's header stalled so while one line 512 bytes ahead
    /// was asked for per record, with PREFETCHW). Into the second-level cache
    /// ([`crate::mem::prefetch_l2`]): PREFETCHW, into the first, measured
    /// 4-10 ns more per 1514-byte or IMIX packet, its requests competing with
    /// the copy's loads and the reducers' bucket prefetches for the first
    /// level's miss buffers.
    #[inline(always)]
    pub fn prefetch_ahead(&mut self, ahead: u64) {
        if self.head >= self.end {
            return;
        }
        let to = (self.head + ahead.min(PREFETCH_MAX)).min(self.limit).min(self.end);
        if to < self.prefetched + PREFETCH_STEP {
            return;
        }
        // The lines from p (at or after the head's line, which lies in the current block:
        // blocks are whole lines) up to `to`, a plain walk of addresses in one block.
        let p = self.prefetched.max(self.head & !(LINE - 1));
        let lines = (to - p).div_ceil(LINE);
        let mut a = self.ptr.wrapping_add(p.wrapping_sub(self.head) as usize);
        for _ in 0..lines {
            crate::mem::prefetch_l2(a);
            a = a.wrapping_add(LINE as usize);
        }
        self.prefetched = p + lines * LINE;
    }

    /// Moves `head` (and its place in the block) `n` bytes on.
    #[inline]
    fn advance(&mut self, n: u64) {
        self.head += n;
        self.ptr = self.ptr.wrapping_add(n as usize);
    }

    /// The bytes `[start, end)` this producer wrote, as one or two slices
    /// (two when the region spans two blocks); `None` when `end` is past
    /// `head`, when the region spans more than two blocks, or when some of
    /// them may be overwritten already (their block was given back and taken
    /// again). The consumer may be reading them at the same time: both only read.
    #[inline]
    pub fn written(&self, start: u64, end: u64) -> Option<(&[u8], &[u8])> {
        if end < start || end > self.head {
            return None;
        }
        if end == start {
            return Some((&[], &[]));
        }
        let (l0, l1) = (start / self.block, (end - 1) / self.block);
        if l1 > l0 + 1 {
            return None;
        }
        let place = |l: u64| {
            let (sl, b) = self.taken[(l % self.blocks) as usize];
            (sl == l && self.holds[b as usize] == l).then_some(u64::from(b) * self.block)
        };
        let first_end = end.min((l0 + 1) * self.block);
        // SAFETY: stream block l0 (and l1) was written by this producer into the arena block
        // `place` names, which it has not taken for another stream block since (only
        // `take_block`, which takes `&mut self`, changes that); [start, end) was written
        // (end <= head) and lies in those blocks.
        unsafe {
            let a = std::slice::from_raw_parts(
                self.base.add((place(l0)? + start - l0 * self.block) as usize),
                (first_end - start) as usize,
            );
            let b = if l1 > l0 {
                std::slice::from_raw_parts(self.base.add(place(l1)? as usize), (end - first_end) as usize)
            } else {
                &[]
            };
            Some((a, b))
        }
    }

    /// Takes back the bytes written from stream position `to` on (at or after the last
    /// [`Producer::publish`]: the consumer never saw them), giving back the blocks taken for
    /// them alone. For a record that turns out not to be stored once written (`--dedup`
    /// judges the copy in the arena).
    pub fn rewind(&mut self, to: u64) {
        debug_assert!(to <= self.head && to >= self.shared.committed.load(Ordering::Relaxed));
        if to >= self.head {
            return;
        }
        let s = &*self.shared;
        // Blocks taken after the one `to` lies in hold nothing else.
        while self.end > 0 && to < self.end - self.block {
            let l = self.end / self.block - 1;
            let slot = (l % self.blocks) as usize;
            let (_, b) = self.taken[slot];
            s.map[slot].store(NONE, Ordering::Relaxed);
            self.taken[slot] = (u64::MAX, 0);
            self.holds[b as usize] = u64::MAX;
            s.free[(b / 64) as usize].fetch_or(1u64 << (b % 64), Ordering::Release);
            self.end -= self.block;
            let (pl, pb) = self.taken[((l - 1) % self.blocks) as usize];
            debug_assert_eq!(pl, l - 1);
            self.ptr = self.base.wrapping_add((u64::from(pb) * self.block) as usize).wrapping_add(self.block as usize);
            self.head = self.end;
        }
        self.ptr = self.ptr.wrapping_sub((self.head - to) as usize);
        self.head = to;
        self.prefetched = self.prefetched.min(self.end);
    }

    /// Makes every byte before `head` visible to the consumer.
    #[inline]
    pub fn publish(&self) {
        self.shared.committed.store(self.head, Ordering::Release);
    }

    /// Advances `head` to the next multiple of `align` (bytes in between are
    /// left as they are: they never reach a closed file). The caller checks room.
    pub fn pad_to(&mut self, align: u64) {
        self.advance(self.head.div_ceil(align) * align - self.head);
    }
}

/// The reading end, owned by the writer thread.
pub struct Consumer {
    shared: Arc<Shared>,
    base: *mut u8,
    block: u64,
    blocks: u64,
    cap: u64,
    released: u64,
}

// SAFETY: the consumer only reads committed, unreleased regions, which the
// producer does not touch; it may do so from any one thread.
unsafe impl Send for Consumer {}

impl Consumer {
    pub fn capacity(&self) -> u64 {
        self.cap
    }

    /// The arena's block size: no region [`Consumer::addr_of`] lends spans two.
    pub fn block_size(&self) -> u64 {
        self.block
    }

    /// Position up to which the producer has published bytes.
    pub fn committed(&self) -> u64 {
        self.shared.committed.load(Ordering::Acquire)
    }

    /// Position before which bytes have been released.
    pub fn released(&self) -> u64 {
        self.released
    }

    /// Fraction of the arena holding published data not yet released, in 0..=1.
    pub fn fill(&self) -> f64 {
        self.committed().saturating_sub(self.released) as f64 / self.cap as f64
    }

    /// The arena's use (see [`Gauge`]).
    pub fn gauge(&self) -> Gauge {
        Gauge(self.shared.clone())
    }

    /// The arena block holding stream position `pos` (committed, not released).
    #[inline]
    fn block_of(&self, pos: u64) -> u32 {
        self.shared.map[((pos / self.block) % self.blocks) as usize].load(Ordering::Acquire)
    }

    /// Memory address of stream position `pos` (committed and not released), the number of
    /// bytes from there to the end of its block, and the block's index in the arena. For
    /// handing regions to the kernel (see `uring::Writer::write_ring`); no Rust reference is
    /// formed.
    pub fn addr_of(&self, pos: u64) -> (*const u8, u64, u32) {
        let b = self.block_of(pos);
        let off = pos % self.block;
        // SAFETY: b < blocks and off < block, so the pointer stays inside the mapping (a
        // slot of a block not taken names NONE, and `wrapping_add` keeps that pointer inert).
        (self.base.wrapping_add((u64::from(b) * self.block + off) as usize), self.block - off, b)
    }

    /// The furthest end [`Consumer::slices`] lends from `start`: the end of the block after
    /// `start`'s (a record, at most a block long, that starts in one block ends by then).
    pub fn reach(&self, start: u64) -> u64 {
        (start / self.block + 2) * self.block
    }

    /// Borrows the bytes `[start, end)` as one or two slices (two when the
    /// region spans two blocks). `None` unless the whole region is committed and not yet
    /// released, and ends by [`Consumer::reach`]`(start)`.
    pub fn slices(&self, start: u64, end: u64) -> Option<(&[u8], &[u8])> {
        if start < self.released || end < start || end > self.committed() || end > self.reach(start) {
            return None;
        }
        let first_end = end.min((start / self.block + 1) * self.block);
        let (p, _, _) = self.addr_of(start);
        // SAFETY: [start, end) is committed (the Acquire load above pairs with the
        // producer's Release store after writing it, and the block map's Release store
        // before it) and not released, so the producer will not write it while `&self` is
        // borrowed: releasing it takes `&mut self`. Each piece lies in its block.
        unsafe {
            let a = std::slice::from_raw_parts(p, (first_end - start) as usize);
            let b = if end > first_end {
                std::slice::from_raw_parts(self.addr_of(first_end).0, (end - first_end) as usize)
            } else {
                &[]
            };
            Some((a, b))
        }
    }

    /// Copies the bytes `[start, end)` into `out` (replacing what it held), across as many
    /// blocks as they span; false, with `out` unchanged, unless they are committed and not
    /// released.
    pub fn copy_out(&self, start: u64, end: u64, out: &mut Vec<u8>) -> bool {
        if start < self.released || end < start || end > self.committed() {
            return false;
        }
        out.clear();
        let mut pos = start;
        while pos < end {
            let (p, room, _) = self.addr_of(pos);
            let n = room.min(end - pos);
            // SAFETY: as in `slices`: [pos, pos + n) is committed, not released, and lies in
            // one block.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, n as usize) });
            pos += n;
        }
        true
    }

    /// Lets the producer overwrite everything before `upto`: the blocks it passes whole go
    /// back to the free set. Positions only move forward; a smaller `upto` is ignored.
    pub fn release(&mut self, upto: u64) {
        if upto <= self.released {
            return;
        }
        let s = &*self.shared;
        for l in self.released / self.block..upto / self.block {
            // A stream block the head only padded into was never taken.
            let slot = &s.map[(l % self.blocks) as usize];
            let b = slot.swap(NONE, Ordering::Acquire);
            if b != NONE {
                s.free[(b / 64) as usize].fetch_or(1u64 << (b % 64), Ordering::Release);
            }
        }
        self.released = upto;
        s.released.store(upto, Ordering::Release);
    }

    /// The backing buffer.
    pub fn buffer(&self) -> &AlignedBuf {
        &self.shared.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An arena of `blocks` blocks in 2 MiB, and its block size.
    fn arena(blocks: u64) -> (Producer, Consumer, u64) {
        let buf = AlignedBuf::new(2 << 20, false).unwrap();
        let (p, c) = byte_ring_blocks(buf, (2 << 20) / blocks);
        assert_eq!(p.capacity() / c.block_size(), blocks);
        let block = c.block_size();
        (p, c, block)
    }

    #[test]
    fn a_writer_that_keeps_up_reuses_the_lowest_blocks() {
        let (mut p, mut c, block) = arena(32);
        assert_eq!(c.gauge().high_water(), 0, "nothing taken before the first write");
        let rec = vec![5u8; 1514];
        // Many laps' worth of records, each block released soon after it is full.
        for i in 0..20_000u64 {
            assert!(p.has_room(rec.len() as u64) && p.write(&rec));
            if i % 64 == 0 {
                p.publish();
                c.release(p.head().saturating_sub(block));
            }
        }
        assert!(p.head() > 10 * p.capacity());
        assert!(c.gauge().high_water() <= 4 * block, "high water {}", c.gauge().high_water());
        // A writer that falls behind takes more, lowest first.
        let before = c.gauge().high_water();
        for _ in 0..(8 * block as usize / rec.len()) {
            assert!(p.has_room(rec.len() as u64) && p.write(&rec));
        }
        assert!(c.gauge().high_water() >= before + 6 * block && c.gauge().high_water() <= 12 * block);
    }

    #[test]
    fn room_comes_back_in_whole_blocks() {
        let (mut p, mut c, block) = arena(4);
        let cap = p.capacity();
        let big = vec![7u8; cap as usize - 10];
        assert!(p.has_room(big.len() as u64) && p.write(&big));
        assert!(!p.has_room(20));
        c.release(100);
        assert!(!p.has_room(20), "a block comes back once it is passed whole");
        c.release(block);
        assert!(p.has_room(20));
        assert!(p.write(&[1u8; 20]));
        assert!(c.slices(cap - 10, cap + 10).is_none(), "not published yet");
        p.publish();
        assert!(c.slices(50, 60).is_none(), "released");
        let (a, b) = c.slices(cap - 10, cap + 10).unwrap();
        assert_eq!((a.len(), b.len()), (10, 10));
        assert!(a.iter().chain(b).all(|&x| x == 1));
        // The new stream block lives in the block given back, the lowest free one.
        assert_eq!(c.addr_of(cap).2, 0);
        assert!(c.slices(cap - 10, c.reach(cap - 10) + 1).is_none(), "beyond two blocks");
    }

    #[test]
    fn written_bytes_until_overwritten() {
        let (mut p, mut c, block) = arena(4);
        let cap = p.capacity();
        assert!(p.write(&vec![3u8; cap as usize - 10]));
        assert!(p.written(0, cap - 9).is_none(), "past head");
        let (a, b) = p.written(5, 100).unwrap();
        assert_eq!((a.len(), b.len()), (95, 0));
        let (a, b) = p.written(block - 5, block + 5).unwrap();
        assert_eq!((a.len(), b.len()), (5, 5));
        assert!(p.written(5, 2 * block + 5).is_none(), "three blocks");
        c.release(block);
        // Released but not yet taken again: the bytes are still there.
        assert!(p.written(5, 100).is_some());
        assert!(p.has_room(20) && p.write(&[1u8; 20]));
        // Block 0 now holds the stream's fifth block: its first stretch is gone.
        assert!(p.written(9, 12).is_none());
        let (a, b) = p.written(cap - 12, cap + 10).unwrap();
        assert_eq!((a, b.len()), (&[3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1][..], 10));
        assert!(b.iter().all(|&x| x == 1));
        assert!(p.written(10, 10).is_some_and(|(a, b)| a.is_empty() && b.is_empty()));
    }

    #[test]
    fn lines_are_asked_for_once_a_step_at_a_time() {
        let (mut p, mut c, block) = arena(4);
        assert!(p.write(&[1; 1]));
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, 4096 + LINE);
        // Less than a step further: nothing asked for.
        assert!(p.write(&[1; 100]));
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, 4096 + LINE);
        // A step further: up to the line past head + 4096.
        assert!(p.write(&[1; 499]));
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, (600 + 4096u64).next_multiple_of(LINE));
        // A head that jumps past what was asked for starts again from its line.
        p.pad_to(8192);
        assert!(p.write(&[1; 1]));
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, 8192 + 4096 + LINE);
        // Not past the block's end (its successor is not taken yet) ...
        let gap = block - 1000 - p.head();
        assert!(p.write(&vec![0; gap as usize]));
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, block);
        // ... nor past what the consumer still holds (nothing released: the arena's end).
        let gap = p.capacity() - 1000 - p.head();
        assert!(p.has_room(gap) && p.write(&vec![0; gap as usize]));
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, p.capacity());
        // Released: in the next block, never more than PREFETCH_MAX ahead.
        p.publish();
        c.release(p.head());
        assert!(p.has_room(2000) && p.write(&[0; 2000]));
        p.prefetch_ahead(u64::MAX);
        assert_eq!(p.prefetched, (p.head() + PREFETCH_MAX).next_multiple_of(LINE));
    }

    #[test]
    fn every_length_and_place_is_written_exactly() {
        // Every length through the inline copies and past them, each written
        // at offsets that cross a block's end too, with bytes that differ
        // from their neighbours; the arena is read back after each write.
        let (mut p, mut c, block) = arena(4);
        let mut k = 0u8;
        for len in 0..=SMALL + 8 {
            for before_end in [len + 3, len, len / 2, 1, 0] {
                // Bring the head to `before_end` bytes before a block's end.
                let head = p.head();
                let target = (head / block + 1) * block - before_end as u64;
                let gap = target - head;
                p.publish();
                c.release(head);
                assert!(p.has_room(gap) && p.write(&vec![0xee; gap as usize]));
                p.publish();
                c.release(p.head());
                assert!(p.has_room(len as u64 + 4));
                let frame: Vec<u8> = (0..len).map(|i| k.wrapping_add((i as u8).wrapping_mul(13))).collect();
                k = k.wrapping_add(1);
                let at = p.head();
                // A hint at any distance (capped at the block's end) changes nothing.
                for dist in [0, 64, before_end as u64, 4096, p.capacity(), u64::MAX] {
                    p.prefetch_ahead(dist);
                }
                assert!(p.write(&[0xaa]) && p.write(&frame) && p.write_array(&[0xbb; 3]));
                let (a, b) = p.written(at, p.head()).unwrap();
                let back: Vec<u8> = a.iter().chain(b).copied().collect();
                let want: Vec<u8> = [&[0xaa][..], &frame, &[0xbb; 3]].concat();
                assert_eq!(back, want, "length {len}, {before_end} bytes before the end");
                p.publish();
                let (a, b) = c.slices(at, p.head()).unwrap();
                assert_eq!(a.iter().chain(b).copied().collect::<Vec<u8>>(), want, "the consumer's view");
            }
        }
    }

    #[test]
    fn a_rewind_takes_back_bytes_and_the_blocks_taken_for_them() {
        let (mut p, mut c, block) = arena(8);
        assert!(p.write(&vec![1u8; block as usize - 100]));
        p.publish();
        let at = p.head();
        // A record across three blocks, taken back: the blocks go back to the free set.
        assert!(p.write(&vec![2u8; 2 * block as usize + 50]));
        assert_eq!(c.gauge().high_water(), 3 * block);
        p.rewind(at);
        assert_eq!(p.head(), at);
        assert!(p.write(&[3u8; 200]));
        p.publish();
        let (a, b) = c.slices(at - 10, at + 200).unwrap();
        let got: Vec<u8> = a.iter().chain(b).copied().collect();
        assert_eq!(got, [&[1u8; 10][..], &[3u8; 200]].concat());
        // The block after the first is the one given back (the lowest free), not a fourth.
        assert_eq!(c.addr_of(at + 150).2, 1);
        c.release(p.head());
        // A rewind inside one block.
        let at = p.head();
        assert!(p.write(&[4u8; 10]));
        p.rewind(at + 4);
        assert!(p.write(&[5u8; 2]));
        p.publish();
        let (a, _) = c.slices(at, at + 6).unwrap();
        assert_eq!(a, &[4, 4, 4, 4, 5, 5]);
    }

    #[test]
    fn the_stream_reads_back_whatever_blocks_it_lands_in() {
        // Records of every size up to a block, released at uneven places, as a writer does:
        // the consumer reads each back byte for byte, and the block map never lends out a
        // block the producer has taken again.
        let (mut p, mut c, block) = arena(6);
        let mut next = 0u64;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let byte = |pos: u64| (pos ^ (pos >> 11)) as u8;
        let mut pending: std::collections::VecDeque<(u64, u64)> = Default::default();
        for _ in 0..4000 {
            let len = match rand() % 4 {
                0 => rand() % 100,
                1 => rand() % 2000,
                2 => rand() % (block / 2),
                _ => rand() % block,
            };
            while !p.has_room(len) {
                let (s, e) = pending.pop_front().expect("room once everything is released");
                let (a, b) = c.slices(s, e).unwrap();
                for (i, x) in a.iter().chain(b).enumerate() {
                    assert_eq!(*x, byte(s + i as u64), "byte {} of [{s}, {e})", s + i as u64);
                }
                c.release(e);
            }
            let bytes: Vec<u8> = (next..next + len).map(byte).collect();
            assert!(p.write(&bytes));
            if rand() % 3 == 0 {
                p.pad_to(4096);
            }
            p.publish();
            pending.push_back((next, next + len));
            next = p.head();
        }
        assert!(next > 20 * p.capacity());
    }
}
