//! The index file format (`NAME.pcap.idx`), version 2.
//!
//! An index divides the packets of one capture file into *blocks* of
//! `block_packets` consecutive records (64 by default). Posting lists name
//! blocks, not packets: a query reads the candidate blocks and lets the exact
//! libpcap filter decide each packet. A block costs a few bytes in the block
//! table, and a key costs about one byte per block it occurs in, which keeps
//! the index near 1% of the capture on mixed traffic.
//!
//! All integers are little-endian. `varint` is unsigned LEB128; `zigzag` maps
//! a signed delta to an unsigned varint. Checksums are CRC-32C (Castagnoli).
//!
//! ```text
//! header (128 bytes)
//!   0  magic          8 bytes  "WVIDX\r\n\x1a"
//!   8  version        u32      2
//!  12  flags          u32      bit 0: KEYS_COMPLETE (every packet's keys are in the
//!                              posting lists; when clear, only the block table may be used)
//!                              bit 1: CAPTURE_ID (bytes 56..76 identify the capture file)
//!                              bit 2: LATE_STRUCTURE (a pcapng file with section header or
//!                              interface blocks after its first packet: a reader cannot
//!                              read its blocks apart, only the block table's times and the
//!                              whole file may be used)
//!  16  linktype       u32
//!  20  block_packets  u32      power of two
//!  24  packets        u64
//!  32  first_ns       u64      smallest packet timestamp (0 when no packets)
//!  40  last_ns        u64      largest packet timestamp
//!  48  n_blocks       u32
//!  52  n_sections     u32      12
//!  56  capture_bytes  u64      size of the capture file indexed
//!  64  capture_mtime  i64      its modification time, ns since the epoch
//!  72  capture_sum    u32      its fingerprint: CRC-32C of its first 64 KiB, continued
//!                              over its last 64 KiB (the two may overlap)
//!  76  chunk_len      u32      4096: sections are checksummed in chunks of this size
//!  80  reserved       40 bytes 0
//! 120  sums_crc       u32      CRC-32C of section 11 (the chunk checksums)
//! 124  head_crc       u32      CRC-32C of the header and section table, this field as 0
//! section table: n_sections × { offset u64, len u64 } (offsets from the file start;
//!                 readers find every section through it: the sections may lie in the
//!                 file in any order, and this writer puts each class's postings before
//!                 its directory, so the postings can stream out as they are merged)
//! sections, by their number in the table:
//!   0  blocks     per block: varint(offset - previous block's offset),
//!                 zigzag(min_ts - previous block's min_ts), varint(max_ts - min_ts)
//!                 (`offset` is the byte offset of the block's first record in the
//!                 capture file: a pcap record header or a pcapng block)
//!   1,2  IPv4     directory: sorted entries { key u32 (address as a big-endian number),
//!                 end u32 }; postings: the posting list of entry i is the byte range
//!                 [end(i-1), end(i)) of the postings section
//!   3,4  IPv6     directory entries { key 16 bytes (network order), end u32 }
//!   5,6  port     directory entries { key u16, end u32 }  (TCP, UDP and SCTP, both directions)
//!   7,8  proto    directory entries { key u8, end u32 }   (IP protocol / IPv6 next headers)
//!   9,10 vlan     directory entries { key u16, end u32 }  (every tag of the stack)
//!  11  sums       for sections 0 to 10 in order, the CRC-32C (u32) of each chunk of
//!                 `chunk_len` bytes of the section (the last one may be shorter; an
//!                 empty section has none)
//! posting list: varint deltas of (block + 1), starting from 0; strictly increasing blocks.
//! ```
//!
//! Every byte of the header, the section table and every section is covered
//! by a checksum. A reader checks the header, the chunk checksums and the
//! block table when it opens an index, and each other chunk when it first
//! reads it: a query that names one flow reads a few chunks of a few
//! sections, never the whole index. Version 1 (the same without checksums
//! or capture identity, a 64-byte header and 11 sections) is not read: it is
//! rebuilt by `wirevault index` or `repair`.
//!
//! Addresses are indexed without direction (source and destination in one
//! list), ARP sender/target addresses with IPv4. Keys are a superset of what
//! libpcap's `host`/`net`/`port`/`proto`/`vlan` code can match, never less.

