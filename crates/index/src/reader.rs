//! Reading an index file: the header and block table are loaded at open;
//! posting lists are found by binary search in a directory section with
//! positioned reads, so a query touches only the keys it names.
//!
//! Checksums: the header (with the section table) and the chunk checksums
//! are checked at open, and so is the block table, which open loads whole.
//! Every other read covers whole chunks of 4 KiB and checks them before
//! using a byte of them: a one-flow query reads and checks a few chunks of
//! a few sections, not the whole index (which can be megabytes per file
//! and is usually not in the page cache). [`IndexReader::verify`] checks
//! everything.

use crate::format::{self, get_varint, unzigzag, KeyClass};
use crate::ident::CaptureId;
use crate::IndexError;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use wv_wire::octets::Octets;

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
    /// The capture has pcapng section or interface blocks after its first
    /// packet: its blocks cannot be read apart from them, only whole.
    pub late_structure: bool,
    /// The block table, in file order.
    pub blocks: Vec<BlockInfo>,
    sections: [(u64, u64); format::N_SECTIONS],
    /// The capture file the index was built from, when the index says.
    capture: Option<CaptureId>,
    /// Chunk checksums of every data section, and where each section's start.
    sums: Vec<u32>,
    sum_base: [usize; format::N_DATA_SECTIONS],
}

impl IndexReader {
    /// Opens and validates an index file and loads its block table. A
    /// symbolic link is not followed.
    pub fn open(path: &Path) -> Result<IndexReader, IndexError> {
        let io = |e| IndexError::Io { path: path.to_path_buf(), source: e };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(io)?;
        Self::from_file(file, path)
    }

