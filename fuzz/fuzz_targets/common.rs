//! Shared helpers for the fuzz targets (included with `#[path]`).
#![allow(dead_code)]

use std::path::PathBuf;

/// A per-process scratch file in /dev/shm (tmpfs; falls back to the temp dir),
/// for APIs that only open paths.
pub fn scratch(name: &str) -> PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    dir.join(format!("wv-fuzz-{name}-{}", std::process::id()))
}

/// A reader that hands out at most `chunk` bytes per `read` call, like a
/// pipe or a slow disk: exercises every refill path of a streaming parser.
pub struct Trickle<'a> {
    pub data: &'a [u8],
    pub chunk: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.data.len().min(buf.len()).min(self.chunk.max(1));
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}
