//! Linux "cooked" capture header, version 1 (LINKTYPE_LINUX_SLL, 113):
//! packet type, ARPHRD type, link-layer address length and address (8 bytes,
//! padded), protocol (an EtherType for most packets).

use super::{be16, Error, EtherType};

/// Byte ranges of the SLL header.
pub mod field {
    use crate::views::{Field, Rest};
    pub const PACKET_TYPE: Field = 0..2;
    pub const ARPHRD: Field = 2..4;
    pub const ADDR_LEN: Field = 4..6;
    pub const ADDR: Field = 6..14;
    pub const PROTOCOL: Field = 14..16;
    pub const PAYLOAD: Rest = 16..;
}

/// Length of the header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A view of an SLL header.
#[derive(Debug, Clone)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Header { buffer })
    }
    /// 0 to us, 1 broadcast, 2 multicast, 3 to another host, 4 sent by us.
    pub fn packet_type(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PACKET_TYPE)
    }
    pub fn arphrd(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ARPHRD)
    }
    /// The link-layer address (at most 8 bytes are kept).
    pub fn addr(&self) -> &[u8] {
        let n = usize::from(be16(self.buffer.as_ref(), field::ADDR_LEN)).min(field::ADDR.len());
        &self.buffer.as_ref()[field::ADDR][..n]
    }
    pub fn protocol_raw(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PROTOCOL)
    }
    pub fn protocol(&self) -> EtherType {
        EtherType::from(self.protocol_raw())
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_apart() {
        let b = [0, 4, 0, 1, 0, 6, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 0, 0x08, 0x00, 0x45];
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!((h.packet_type(), h.arphrd()), (4, 1));
        assert_eq!(h.addr(), &[0, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(h.protocol(), EtherType::Ipv4);
        assert_eq!(h.payload(), &[0x45]);
        assert!(Header::new_checked(&b[..15]).is_err());
    }
}
