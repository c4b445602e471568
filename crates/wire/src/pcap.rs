//! The classic pcap file format (libpcap's savefile), both timestamp
//! precisions and both byte orders for reading; wirevault itself writes
//! little-endian nanosecond files (magic `a1b23c4d`).
//!
//! Layout (all fields in the file's byte order):
//! ```text
//! file header (24 bytes): magic u32, version_major u16 (2), version_minor u16 (4),
//!                         thiszone i32, sigfigs u32, snaplen u32, linktype u32
//! record header (16 bytes): ts_sec u32, ts_frac u32 (µs or ns), caplen u32, origlen u32
//! ```

/// Size of the pcap file header.
pub const FILE_HEADER_LEN: usize = 24;
/// Size of a pcap record header.
pub const RECORD_HEADER_LEN: usize = 16;

/// Magic of a microsecond pcap file, as read in the writer's byte order.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic of a nanosecond pcap file, as read in the writer's byte order.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;

/// Byte ranges of the file header fields.
pub mod field {
    use core::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION_MAJOR: Range<usize> = 4..6;
    pub const VERSION_MINOR: Range<usize> = 6..8;
    pub const THISZONE: Range<usize> = 8..12;
    pub const SIGFIGS: Range<usize> = 12..16;
    pub const SNAPLEN: Range<usize> = 16..20;
    pub const LINKTYPE: Range<usize> = 20..24;
}

/// Timestamp resolution of a pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Micro,
    Nano,
}

/// A parsed pcap file header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    pub big_endian: bool,
    pub precision: Precision,
    pub version_major: u16,
    pub version_minor: u16,
    pub snaplen: u32,
    /// Link type; the upper bits (FCS length) are masked off by [`FileHeader::linktype`].
    pub linktype_field: u32,
}

impl FileHeader {
    /// Parses a file header; `None` if the magic is not a pcap magic or the
    /// buffer is shorter than 24 bytes.
    pub fn parse(b: &[u8]) -> Option<FileHeader> {
        if b.len() < FILE_HEADER_LEN {
            return None;
        }
        let le = u32::from_le_bytes(b[field::MAGIC].try_into().ok()?);
        let be = u32::from_be_bytes(b[field::MAGIC].try_into().ok()?);
        let (big_endian, precision) = match (le, be) {
            (MAGIC_MICROS, _) => (false, Precision::Micro),
            (MAGIC_NANOS, _) => (false, Precision::Nano),
            (_, MAGIC_MICROS) => (true, Precision::Micro),
            (_, MAGIC_NANOS) => (true, Precision::Nano),
            _ => return None,
        };
        let r16 = |r: core::ops::Range<usize>| {
            let a = [b[r.start], b[r.start + 1]];
            if big_endian {
                u16::from_be_bytes(a)
            } else {
                u16::from_le_bytes(a)
            }
        };
        let r32 = |r: core::ops::Range<usize>| read_u32(&b[r], big_endian);
        Some(FileHeader {
            big_endian,
            precision,
            version_major: r16(field::VERSION_MAJOR),
            version_minor: r16(field::VERSION_MINOR),
            snaplen: r32(field::SNAPLEN),
            linktype_field: r32(field::LINKTYPE),
        })
    }

    /// The link type without the FCS bits libpcap keeps in the upper bits.
    pub fn linktype(&self) -> u32 {
        self.linktype_field & 0x03ff_ffff
    }

    /// The snapshot length libpcap uses for this file: a zero or oversized
    /// snaplen in the header means [`crate::MAX_SNAPLEN`].
    pub fn effective_snaplen(&self) -> u32 {
        if self.snaplen == 0 || self.snaplen > crate::MAX_SNAPLEN {
            crate::MAX_SNAPLEN
        } else {
            self.snaplen
        }
    }
}

