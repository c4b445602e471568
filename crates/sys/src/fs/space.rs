//! A volume's free space, and whether it is memory.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

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
    Ok(free_and_total(&s))
}

/// The name of a memory file system (`tmpfs`, `ramfs`) when `path` is on
/// one (statfs's type): what is written there never reaches a disk.
pub fn memory_fs(path: &Path) -> io::Result<Option<&'static str>> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: statfs is plain data; zeroed is a valid value to overwrite.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-pointer.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(match s.f_type as i64 {
        0x0102_1994 => Some("tmpfs"),
        0x8584_58f6 => Some("ramfs"),
        _ => None,
    })
}

fn free_and_total(s: &libc::statvfs) -> (u64, u64) {
    (s.f_bavail * s.f_frsize, s.f_blocks * s.f_frsize)
}

/// [`fs_space`] of the volume holding an open file.
pub fn fd_space(file: &File) -> io::Result<(u64, u64)> {
    // SAFETY: fstatvfs fills plain data; zeroed is a valid value to overwrite.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: an open descriptor and a valid out-pointer.
    if unsafe { libc::fstatvfs(file.as_raw_fd(), &mut s) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(free_and_total(&s))
}
