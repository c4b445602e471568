//! Reading an index file: the header and block table are loaded at open;
//! posting lists are found by binary search in a directory section with
//! positioned reads, so a query touches only the keys it names.

use crate::format::{self, get_varint, unzigzag, KeyClass};
use crate::IndexError;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// One block of consecutive records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockInfo {
    /// Byte offset of the block's first record in the capture file.
    pub offset: u64,
    pub min_ts: u64,
    pub max_ts: u64,
}

/// An open index file.
pub struct IndexReader {
    file: File,
    path: PathBuf,
    pub linktype: u32,
    pub block_packets: u32,
    pub packets: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub keys_complete: bool,
    /// The block table, in file order.
    pub blocks: Vec<BlockInfo>,
    sections: [(u64, u64); format::N_SECTIONS],
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl IndexReader {
    /// Opens and validates an index file and loads its block table.
    pub fn open(path: &Path) -> Result<IndexReader, IndexError> {
        let file = File::open(path).map_err(|e| IndexError::Io { path: path.to_path_buf(), source: e })?;
        Self::from_file(file, path)
    }

    /// [`IndexReader::open`] of a file already open (a store opens its
    /// files beneath itself, following no symlink); `path` is for messages.
    pub fn from_file(file: File, path: &Path) -> Result<IndexReader, IndexError> {
        let io = |e| IndexError::Io { path: path.to_path_buf(), source: e };
        let corrupt = |what: &'static str| IndexError::Corrupt { path: path.to_path_buf(), what };
        let len = file.metadata().map_err(io)?.len();
        let head_len = format::HEADER_LEN + format::SECTION_TABLE_LEN;
        if len < head_len as u64 {
            return Err(corrupt("shorter than its header"));
        }
        let mut h = vec![0u8; head_len];
        file.read_exact_at(&mut h, 0).map_err(io)?;
        if h[..8] != format::MAGIC {
            return Err(corrupt("not an index file (bad magic)"));
        }
        let version = u32_at(&h, 8);
        if version != format::VERSION {
            return Err(IndexError::Version { path: path.to_path_buf(), version });
        }
        let flags = u32_at(&h, 12);
        let n_blocks = u32_at(&h, 48) as usize;
        if u32_at(&h, 52) as usize != format::N_SECTIONS {
            return Err(corrupt("unexpected section count"));
        }
        let mut sections = [(0u64, 0u64); format::N_SECTIONS];
        for (i, s) in sections.iter_mut().enumerate() {
            let at = format::HEADER_LEN + 16 * i;
            *s = (u64_at(&h, at), u64_at(&h, at + 8));
            if s.0.checked_add(s.1).is_none_or(|end| end > len) {
                return Err(corrupt("section beyond the end of the file"));
            }
        }
        let mut r = IndexReader {
            file,
            path: path.to_path_buf(),
            linktype: u32_at(&h, 16),
            block_packets: u32_at(&h, 20),
            packets: u64_at(&h, 24),
            first_ns: u64_at(&h, 32),
            last_ns: u64_at(&h, 40),
            keys_complete: flags & format::FLAG_KEYS_COMPLETE != 0,
            blocks: Vec::new(),
            sections,
        };
        let raw = r.section(format::section::BLOCKS)?;
        let mut blocks = Vec::with_capacity(n_blocks.min(raw.len()));
        let (mut pos, mut off, mut ts) = (0usize, 0u64, 0u64);
        for _ in 0..n_blocks {
            let (Some(d_off), Some(d_ts), Some(span)) =
                (get_varint(&raw, &mut pos), get_varint(&raw, &mut pos), get_varint(&raw, &mut pos))
            else {
                return Err(corrupt("truncated block table"));
            };
            off = off.wrapping_add(d_off);
            ts = ts.wrapping_add(unzigzag(d_ts) as u64);
            blocks.push(BlockInfo { offset: off, min_ts: ts, max_ts: ts.wrapping_add(span) });
        }
        r.blocks = blocks;
        Ok(r)
    }

    /// The path this index was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn section(&self, i: usize) -> Result<Vec<u8>, IndexError> {
        let (off, len) = self.sections[i];
        let mut b = vec![0u8; len as usize];
        self.file.read_exact_at(&mut b, off).map_err(|e| IndexError::Io { path: self.path.clone(), source: e })?;
        Ok(b)
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> Result<(), IndexError> {
        self.file.read_exact_at(buf, off).map_err(|e| IndexError::Io { path: self.path.clone(), source: e })
    }

    /// The blocks (sorted, no duplicates) of every key `k` of `class` with
    /// `lo <= k <= hi` (keys as numbers; an address as a big-endian number).
    pub fn lookup_range(&self, class: KeyClass, lo: u128, hi: u128) -> Result<Vec<u32>, IndexError> {
        let mut out = Vec::new();
        if lo > hi {
            return Ok(out);
        }
        let corrupt = |what: &'static str| IndexError::Corrupt { path: self.path.clone(), what };
        let (dir_off, dir_len) = self.sections[class.dir_section()];
        let (post_off, post_len) = self.sections[class.dir_section() + 1];
        let entry = class.key_len() + 4;
        if dir_len % entry as u64 != 0 {
            return Err(corrupt("directory size is not a whole number of entries"));
        }
        let n = dir_len / entry as u64;
        let mut e = [0u8; 20];
        let read_entry = |i: u64, e: &mut [u8; 20]| -> Result<(u128, u64), IndexError> {
            self.read_at(&mut e[..entry], dir_off + i * entry as u64)?;
            let key = class.decode_key(&e[..class.key_len()]);
            Ok((key, u64::from(u32_at(&e[..], class.key_len()))))
        };
        // First entry with key >= lo.
        let (mut a, mut b) = (0u64, n);
        while a < b {
            let m = a + (b - a) / 2;
            if read_entry(m, &mut e)?.0 < lo {
                a = m + 1;
            } else {
                b = m;
            }
        }
        let mut start = if a == 0 { 0 } else { read_entry(a - 1, &mut e)?.1 };
        let mut lists = 0;
        let mut buf = Vec::new();
        let mut i = a;
        while i < n {
            let (key, end) = read_entry(i, &mut e)?;
            if key > hi {
                break;
            }
            if end < start || end > post_len {
                return Err(corrupt("posting list out of bounds"));
            }
            buf.resize((end - start) as usize, 0);
            self.read_at(&mut buf, post_off + start)?;
            format::decode_posting(&buf, &mut out).ok_or_else(|| corrupt("malformed posting list"))?;
            lists += 1;
            start = end;
            i += 1;
        }
        if lists > 1 {
            out.sort_unstable();
            out.dedup();
        }
        Ok(out)
    }

    /// Every key of `class` present in this index, with its block count
    /// (for statistics and tests).
    pub fn keys(&self, class: KeyClass) -> Result<Vec<u128>, IndexError> {
        let dir = self.section(class.dir_section())?;
        let entry = class.key_len() + 4;
        Ok(dir.chunks_exact(entry).map(|e| class.decode_key(&e[..class.key_len()])).collect())
    }
}