use wv_wire::octets::{Octets, OctetsMut};

/// File magic.
pub const MAGIC: [u8; 8] = *b"WVIDX\r\n\x1a";
/// Current format version.
pub const VERSION: u32 = 2;
/// Flag: the posting lists cover every packet.
pub const FLAG_KEYS_COMPLETE: u32 = 1;
/// Flag: the header identifies the capture file (size, mtime, fingerprint).
pub const FLAG_CAPTURE_ID: u32 = 2;
/// Flag: the capture (pcapng) has section or interface blocks after its first packet.
pub const FLAG_LATE_STRUCTURE: u32 = 4;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 128;
/// Number of sections (the last holds the chunk checksums of the others).
pub const N_SECTIONS: usize = 12;
/// Sections covered by chunk checksums (all but the last).
pub const N_DATA_SECTIONS: usize = N_SECTIONS - 1;
/// Size of the section table.
pub const SECTION_TABLE_LEN: usize = N_SECTIONS * 16;
/// The header and the section table.
pub const HEAD_LEN: usize = HEADER_LEN + SECTION_TABLE_LEN;
/// Sections are checksummed in chunks of this many bytes.
pub const CHUNK_LEN: u32 = 4096;
/// Offsets in the header.
pub mod at {
    pub const CAPTURE_BYTES: usize = 56;
    pub const CAPTURE_MTIME: usize = 64;
    pub const CAPTURE_SUM: usize = 72;
    pub const CHUNK_LEN: usize = 76;
    pub const SUMS_CRC: usize = 120;
    pub const HEAD_CRC: usize = 124;
}
/// Bytes at each end of a capture file that its fingerprint covers.
pub const FINGERPRINT_LEN: u64 = 64 << 10;

/// Section numbers.
pub mod section {
    pub const BLOCKS: usize = 0;
    pub const IPV4: usize = 1;
    pub const IPV6: usize = 3;
    pub const PORT: usize = 5;
    pub const PROTO: usize = 7;
    pub const VLAN: usize = 9;
    pub const SUMS: usize = 11;
}

/// The header and section table of an index file ([`HEAD_LEN`] bytes): the
/// one definition of their layout, written by the builder and read by the
/// reader and [`reseal`]. `reserved` bytes are written as zeros and not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub version: u32,
    pub flags: u32,
    pub linktype: u32,
    pub block_packets: u32,
    pub packets: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub n_blocks: u32,
    pub n_sections: u32,
    pub capture_bytes: u64,
    pub capture_mtime: i64,
    pub capture_sum: u32,
    pub chunk_len: u32,
    pub sums_crc: u32,
    pub head_crc: u32,
    /// (offset, length) of every section, by section number.
    pub sections: [(u64, u64); N_SECTIONS],
}

impl Head {
    /// The version field of `b` if it starts with the index magic (read
    /// before the rest, so an old version is reported as such even when its
    /// header is shorter than this one).
    pub fn magic_version(b: &[u8]) -> Option<u32> {
        let mut o = Octets::le(b);
        (o.get_array::<8>()? == MAGIC).then_some(())?;
        o.get_u32()
    }

