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

use crate::octets::{Endian, Octets, OctetsMut};

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

/// Alexey Kuznetzov's patched pcap format (µs, 24-byte record headers).
pub const MAGIC_KUZNETZOV: u32 = 0xa1b2_cd34;

/// Timestamp resolution of a pcap file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    Micro,
    Nano,
}

/// What a file's magic says: byte order, timestamp precision and whether
/// records have Kuznetzov's longer header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Magic {
    pub endian: Endian,
    pub precision: Precision,
    /// Kuznetzov's patched format: 24-byte record headers.
    pub patched: bool,
}

impl Magic {
    /// Reads the four magic bytes of a file; `None` if they are not a pcap magic.
    pub fn parse(b: [u8; 4]) -> Option<Magic> {
        let known = |m| [MAGIC_MICROS, MAGIC_NANOS, MAGIC_KUZNETZOV].contains(&m);
        let endian = if known(u32::from_le_bytes(b)) {
            Endian::Little
        } else if known(u32::from_be_bytes(b)) {
            Endian::Big
        } else {
            return None;
        };
        let m = Octets::new(&b, endian).peek_u32()?;
        let precision = if m == MAGIC_NANOS { Precision::Nano } else { Precision::Micro };
        Some(Magic { endian, precision, patched: m == MAGIC_KUZNETZOV })
    }

    /// The magic number as written in the file's byte order.
    pub fn value(&self) -> u32 {
        match (self.patched, self.precision) {
            (true, _) => MAGIC_KUZNETZOV,
            (false, Precision::Nano) => MAGIC_NANOS,
            (false, Precision::Micro) => MAGIC_MICROS,
        }
    }

    /// Size of a record header in a file with this magic.
    pub fn record_header_len(&self) -> usize {
        if self.patched {
            KUZNETZOV_RECORD_HEADER_LEN
        } else {
            RECORD_HEADER_LEN
        }
    }
}

/// Size of a record header in Kuznetzov's patched format.
pub const KUZNETZOV_RECORD_HEADER_LEN: usize = 24;

/// A pcap file header; [`FileHeader::parse`] and [`FileHeader::emit`] are
/// the one definition of its layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    pub magic: Magic,
    pub version_major: u16,
    pub version_minor: u16,
    pub thiszone: i32,
    pub sigfigs: u32,
    pub snaplen: u32,
    /// Link type; the upper bits (FCS length) are masked off by [`FileHeader::linktype`].
    pub linktype_field: u32,
}

impl FileHeader {
    /// The header of the files wirevault writes: little-endian, nanoseconds, version 2.4.
    pub fn wirevault(snaplen: u32, linktype: u32) -> FileHeader {
        FileHeader {
            magic: Magic { endian: Endian::Little, precision: Precision::Nano, patched: false },
            version_major: 2,
            version_minor: 4,
            thiszone: 0,
            sigfigs: 0,
            snaplen,
            linktype_field: linktype,
        }
    }

    /// Parses a file header; `None` if the magic is not a pcap magic or the
    /// buffer is shorter than 24 bytes.
    pub fn parse(b: &[u8]) -> Option<FileHeader> {
        let magic = Magic::parse(*b.first_chunk()?)?;
        let mut o = Octets::new(b, magic.endian);
        o.skip(4)?;
        Some(FileHeader {
            magic,
            version_major: o.get_u16()?,
            version_minor: o.get_u16()?,
            thiszone: o.get_u32()? as i32,
            sigfigs: o.get_u32()?,
            snaplen: o.get_u32()?,
            linktype_field: o.get_u32()?,
        })
    }

    /// Writes the header in its own byte order.
    pub fn emit(&self, out: &mut [u8; FILE_HEADER_LEN]) {
        let mut w = OctetsMut::new(out, self.magic.endian);
        // Cannot fail: the fields add up to FILE_HEADER_LEN.
        let written = (|| {
            w.put_u32(self.magic.value())?;
            w.put_u16(self.version_major)?;
            w.put_u16(self.version_minor)?;
            w.put_u32(self.thiszone as u32)?;
            w.put_u32(self.sigfigs)?;
            w.put_u32(self.snaplen)?;
            w.put_u32(self.linktype_field)
        })();
        debug_assert!(written.is_some(), "fields add up to the buffer");
    }

    /// The link type without the FCS bits libpcap keeps in the upper bits.
    pub fn linktype(&self) -> u32 {
        self.linktype_field & 0x03ff_ffff
    }

    /// The snapshot length libpcap uses for this file: a zero or oversized
    /// snaplen in the header means the link type's maximum
    /// ([`crate::linktype::effective_snaplen`]).
    pub fn effective_snaplen(&self) -> u32 {
        crate::linktype::effective_snaplen(self.linktype(), self.snaplen)
    }
}

/// Writes the 24-byte header of a little-endian nanosecond pcap file.
pub fn emit_file_header(out: &mut [u8; FILE_HEADER_LEN], snaplen: u32, linktype: u32) {
    FileHeader::wirevault(snaplen, linktype).emit(out);
}

/// Writes a little-endian nanosecond record header (the capture path's
/// [`RecordHeader::emit`]).
#[inline]
pub fn emit_record_header(out: &mut [u8; RECORD_HEADER_LEN], ts_ns: u64, caplen: u32, origlen: u32) {
    RecordHeader { ts_ns, caplen, origlen }.emit(out);
}