/// Reads a u32 in the given byte order from the first four bytes of `b`.
#[inline]
pub fn read_u32(b: &[u8], big_endian: bool) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if big_endian {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

/// Writes the 24-byte header of a little-endian nanosecond pcap file.
pub fn emit_file_header(out: &mut [u8; FILE_HEADER_LEN], snaplen: u32, linktype: u32) {
    out[field::MAGIC].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
    out[field::VERSION_MAJOR].copy_from_slice(&2u16.to_le_bytes());
    out[field::VERSION_MINOR].copy_from_slice(&4u16.to_le_bytes());
    out[field::THISZONE].copy_from_slice(&0i32.to_le_bytes());
    out[field::SIGFIGS].copy_from_slice(&0u32.to_le_bytes());
    out[field::SNAPLEN].copy_from_slice(&snaplen.to_le_bytes());
    out[field::LINKTYPE].copy_from_slice(&linktype.to_le_bytes());
}

/// Writes a little-endian nanosecond record header.
#[inline]
pub fn emit_record_header(out: &mut [u8; RECORD_HEADER_LEN], ts_ns: u64, caplen: u32, origlen: u32) {
    let sec = (ts_ns / 1_000_000_000) as u32;
    let nsec = (ts_ns % 1_000_000_000) as u32;
    out[0..4].copy_from_slice(&sec.to_le_bytes());
    out[4..8].copy_from_slice(&nsec.to_le_bytes());
    out[8..12].copy_from_slice(&caplen.to_le_bytes());
    out[12..16].copy_from_slice(&origlen.to_le_bytes());
}

/// A record header of a file wirevault wrote (little-endian, nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub ts_ns: u64,
    pub caplen: u32,
    pub origlen: u32,
}

impl RecordHeader {
    /// Parses a record header of a file with the given byte order and precision.
    pub fn parse(b: &[u8; RECORD_HEADER_LEN], big_endian: bool, precision: Precision) -> RecordHeader {
        let sec = read_u32(&b[0..4], big_endian) as u64;
        let frac = read_u32(&b[4..8], big_endian) as u64;
        let ts_ns = match precision {
            Precision::Micro => sec * 1_000_000_000 + frac * 1_000,
            Precision::Nano => sec * 1_000_000_000 + frac,
        };
        RecordHeader { ts_ns, caplen: read_u32(&b[8..12], big_endian), origlen: read_u32(&b[12..16], big_endian) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The header of a nanosecond Ethernet file written by `tcpdump --time-stamp-precision=nano -w`.
    static TCPDUMP_NS_HEADER: [u8; 24] = [
        0x4d, 0x3c, 0xb2, 0xa1, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x04, 0x00, 0x01, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn parse_tcpdump_header() {
        let h = FileHeader::parse(&TCPDUMP_NS_HEADER).unwrap();
        assert!(!h.big_endian);
        assert_eq!(h.precision, Precision::Nano);
        assert_eq!((h.version_major, h.version_minor), (2, 4));
        assert_eq!(h.snaplen, 262_144);
        assert_eq!(h.linktype(), crate::linktype::ETHERNET);
    }

    #[test]
    fn emit_matches_tcpdump() {
        let mut out = [0xffu8; 24];
        emit_file_header(&mut out, 262_144, 1);
        assert_eq!(out, TCPDUMP_NS_HEADER);
    }

    #[test]
    fn record_round_trip() {
        let mut b = [0xaa; 16];
        emit_record_header(&mut b, 1_763_800_000_123_456_789, 60, 1514);
        let r = RecordHeader::parse(&b, false, Precision::Nano);
        assert_eq!(r.ts_ns, 1_763_800_000_123_456_789);
        assert_eq!((r.caplen, r.origlen), (60, 1514));
    }

    #[test]
    fn big_endian_micro() {
        let mut b = [0u8; 24];
        b[0..4].copy_from_slice(&MAGIC_MICROS.to_be_bytes());
        b[16..20].copy_from_slice(&0u32.to_be_bytes());
        b[20..24].copy_from_slice(&105u32.to_be_bytes());
        let h = FileHeader::parse(&b).unwrap();
        assert!(h.big_endian);
        assert_eq!(h.precision, Precision::Micro);
        assert_eq!(h.linktype(), 105);
        assert_eq!(h.effective_snaplen(), crate::MAX_SNAPLEN);
    }
}