    /// Parses a header and section table; `None` if `b` is shorter than
    /// [`HEAD_LEN`] or lacks the magic. Nothing else is checked here.
    pub fn parse(b: &[u8]) -> Option<Head> {
        let mut o = Octets::le(b.get(..HEAD_LEN)?);
        (o.get_array::<8>()? == MAGIC).then_some(())?;
        let mut h = Head {
            version: o.get_u32()?,
            flags: o.get_u32()?,
            linktype: o.get_u32()?,
            block_packets: o.get_u32()?,
            packets: o.get_u64()?,
            first_ns: o.get_u64()?,
            last_ns: o.get_u64()?,
            n_blocks: o.get_u32()?,
            n_sections: o.get_u32()?,
            capture_bytes: o.get_u64()?,
            capture_mtime: o.get_u64()? as i64,
            capture_sum: o.get_u32()?,
            chunk_len: o.get_u32()?,
            sums_crc: {
                o.skip(at::SUMS_CRC - at::CHUNK_LEN - 4)?;
                o.get_u32()?
            },
            head_crc: o.get_u32()?,
            sections: [(0, 0); N_SECTIONS],
        };
        for s in &mut h.sections {
            *s = (o.get_u64()?, o.get_u64()?);
        }
        Some(h)
    }

    /// The header's bytes, with `head_crc` as it is in `self` (see [`Head::seal`]).
    pub fn emit(&self) -> [u8; HEAD_LEN] {
        let mut out = [0u8; HEAD_LEN];
        let mut w = OctetsMut::le(&mut out);
        // Cannot fail: the fields add up to HEAD_LEN.
        let written = (|| {
            w.put_bytes(&MAGIC)?;
            for v in [self.version, self.flags, self.linktype, self.block_packets] {
                w.put_u32(v)?;
            }
            for v in [self.packets, self.first_ns, self.last_ns] {
                w.put_u64(v)?;
            }
            w.put_u32(self.n_blocks)?;
            w.put_u32(self.n_sections)?;
            w.put_u64(self.capture_bytes)?;
            w.put_u64(self.capture_mtime as u64)?;
            w.put_u32(self.capture_sum)?;
            w.put_u32(self.chunk_len)?;
            w.put_bytes(&[0; at::SUMS_CRC - at::CHUNK_LEN - 4])?;
            w.put_u32(self.sums_crc)?;
            w.put_u32(self.head_crc)?;
            for (off, len) in self.sections {
                w.put_u64(off)?;
                w.put_u64(len)?;
            }
            Some(())
        })();
        debug_assert!(written.is_some(), "fields add up to the buffer");
        out
    }

    /// [`Head::emit`] with `head_crc` computed over the bytes.
    pub fn seal(&mut self) -> [u8; HEAD_LEN] {
        self.head_crc = head_crc(&self.emit());
        self.emit()
    }
}

/// The checksum of a header and section table (`head`, at least
/// [`HEAD_LEN`] bytes): CRC-32C with the `head_crc` field taken as 0.
pub fn head_crc(head: &[u8]) -> u32 {
    let c = crc32c::crc32c(&head[..at::HEAD_CRC]);
    let c = crc32c::crc32c_append(c, &[0; 4]);
    crc32c::crc32c_append(c, &head[at::HEAD_CRC + 4..HEAD_LEN])
}

/// Number of checksum chunks of a section of `len` bytes.
pub fn chunks(len: u64, chunk_len: u32) -> u64 {
    len.div_ceil(u64::from(chunk_len))
}

/// Recomputes every checksum of an index laid out in `bytes` (the chunk
/// sums of each section, the sums' checksum and the header's), as the
/// builder would have written them. Fuzzing and tests use it to reach the
/// parsing behind the checksums with damaged content; it does nothing to
/// bytes whose header or section table is unusable.
pub fn reseal(bytes: &mut [u8]) {
    let Some(mut head) = Head::parse(bytes) else { return };
    if head.chunk_len == 0 {
        return;
    }
    let section = |b: &[u8], (off, len): (u64, u64)| {
        let end = off.checked_add(len).filter(|e| *e <= b.len() as u64)?;
        Some((off as usize, end as usize))
    };
    let mut sums = Vec::new();
    for i in 0..N_DATA_SECTIONS {
        let Some((a, b)) = section(bytes, head.sections[i]) else { return };
        for c in bytes[a..b].chunks(head.chunk_len as usize) {
            sums.extend_from_slice(&crc32c::crc32c(c).to_le_bytes());
        }
    }
    let Some((a, b)) = section(bytes, head.sections[section::SUMS]) else { return };
    if b - a == sums.len() {
        bytes[a..b].copy_from_slice(&sums);
    }
    head.sums_crc = crc32c::crc32c(&bytes[a..b]);
    // Only the two checksums change: the other bytes (reserved ones too) stay.
    bytes[at::SUMS_CRC..at::SUMS_CRC + 4].copy_from_slice(&head.sums_crc.to_le_bytes());
    let crc = head_crc(bytes);
    bytes[at::HEAD_CRC..at::HEAD_CRC + 4].copy_from_slice(&crc.to_le_bytes());
}

