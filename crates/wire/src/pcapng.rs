//! The pcapng format: what wirevault writes (`--format pcapng`) and, in
//! `reader`, what it reads.
//!
//! wirevault writes one Section Header Block, one Interface Description Block
//! with `if_tsresol = 9` (nanoseconds), then one Enhanced Packet Block per
//! packet, all little-endian.

use crate::octets::{Endian, Octets, OctetsMut};

/// Block type of a Section Header Block.
pub const BT_SHB: u32 = 0x0a0d_0d0a;
/// Block type of an Interface Description Block.
pub const BT_IDB: u32 = 0x0000_0001;
/// Block type of a Simple Packet Block.
pub const BT_SPB: u32 = 0x0000_0003;
/// Block type of an (obsolete) Packet Block.
pub const BT_PB: u32 = 0x0000_0002;
/// Block type of an Enhanced Packet Block.
pub const BT_EPB: u32 = 0x0000_0006;
/// Block type wirevault's zero-copy files use to cover bytes that are not
/// packets (ring block headers, gaps between frames, the tail of a ring
/// block): a local-use type (bit 31 set), which pcapng readers skip
/// (libpcap, Wireshark, wirevault's own reader).
pub const BT_LOCAL_SKIP: u32 = 0x8000_5756;
/// EPB option: link-layer flags (`epb_flags`), 4 bytes. Zero-copy files use
/// one with value 0 ("no information") to absorb an 8-byte gap.
pub const EPB_FLAGS: u16 = 2;
/// Byte-order magic of a Section Header Block.
pub const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;

/// Option code that ends an option list (`opt_endofopt`).
pub const OPT_ENDOFOPT: u16 = 0;
/// IDB option: timestamp resolution (`if_tsresol`), one byte.
pub const IF_TSRESOL: u16 = 9;
/// IDB option: timestamp offset in seconds (`if_tsoffset`), a signed 64-bit value.
pub const IF_TSOFFSET: u16 = 14;

/// Size of the block header (type + total length) every block starts with.
pub const BLOCK_HEADER_LEN: usize = 8;
/// Size of the trailing copy of the total length every block ends with.
pub const BLOCK_TRAILER_LEN: usize = 4;
/// Smallest legal block: header and trailer with an empty body.
pub const MIN_BLOCK_LEN: u32 = (BLOCK_HEADER_LEN + BLOCK_TRAILER_LEN) as u32;
/// Fixed body of an SHB: byte-order magic, major, minor, section length.
pub const SHB_BODY_LEN: usize = 16;
/// Fixed body of an IDB: link type (u16), reserved (u16), snaplen (u32).
pub const IDB_BODY_LEN: usize = 8;
/// Fixed body of an EPB (and of the obsolete PB): interface, timestamp
/// high/low, captured length, original length.
pub const EPB_BODY_LEN: usize = 20;
/// Fixed body of an SPB: original length.
pub const SPB_BODY_LEN: usize = 4;

/// Length of the SHB + IDB preamble wirevault writes.
pub const PREAMBLE_LEN: usize = SHB_LEN + IDB_LEN;
/// Length of the SHB wirevault writes (no options).
pub const SHB_LEN: usize = 28;
// IDB: 16 fixed + option if_tsresol (4 + 1 padded to 4) + opt_endofopt (4) + trailing length (4)
const IDB_LEN: usize = 32;
/// Fixed part of an EPB before the packet data.
pub const EPB_HEADER_LEN: usize = 28;
/// Bytes after the padded packet data of an EPB (trailing total length).
pub const EPB_TRAILER_LEN: usize = 4;

/// Total length of an EPB carrying `caplen` bytes, no options.
#[inline]
pub fn epb_len(caplen: u32) -> usize {
    EPB_HEADER_LEN + pad4(caplen as usize) + EPB_TRAILER_LEN
}

/// Rounds up to a multiple of four.
#[inline]
pub fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// The byte order of a section, from the byte-order magic of its SHB
/// (bytes 8..12 of the block; the block type reads the same both ways).
/// The one place this check is made.
pub fn section_endian(bom: [u8; 4]) -> Option<Endian> {
    Endian::detect(bom, BYTE_ORDER_MAGIC)
}

