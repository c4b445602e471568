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

/// ICMPv4 and ICMPv6 type numbers.
pub mod types {
    pub const ECHO_REPLY: u8 = 0;
    pub const DST_UNREACHABLE: u8 = 3;
    pub const REDIRECT: u8 = 5;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
    pub const PARAM_PROBLEM: u8 = 12;
    pub const V6_DST_UNREACHABLE: u8 = 1;
    pub const V6_PACKET_TOO_BIG: u8 = 2;
    pub const V6_TIME_EXCEEDED: u8 = 3;
    pub const V6_PARAM_PROBLEM: u8 = 4;
    pub const V6_ECHO_REQUEST: u8 = 128;
    pub const V6_ECHO_REPLY: u8 = 129;
    pub const V6_ROUTER_SOLICIT: u8 = 133;
    pub const V6_ROUTER_ADVERT: u8 = 134;
    pub const V6_NEIGHBOR_SOLICIT: u8 = 135;
    pub const V6_NEIGHBOR_ADVERT: u8 = 136;
    pub const V6_REDIRECT: u8 = 137;
}

code_enum! {
    /// ICMPv4 message types.
    pub enum Type4(u8) {
        EchoReply = types::ECHO_REPLY,
        DstUnreachable = types::DST_UNREACHABLE,
        Redirect = types::REDIRECT,
        EchoRequest = types::ECHO_REQUEST,
        TimeExceeded = types::TIME_EXCEEDED,
        ParamProblem = types::PARAM_PROBLEM,
    }
}

code_enum! {
    /// ICMPv6 message types.
    pub enum Type6(u8) {
        DstUnreachable = types::V6_DST_UNREACHABLE,
        PacketTooBig = types::V6_PACKET_TOO_BIG,
        TimeExceeded = types::V6_TIME_EXCEEDED,
        ParamProblem = types::V6_PARAM_PROBLEM,
        EchoRequest = types::V6_ECHO_REQUEST,
        EchoReply = types::V6_ECHO_REPLY,
        RouterSolicit = types::V6_ROUTER_SOLICIT,
        RouterAdvert = types::V6_ROUTER_ADVERT,
        NeighborSolicit = types::V6_NEIGHBOR_SOLICIT,
        NeighborAdvert = types::V6_NEIGHBOR_ADVERT,
        Redirect = types::V6_REDIRECT,
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
