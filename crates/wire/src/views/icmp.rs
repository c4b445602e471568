//! ICMP (RFC 792) and ICMPv6 (RFC 4443) common header: type, code,
//! checksum, then 4 bytes whose meaning depends on the type (ICMPv4 echo:
//! identifier and sequence). An ICMPv4 message is at least 8 bytes; an
//! ICMPv6 message at least 4 ([`MIN_LEN_V6`]).

use super::{be16, code_enum, ones_sum, Error};

/// Byte ranges of the common header.
pub mod field {
    use crate::views::{Field, Rest};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const REST: Field = 4..8;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQ: Field = 6..8;
    pub const PAYLOAD: Rest = 8..;
}

/// Smallest ICMPv4 message.
pub const MIN_LEN_V4: usize = field::PAYLOAD.start;
/// Smallest ICMPv6 message.
pub const MIN_LEN_V6: usize = field::REST.start;

code_enum! {
    /// ICMPv4 message types.
    pub enum Type4(u8) {
        EchoReply = 0,
        DstUnreachable = 3,
        Redirect = 5,
        EchoRequest = 8,
        TimeExceeded = 11,
        ParamProblem = 12,
    }
}

code_enum! {
    /// ICMPv6 message types.
    pub enum Type6(u8) {
        DstUnreachable = 1,
        PacketTooBig = 2,
        TimeExceeded = 3,
        ParamProblem = 4,
        EchoRequest = 128,
        EchoReply = 129,
        RouterSolicit = 133,
        RouterAdvert = 134,
        NeighborSolicit = 135,
        NeighborAdvert = 136,
        Redirect = 137,
    }
}

/// A view of an ICMP or ICMPv6 message.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The view of an ICMPv4 message (8 bytes at least).
    pub fn new_checked_v4(buffer: T) -> Result<Self, Error> {
        Self::checked(buffer, MIN_LEN_V4)
    }
    /// The view of an ICMPv6 message (4 bytes at least).
    pub fn new_checked_v6(buffer: T) -> Result<Self, Error> {
        Self::checked(buffer, MIN_LEN_V6)
    }
    fn checked(buffer: T, min: usize) -> Result<Self, Error> {
        if buffer.as_ref().len() < min {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    pub fn type4(&self) -> Type4 {
        Type4::from(self.msg_type())
    }
    pub fn type6(&self) -> Type6 {
        Type6::from(self.msg_type())
    }
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// The 4 type-specific bytes (ICMPv6 messages may lack them: then 0).
    pub fn rest(&self) -> u32 {
        self.buffer.as_ref().get(field::REST).map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    /// True when the ICMPv4 checksum over the captured message adds up
    /// (meaningful only when the whole message was captured).
    pub fn verify_checksum_v4(&self) -> bool {
        ones_sum(0, self.buffer.as_ref()) == 0xffff
    }
    pub fn payload(&self) -> &[u8] {
        self.buffer.as_ref().get(field::PAYLOAD).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ICMP echo request id 0x1234 seq 1, payload "abcd" (checksum filled).
    const ECHO: [u8; 12] = [8, 0, 0x21, 0x04, 0x12, 0x34, 0x00, 0x01, b'a', b'b', b'c', b'd'];

    #[test]
    fn take_apart() {
        let p = Packet::new_checked_v4(&ECHO[..]).unwrap();
        assert_eq!((p.type4(), p.code(), p.checksum()), (Type4::EchoRequest, 0, 0x2104));
        assert_eq!(p.rest(), 0x1234_0001);
        assert_eq!(p.payload(), b"abcd");
        assert!(p.verify_checksum_v4());
        assert!(Packet::new_checked_v4(&ECHO[..7]).is_err());
        let v6 = Packet::new_checked_v6(&[135u8, 0, 0, 0][..]).unwrap();
        assert_eq!((v6.type6(), v6.rest()), (Type6::NeighborSolicit, 0));
        assert_eq!(Type6::from(200), Type6::Unknown(200));
    }
}
