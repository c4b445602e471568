//! The pcapng format: what wirevault writes (`--format pcapng`) and, in
//! `reader`, what it reads.
//!
//! wirevault writes one Section Header Block, one Interface Description Block
//! with `if_tsresol = 9` (nanoseconds), then one Enhanced Packet Block per
//! packet, all little-endian.

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
const SHB_LEN: usize = 28;
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

/// Writes the SHB and IDB that open every pcapng file wirevault writes.
pub fn emit_preamble(out: &mut [u8; PREAMBLE_LEN], snaplen: u32, linktype: u32) {
    let shb = &mut out[..SHB_LEN];
    shb[0..4].copy_from_slice(&BT_SHB.to_le_bytes());
    shb[4..8].copy_from_slice(&(SHB_LEN as u32).to_le_bytes());
    shb[8..12].copy_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
    shb[12..14].copy_from_slice(&1u16.to_le_bytes());
    shb[14..16].copy_from_slice(&0u16.to_le_bytes());
    shb[16..24].copy_from_slice(&u64::MAX.to_le_bytes()); // section length unknown
    shb[24..28].copy_from_slice(&(SHB_LEN as u32).to_le_bytes());
    let idb = &mut out[SHB_LEN..];
    idb[0..4].copy_from_slice(&BT_IDB.to_le_bytes());
    idb[4..8].copy_from_slice(&(IDB_LEN as u32).to_le_bytes());
    idb[8..10].copy_from_slice(&(linktype as u16).to_le_bytes());
    idb[10..12].copy_from_slice(&0u16.to_le_bytes());
    idb[12..16].copy_from_slice(&snaplen.to_le_bytes());
    // if_tsresol (code 9, length 1, value 9 = 10^-9 s), padded to 4 bytes
    idb[16..18].copy_from_slice(&9u16.to_le_bytes());
    idb[18..20].copy_from_slice(&1u16.to_le_bytes());
    idb[20..24].copy_from_slice(&[9, 0, 0, 0]);
    // opt_endofopt
    idb[24..28].copy_from_slice(&0u32.to_le_bytes());
    idb[28..32].copy_from_slice(&(IDB_LEN as u32).to_le_bytes());
}

/// Writes the fixed header of an EPB for interface 0.
#[inline]
pub fn emit_epb_header(out: &mut [u8; EPB_HEADER_LEN], ts_ns: u64, caplen: u32, origlen: u32) {
    let total = epb_len(caplen) as u32;
    out[0..4].copy_from_slice(&BT_EPB.to_le_bytes());
    out[4..8].copy_from_slice(&total.to_le_bytes());
    out[8..12].copy_from_slice(&0u32.to_le_bytes());
    out[12..16].copy_from_slice(&((ts_ns >> 32) as u32).to_le_bytes());
    out[16..20].copy_from_slice(&(ts_ns as u32).to_le_bytes());
    out[20..24].copy_from_slice(&caplen.to_le_bytes());
    out[24..28].copy_from_slice(&origlen.to_le_bytes());
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
}
