//! IPv6 fixed header (RFC 8200) and its extension headers: Hop-by-Hop,
//! Routing, Destination Options (length in 8-byte units past the first 8),
//! Fragment (8 bytes), Authentication Header (RFC 4302: length in 4-byte
//! units, minus 2). [`ExtHeader`] walks one of them; the dissector walks
//! the chain.

use super::{be16, get16, get_arr, ipproto, Error, IpProtocol};

/// Byte ranges of the fixed header.
pub mod field {
    use crate::views::{Field, Rest};
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
    pub const PAYLOAD: Rest = 40..;
}

/// Byte ranges of an extension header.
pub mod ext_field {
    use crate::views::Field;
    pub const NXT_HDR: usize = 0;
    /// Header length (in units that depend on the header type).
    pub const LENGTH: usize = 1;
    /// Fragment header: offset (13 bits, 8-byte units), 2 reserved bits, M.
    pub const FRAG_OFF_M: Field = 2..4;
    pub const FRAG_IDENT: Field = 4..8;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;
/// Length of a fragment header.
pub const FRAG_HEADER_LEN: usize = 8;
/// Mask of the offset in [`ext_field::FRAG_OFF_M`].
pub const FRAG_OFFSET_MASK: u16 = 0xfff8;
/// Option types of Hop-by-Hop and Destination Options headers (RFC 8200 4.2).
pub const OPT_PAD1: u8 = 0x00;
/// Jumbo Payload (RFC 2675): a 4-byte payload length, for a payload length field of 0.
pub const OPT_JUMBO: u8 = 0xc2;
/// Jumbo Payload option data length.
pub const OPT_JUMBO_LEN: u8 = 4;

/// True for the Next Header values this module walks as extension headers.
pub const fn is_extension(nh: u8) -> bool {
    matches!(nh, ipproto::HOPOPTS | ipproto::ROUTING | ipproto::FRAGMENT | ipproto::AH | ipproto::DSTOPTS)
}

/// Length of the extension header of type `nh` whose bytes start `b`,
/// when its length field is inside `b` (it may say more than `b` holds).
pub fn ext_header_len(nh: u8, b: &[u8]) -> Option<usize> {
    match nh {
        ipproto::FRAGMENT => Some(FRAG_HEADER_LEN),
        ipproto::AH => b.get(ext_field::LENGTH).map(|&l| 4 * (usize::from(l) + 2)),
        _ => b.get(ext_field::LENGTH).map(|&l| 8 + 8 * usize::from(l)),
    }
}

/// A view of an IPv6 fixed header (and what follows).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The view, when the buffer holds the fixed header. The version and
    /// the payload length are not checked here.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn version(&self) -> u8 {
        self.b()[0] >> 4
    }
    pub fn traffic_class(&self) -> u8 {
        (be16(self.b(), 0..2) >> 4) as u8
    }
    pub fn flow_label(&self) -> u32 {
        u32::from_be_bytes([0, self.b()[1] & 0x0f, self.b()[2], self.b()[3]])
    }
    pub fn payload_len(&self) -> u16 {
        be16(self.b(), field::LENGTH)
    }
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.b()[field::NXT_HDR])
    }
    pub fn hop_limit(&self) -> u8 {
        self.b()[field::HOP_LIMIT]
    }
    pub fn src_addr(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.b()[field::SRC_ADDR]);
        a
    }
    pub fn dst_addr(&self) -> [u8; 16] {
        let mut a = [0; 16];
        a.copy_from_slice(&self.b()[field::DST_ADDR]);
        a
    }
    /// The payload as far as it was captured and the payload length allows.
    pub fn payload(&self) -> &[u8] {
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(self.b().len());
        &self.b()[HEADER_LEN..end]
    }
}

/// A view of one extension header of type `kind`, whole inside the buffer.
#[derive(Debug, Clone)]
pub struct ExtHeader<T: AsRef<[u8]>> {
    buffer: T,
    kind: u8,
    len: usize,
}