/// A pcap record header, its timestamp in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub ts_ns: u64,
    pub caplen: u32,
    pub origlen: u32,
}

impl RecordHeader {
    /// Parses a record header at the cursor (in the file's byte order) of
    /// a file with the given precision; `None` if fewer than 16 bytes are left.
    #[inline]
    pub fn parse(o: &mut Octets<'_>, precision: Precision) -> Option<RecordHeader> {
        let sec = u64::from(o.get_u32()?);
        let frac = u64::from(o.get_u32()?);
        let ts_ns = match precision {
            Precision::Micro => sec * 1_000_000_000 + frac * 1_000,
            Precision::Nano => sec * 1_000_000_000 + frac,
        };
        Some(RecordHeader { ts_ns, caplen: o.get_u32()?, origlen: o.get_u32()? })
    }

    /// Parses a record header of a file wirevault wrote (little-endian,
    /// nanoseconds); `None` if its nanosecond field is not below 10^9, which
    /// wirevault never writes (so `emit(parse_wirevault(b)) == b`).
    #[inline]
    pub fn parse_wirevault(b: &[u8; RECORD_HEADER_LEN]) -> Option<RecordHeader> {
        let mut o = Octets::le(b);
        let sec = u64::from(o.get_u32()?);
        let nsec = o.get_u32()?;
        if nsec >= 1_000_000_000 {
            return None;
        }
        Some(RecordHeader { ts_ns: sec * 1_000_000_000 + u64::from(nsec), caplen: o.get_u32()?, origlen: o.get_u32()? })
    }

    /// Writes the header as wirevault does: little-endian, nanoseconds.
    #[inline]
    pub fn emit(&self, out: &mut [u8; RECORD_HEADER_LEN]) {
        let sec = (self.ts_ns / 1_000_000_000) as u32;
        let nsec = (self.ts_ns % 1_000_000_000) as u32;
        out[0..4].copy_from_slice(&sec.to_le_bytes());
        out[4..8].copy_from_slice(&nsec.to_le_bytes());
        out[8..12].copy_from_slice(&self.caplen.to_le_bytes());
        out[12..16].copy_from_slice(&self.origlen.to_le_bytes());
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
        assert_eq!(h.magic.endian, Endian::Little);
        assert_eq!(h.magic.precision, Precision::Nano);
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
        let r = RecordHeader::parse(&mut Octets::le(&b), Precision::Nano).unwrap();
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
        assert_eq!(h.magic.endian, Endian::Big);
        assert_eq!(h.magic.precision, Precision::Micro);
        assert_eq!(h.linktype(), 105);
        assert_eq!(h.effective_snaplen(), crate::MAX_SNAPLEN);
    }

    #[test]
    fn file_header_parse_emit_round_trip() {
        // Every magic in both byte orders, odd field values.
        for endian in [Endian::Little, Endian::Big] {
            for (precision, patched) in [(Precision::Micro, false), (Precision::Nano, false), (Precision::Micro, true)]
            {
                let h = FileHeader {
                    magic: Magic { endian, precision, patched },
                    version_major: 2,
                    version_minor: 3,
                    thiszone: -3600,
                    sigfigs: 7,
                    snaplen: 65535,
                    linktype_field: 0x0400_0001,
                };
                let mut b = [0xeeu8; FILE_HEADER_LEN];
                h.emit(&mut b);
                assert_eq!(FileHeader::parse(&b), Some(h));
                let mut again = [0u8; FILE_HEADER_LEN];
                FileHeader::parse(&b).unwrap().emit(&mut again);
                assert_eq!(again, b);
            }
        }
        let mut again = [0u8; FILE_HEADER_LEN];
        FileHeader::parse(&TCPDUMP_NS_HEADER).unwrap().emit(&mut again);
        assert_eq!(again, TCPDUMP_NS_HEADER);
        assert_eq!(FileHeader::parse(&TCPDUMP_NS_HEADER[..23]), None);
    }

    #[test]
    fn record_header_emit_parse_bytes() {
        // A record header as tcpdump wrote it (ns): 2025-11-22 ... caplen 60, origlen 1514.
        let b: [u8; 16] = [0x15, 0xcd, 0x5b, 0x07, 0x0d, 0x0c, 0x0b, 0x0a, 60, 0, 0, 0, 0xea, 0x05, 0, 0];
        let r = RecordHeader::parse(&mut Octets::le(&b), Precision::Nano).unwrap();
        assert_eq!(r, RecordHeader { ts_ns: 0x075b_cd15 * 1_000_000_000 + 0x0a0b_0c0d, caplen: 60, origlen: 1514 });
        let mut again = [0xffu8; 16];
        r.emit(&mut again);
        assert_eq!(again, b);
        assert_eq!(RecordHeader::parse_wirevault(&b), Some(r));
        let mut bad = b;
        bad[4..8].copy_from_slice(&1_000_000_000u32.to_le_bytes());
        assert_eq!(RecordHeader::parse_wirevault(&bad), None);
        assert_eq!(RecordHeader::parse(&mut Octets::le(&b[..15]), Precision::Nano), None);
    }
}
