//! Large page-aligned buffers for the arena.
//!
//! The arena must be page-aligned (O_DIRECT), pre-faulted (no page fault on
//! the capture path) and, where the system has reserved hugepages, backed by
//! them (fewer TLB misses while copying gigabytes a second).

use std::io;
use std::ptr::NonNull;
use std::sync::Arc;

/// How an [`AlignedBuf`] is backed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backing {
    /// Reserved 2 MiB hugepages (`MAP_HUGETLB`).
    HugeTlb,
    /// Ordinary pages with transparent hugepages requested (`MADV_HUGEPAGE`).
    Transparent,
}

/// An anonymous, page-aligned mapping, faulted in (wholly by [`AlignedBuf::new`], its first
/// part by [`AlignedBuf::new_partly`]), unmapped once it and its [`Unfaulted`] rest are dropped.
pub struct AlignedBuf {
    map: Arc<Mapping>,
    backing: Backing,
}

/// The mapping itself: unmapped when the last of the [`AlignedBuf`] and its
/// [`Unfaulted`] rest is dropped.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; access to its
// contents is governed by whoever holds the pointer (see `byte_ring`).
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` only exposes the pointer and length.
unsafe impl Sync for Mapping {}

/// Size of a huge page on x86_64 Linux.
pub const HUGE_PAGE: usize = 2 << 20;

/// The part of an [`AlignedBuf`] that [`AlignedBuf::new_partly`] left to be
/// faulted in later, by [`Unfaulted::step`] (on a thread of its own, ahead
/// of the buffer's users: a write to a page not faulted in yet faults it
/// itself, which is correct but slow). It keeps the mapping alive.
pub struct Unfaulted {
    map: Arc<Mapping>,
    /// Faulted in below this offset.
    at: usize,
}

impl Unfaulted {
    /// Bytes faulted in so far, from the start of the buffer.
    pub fn faulted(&self) -> usize {
        self.at
    }

    /// Bytes still to fault in.
    pub fn left(&self) -> usize {
        self.map.len - self.at
    }

    /// Faults in (writable, zero-filled where not present) the next `step` bytes rounded up
    /// to whole 2 MiB pages, in order; returns how many (0: done). Pages already present, such as ones the buffer's user wrote
    /// meanwhile, keep their contents: `MADV_POPULATE_WRITE` only fills holes.
    pub fn step(&mut self, step: usize) -> io::Result<usize> {
        let n = step.next_multiple_of(HUGE_PAGE).min(self.left());
        if n > 0 {
            // SAFETY: [at, at + n) lies inside the mapping, which `self.map` keeps mapped;
            // MADV_POPULATE_WRITE changes no byte of a present page and fills holes with zeros,
            // as the buffer's first write into them would.
            if unsafe { libc::madvise(self.map.ptr.as_ptr().add(self.at).cast(), n, libc::MADV_POPULATE_WRITE) } != 0 {
                return Err(io::Error::last_os_error());
            }
            self.at += n;
        }
        Ok(n)
    }
}

impl AlignedBuf {
    /// Maps `len` bytes (rounded up to 2 MiB). Tries reserved hugepages first
    /// when `try_huge` is set, then falls back to ordinary pages.
    pub fn new(len: usize, try_huge: bool) -> io::Result<AlignedBuf> {
        Ok(Self::new_partly(len, try_huge, usize::MAX)?.0)
    }

    /// As [`AlignedBuf::new`], but faults in only the first `first` bytes (whole 2 MiB pages)
    /// of ordinary pages, and returns the rest for [`Unfaulted::step`] (`None`: all of it is
    /// faulted in, as always with reserved hugepages, and on kernels before 5.14).
    pub fn new_partly(len: usize, try_huge: bool, first: usize) -> io::Result<(AlignedBuf, Option<Unfaulted>)> {
        let len = len.div_ceil(HUGE_PAGE).max(1) * HUGE_PAGE;
        let base = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if try_huge {
            if let Some(ptr) = map(len, base | libc::MAP_HUGETLB) {
                return Ok((AlignedBuf { map: Arc::new(Mapping { ptr, len }), backing: Backing::HugeTlb }, None));
            }
        }
        // Ordinary pages: ask for transparent huge pages *before* the memory
        // is touched (MAP_POPULATE would fault it all in as 4 KiB pages
        // first), then fault it in: one fault and one TLB entry per 2 MiB.
        let ptr = map(len, base & !libc::MAP_POPULATE).ok_or_else(io::Error::last_os_error)?;
        let map = Arc::new(Mapping { ptr, len });
        let first = first.clamp(1, len).next_multiple_of(HUGE_PAGE);
        // SAFETY: ptr..ptr+len is the mapping just created; madvise only
        // changes the kernel's paging policy for it and faults it in (zeros).
        // Failure of either is harmless: pages then fault in on first use.
        unsafe {
            libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE);
            if libc::madvise(ptr.as_ptr().cast(), first, libc::MADV_POPULATE_WRITE) != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINVAL) {
                    // Out of memory (a cgroup limit, say): a clear error, not the OOM killer.
                    return Err(e);
                }
                // Kernels before 5.14: touch every page instead, all of them now (a later
                // touch could not tell a hole from a page the buffer's user wrote).
                for off in (0..len).step_by(4096) {
                    ptr.as_ptr().add(off).write_volatile(0);
                }
                return Ok((AlignedBuf { map, backing: Backing::Transparent }, None));
            }
        }
        let rest = (first < len).then(|| Unfaulted { map: map.clone(), at: first });
        Ok((AlignedBuf { map, backing: Backing::Transparent }, rest))
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.map.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.map.len
    }

    pub fn is_empty(&self) -> bool {
        self.map.len == 0
    }

    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is this value's mapping, alive as long as it; no `&mut` slice of
        // it made through this value can coexist with `&self`.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.len()) }
    }

    /// The buffer's bytes, writable (a small aligned buffer owned by one user, such as the
    /// zero-copy writer's file header and bounce buffer; the arena goes through `byte_ring`).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr..ptr+len is this value's mapping, alive as long as it; `&mut self` makes
        // this the only slice of it made through this value.
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), self.len()) }
    }
}

fn map(len: usize, flags: i32) -> Option<NonNull<u8>> {
    // SAFETY: an anonymous mapping with no address hint touches no existing memory.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, -1, 0) };
    if p == libc::MAP_FAILED {
        None
    } else {
        NonNull::new(p.cast())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe exactly the mapping created in `new`, and
        // no borrow of it can outlive `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// Asks the CPU to start loading the cache line at `ptr` (a hint: any