    /// [`IndexReader::open`] of a file already open (a store opens its
    /// files beneath itself, following no symlink); `path` is for messages.
    pub fn from_file(file: File, path: &Path) -> Result<IndexReader, IndexError> {
        let io = |e| IndexError::Io { path: path.to_path_buf(), source: e };
        let corrupt = |what: &'static str| IndexError::Corrupt { path: path.to_path_buf(), what };
        let meta = file.metadata().map_err(io)?;
        if !meta.file_type().is_file() {
            return Err(corrupt("not a regular file"));
        }
        let len = meta.len();
        if len < 12 {
            return Err(corrupt("shorter than its header"));
        }
        let mut h = vec![0u8; format::HEAD_LEN.min(len as usize)];
        file.read_exact_at(&mut h, 0).map_err(io)?;
        let Some(version) = format::Head::magic_version(&h) else {
            return Err(corrupt("not an index file (bad magic)"));
        };
        if version != format::VERSION {
            return Err(IndexError::Version { path: path.to_path_buf(), version });
        }
        let Some(head) = format::Head::parse(&h) else {
            return Err(corrupt("shorter than its header"));
        };
        if head.head_crc != format::head_crc(&h) {
            return Err(corrupt("checksum mismatch in its header"));
        }
        let n_blocks = head.n_blocks as usize;
        if head.n_sections as usize != format::N_SECTIONS {
            return Err(corrupt("unexpected section count"));
        }
        if head.chunk_len != format::CHUNK_LEN {
            return Err(corrupt("unexpected checksum chunk size"));
        }
        let sections = head.sections;
        if sections.iter().any(|s| s.0.checked_add(s.1).is_none_or(|end| end > len)) {
            return Err(corrupt("section beyond the end of the file"));
        }
        // The chunk checksums: one u32 per chunk of every data section.
        let mut sum_base = [0usize; format::N_DATA_SECTIONS];
        let mut n_sums = 0u64;
        for (i, base) in sum_base.iter_mut().enumerate() {
            *base = n_sums as usize;
            n_sums += format::chunks(sections[i].1, format::CHUNK_LEN);
        }
        let (s_off, s_len) = sections[format::section::SUMS];
        if s_len != n_sums * 4 {
            return Err(corrupt("checksum section of the wrong size"));
        }
        let mut raw = vec![0u8; s_len as usize];
        file.read_exact_at(&mut raw, s_off).map_err(io)?;
        if crc32c::crc32c(&raw) != head.sums_crc {
            return Err(corrupt("checksum mismatch in its checksum section"));
        }
        let mut o = Octets::le(&raw);
        let sums = std::iter::from_fn(|| o.get_u32()).collect();
        let capture = (head.flags & format::FLAG_CAPTURE_ID != 0).then_some(CaptureId {
            bytes: head.capture_bytes,
            mtime_ns: head.capture_mtime,
            fingerprint: head.capture_sum,
        });
        let mut r = IndexReader {
            file,
            path: path.to_path_buf(),
            linktype: head.linktype,
            block_packets: head.block_packets,
            packets: head.packets,
            first_ns: head.first_ns,
            last_ns: head.last_ns,
            keys_complete: head.flags & format::FLAG_KEYS_COMPLETE != 0,
            late_structure: head.flags & format::FLAG_LATE_STRUCTURE != 0,
            blocks: Vec::new(),
            sections,
            capture,
            sums,
            sum_base,
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

    /// The capture file the index was built from, if the index names it.
    pub fn capture_id(&self) -> Option<CaptureId> {
        self.capture
    }

    /// Checks that `capture` (open) is the file this index was built from:
    /// same size, and same content fingerprint when its mtime differs or
    /// its inode changed after the index was written (see
    /// [`CaptureId::mismatch`]); with `full`, always the fingerprint and
    /// the mtime. An index that does not identify its capture is not
    /// trusted either.
    pub fn check_capture_with(&self, capture: &File, full: bool) -> Result<(), IndexError> {
        let stale = |what: &'static str| IndexError::Stale { path: self.path.clone(), what };
        let Some(id) = self.capture else {
            return Err(stale("it does not identify its capture file"));
        };
        let indexed_ns = self.file.metadata().ok().map(|m| crate::ident::mtime_ns(&m));
        match id.mismatch(capture, full, indexed_ns) {
            Ok(None) => Ok(()),
            Ok(Some(why)) => Err(stale(why)),
            Err(e) => Err(IndexError::Io { path: self.path.clone(), source: e }),
        }
    }

    /// [`IndexReader::check_capture_with`] as a query does it (the content
    /// is read only when the file's times say it may have changed).
    pub fn check_capture(&self, capture: &File) -> Result<(), IndexError> {
        self.check_capture_with(capture, false)
    }

    /// Reads every section and checks every checksum.
    pub fn verify(&self) -> Result<(), IndexError> {
        for i in 0..format::N_DATA_SECTIONS {
            self.section(i)?;
        }
        Ok(())
    }

    /// The path this index was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Section `i` whole, its checksums checked.
    fn section(&self, i: usize) -> Result<Vec<u8>, IndexError> {
        self.read_checked(i, 0, self.sections[i].1)
    }

    /// Bytes `[start, end)` of data section `sec`: the chunks that hold them
    /// are read whole and checked first.
    fn read_checked(&self, sec: usize, start: u64, end: u64) -> Result<Vec<u8>, IndexError> {
        let corrupt = |what: &'static str| IndexError::Corrupt { path: self.path.clone(), what };
        let (off, len) = self.sections[sec];
        if start > end || end > len {
            return Err(corrupt("a read beyond its section"));
        }
        if start == end {
            return Ok(Vec::new());
        }
        let chunk = u64::from(format::CHUNK_LEN);
        let (first, last) = (start / chunk, end.div_ceil(chunk));
        let (a, b) = (first * chunk, (last * chunk).min(len));
        let mut buf = vec![0u8; (b - a) as usize];
        self.file
            .read_exact_at(&mut buf, off + a)
            .map_err(|e| IndexError::Io { path: self.path.clone(), source: e })?;
        for (k, c) in buf.chunks(chunk as usize).enumerate() {
            if crc32c::crc32c(c) != self.sums[self.sum_base[sec] + first as usize + k] {
                return Err(corrupt("checksum mismatch"));
            }
        }
        buf.truncate((end - a) as usize);
        buf.drain(..(start - a) as usize);
        Ok(buf)
    }

    /// The blocks (sorted, no duplicates) of every key `k` of `class` with
    /// `lo <= k <= hi` (keys as numbers; an address as a big-endian number).
    pub fn lookup_range(&self, class: KeyClass, lo: u128, hi: u128) -> Result<Vec<u32>, IndexError> {
        let mut out = Vec::new();
        if lo > hi {
            return Ok(out);
        }
        let corrupt = |what: &'static str| IndexError::Corrupt { path: self.path.clone(), what };
        let dir_sec = class.dir_section();
        let (_, dir_len) = self.sections[dir_sec];
        let (_, post_len) = self.sections[dir_sec + 1];
        let entry = class.entry_len() as u64;
        if dir_len % entry != 0 {
            return Err(corrupt("directory size is not a whole number of entries"));
        }
        let n = dir_len / entry;
        let read_entry = |i: u64| -> Result<(u128, u64), IndexError> {
            let e = self.read_checked(dir_sec, i * entry, (i + 1) * entry)?;
            let (key, end) = class.parse_entry(&e).ok_or_else(|| corrupt("truncated directory entry"))?;
            Ok((key, u64::from(end)))
        };
        // Entries [a, b): the first with key >= lo, the first with key > hi.
        let search = |bound: &dyn Fn(u128) -> bool| -> Result<u64, IndexError> {
            let (mut a, mut b) = (0u64, n);
            while a < b {
                let m = a + (b - a) / 2;
                if bound(read_entry(m)?.0) {
                    a = m + 1;
                } else {
                    b = m;
                }
            }
            Ok(a)
        };
        let a = search(&|k| k < lo)?;
        let b = search(&|k| k <= hi)?;
        if a >= b {
            return Ok(out);
        }
        // Those entries (and the one before, whose end starts the first list)
        // and their posting lists, each in one checked read.
        let from = a.saturating_sub(1);
        let dir = self.read_checked(dir_sec, from * entry, b * entry)?;
        let ends: Vec<u64> = dir
            .chunks_exact(entry as usize)
            .filter_map(|e| class.parse_entry(e))
            .map(|(_, end)| u64::from(end))
            .collect();
        let (ends_before, ends) = if a == 0 { (0, &ends[..]) } else { (ends[0], &ends[1..]) };
        let last = *ends.last().unwrap_or(&ends_before);
        if last < ends_before || last > post_len {
            return Err(corrupt("posting list out of bounds"));
        }
        let post = self.read_checked(dir_sec + 1, ends_before, last)?;
        let mut start = ends_before;
        for &end in ends {
            if end < start || end > last {
                return Err(corrupt("posting list out of bounds"));
            }
            let list = &post[(start - ends_before) as usize..(end - ends_before) as usize];
            format::decode_posting(list, &mut out).ok_or_else(|| corrupt("malformed posting list"))?;
            start = end;
        }
        if ends.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
        Ok(out)
    }

    /// Every key of `class` present in this index, with its block count
    /// (for statistics and tests).
    pub fn keys(&self, class: KeyClass) -> Result<Vec<u128>, IndexError> {
        let dir = self.section(class.dir_section())?;
        Ok(dir.chunks_exact(class.entry_len()).filter_map(|e| class.parse_entry(e)).map(|(key, _)| key).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Builder;

    const CLASSES: [KeyClass; 5] = [KeyClass::Ipv4, KeyClass::Ipv6, KeyClass::Port, KeyClass::Proto, KeyClass::Vlan];

    /// An index whose address and port sections span many 4 KiB chunks.
    fn index_bytes() -> Vec<u8> {
        let mut b = Builder::with_block_packets(1, 4);
        for i in 0..30_000u32 {
            let mut f = vec![0u8; 60];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[23] = if i % 3 == 0 { 6 } else { 17 };
            f[26..30].copy_from_slice(&(0x0a00_0000 | (i % 7000)).to_be_bytes());
            f[30..34].copy_from_slice(&[192, 168, 0, (i % 200) as u8]);
            f[34..36].copy_from_slice(&((i % 9000) as u16).to_be_bytes());
            f[36..38].copy_from_slice(&[0, 53]);
            b.add(u64::from(i) * 1000, 24 + u64::from(i) * 76, &f, 60);
        }
        b.encode().unwrap()
    }

    fn scratch(tag: &str, bytes: &[u8]) -> PathBuf {
        let p = std::env::temp_dir().join(format!("wv-reader-{tag}-{}.idx", std::process::id()));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    type Answers = Vec<Result<Vec<u32>, ()>>;

    fn answers(r: &IndexReader) -> Answers {
        let mut v = Vec::new();
        for c in CLASSES {
            for (lo, hi) in
                [(0, u128::MAX), (0x0a00_0010, 0x0a00_0010), (0x0a00_0100, 0x0a00_1000), (53, 53), (4000, 4100), (6, 6)]
            {
                v.push(r.lookup_range(c, lo, hi).map_err(drop));
            }
        }
        v
    }

    /// Lookups over sections of many chunks agree with a lookup of each key
    /// alone; every byte of the file is under a checksum that `verify`
    /// (or `open`) checks; a damaged chunk fails the lookups that read it
    /// and no other answer changes.
    #[test]
    fn checksums_cover_every_byte_and_lookups_stay_exact() {
        let good = index_bytes();
        let path = scratch("good", &good);
        let r = IndexReader::open(&path).unwrap();
        r.verify().unwrap();
        assert!(r.sections[format::section::PORT + 1].1 > 3 * u64::from(format::CHUNK_LEN), "postings of many chunks");
        assert!(r.sections[format::section::IPV4].1 > 3 * u64::from(format::CHUNK_LEN), "a directory of many chunks");
        for c in [KeyClass::Ipv4, KeyClass::Port] {
            let keys = r.keys(c).unwrap();
            let (lo, hi) = (keys[keys.len() / 3], keys[2 * keys.len() / 3]);
            let mut each: Vec<u32> = Vec::new();
            for k in keys.iter().filter(|k| (lo..=hi).contains(*k)) {
                each.extend(r.lookup_range(c, *k, *k).unwrap());
            }
            each.sort_unstable();
            each.dedup();
            assert_eq!(r.lookup_range(c, lo, hi).unwrap(), each, "{c:?}");
        }
        let want = answers(&r);
        std::fs::remove_file(&path).unwrap();
        let flips: Vec<usize> = (0..format::HEAD_LEN).chain((format::HEAD_LEN..good.len()).step_by(61)).collect();
        // The flips are independent: shared among the cores (each thread
        // with its own copy and file), as one thread they took a minute.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
        std::thread::scope(|s| {
            for t in 0..threads {
                let (good, want, flips) = (&good, &want, &flips);
                s.spawn(move || {
                    let mut bytes = good.clone();
                    let path = scratch(&format!("flip{t}"), &bytes);
                    for &at in flips.iter().skip(t).step_by(threads) {
                        bytes[at] ^= 0x10;
                        std::fs::write(&path, &bytes).unwrap();
                        match IndexReader::open(&path) {
                            Err(_) => {}
                            Ok(r) => {
                                assert!(r.verify().is_err(), "byte {at} of {} is not under a checksum", good.len());
                                for (i, (got, want)) in answers(&r).iter().zip(want).enumerate() {
                                    assert!(
                                        got.is_err() || got == want,
                                        "byte {at}: lookup {i} changed without an error"
                                    );
                                }
                            }
                        }
                        bytes[at] ^= 0x10;
                    }
                    std::fs::remove_file(&path).unwrap();
                });
            }
        });
    }

    /// `reseal` recomputes exactly the checksums the builder wrote, and a
    /// resealed damaged index opens (so fuzzing reaches the parsing).
    #[test]
    fn reseal_restores_the_builders_checksums() {
        let good = index_bytes();
        let mut b = good.clone();
        b[format::at::HEAD_CRC] ^= 1;
        b[format::at::SUMS_CRC] ^= 1;
        let last = b.len() - 1;
        b[last] ^= 1;
        format::reseal(&mut b);
        assert_eq!(b, good);
        let (blocks_off, _) =
            (u64::from_le_bytes(good[format::HEADER_LEN..format::HEADER_LEN + 8].try_into().unwrap()), 0);
        b[blocks_off as usize] ^= 0x40;
        format::reseal(&mut b);
        let path = scratch("reseal", &b);
        let r = IndexReader::open(&path).unwrap();
        r.verify().unwrap();
        std::fs::remove_file(&path).unwrap();
    }

    /// Version 1 is refused with the version error (the query then scans and
    /// says to run `wirevault index`).
    #[test]
    fn version_1_is_not_read() {
        let mut b = index_bytes();
        b[8..12].copy_from_slice(&1u32.to_le_bytes());
        let path = scratch("v1", &b);
        match IndexReader::open(&path) {
            Err(IndexError::Version { version: 1, .. }) => {}
            other => panic!("{:?}", other.map(|_| ())),
        }
        std::fs::remove_file(&path).unwrap();
    }
}
