//! The index file format (`NAME.pcap.idx`), version 1.
//!
//! An index divides the packets of one capture file into *blocks* of
//! `block_packets` consecutive records (64 by default). Posting lists name
//! blocks, not packets: a query reads the candidate blocks and lets the exact
//! libpcap filter decide each packet. A block costs a few bytes in the block
//! table, and a key costs about one byte per block it occurs in, which keeps
//! the index near 1% of the capture on mixed traffic.
//!
//! All integers are little-endian. `varint` is unsigned LEB128; `zigzag` maps
//! a signed delta to an unsigned varint.
//!
//! ```text
//! header (64 bytes)
//!   0  magic          8 bytes  "WVIDX\r\n\x1a"
//!   8  version        u32      1
//!  12  flags          u32      bit 0: KEYS_COMPLETE (every packet's keys are in the
//!                              posting lists; when clear, only the block table may be used)
//!  16  linktype       u32
//!  20  block_packets  u32      power of two
//!  24  packets        u64
//!  32  first_ns       u64      smallest packet timestamp (0 when no packets)
//!  40  last_ns        u64      largest packet timestamp
//!  48  n_blocks       u32
//!  52  n_sections     u32      11
//!  56  reserved       u64      0
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
//! posting list: varint deltas of (block + 1), starting from 0; strictly increasing blocks.
//! ```
//!
//! Addresses are indexed without direction (source and destination in one
//! list), ARP sender/target addresses with IPv4. Keys are a superset of what
//! libpcap's `host`/`net`/`port`/`proto`/`vlan` code can match, never less.

/// File magic.
pub const MAGIC: [u8; 8] = *b"WVIDX\r\n\x1a";
/// Current format version.
pub const VERSION: u32 = 1;
/// Flag: the posting lists cover every packet.
pub const FLAG_KEYS_COMPLETE: u32 = 1;
/// Size of the fixed header.
pub const HEADER_LEN: usize = 64;
/// Number of sections.
pub const N_SECTIONS: usize = 11;
/// Size of the section table.
pub const SECTION_TABLE_LEN: usize = N_SECTIONS * 16;

/// Section numbers.
pub mod section {
    pub const BLOCKS: usize = 0;
    pub const IPV4: usize = 1;
    pub const IPV6: usize = 3;
    pub const PORT: usize = 5;
    pub const PROTO: usize = 7;
    pub const VLAN: usize = 9;
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