/// The header every block starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    pub block_type: u32,
    pub total_len: u32,
}

impl BlockHeader {
    pub fn parse(o: &mut Octets<'_>) -> Option<BlockHeader> {
        Some(BlockHeader { block_type: o.get_u32()?, total_len: o.get_u32()? })
    }
    pub fn emit(&self, w: &mut OctetsMut<'_>) -> Option<()> {
        w.put_u32(self.block_type)?;
        w.put_u32(self.total_len)
    }
}

/// The fixed body of a Section Header Block ([`SHB_BODY_LEN`] bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SectionHeader {
    /// The section's byte order (its byte-order magic).
    pub endian: Endian,
    pub major: u16,
    pub minor: u16,
    /// Section length; `u64::MAX` when unknown.
    pub section_len: u64,
}

impl SectionHeader {
    /// Parses the fixed body; `None` if it is short or the byte-order
    /// magic is neither order's.
    pub fn parse(body: &[u8]) -> Option<SectionHeader> {
        let endian = section_endian(*body.first_chunk()?)?;
        let mut o = Octets::new(body, endian);
        o.skip(4)?;
        Some(SectionHeader { endian, major: o.get_u16()?, minor: o.get_u16()?, section_len: o.get_u64()? })
    }
    pub fn emit(&self, w: &mut OctetsMut<'_>) -> Option<()> {
        w.put_u32(BYTE_ORDER_MAGIC)?;
        w.put_u16(self.major)?;
        w.put_u16(self.minor)?;
        w.put_u64(self.section_len)
    }
}

/// The fixed body of an Interface Description Block ([`IDB_BODY_LEN`] bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InterfaceDescription {
    pub linktype: u16,
    pub reserved: u16,
    pub snaplen: u32,
}

impl InterfaceDescription {
    pub fn parse(o: &mut Octets<'_>) -> Option<InterfaceDescription> {
        Some(InterfaceDescription { linktype: o.get_u16()?, reserved: o.get_u16()?, snaplen: o.get_u32()? })
    }
    pub fn emit(&self, w: &mut OctetsMut<'_>) -> Option<()> {
        w.put_u16(self.linktype)?;
        w.put_u16(self.reserved)?;
        w.put_u32(self.snaplen)
    }
}

/// The fixed body of an Enhanced Packet Block, or of the obsolete Packet
/// Block (whose interface id is a u16 followed by a u16 drop count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnhancedPacket {
    pub interface_id: u32,
    /// Timestamp in the interface's units (high and low halves joined).
    pub ts: u64,
    pub caplen: u32,
    pub origlen: u32,
}

impl EnhancedPacket {
    /// Parses the fixed body ([`EPB_BODY_LEN`] bytes) of an EPB, or of a PB
    /// when `obsolete`.
    pub fn parse(o: &mut Octets<'_>, obsolete: bool) -> Option<EnhancedPacket> {
        let interface_id = if obsolete {
            let id = o.get_u16()?;
            o.skip(2)?;
            u32::from(id)
        } else {
            o.get_u32()?
        };
        let (hi, lo) = (o.get_u32()?, o.get_u32()?);
        Some(EnhancedPacket {
            interface_id,
            ts: (u64::from(hi) << 32) | u64::from(lo),
            caplen: o.get_u32()?,
            origlen: o.get_u32()?,
        })
    }

    /// Parses the block header and fixed body of an EPB as wirevault writes
    /// it (the header's type and length are returned, not checked).
    #[inline]
    pub fn parse_block(b: &[u8; EPB_HEADER_LEN]) -> Option<(BlockHeader, EnhancedPacket)> {
        let mut o = Octets::le(b);
        Some((BlockHeader::parse(&mut o)?, EnhancedPacket::parse(&mut o, false)?))
    }