/// address is allowed, nothing is read, nothing faults). For walks over
/// memory another core wrote, whose next position is known or guessed
/// before the current one is done.
#[inline(always)]
pub fn prefetch(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    prefetch_hint::<{ std::arch::x86_64::_MM_HINT_T0 }>(ptr);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// [`prefetch`] into the second-level cache only (PREFETCHT1): for lines
/// needed a few microseconds later, whose request should not hold one of
/// the first-level cache's few miss buffers meanwhile. A line no other core
/// holds comes in exclusive even so: a store into it takes no second trip.
#[inline(always)]
pub fn prefetch_l2(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    prefetch_hint::<{ std::arch::x86_64::_MM_HINT_T1 }>(ptr);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// PREFETCHT0/T1/T2/NTA by `HINT` (`_MM_HINT_*`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch_hint<const HINT: i32>(ptr: *const u8) {
    // SAFETY: the PREFETCHh instructions never fault and read no memory into a
    // register; SSE is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<HINT>(ptr.cast());
    }
}

/// [`prefetch`] with the intent to write the line (PREFETCHW): the line
/// comes in exclusive, so the write that follows needs no second round trip
/// to the core that wrote it last. Where the CPU lacks PREFETCHW it is a
/// no-op (the instruction decodes as a NOP).
#[inline(always)]
pub fn prefetch_write(ptr: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHW never faults, reads no memory into a register and changes no flags;
    // CPUs without it (0F 0D /1) execute it as a NOP. Written as assembly: `_MM_HINT_ET0`
    // lowers to PREFETCHT0 unless the whole crate is built for `prfchw`.
    unsafe {
        std::arch::asm!("prefetchw [{0}]", in(reg) ptr, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// Asks for transparent huge pages behind the whole 2 MiB pages of a big
/// vector's buffer (`ptr`, `bytes` of capacity). For large buffers that are
/// filled once and reused, such as the index builder's run buffers: one fault
/// per 2 MiB instead of 512, which matters most in a VM, where every first
/// touch of a 4 KiB page is two faults deep. Only paging policy changes; the
/// contents do not. Best effort: errors are ignored.
pub fn advise_huge(ptr: *const u8, bytes: usize) {
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize).saturating_add(bytes) / HUGE_PAGE * HUGE_PAGE;
    if end > start {
        // SAFETY: madvise(MADV_HUGEPAGE) on whole pages of memory the caller
        // owns changes no contents and no access rights.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

/// An empty vector with room for `n` items, backed by transparent huge pages where it spans
/// whole ones ([`advise_huge`]; room for a 2 MiB page more is taken: the allocator aligns big
/// blocks to 4 KiB only). For big tables probed at random (flow tables): one TLB entry and one
/// fault per 2 MiB.
pub fn huge_vec<T>(n: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>().max(1);
    let slack = if n.saturating_mul(size) >= HUGE_PAGE { HUGE_PAGE / size } else { 0 };
    let v: Vec<T> = Vec::with_capacity(n + slack);
    advise_huge(v.as_ptr().cast(), v.capacity() * size);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_faults_in_later_keeping_what_was_written() {
        let (b, rest) = AlignedBuf::new_partly(9 << 20, false, 1).unwrap();
        assert_eq!(b.len(), 10 << 20);
        let mut rest = rest.expect("8 MiB left to fault in");
        assert_eq!(rest.left(), 8 << 20);
        // SAFETY: inside the mapping; nothing else uses it.
        unsafe {
            b.as_ptr().add(5 << 20).write(0xab);
            b.as_ptr().add(9 << 20).write(0xcd);
        }
        let mut total = 0;
        while let n @ 1.. = rest.step(3 << 20).unwrap() {
            total += n;
        }
        assert_eq!((total, rest.left()), (8 << 20, 0));
        drop(b);
        // The rest keeps the mapping: the bytes written before are there, the others zero.
        // SAFETY: `rest` keeps the mapping alive; nothing writes it any more.
        let s = unsafe { std::slice::from_raw_parts(rest.map.ptr.as_ptr(), rest.map.len) };
        assert_eq!((s[5 << 20], s[9 << 20], s[3 << 20], s[(9 << 20) + 1]), (0xab, 0xcd, 0, 0));
    }

    #[test]
    fn maps_aligned_zeroed_memory() {
        let b = AlignedBuf::new(3 << 20, true).unwrap();
        assert_eq!(b.len(), 4 << 20);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        // SAFETY: the mapping is len bytes long and nobody else uses it.
        let s = unsafe { std::slice::from_raw_parts(b.as_ptr(), b.len()) };
        assert!(s.iter().all(|&x| x == 0));
    }
}