impl<T: AsRef<[u8]>> ExtHeader<T> {
    /// The view of the extension header of type `kind` at the start of
    /// `buffer`; `Malformed` when `kind` is not an extension header.
    pub fn new_checked(buffer: T, kind: u8) -> Result<Self, Error> {
        if !is_extension(kind) {
            return Err(Error::Malformed);
        }
        let len = ext_header_len(kind, buffer.as_ref()).ok_or(Error::Truncated)?;
        if buffer.as_ref().len() < len {
            return Err(Error::Truncated);
        }
        Ok(ExtHeader { buffer, kind, len })
    }
    pub fn kind(&self) -> IpProtocol {
        IpProtocol::from(self.kind)
    }
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[ext_field::NXT_HDR])
    }
    /// Length of this header in bytes.
    pub fn header_len(&self) -> usize {
        self.len
    }
    /// Fragment offset in bytes (0 for other headers).
    pub fn frag_offset(&self) -> u16 {
        match self.kind {
            ipproto::FRAGMENT => {
                get16(self.buffer.as_ref(), ext_field::FRAG_OFF_M.start).map_or(0, |v| v & FRAG_OFFSET_MASK)
            }
            _ => 0,
        }
    }
    /// The More Fragments flag (false for other headers).
    pub fn more_frags(&self) -> bool {
        self.kind == ipproto::FRAGMENT && self.buffer.as_ref()[ext_field::FRAG_OFF_M.end - 1] & 1 != 0
    }
    /// The value of the first Jumbo Payload option (RFC 2675) of a
    /// Hop-by-Hop header, when there is one whose data is 4 bytes inside
    /// this header (None for other headers).
    pub fn jumbo_payload_len(&self) -> Option<u32> {
        if self.kind != ipproto::HOPOPTS {
            return None;
        }
        let opts = self.data();
        let mut at = 0;
        while let Some(&t) = opts.get(at) {
            if t == OPT_PAD1 {
                at += 1;
                continue;
            }
            let len = *opts.get(at + 1)?;
            if t == OPT_JUMBO && len == OPT_JUMBO_LEN {
                return get_arr::<4>(opts, at + 2).map(u32::from_be_bytes);
            }
            at += 2 + usize::from(len);
        }
        None
    }
    /// The header's data after its first two bytes.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[2..self.len]
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.len..]
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// IPv6 / Hop-by-hop (PadN) / Fragment (first, M=1) / UDP 5353 -> 53.
    pub fn ipv6_ext() -> Vec<u8> {
        let mut f = vec![0x60, 0, 0, 0, 0, 24, 0 /* hop-by-hop */, 64];
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f.extend_from_slice(&[44, 0, 1, 4, 0, 0, 0, 0]); // HBH: next=fragment, len 0, PadN
        f.extend_from_slice(&[17, 0, 0, 1, 0, 0, 0, 7]); // fragment: next=UDP, offset 0, M=1
        f.extend_from_slice(&[0x14, 0xe9, 0x00, 0x35, 0, 8, 0, 0]); // UDP
        f
    }

    #[test]
    fn take_apart() {
        let f = ipv6_ext();
        let p = Packet::new_checked(&f[..]).unwrap();
        assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, 0, 0));
        assert_eq!((p.payload_len(), p.next_header(), p.hop_limit()), (24, IpProtocol::HopByHop, 64));
        assert_eq!(p.src_addr()[15], 1);
        assert_eq!(p.dst_addr()[15], 2);
        assert_eq!(p.payload().len(), 24);
        let h = ExtHeader::new_checked(p.payload(), 0).unwrap();
        assert_eq!((h.header_len(), h.next_header()), (8, IpProtocol::Ipv6Frag));
        assert_eq!(h.data(), &[1, 4, 0, 0, 0, 0]);
        let fr = ExtHeader::new_checked(h.payload(), 44).unwrap();
        assert_eq!((fr.next_header(), fr.frag_offset(), fr.more_frags()), (IpProtocol::Udp, 0, true));
        assert_eq!(fr.payload().len(), 8);
        assert_eq!(ExtHeader::new_checked(&f[40..47], 0).unwrap_err(), Error::Truncated);
        assert_eq!(ExtHeader::new_checked(&f[40..], 17).unwrap_err(), Error::Malformed);
        assert!(Packet::new_checked(&f[..39]).is_err());
        assert_eq!(h.jumbo_payload_len(), None);
        // Pad1, then Jumbo Payload 70000; the option must lie inside the header.
        let j = [6, 0, 0, 0xc2, 4, 0, 1, 0x11, 0x70, 0];
        assert_eq!(ExtHeader::new_checked(&j[..8], 0).unwrap().jumbo_payload_len(), None);
        let j = [6, 0, 0xc2, 4, 0, 1, 0x11, 0x70];
        assert_eq!(ExtHeader::new_checked(&j[..], 0).unwrap().jumbo_payload_len(), Some(70_000));
        assert_eq!(ExtHeader::new_checked(&j[..], 60).unwrap().jumbo_payload_len(), None);
        // AH: length 1 means 12 bytes.
        assert_eq!(ext_header_len(51, &[6, 1]), Some(12));
    }
}