    /// Writes the block header and fixed body of an EPB as wirevault does
    /// (little-endian, no options): the capture path's per-packet emit.
    #[inline]
    pub fn emit_header(&self, out: &mut [u8; EPB_HEADER_LEN]) {
        let total = epb_len(self.caplen) as u32;
        out[0..4].copy_from_slice(&BT_EPB.to_le_bytes());
        out[4..8].copy_from_slice(&total.to_le_bytes());
        out[8..12].copy_from_slice(&self.interface_id.to_le_bytes());
        out[12..16].copy_from_slice(&((self.ts >> 32) as u32).to_le_bytes());
        out[16..20].copy_from_slice(&(self.ts as u32).to_le_bytes());
        out[20..24].copy_from_slice(&self.caplen.to_le_bytes());
        out[24..28].copy_from_slice(&self.origlen.to_le_bytes());
    }
}

/// Writes the SHB and IDB that open every pcapng file wirevault writes.
pub fn emit_preamble(out: &mut [u8; PREAMBLE_LEN], snaplen: u32, linktype: u32) {
    let mut w = OctetsMut::le(out);
    // Cannot fail: the pieces add up to PREAMBLE_LEN.
    let written = (|| {
        BlockHeader { block_type: BT_SHB, total_len: SHB_LEN as u32 }.emit(&mut w)?;
        SectionHeader { endian: Endian::Little, major: 1, minor: 0, section_len: u64::MAX }.emit(&mut w)?;
        w.put_u32(SHB_LEN as u32)?;
        BlockHeader { block_type: BT_IDB, total_len: IDB_LEN as u32 }.emit(&mut w)?;
        InterfaceDescription { linktype: linktype as u16, reserved: 0, snaplen }.emit(&mut w)?;
        // if_tsresol (code 9, length 1, value 9 = 10^-9 s), padded to 4 bytes
        w.put_u16(IF_TSRESOL)?;
        w.put_u16(1)?;
        w.put_bytes(&[9, 0, 0, 0])?;
        w.put_u32(u32::from(OPT_ENDOFOPT))?;
        w.put_u32(IDB_LEN as u32)
    })();
    debug_assert!(written.is_some(), "fields add up to the buffer");
}

/// Writes the fixed header of an EPB for interface 0.
#[inline]
pub fn emit_epb_header(out: &mut [u8; EPB_HEADER_LEN], ts_ns: u64, caplen: u32, origlen: u32) {
    EnhancedPacket { interface_id: 0, ts: ts_ns, caplen, origlen }.emit_header(out);
}

