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

/// The link type a selector byte stands for (the first byte of the
/// `packet_index`, `dissect` and `analyze` inputs): 0 Ethernet, 1 Linux SLL,
/// 2 raw IP, 3 IPv4, 4 IPv6, any other byte itself.
pub fn linktype(sel: u8) -> u32 {
    match sel {
        0 => 1,
        1 => 113,
        2 => 101,
        3 => 228,
        4 => 229,
        x => u32::from(x),
    }
}
