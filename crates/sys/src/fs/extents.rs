//! Where the written data of a file ends (what a crash leaves).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// Where the data of `file` ends: the start of its first hole or unwritten
/// extent, or its length where the file system cannot tell. Preallocated
/// but unwritten extents (fallocate) and the range of a write that never
/// completed are what a crash leaves; they read as zeros. Two questions,
/// the nearer answer kept:
/// * the extent map (FIEMAP), which flags unwritten extents whatever the
///   page cache holds (ext4, XFS, btrfs);
/// * SEEK_HOLE, where there is no extent map (tmpfs). SEEK_HOLE alone is
///   not enough on ext4: once the file has been read (a backup, `tcpdump
///   -r`), the cached pages of zeros over an unwritten extent count as data.
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
    let hole = match err.map(|e| (e.raw_os_error(), e)) {
        None => (hole as u64).min(len),
        Some((Some(libc::EINVAL | libc::ENXIO | libc::EOPNOTSUPP), _)) => len,
        Some((_, e)) => return Err(e),
    };
    Ok(hole.min(written_end(file, len)?.unwrap_or(len)))
}

/// `struct fiemap` (linux/fiemap.h) with room for [`FIEMAP_EXTENTS`] extents.
#[repr(C)]
struct Fiemap {
    start: u64,
    length: u64,
    flags: u32,
    mapped_extents: u32,
    extent_count: u32,
    reserved: u32,
    extents: [FiemapExtent; FIEMAP_EXTENTS],
}

/// `struct fiemap_extent`.
#[repr(C)]
#[derive(Clone, Copy)]
struct FiemapExtent {
    logical: u64,
    physical: u64,
    length: u64,
    reserved64: [u64; 2],
    flags: u32,
    reserved: [u32; 3],
}

const FIEMAP_EXTENTS: usize = 64;
/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xc020_660b;
/// Write dirty pages first (a crashed process leaves them to the kernel).
const FIEMAP_FLAG_SYNC: u32 = 0x1;
const FIEMAP_EXTENT_LAST: u32 = 0x1;
const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;

/// Where the written extents of `file` (of length `len`) end, from the
/// extent map: the first hole or unwritten extent. None where the file
/// system has no extent map.
pub fn written_end(file: &File, len: u64) -> io::Result<Option<u64>> {
    let mut pos = 0u64;
    while pos < len {
        let mut m = Fiemap {
            start: pos,
            length: len - pos,
            flags: FIEMAP_FLAG_SYNC,
            mapped_extents: 0,
            extent_count: FIEMAP_EXTENTS as u32,
            reserved: 0,
            extents: [FiemapExtent {
                logical: 0,
                physical: 0,
                length: 0,
                reserved64: [0; 2],
                flags: 0,
                reserved: [0; 3],
            }; FIEMAP_EXTENTS],
        };
        // SAFETY: FS_IOC_FIEMAP reads and fills `m`, whose extent array holds
        // `extent_count` entries, on an open descriptor.
        if unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP as _, &mut m) } != 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EOPNOTSUPP | libc::ENOTTY | libc::EINVAL) => Ok(None),
                _ => Err(e),
            };
        }
        let n = (m.mapped_extents as usize).min(FIEMAP_EXTENTS);
        if n == 0 {
            return Ok(Some(pos));
        }
        for x in &m.extents[..n] {
            // A hole before this extent, or an extent never written.
            if x.logical > pos || x.flags & FIEMAP_EXTENT_UNWRITTEN != 0 {
                return Ok(Some(pos));
            }
            pos = pos.max(x.logical + x.length);
            if x.flags & FIEMAP_EXTENT_LAST != 0 {
                return Ok(Some(pos.min(len)));
            }
        }
    }
    Ok(Some(len))
}