/// A class of keys: its directory section and key width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyClass {
    Ipv4,
    Ipv6,
    Port,
    Proto,
    Vlan,
}

impl KeyClass {
    /// Width of a key in a directory entry.
    pub fn key_len(self) -> usize {
        match self {
            KeyClass::Ipv4 => 4,
            KeyClass::Ipv6 => 16,
            KeyClass::Port | KeyClass::Vlan => 2,
            KeyClass::Proto => 1,
        }
    }
    /// Section number of the directory (its postings are the next number).
    pub fn dir_section(self) -> usize {
        match self {
            KeyClass::Ipv4 => section::IPV4,
            KeyClass::Ipv6 => section::IPV6,
            KeyClass::Port => section::PORT,
            KeyClass::Proto => section::PROTO,
            KeyClass::Vlan => section::VLAN,
        }
    }
    /// Encodes a key (given as a number) into its directory bytes; keys
    /// compare in directory order exactly as the numbers do.
    pub fn encode_key(self, key: u128, out: &mut [u8; 16]) -> usize {
        let n = self.key_len();
        out[..n].copy_from_slice(&key.to_be_bytes()[16 - n..]);
        n
    }
    /// Decodes directory key bytes into a number.
    pub fn decode_key(self, b: &[u8]) -> u128 {
        let mut a = [0u8; 16];
        a[16 - b.len()..].copy_from_slice(b);
        u128::from_be_bytes(a)
    }

    /// Size of a directory entry: the key, then the end of its posting list (u32).
    pub fn entry_len(self) -> usize {
        self.key_len() + 4
    }

    /// Appends the directory entry of `key`, whose posting list ends at `end`.
    pub fn emit_entry(self, key: u128, end: u32, dir: &mut Vec<u8>) {
        let mut k = [0u8; 16];
        let n = self.encode_key(key, &mut k);
        dir.extend_from_slice(&k[..n]);
        dir.extend_from_slice(&end.to_le_bytes());
    }

    /// Parses a directory entry: its key and the end of its posting list;
    /// `None` if `e` is shorter than [`KeyClass::entry_len`].
    pub fn parse_entry(self, e: &[u8]) -> Option<(u128, u32)> {
        let mut o = Octets::le(e);
        let key = self.decode_key(o.get_bytes(self.key_len())?);
        Some((key, o.get_u32()?))
    }
}

/// Appends `v` as LEB128.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a LEB128 value at `*pos`; `None` when truncated or longer than 10 bytes.
#[inline]
pub fn get_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = *b.get(*pos)?;
        *pos += 1;
        if shift >= 64 {
            return None;
        }
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(v);
        }
        shift += 7;
    }
}

