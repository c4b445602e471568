//! Disk reserved ahead of the writer's O_DIRECT writes.

use super::fd_space;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Allocates `len` bytes of disk at `offset` for `file` and extends its size
/// to cover them (fallocate mode 0; the new range reads as zeros).
///
/// The writer preallocates its output files this way so that its O_DIRECT
/// writes land inside the file size. On ext4 and XFS a write that extends the
/// file needs the inode lock exclusively, so io_uring cannot issue it inline
/// and hands it to a kernel worker thread (`iou-wrk`) instead; a write inside
/// the size into allocated blocks is issued straight from the submitting
/// thread. The file is cut to its exact length when it closes; after a
/// crash, recovery reads only up to the first hole ([`data_end`](super::data_end)), so the
/// unwritten tail is never mistaken for records. Not every file system can
/// (EOPNOTSUPP); callers may ignore the error and write past the end instead.
pub fn fallocate_extend(file: &File, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: plain syscall on an owned fd.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, offset as libc::off_t, len as libc::off_t) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A whole file is preallocated at once only when it is at most this
/// fraction (1/`WHOLE_SHARE`) of the volume's free space.
const WHOLE_SHARE: u64 = 2;

/// Preallocation of one output file ahead of its O_DIRECT writes
/// ([`fallocate_extend`]).
///
/// The first call covers the whole expected size at once: a new file has no
/// write in flight yet, and ext4 and XFS make `fallocate` wait for *every*
/// direct write in flight on the inode (`inode_dio_wait`), so each later
/// call would drain the writer's queue and leave the disk idle while it
/// refills. In 64 MiB steps that was 16 drains per GiB and 2.5-5% of the
/// throughput on this VM's disk (DESIGN.md, "Preallocation"). Where the
/// whole size cannot be had (a nearly full volume), it goes on in `step`s,
/// as far as the space lasts, and so it does for a file larger than half
/// of the free space. The file is cut to its length on close either way.
#[derive(Debug, Clone, Copy)]
pub struct Prealloc {
    allocated: u64,
    whole_refused: bool,
}

impl Prealloc {
    /// For a new file: `whole` when it is written O_DIRECT; a file written
    /// through the page cache gains nothing from a whole-file call (on tmpfs
    /// it would take the memory at once), so it gets the steps alone.
    pub fn new(whole: bool) -> Prealloc {
        Prealloc { allocated: 0, whole_refused: !whole }
    }

    /// Makes `[0, end)` of `file` allocated (best effort) when it is not yet:
    /// at first `size` (rounded up to pages), later `step` at a time. Never
    /// beyond `size` unless `end` is.
    pub fn ensure(&mut self, file: &File, end: u64, size: u64, step: u64) {
        if step == 0 || end <= self.allocated {
            return;
        }
        let page = crate::uring::DIRECT_ALIGN;
        let cap = size.next_multiple_of(page).max(end.next_multiple_of(page));
        if self.allocated == 0 && !self.whole_refused {
            // Only what the volume can easily spare: ext4 keeps what a failed
            // fallocate got, so asking for far more than is free (`--file-size
            // 1T`) would fill the volume for every other writer until close.
            let spare = fd_space(file).map_or(0, |(free, _)| free / WHOLE_SHARE);
            if cap <= spare && fallocate_extend(file, 0, cap).is_ok() {
                self.allocated = cap;
                return;
            }
            self.whole_refused = true;
        }
        let to = end.next_multiple_of(step).min(cap);
        let _ = fallocate_extend(file, self.allocated, to - self.allocated);
        self.allocated = to;
    }

    /// Bytes from the start the file has been extended over.
    pub fn allocated(&self) -> u64 {
        self.allocated
    }
}

/// Reserves `len` bytes of disk at `offset` for `file` without changing its
/// size, so the writes that follow need no block allocation. Not every file
/// system can (EOPNOTSUPP); callers may ignore the error.
pub fn fallocate_keep_size(file: &File, offset: u64, len: u64) -> io::Result<()> {
    // SAFETY: plain syscall on an owned fd.
    let r = unsafe {
        libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, offset as libc::off_t, len as libc::off_t)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
