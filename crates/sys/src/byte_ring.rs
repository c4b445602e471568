//! A single-producer single-consumer byte ring over an [`AlignedBuf`]: the arena.
//!
//! The capture worker (producer) appends file bytes at `head`; the writer
//! (consumer) hands committed regions to the kernel and then *releases* them,
//! which lets the producer reuse the space. Positions are monotonic `u64`
//! stream offsets; the ring offset is `pos % capacity`.
//!
//! Two positions are shared, each written by one side only:
//! * `committed` (producer stores with Release, consumer loads with Acquire):
//!   every byte before it is written and will not change until released;
//! * `released` (consumer stores with Release, producer loads with Acquire):
//!   the producer may overwrite every byte before `released + capacity`.
//!
//! The consumer's API is safe: it lends out only bytes in
//! `[released, committed)`, and `release` needs `&mut self`, so no borrow can
//! outlive the release of the bytes it points to.

use crate::mem::AlignedBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

struct Shared {
    buf: AlignedBuf,
    /// Everything before this stream position may be overwritten.
    released: AtomicU64,
    /// Everything before this stream position is written and stable.
    committed: AtomicU64,
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
/// The furthest [`Producer::prefetch_ahead`] asks ahead (less than the
/// smallest ring, 2 MiB, by a line at least).
const PREFETCH_MAX: u64 = 64 << 10;
const _: () = assert!(PREFETCH_MAX + LINE <= crate::mem::HUGE_PAGE as u64);

/// [`Producer::prefetch_ahead`] asks for lines this many bytes at a time.
const PREFETCH_STEP: u64 = 512;

/// Splits an aligned buffer into the two ends of a byte ring.
pub fn byte_ring(buf: AlignedBuf) -> (Producer, Consumer) {
    let cap = buf.len() as u64;
    // AlignedBuf rounds to whole 2 MiB pages; prefetch_ahead relies on it.
    assert!(cap.is_multiple_of(LINE) && cap >= PREFETCH_MAX + LINE, "ring of {cap} bytes");
    let base = buf.as_ptr();
    let shared = Arc::new(Shared { buf, released: AtomicU64::new(0), committed: AtomicU64::new(0) });
    (
        Producer { shared: shared.clone(), base, cap, head: 0, off: 0, limit: cap, prefetched: 0 },
        Consumer { shared, base, cap, released: 0 },
    )
}

/// The writing end, owned by one capture worker. Hot path: no atomics unless
/// the cached free space runs out.
pub struct Producer {
    shared: Arc<Shared>,
    base: *mut u8,
    cap: u64,
    head: u64,
    /// `head % cap`, kept up to date instead of computed per write: a 64-bit
    /// division took a third of a 64-byte packet's append on this VM's cores
    /// (the capacity is not always a power of two).
    off: u64,
    /// Cached `released + cap`: the producer may write below this position.
    limit: u64,
    /// Every arena line before this stream position was asked for by
    /// [`Producer::prefetch_ahead`] (a multiple of [`LINE`]).
    prefetched: u64,
}

// SAFETY: the producer is the only writer of the region between `released`
// and `released + cap`; moving it to another thread moves that right with it.
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

    /// True if `n` more bytes fit without overwriting unreleased data.
    #[inline]
    pub fn has_room(&mut self, n: u64) -> bool {
        if self.head + n <= self.limit {
            return true;
        }
        self.limit = self.shared.released.load(Ordering::Acquire) + self.cap;
        self.head + n <= self.limit
    }

    /// Fraction of the ring holding data not yet released, in 0..=1.
    pub fn fill(&self) -> f64 {
        let released = self.shared.released.load(Ordering::Relaxed);
        self.head.saturating_sub(released) as f64 / self.cap as f64
    }

