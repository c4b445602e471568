//! TCP header (RFC 9293). `new_checked` requires the header its data
//! offset announces (at least 5 words) inside the buffer.

use super::{be16, be32, set_be16, Error};

/// Byte ranges of the fixed header.
pub mod field {
    use crate::views::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const SEQ_NUM: Field = 4..8;
    pub const ACK_NUM: Field = 8..12;
    /// Data offset (4 bits, in 32-bit words), reserved bits and flags.
    pub const FLAGS: Field = 12..14;
    pub const WIN_SIZE: Field = 14..16;
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
}

/// Length of the header without options.
pub const MIN_HEADER_LEN: usize = field::URGENT.end;

/// Flag bits in the low byte of [`field::FLAGS`] (and CWR/ECE).
pub mod flags {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;
}

/// A view of a TCP segment.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(Error::Truncated);
        }
        let hl = header_len_of(b);
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
    pub fn src_port(&self) -> u16 {
        be16(self.b(), field::SRC_PORT)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.b(), field::DST_PORT)
    }
    pub fn seq_number(&self) -> u32 {
        be32(self.b(), field::SEQ_NUM)
    }
    pub fn ack_number(&self) -> u32 {
        be32(self.b(), field::ACK_NUM)
    }
    /// Header length in bytes (20 to 60).
    pub fn header_len(&self) -> usize {
        header_len_of(self.b())
    }
    /// The flag bits (see [`flags`]).
    pub fn flags(&self) -> u16 {
        be16(self.b(), field::FLAGS) & 0x01ff
    }
    pub fn window_len(&self) -> u16 {
        be16(self.b(), field::WIN_SIZE)
    }
    pub fn checksum(&self) -> u16 {
        be16(self.b(), field::CHECKSUM)
    }
    pub fn urgent_at(&self) -> u16 {
        be16(self.b(), field::URGENT)
    }
    pub fn options(&self) -> &[u8] {
        &self.b()[MIN_HEADER_LEN..self.header_len()]
    }
    /// Everything after the header that the buffer holds.
    pub fn payload(&self) -> &[u8] {
        &self.b()[self.header_len()..]
    }
}

/// The data offset of the header at the start of `b` in bytes (b has 13 bytes at least).
fn header_len_of(b: &[u8]) -> usize {
    4 * usize::from(b[field::FLAGS.start] >> 4)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::SRC_PORT, v);
    }
    pub fn set_dst_port(&mut self, v: u16) {
        set_be16(self.buffer.as_mut(), field::DST_PORT, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::ethernet::tests::ETH_TCP;

    #[test]
    fn take_apart() {
        let s = &ETH_TCP[34..];
        let p = Packet::new_checked(s).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.seq_number(), p.ack_number()), (51000, 80, 1, 0));
        assert_eq!((p.header_len(), p.flags(), p.window_len()), (40, flags::SYN, 0xfaf0));
        assert_eq!((p.checksum(), p.urgent_at()), (0, 0));
        assert_eq!(p.options()[..4], [0x02, 0x04, 0x05, 0xb4]);
        assert!(p.payload().is_empty());
        assert_eq!(Packet::new_checked(&s[..39]).unwrap_err(), Error::Truncated);
        let mut bad = [0u8; 40];
        bad.copy_from_slice(s);
        bad[12] = 0x40;
        assert_eq!(Packet::new_checked(&bad[..]).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn emit_into_dirty_buffer() {
        let mut buf = [0x11u8; 40];
        buf[4..].copy_from_slice(&ETH_TCP[38..]);
        let mut p = Packet::new_checked(&mut buf[..]).unwrap();
        p.set_src_port(51000);
        p.set_dst_port(80);
        assert_eq!(buf, ETH_TCP[34..]);
    }
}
