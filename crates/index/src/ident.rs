//! What identifies the capture file an index was built from: its size, its
//! modification time and a fingerprint of its content (CRC-32C of its
//! first and last 64 KiB). A capture replaced by another of the same name
//! and size (tcpdump's `-C`/`-W` rings reuse names) no longer matches.

use crate::format::FINGERPRINT_LEN;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Size, mtime and content fingerprint of a capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureId {
    pub bytes: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    pub fingerprint: u32,
}

/// Modification time of `meta` in ns since the epoch.
pub fn mtime_ns(meta: &std::fs::Metadata) -> i64 {
    meta.mtime().saturating_mul(1_000_000_000).saturating_add(meta.mtime_nsec())
}

/// CRC-32C of the first [`FINGERPRINT_LEN`] bytes of a file of `len`
/// bytes, continued over its last [`FINGERPRINT_LEN`] bytes.
pub fn fingerprint(file: &File, len: u64) -> io::Result<u32> {
    let head = len.min(FINGERPRINT_LEN);
    let mut buf = vec![0u8; head as usize];
    file.read_exact_at(&mut buf, 0)?;
    let c = crc32c::crc32c(&buf);
    let tail_at = len.saturating_sub(FINGERPRINT_LEN);
    file.read_exact_at(&mut buf, tail_at)?;
    Ok(crc32c::crc32c_append(c, &buf))
}

impl CaptureId {
    /// The identity of an open capture file.
    pub fn of(file: &File) -> io::Result<CaptureId> {
        let meta = file.metadata()?;
        Ok(CaptureId { bytes: meta.len(), mtime_ns: mtime_ns(&meta), fingerprint: fingerprint(file, meta.len())? })
    }

    /// Why `file` is not the capture this identity names, or `None` when
    /// it is. Size and mtime are compared without reading; the content
    /// fingerprint is compared when `full`, or when the mtime differs (a
    /// copy without `-p`), or when `indexed_ns` (when the index was
    /// written) is older than the file's inode change time: a file renamed
    /// over the capture, or written to, after its index was written, even
    /// one given the old mtime back (`touch -r`, `cp -p`).
    pub fn mismatch(&self, file: &File, full: bool, indexed_ns: Option<i64>) -> io::Result<Option<&'static str>> {
        let meta = file.metadata()?;
        if meta.len() != self.bytes {
            return Ok(Some("its capture file changed size since it was indexed"));
        }
        let ctime_ns = meta.ctime().saturating_mul(1_000_000_000).saturating_add(meta.ctime_nsec());
        let look = full || mtime_ns(&meta) != self.mtime_ns || indexed_ns.is_none_or(|t| ctime_ns > t);
        if look && fingerprint(file, meta.len())? != self.fingerprint {
            return Ok(Some("its capture file was replaced or changed since it was indexed"));
        }
        if full && mtime_ns(&meta) != self.mtime_ns {
            return Ok(Some("its capture file's modification time changed since it was indexed"));
        }
        Ok(None)
    }
}

/// Opens a capture file for reading: never through a symlink when
/// `nofollow`, never blocking (a FIFO or device is opened without waiting
/// for a writer), and only a regular file.
pub fn open_capture(path: &Path, nofollow: bool) -> io::Result<File> {
    let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
    if nofollow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new().read(true).custom_flags(flags).open(path).map_err(|e| {
        if nofollow && e.raw_os_error() == Some(libc::ELOOP) {
            io::Error::other("is a symbolic link; not followed")
        } else {
            e
        }
    })?;
    if !file.metadata()?.file_type().is_file() {
        return Err(io::Error::other("is not a regular file"));
    }
    Ok(file)
}

/// [`open_capture`] of `rel` beneath a store's directory: no symlink is
/// followed at any component, never blocking, only a regular file.
pub fn open_capture_in(dir: &wv_sys::fs::Dir, rel: &str) -> io::Result<File> {
    dir.open_file(rel, wv_sys::fs::Open::Read, 0).map_err(|e| {
        if e.raw_os_error() == Some(libc::ELOOP) {
            io::Error::other("is a symbolic link or under one; not followed")
        } else {
            e
        }
    })
}