/// The trailer of an EPB: padding (up to 3 zero bytes) then the total length.
/// Returns the number of bytes written into `out` (padding + 4).
#[inline]
pub fn emit_epb_trailer(out: &mut [u8; 7], caplen: u32) -> usize {
    let pad = pad4(caplen as usize) - caplen as usize;
    out[..pad].fill(0);
    out[pad..pad + 4].copy_from_slice(&(epb_len(caplen) as u32).to_le_bytes());
    pad + 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_lengths_consistent() {
        let mut b = [0u8; PREAMBLE_LEN];
        emit_preamble(&mut b, 262_144, 1);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize, SHB_LEN);
        assert_eq!(u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize, SHB_LEN);
        let idb = &b[SHB_LEN..];
        assert_eq!(u32::from_le_bytes(idb[4..8].try_into().unwrap()) as usize, IDB_LEN);
        assert_eq!(u32::from_le_bytes(idb[28..32].try_into().unwrap()) as usize, IDB_LEN);
    }

    #[test]
    fn epb_padding() {
        assert_eq!(epb_len(60), 28 + 60 + 4);
        assert_eq!(epb_len(61), 28 + 64 + 4);
        let mut t = [0xffu8; 7];
        assert_eq!(emit_epb_trailer(&mut t, 61), 7);
        assert_eq!(&t[..3], &[0, 0, 0]);
        assert_eq!(u32::from_le_bytes(t[3..7].try_into().unwrap()), 96);
    }

    /// The preamble as bytes, written out by hand from the pcapng spec.
    fn preamble_bytes() -> Vec<u8> {
        let mut b = Vec::new();
        for v in [BT_SHB, 28, BYTE_ORDER_MAGIC] {
            b.extend(v.to_le_bytes());
        }
        b.extend(1u16.to_le_bytes());
        b.extend(0u16.to_le_bytes());
        b.extend([0xff; 8]);
        b.extend(28u32.to_le_bytes());
        for v in [BT_IDB, 32] {
            b.extend(v.to_le_bytes());
        }
        b.extend(1u16.to_le_bytes());
        b.extend(0u16.to_le_bytes());
        b.extend(65535u32.to_le_bytes());
        b.extend([9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        b.extend(32u32.to_le_bytes());
        b
    }

    #[test]
    fn preamble_bytes_and_block_types_round_trip() {
        let mut out = [0xaau8; PREAMBLE_LEN];
        emit_preamble(&mut out, 65535, 1);
        let want = preamble_bytes();
        assert_eq!(&out[..], &want[..]);
        // Parse the pieces back and emit them again.
        let mut o = Octets::le(&want);
        let bh = BlockHeader::parse(&mut o).unwrap();
        assert_eq!(bh, BlockHeader { block_type: BT_SHB, total_len: 28 });
        let shb = SectionHeader::parse(o.rest()).unwrap();
        assert_eq!(shb, SectionHeader { endian: Endian::Little, major: 1, minor: 0, section_len: u64::MAX });
        let mut again = [0u8; SHB_BODY_LEN];
        shb.emit(&mut OctetsMut::le(&mut again)).unwrap();
        assert_eq!(&again[..], &want[8..24]);
        let mut o = Octets::le(&want[SHB_LEN + 8..]);
        let idb = InterfaceDescription::parse(&mut o).unwrap();
        assert_eq!(idb, InterfaceDescription { linktype: 1, reserved: 0, snaplen: 65535 });
        let mut again = [0u8; IDB_BODY_LEN];
        idb.emit(&mut OctetsMut::le(&mut again)).unwrap();
        assert_eq!(&again[..], &want[SHB_LEN + 8..SHB_LEN + 16]);
        // A big-endian SHB body reads as big-endian.
        let mut be = [0u8; SHB_BODY_LEN];
        let h = SectionHeader { endian: Endian::Big, major: 1, minor: 2, section_len: 7 };
        h.emit(&mut OctetsMut::new(&mut be, Endian::Big)).unwrap();
        assert_eq!(SectionHeader::parse(&be), Some(h));
        assert_eq!(section_endian([0x1a, 0x2b, 0x3c, 0x4d]), Some(Endian::Big));
        assert_eq!(section_endian([1, 2, 3, 4]), None);
    }

    #[test]
    fn epb_parse_emit_round_trip() {
        let e = EnhancedPacket { interface_id: 0, ts: 1_763_800_000_123_456_789, caplen: 61, origlen: 1514 };
        let mut b = [0xffu8; EPB_HEADER_LEN];
        e.emit_header(&mut b);
        let mut o = Octets::le(&b);
        assert_eq!(BlockHeader::parse(&mut o), Some(BlockHeader { block_type: BT_EPB, total_len: 96 }));
        assert_eq!(EnhancedPacket::parse(&mut o, false), Some(e));
        assert_eq!(EnhancedPacket::parse_block(&b), Some((BlockHeader { block_type: BT_EPB, total_len: 96 }, e)));
        let mut again = [0u8; EPB_HEADER_LEN];
        EnhancedPacket::parse(&mut Octets::le(&b[8..]), false).unwrap().emit_header(&mut again);
        assert_eq!(again, b);
        assert_eq!(EnhancedPacket::parse(&mut Octets::le(&b[8..27]), false), None);
        // The obsolete PB: u16 interface, u16 drops.
        let pb = [3, 0, 9, 9, 0, 0, 0, 0, 42, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0];
        let p = EnhancedPacket::parse(&mut Octets::le(&pb), true).unwrap();
        assert_eq!(p, EnhancedPacket { interface_id: 3, ts: 42, caplen: 2, origlen: 2 });
    }
}