/// Zigzag-encodes a signed value.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Decodes a zigzag value.
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Decodes a posting list into block numbers, appending to `out`.
/// Returns `None` when the bytes are malformed.
pub fn decode_posting(b: &[u8], out: &mut Vec<u32>) -> Option<()> {
    let mut pos = 0;
    let mut cur: u64 = 0;
    while pos < b.len() {
        let d = get_varint(b, &mut pos)?;
        if d == 0 {
            return None;
        }
        cur = cur.checked_add(d)?;
        out.push(u32::try_from(cur - 1).ok()?);
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_parse_emit_round_trip() {
        let mut sections = [(0u64, 0u64); N_SECTIONS];
        for (i, s) in sections.iter_mut().enumerate() {
            *s = (HEAD_LEN as u64 + 100 * i as u64, 7 * i as u64);
        }
        let mut h = Head {
            version: VERSION,
            flags: FLAG_KEYS_COMPLETE | FLAG_CAPTURE_ID,
            linktype: 1,
            block_packets: 64,
            packets: 123_456,
            first_ns: 1_763_800_000_000_000_000,
            last_ns: 1_763_800_001_000_000_000,
            n_blocks: 1930,
            n_sections: N_SECTIONS as u32,
            capture_bytes: 1 << 30,
            capture_mtime: -5,
            capture_sum: 0xdead_beef,
            chunk_len: CHUNK_LEN,
            sums_crc: 0x1234_5678,
            head_crc: 0,
            sections,
        };
        let b = h.seal();
        // The layout the module docs give, byte by byte.
        assert_eq!(&b[..8], b"WVIDX\r\n\x1a");
        assert_eq!(b[8..12], 2u32.to_le_bytes());
        assert_eq!(b[48..52], 1930u32.to_le_bytes());
        assert_eq!(b[at::CAPTURE_MTIME..at::CAPTURE_MTIME + 8], (-5i64).to_le_bytes());
        assert_eq!(b[at::CAPTURE_SUM..at::CAPTURE_SUM + 4], 0xdead_beefu32.to_le_bytes());
        assert!(b[80..120].iter().all(|&x| x == 0));
        assert_eq!(b[HEADER_LEN..HEADER_LEN + 8], (HEAD_LEN as u64).to_le_bytes());
        assert_eq!(b[at::HEAD_CRC..at::HEAD_CRC + 4], head_crc(&b).to_le_bytes());
        let back = Head::parse(&b).unwrap();
        assert_eq!(back, h);
        assert_eq!(back.emit(), b);
        assert_eq!(Head::magic_version(&b[..12]), Some(VERSION));
        assert_eq!(Head::parse(&b[..HEAD_LEN - 1]), None);
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!((Head::parse(&bad), Head::magic_version(&bad)), (None, None));
    }

    #[test]
    fn directory_entry_round_trip() {
        for (class, key) in [(KeyClass::Ipv4, 0x0a00_0001u128), (KeyClass::Ipv6, u128::MAX - 3), (KeyClass::Port, 443)]
        {
            let mut dir = Vec::new();
            class.emit_entry(key, 77, &mut dir);
            assert_eq!(dir.len(), class.entry_len());
            assert_eq!(class.parse_entry(&dir), Some((key, 77)));
            assert_eq!(class.parse_entry(&dir[..dir.len() - 1]), None);
        }
    }

    #[test]
    fn varint_round_trip() {
        let mut b = Vec::new();
        let vals = [0u64, 1, 127, 128, 300, 1 << 40, u64::MAX];
        for v in vals {
            put_varint(&mut b, v);
        }
        assert_eq!(&b[..5], &[0, 1, 127, 0x80, 1]);
        let mut pos = 0;
        for v in vals {
            assert_eq!(get_varint(&b, &mut pos), Some(v));
        }
        assert_eq!(get_varint(&b, &mut pos), None);
        assert_eq!(get_varint(&[0x80], &mut 0), None);
    }

    #[test]
    fn zigzag_round_trip() {
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -12345] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn keys_sort_like_numbers() {
        let mut a = [0u8; 16];
        let mut b = [0u8; 16];
        let n = KeyClass::Ipv4.encode_key(0x0a00_0001, &mut a);
        KeyClass::Ipv4.encode_key(0x0900_ffff, &mut b);
        assert!(a[..n] > b[..n]);
        assert_eq!(KeyClass::Ipv4.decode_key(&a[..n]), 0x0a00_0001);
    }
}
