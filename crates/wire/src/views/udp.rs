//! UDP header (RFC 768).

use super::{be16, set_be16, Error};

/// Byte ranges of the header.
pub mod field {
    use crate::views::{Field, Rest};
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
    pub const PAYLOAD: Rest = 8..;
}

/// Length of the header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view of a UDP datagram.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The view, when the buffer holds the header (the length field is
    /// judged by the dissector against the IP payload).
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }
    pub fn is_empty(&self) -> bool {
        self.len() <= HEADER_LEN as u16
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// The payload as far as it was captured and the length field allows.
    pub fn payload(&self) -> &[u8] {
        let b = self.buffer.as_ref();
        let end = usize::from(self.len()).clamp(HEADER_LEN, b.len());
        &b[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, v);
    }
    pub fn set_dst_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, v);
    }
    pub fn set_len(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::LENGTH, v);
    }
    pub fn set_checksum(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // DNS query 10.0.0.1:5353 -> 10.0.0.2:53, 12 bytes of payload, checksum 0x1c3a.
    const UDP: [u8; 20] = [0x14, 0xe9, 0x00, 0x35, 0x00, 0x14, 0x1c, 0x3a, 0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];

    #[test]
    fn take_apart() {
        let p = Packet::new_checked(&UDP[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len(), p.checksum()), (5353, 53, 20, 0x1c3a));
        assert_eq!(p.payload(), &UDP[8..]);
        assert!(Packet::new_checked(&UDP[..7]).is_err());
        let mut long = UDP;
        long[5] = 200; // says more than there is: payload stops at the buffer
        assert_eq!(Packet::new_checked(&long[..]).unwrap().payload().len(), 12);
    }

    #[test]
    fn emit_into_dirty_buffer() {
        let mut buf = [0x77u8; 20];
        buf[8..].copy_from_slice(&UDP[8..]);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_src_port(5353);
        p.set_dst_port(53);
        p.set_len(20);
        p.set_checksum(0x1c3a);
        assert_eq!(buf, UDP);
    }
}
