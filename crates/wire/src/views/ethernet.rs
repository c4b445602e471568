//! Ethernet II header (IEEE 802.3 clause 3.2.6): destination, source, type.
//! A type field below 0x0600 is an 802.3 length (an LLC frame follows).

use super::{be16, set_be16, Error, EtherType};

/// Byte ranges of the Ethernet II header.
pub mod field {
    use crate::views::{Field, Rest};
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const PAYLOAD: Rest = 14..;
}

/// Length of the header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// Type values below this are 802.3 lengths, not EtherTypes.
pub const MIN_ETHERTYPE: u16 = 0x0600;

/// A view of an Ethernet II frame.
#[derive(Debug, Clone)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// The view, when `buffer` holds the whole header.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Frame { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn dst_addr(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        a
    }
    pub fn src_addr(&self) -> [u8; 6] {
        let mut a = [0; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        a
    }
    /// The raw type field (EtherType, or an 802.3 length below 0x0600).
    pub fn ethertype_raw(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(self.ethertype_raw())
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    pub fn set_dst_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&a);
    }
    pub fn set_src_addr(&mut self, a: [u8; 6]) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&a);
    }
    pub fn set_ethertype(&mut self, t: EtherType) {
        set_be16(self.buffer.as_mut(), field::ETHERTYPE, t.into());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Ethernet / IPv4 / TCP SYN 192.168.1.10:51000 -> 93.184.216.34:80
    /// (from a real capture; IPv4 checksum as captured: offloaded, zero).
    pub const ETH_TCP: [u8; 74] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00, // eth
        0x45, 0x00, 0x00, 0x3c, 0x1c, 0x46, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, // ip
        0xc0, 0xa8, 0x01, 0x0a, 0x5d, 0xb8, 0xd8, 0x22, // addrs
        0xc7, 0x38, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, // tcp
        0xa0, 0x02, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, 0x00, 0x00,
        0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
    ];

    #[test]
    fn take_apart() {
        let f = Frame::new_checked(&ETH_TCP[..]).unwrap();
        assert_eq!(f.dst_addr(), [0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(f.src_addr(), [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
        assert_eq!(f.ethertype(), EtherType::Ipv4);
        assert_eq!(f.payload(), &ETH_TCP[14..]);
        assert_eq!(Frame::new_checked(&ETH_TCP[..13]).unwrap_err(), Error::Truncated);
        assert_eq!(EtherType::from(0x1234), EtherType::Unknown(0x1234));
    }

    #[test]
    fn emit_into_dirty_buffer() {
        let mut buf = [0xa5u8; 14];
        let mut f = Frame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr([0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
        f.set_src_addr([0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
        f.set_ethertype(EtherType::Ipv4);
        assert_eq!(buf, ETH_TCP[..14]);
    }
}