    /// Appends `bytes` at `head`, wrapping at the end of the ring.
    ///
    /// The caller must have checked [`Producer::has_room`] for at least
    /// `bytes.len()`; this is asserted in debug builds and, in release builds,
    /// enforced by refusing the write (returns false) rather than corrupting
    /// data the consumer still uses.
    #[inline]
    pub fn write(&mut self, bytes: &[u8]) -> bool {
        let n = bytes.len() as u64;
        if self.head + n > self.limit {
            debug_assert!(false, "byte ring overrun");
            return false;
        }
        debug_assert_eq!(self.off, self.head % self.cap);
        let off = self.off as usize;
        if bytes.len() <= SMALL && off + bytes.len() <= self.cap as usize {
            // SAFETY: as below, and off + len <= cap: the bytes fit before the ring's end.
            unsafe { copy_small(bytes, self.base.add(off)) };
            self.advance(n);
            return true;
        }
        let first = bytes.len().min(self.cap as usize - off);
        // SAFETY: [head, head+n) lies below `limit`, so the consumer released
        // it (or never had it) and will not read it until the producer commits
        // it again; off+first <= cap and the rest (n-first <= cap) starts at 0.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(off), first);
            if first < bytes.len() {
                std::ptr::copy_nonoverlapping(bytes.as_ptr().add(first), self.base, bytes.len() - first);
            }
        }
        self.advance(n);
        true
    }

    /// [`Producer::write`] of a few bytes whose number is known at compile
    /// time (a record header): away from the ring's end, a fixed-size copy
    /// the compiler inlines (two vector stores), not a call to `memcpy`.
    #[inline]
    pub fn write_array<const N: usize>(&mut self, bytes: &[u8; N]) -> bool {
        if self.off as usize + N > self.cap as usize || self.head + N as u64 > self.limit {
            return self.write(bytes);
        }
        // SAFETY: as in `write`: [head, head+N) lies below `limit`, and
        // off + N <= cap, so the N bytes at `off` are inside the ring.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(self.off as usize), N) };
        self.advance(N as u64);
        true
    }

    /// Asks for every arena line up to `ahead` bytes (at most
    /// `PREFETCH_MAX`, and not past what the consumer still holds) past
    /// the head that no earlier call asked for: each line once a lap, about
    /// `ahead` bytes before the records reach it, `PREFETCH_STEP` bytes of
    /// lines or more at a time (an `ahead` below that asks only for lines
    /// the head has reached; lines a jump of the head skips are not asked
    /// for). The arena's lines were last written a lap ago and, read by the
    /// disk since, are in no cache; a store into one that was not asked for
    /// waits for it (a 1514-byte record's header stalled so while one line
    /// 512 bytes ahead was asked for per record, with PREFETCHW). Into the
    /// second-level cache ([`crate::mem::prefetch_l2`]): PREFETCHW, into
    /// the first, measured 4-10 ns more per 1514-byte or IMIX packet, its
    /// requests competing with the copy's loads and the reducers' bucket
    /// prefetches for the first level's miss buffers (RESULTS.md,
    /// 2026-11-28).
    #[inline(always)]
    pub fn prefetch_ahead(&mut self, ahead: u64) {
        let to = (self.head + ahead.min(PREFETCH_MAX)).min(self.limit);
        if to < self.prefetched + PREFETCH_STEP {
            return;
        }
        let head_line = self.head & !(LINE - 1);
        let p = self.prefetched.max(head_line);
        // The head's line in the ring (the capacity is a multiple of LINE,
        // so the head and its offset lie as far into their lines).
        let off_line = self.off - (self.head - head_line);
        // The lines from p up to `to`, as at most two runs of the ring's memory (before and
        // after its end), each a plain walk of addresses.
        let mut at = off_line + (p - head_line);
        if at >= self.cap {
            at -= self.cap;
        }
        debug_assert_eq!(at, p % self.cap);
        let lines = (to - p).div_ceil(LINE);
        let first = lines.min((self.cap - at) / LINE);
        // SAFETY: at < cap (p - head_line < PREFETCH_MAX + LINE <= cap, so one subtraction
        // wraps it) and the cap is a multiple of LINE: the first run's lines lie in the ring
        // (its pointer ends at most one past the ring's end), the second's start at its base
        // and are at most PREFETCH_MAX / LINE (< cap / LINE).
        unsafe {
            let mut a = self.base.add(at as usize);
            for _ in 0..first {
                crate::mem::prefetch_l2(a);
                a = a.add(LINE as usize);
            }
            let mut a = self.base;
            for _ in first..lines {
                crate::mem::prefetch_l2(a);
                a = a.add(LINE as usize);
            }
        }
        self.prefetched = p + lines * LINE;
    }

    /// Moves `head` (and its ring offset) `n` bytes on; `n` is at most the capacity.
    #[inline]
    fn advance(&mut self, n: u64) {
        self.head += n;
        self.off += n;
        if self.off >= self.cap {
            self.off -= self.cap;
        }
    }

    /// The bytes `[start, end)` this producer wrote, as one or two slices
    /// (two when the region wraps); `None` when `end` is past `head` or
    /// when some of them may be overwritten already (more than the ring's
    /// capacity written since `start`). The consumer may be reading them at
    /// the same time: both only read.
    #[inline]
    pub fn written(&self, start: u64, end: u64) -> Option<(&[u8], &[u8])> {
        if end < start || end > self.head || self.head - start > self.cap {
            return None;
        }
        let off = (start % self.cap) as usize;
        let first = ((end - start) as usize).min(self.cap as usize - off);
        let rest = (end - start) as usize - first;
        // SAFETY: [start, end) was written by this producer and not written
        // again since (head - start <= cap); only `write`, which takes `&mut
        // self`, writes the ring. off + first <= cap and rest <= off.
        unsafe {
            Some((std::slice::from_raw_parts(self.base.add(off), first), std::slice::from_raw_parts(self.base, rest)))
        }
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

    /// Position up to which the producer has published bytes.
    pub fn committed(&self) -> u64 {
        self.shared.committed.load(Ordering::Acquire)
    }

    /// Position before which bytes have been released.
    pub fn released(&self) -> u64 {
        self.released
    }

    /// Fraction of the ring holding published data not yet released, in 0..=1.
    pub fn fill(&self) -> f64 {
        self.committed().saturating_sub(self.released) as f64 / self.cap as f64
    }

    /// Memory address of stream position `pos` and the number of bytes from
    /// there to the end of the ring. For handing regions to the kernel
    /// (see `uring::Writer::write_ring`); no Rust reference is formed.
    pub fn addr_of(&self, pos: u64) -> (*const u8, u64) {
        let off = pos % self.cap;
        // SAFETY: off < cap, so the pointer stays inside the mapping.
        (unsafe { self.base.add(off as usize) }, self.cap - off)
    }

    /// Borrows the bytes `[start, end)` as one or two slices (two when the
    /// region wraps). `None` unless the whole region is committed and not yet
    /// released.
    pub fn slices(&self, start: u64, end: u64) -> Option<(&[u8], &[u8])> {
        if start < self.released || end < start || end > self.committed() || end - start > self.cap {
            return None;
        }
        let (p, room) = self.addr_of(start);
        let first = (end - start).min(room) as usize;
        let rest = (end - start) as usize - first;
        // SAFETY: [start, end) is committed (Acquire load above pairs with the
        // producer's Release store after writing it) and not released, so the
        // producer will not write it while `&self` is borrowed: releasing it
        // takes `&mut self`. first <= cap - off and rest <= off.
        unsafe { Some((std::slice::from_raw_parts(p, first), std::slice::from_raw_parts(self.base, rest))) }
    }

    /// Lets the producer overwrite everything before `upto`. Positions only
    /// move forward; a smaller `upto` is ignored.
    pub fn release(&mut self, upto: u64) {
        if upto > self.released {
            self.released = upto;
            self.shared.released.store(upto, Ordering::Release);
        }
    }

    /// The backing buffer.
    pub fn buffer(&self) -> &AlignedBuf {
        &self.shared.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_and_respects_release() {
        let (mut p, mut c) = byte_ring(AlignedBuf::new(1, false).unwrap());
        let cap = p.capacity();
        let big = vec![7u8; cap as usize - 10];
        assert!(p.has_room(big.len() as u64));
        assert!(p.write(&big));
        assert!(!p.has_room(20));
        c.release(100);
        assert!(p.has_room(20));
        assert!(p.write(&[1u8; 20]));
        assert!(c.slices(cap - 10, cap + 10).is_none(), "not published yet");
        p.publish();
        assert!(c.slices(50, 60).is_none(), "released");
        let (a, b) = c.slices(cap - 10, cap + 10).unwrap();
        assert_eq!((a.len(), b.len()), (10, 10));
        assert!(a.iter().chain(b).all(|&x| x == 1));
    }

    #[test]
    fn written_bytes_until_overwritten() {
        let (mut p, mut c) = byte_ring(AlignedBuf::new(1, false).unwrap());
        let cap = p.capacity();
        assert!(p.write(&vec![3u8; cap as usize - 10]));
        assert!(p.written(0, cap - 9).is_none(), "past head");
        let (a, b) = p.written(5, cap - 10).unwrap();
        assert_eq!((a.len(), b.len()), (cap as usize - 15, 0));
        c.release(cap);
        assert!(p.has_room(20));
        assert!(p.write(&[1u8; 20]));
        // [0, 10) is overwritten by the wrap; [10, ..) is not.
        assert!(p.written(9, 12).is_none());
        let (a, b) = p.written(cap - 12, cap + 10).unwrap();
        assert_eq!((a, b.len()), (&[3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1][..], 10));
        assert!(b.iter().all(|&x| x == 1));
        assert!(p.written(10, 10).is_some_and(|(a, b)| a.is_empty() && b.is_empty()));
    }

    #[test]
    fn lines_are_asked_for_once_a_step_at_a_time() {
        let (mut p, mut c) = byte_ring(AlignedBuf::new(1, false).unwrap());
        let cap = p.capacity();
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, 4096);
        // Less than a step further: nothing asked for.
        assert!(p.write(&[1; 100]));
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, 4096);
        // A step further: up to the line past head + 4096.
        assert!(p.write(&[1; 500]));
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, (600 + 4096u64).next_multiple_of(LINE));
        // A head that jumps past what was asked for starts again from its line.
        p.pad_to(8192);
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, 8192 + 4096);
        // Not past what the consumer still holds (nothing released: the ring's end).
        let gap = cap - 1000 - p.head();
        assert!(p.has_room(gap) && p.write(&vec![0; gap as usize]));
        p.prefetch_ahead(4096);
        assert_eq!(p.prefetched, cap);
        // Released: across the ring's end, never more than PREFETCH_MAX ahead.
        c.release(p.head());
        assert!(p.has_room(cap));
        p.prefetch_ahead(u64::MAX);
        assert_eq!(p.prefetched, (cap - 1000 + PREFETCH_MAX).next_multiple_of(LINE));
    }

    #[test]
    fn every_length_and_place_is_written_exactly() {
        // Every length through the inline copies and past them, each written
        // at offsets that cross the ring's end too, with bytes that differ
        // from their neighbours; the ring is read back after each write.
        let (mut p, mut c) = byte_ring(AlignedBuf::new(1, false).unwrap());
        let cap = p.capacity();
        let mut k = 0u8;
        for len in 0..=SMALL + 8 {
            for before_end in [len + 3, len, len / 2, 1, 0] {
                // Bring the ring's offset to `before_end` bytes before its end.
                let head = p.head();
                let target = (head / cap + 1) * cap - before_end as u64;
                let gap = if target >= head { target - head } else { target + cap - head };
                c.release(head);
                assert!(p.has_room(gap) && p.write(&vec![0xee; gap as usize]));
                c.release(p.head());
                assert!(p.has_room(len as u64 + 4));
                let frame: Vec<u8> = (0..len).map(|i| k.wrapping_add((i as u8).wrapping_mul(13))).collect();
                k = k.wrapping_add(1);
                let at = p.head();
                // A hint at any distance (capped, wrapping at the ring's end)
                // changes nothing; the loop's debug assertion checks each line's place.
                for dist in [0, 64, before_end as u64, 4096, cap, u64::MAX] {
                    p.prefetch_ahead(dist);
                }
                assert!(p.write(&[0xaa]) && p.write(&frame) && p.write_array(&[0xbb; 3]));
                let (a, b) = p.written(at, p.head()).unwrap();
                let back: Vec<u8> = a.iter().chain(b).copied().collect();
                let want: Vec<u8> = [&[0xaa][..], &frame, &[0xbb; 3]].concat();
                assert_eq!(back, want, "length {len}, {before_end} bytes before the end");
            }
        }
    }
}
