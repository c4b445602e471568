//! IPv4 header (RFC 791). `new_checked` requires the header its IHL
//! announces (IHL of at least 5) inside the buffer; the total length is
//! *not* required to fit, since captures cut packets (the dissector judges
//! it against the wire length).

use super::{be16, ones_sum, set_be16, Error, IpProtocol};

/// Byte ranges of the fixed header.
pub mod field {
    use crate::views::Field;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    /// Flags (3 bits) and fragment offset (13 bits, in 8-byte units).
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// Length of the header without options.
pub const MIN_HEADER_LEN: usize = field::DST_ADDR.end;

/// Mask of the fragment offset in [`field::FLG_OFF`].
pub const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 header (and what follows).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The view, when the buffer holds the whole header (options included)
    /// and IHL is at least 5. The version is not checked (see [`Packet::version`]).
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = 4 * usize::from(b[field::VER_IHL] & 0x0f);
        if hl < MIN_HEADER_LEN {
            return Err(Error::Malformed);
        }
        if b.len() < hl {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }
    fn b(&self) -> &[u8] {
        self.buffer.as_ref()
    }
    pub fn version(&self) -> u8 {
        self.b()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (20 to 60).
    pub fn header_len(&self) -> usize {
        4 * usize::from(self.b()[field::VER_IHL] & 0x0f)
    }
    pub fn dscp(&self) -> u8 {
        self.b()[field::DSCP_ECN] >> 2
    }
    pub fn ecn(&self) -> u8 {
        self.b()[field::DSCP_ECN] & 3
    }
    pub fn total_len(&self) -> u16 {
        be16(self.b(), field::LENGTH)
    }
    pub fn ident(&self) -> u16 {
        be16(self.b(), field::IDENT)
    }
    pub fn dont_frag(&self) -> bool {
        be16(self.b(), field::FLG_OFF) & 0x4000 != 0
    }
    pub fn more_frags(&self) -> bool {
        be16(self.b(), field::FLG_OFF) & 0x2000 != 0
    }
    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u16 {
        (be16(self.b(), field::FLG_OFF) & FRAG_OFFSET_MASK) << 3
    }
    pub fn ttl(&self) -> u8 {
        self.b()[field::TTL]
    }
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.b()[field::PROTOCOL])
    }
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }
    pub fn src_addr(&self) -> [u8; 4] {
        let mut a = [0; 4];
        a.copy_from_slice(&self.b()[field::SRC_ADDR]);
        a
    }
    pub fn dst_addr(&self) -> [u8; 4] {
        let mut a = [0; 4];
        a.copy_from_slice(&self.b()[field::DST_ADDR]);
        a
    }
    /// Options (empty unless IHL > 5).
    pub fn options(&self) -> &[u8] {
        &self.b()[MIN_HEADER_LEN..self.header_len()]
    }
    /// True when the header checksum adds up.
    pub fn verify_checksum(&self) -> bool {
        ones_sum(0, &self.b()[..self.header_len()]) == 0xffff
    }
    /// The payload as far as it was captured and the total length allows
    /// (empty when the total length is below the header length).
    pub fn payload(&self) -> &[u8] {
        let end = usize::from(self.total_len()).clamp(self.header_len(), self.b().len());
        &self.b()[self.header_len()..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_total_len(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, v);
    }
    pub fn set_src_addr(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a);
    }
    pub fn set_dst_addr(&mut self, a: [u8; 4]) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a);
    }
    /// Recomputes the header checksum.
    pub fn fill_checksum(&mut self) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, 0);
        let hl = self.header_len();
        let sum = !ones_sum(0, &self.buffer.as_ref()[..hl]);
        set_be16(self.buffer.as_mut(), field::CHECKSUM, sum);
    }
}

/// The parts of an IPv4 header without options that a builder chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub protocol: IpProtocol,
    pub payload_len: u16,
    pub ttl: u8,
    pub ident: u16,
    pub dont_frag: bool,
}

impl Repr {
    /// Reads a header without options, not fragmented.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, Error> {
        if p.header_len() != MIN_HEADER_LEN || p.version() != 4 || p.more_frags() || p.frag_offset() != 0 {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.next_header(),
            payload_len: p.total_len().checked_sub(MIN_HEADER_LEN as u16).ok_or(Error::Malformed)?,
            ttl: p.ttl(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
        })
    }
    /// Writes the header (checksum filled) into the first 20 bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) -> Result<(), Error> {
        let h = b.get_mut(..MIN_HEADER_LEN).ok_or(Error::Truncated)?;
        h[field::VER_IHL] = 0x45;
        h[field::DSCP_ECN] = 0;
        set_be16(h, field::LENGTH, self.payload_len.saturating_add(MIN_HEADER_LEN as u16));
        set_be16(h, field::IDENT, self.ident);
        set_be16(h, field::FLG_OFF, if self.dont_frag { 0x4000 } else { 0 });
        h[field::TTL] = self.ttl;
        h[field::PROTOCOL] = self.protocol.into();
        h[field::SRC_ADDR].copy_from_slice(&self.src);
        h[field::DST_ADDR].copy_from_slice(&self.dst);
        let mut p = Packet { buffer: h };
        p.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::ethernet::tests::ETH_TCP;

    fn with_checksum() -> [u8; 60] {
        let mut b = [0; 60];
        b.copy_from_slice(&ETH_TCP[14..]);
        // The capture had the checksum offloaded (zero); the right one:
        b[10..12].copy_from_slice(&0x26e9u16.to_be_bytes());
        b
    }

    #[test]
    fn take_apart() {
        let b = with_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.version(), p.header_len(), p.total_len(), p.ident()), (4, 20, 60, 0x1c46));
        assert!(p.dont_frag() && !p.more_frags());
        assert_eq!((p.frag_offset(), p.ttl(), p.next_header()), (0, 64, IpProtocol::Tcp));
        assert_eq!(p.src_addr(), [192, 168, 1, 10]);
        assert_eq!(p.dst_addr(), [93, 184, 216, 34]);
        assert!(p.verify_checksum());
        assert_eq!(p.payload(), &b[20..]);
        assert!(!Packet::new_checked(&ETH_TCP[14..]).unwrap().verify_checksum());
        assert_eq!(Packet::new_checked(&b[..19]).unwrap_err(), Error::Truncated);
        let mut bad = b;
        bad[0] = 0x44;
        assert_eq!(Packet::new_checked(&bad[..]).unwrap_err(), Error::Malformed);
        bad[0] = 0x4f;
        assert_eq!(Packet::new_checked(&bad[..59]).unwrap_err(), Error::Truncated);
        // A total length below the header: empty payload, no panic.
        bad[0] = 0x45;
        bad[3] = 4;
        assert!(Packet::new_checked(&bad[..]).unwrap().payload().is_empty());
    }

    #[test]
    fn repr_round_trip_into_dirty_buffer() {
        let b = with_checksum();
        let r = Repr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.payload_len, 40);
        let mut out = [0xeeu8; 20];
        r.emit(&mut out).unwrap();
        // Same bytes except DSCP (0 here too).
        assert_eq!(out, b[..20]);
        assert_eq!(Repr::parse(&Packet::new_checked(&out[..]).unwrap()).unwrap(), r);
    }
}
