//! File output for the writer: O_DIRECT files and an io_uring with several
//! writes in flight.
//!
//! O_DIRECT bypasses the page cache (no double copy, no write-back storms),
//! but needs buffer address, file offset and length aligned to the logical
//! block size; the arena guarantees 4 KiB alignment. Where the file system
//! refuses O_DIRECT (tmpfs, some FUSE/ZFS setups) [`create_output`] falls back to
//! buffered I/O and says so through its return value.

use io_uring::{opcode, types, IoUring};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::byte_ring::Consumer;

/// Alignment wirevault uses for O_DIRECT (covers 512 and 4096-byte sectors).
pub const DIRECT_ALIGN: u64 = 4096;

/// Creates (truncating) `path` for writing with mode 0640, with O_DIRECT when
/// the file system allows it. Returns the file and whether O_DIRECT is on.
pub fn create_output(path: &Path, direct: bool) -> io::Result<(File, bool)> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let base = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC;
    if direct {
        // SAFETY: `c` is a valid NUL-terminated path; open has no other preconditions.
        let fd = unsafe { libc::open(c.as_ptr(), base | libc::O_DIRECT, 0o640) };
        if fd >= 0 {
            // SAFETY: fd was just opened and is owned by nobody else.
            return Ok((unsafe { File::from_raw_fd(fd) }, true));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(e);
        }
    }
    // SAFETY: as above.
    let fd = unsafe { libc::open(c.as_ptr(), base, 0o640) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    Ok((unsafe { File::from_raw_fd(fd) }, false))
}

/// Allocates `len` bytes of disk at `offset` for `file` and extends its size
/// to cover them (fallocate mode 0; the new range reads as zeros).
///
/// The writer preallocates its output files this way so that its O_DIRECT
/// writes land inside the file size. On ext4 and XFS a write that extends the
/// file needs the inode lock exclusively, so io_uring cannot issue it inline
/// and hands it to a kernel worker thread (`iou-wrk`) instead; a write inside
/// the size into allocated blocks is issued straight from the submitting
/// thread. The file is cut to its exact length when it closes; after a
/// crash, recovery reads only up to the first hole ([`data_end`]), so the
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

/// A completed write.
#[derive(Debug, Clone, Copy)]
pub struct Completion {
    pub user_data: u64,
    /// Bytes written, or a negative errno.
    pub result: i32,
}

/// Where the data of `file` ends: the start of its first hole (SEEK_HOLE),
/// or its length where the file system cannot tell. Preallocated but
/// unwritten extents (fallocate) and the range of a write that never
/// completed count as holes on ext4, XFS, btrfs and tmpfs.
pub fn data_end(file: &File) -> io::Result<u64> {
    use std::io::{Seek, SeekFrom};
    let len = file.metadata()?.len();
    let mut f = file;
    let cur = f.stream_position()?;
    // SAFETY: plain syscall on an owned fd; it only moves the file offset,
    // which is put back below.
    let hole = unsafe { libc::lseek(file.as_raw_fd(), 0, libc::SEEK_HOLE) };
    let err = (hole < 0).then(io::Error::last_os_error);
    f.seek(SeekFrom::Start(cur))?;
    match err.map(|e| (e.raw_os_error(), e)) {
        None => Ok((hole as u64).min(len)),
        Some((Some(libc::EINVAL | libc::ENXIO | libc::EOPNOTSUPP), _)) => Ok(len),
        Some((_, e)) => Err(e),
    }
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
}

impl Writer {
    pub fn new(depth: u32) -> io::Result<Writer> {
        Ok(Writer {
            ring: IoUring::new(depth)?,
            in_flight: 0,
            tail: Box::new(TailPage([0; DIRECT_ALIGN as usize])),
            tail_busy: None,
        })
    }

    /// Writes in flight (submitted, not yet reaped).
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Queues and submits one write of `len` bytes from `ptr` to `fd` at `offset`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid and unchanged until the completion with
    /// `user_data` has been returned by [`Writer::wait`], and `fd` must stay open
    /// until then.
    pub unsafe fn write(&mut self, fd: RawFd, ptr: *const u8, len: u32, offset: u64, user_data: u64) -> io::Result<()> {
        let sqe = opcode::Write::new(types::Fd(fd), ptr, len).offset(offset).build().user_data(user_data);
        loop {
            // SAFETY: the caller keeps the buffer and fd alive until completion.
            let pushed = unsafe { self.ring.submission().push(&sqe) }.is_ok();
            if pushed {
                break;
            }
            // Submission queue full: hand what is queued to the kernel first.
            self.ring.submit()?;
        }
        // Queued: the kernel will run it (now, or with the next submit in
        // `wait`), so it is in flight whatever this submit says; an error of
        // the ring itself shows again in `wait`.
        self.in_flight += 1;
        let _ = self.ring.submit();
        Ok(())
    }

    /// Queues and submits a write of `len` bytes of the arena, starting at
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
        let (ptr, room) = ring.addr_of(start);
        if u64::from(len) > room {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "write crosses the end of the ring"));
        }
        // SAFETY: ptr..ptr+len lies inside the ring's mapping (checked above),
        // which is only unmapped when the last ring end is dropped; the store
        // keeps the consumer alive until it has reaped every write.
        unsafe { self.write(file.as_raw_fd(), ptr, len, offset, user_data) }
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

/// Renames `from` to `to` and fsyncs the directory so the rename is durable.
pub fn rename_durable(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::rename(from, to)?;
    if let Some(dir) = to.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Free and total bytes of the file system holding `path` (statvfs).
pub fn fs_space(path: &Path) -> io::Result<(u64, u64)> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: statvfs is plain data; zeroed is a valid value to overwrite.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((s.f_bavail * s.f_frsize, s.f_blocks * s.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::AlignedBuf;

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
        let dir = std::env::temp_dir().join(format!("wv-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let (f, _direct) = create_output(&path, true).unwrap();
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

    #[test]
    fn direct_write_round_trip() {
        let dir = std::env::temp_dir().join(format!("wv-uring-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let (f, _direct) = create_output(&path, true).unwrap();
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
}
