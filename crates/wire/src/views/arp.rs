//! ARP (RFC 826) with variable hardware and protocol address lengths.
//! libpcap's `arp host` reads the IPv4-over-Ethernet positions
//! ([`field::ETH_IPV4_SPA`], [`field::ETH_IPV4_TPA`]) whatever the lengths say.

use super::{be16, Error, EtherType};

/// Byte ranges of the fixed part, and the addresses of IPv4-over-Ethernet ARP.
pub mod field {
    use crate::views::Field;
    pub const HTYPE: Field = 0..2;
    pub const PTYPE: Field = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Field = 6..8;
    /// Sender hardware address starts here; the rest follow by length.
    pub const SHA: usize = 8;
    /// Sender protocol address when HLEN is 6 and PLEN 4.
    pub const ETH_IPV4_SPA: Field = 14..18;
    /// Target protocol address when HLEN is 6 and PLEN 4.
    pub const ETH_IPV4_TPA: Field = 24..28;
}

/// A view of an ARP packet whose four addresses are all inside the buffer.
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let b = buffer.as_ref();
        if b.len() < field::SHA {
            return Err(Error::Truncated);
        }
        let (h, p) = (usize::from(b[field::HLEN]), usize::from(b[field::PLEN]));
        if b.len() < field::SHA + 2 * (h + p) {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }
    pub fn htype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HTYPE)
    }
    pub fn ptype(&self) -> EtherType {
        EtherType::from(be16(self.buffer.as_ref(), field::PTYPE))
    }
    pub fn hlen(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }
    pub fn plen(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }
    /// 1 request, 2 reply (3/4 RARP).
    pub fn oper(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OPER)
    }
    fn at(&self, i: usize) -> &[u8] {
        let (h, p) = (usize::from(self.hlen()), usize::from(self.plen()));
        let start = field::SHA + [0, h, h + p, 2 * h + p][i];
        let len = if i.is_multiple_of(2) { h } else { p };
        &self.buffer.as_ref()[start..start + len]
    }
    pub fn sha(&self) -> &[u8] {
        self.at(0)
    }
    pub fn spa(&self) -> &[u8] {
        self.at(1)
    }
    pub fn tha(&self) -> &[u8] {
        self.at(2)
    }
    pub fn tpa(&self) -> &[u8] {
        self.at(3)
    }
    /// Bytes of the ARP packet proper (the rest is padding).
    pub fn len(&self) -> usize {
        field::SHA + 2 * (usize::from(self.hlen()) + usize::from(self.plen()))
    }
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // ARP request who-has 10.0.0.2 tell 10.0.0.1 (after the Ethernet header).
    const REQ: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, //
        10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
    ];

    #[test]
    fn take_apart() {
        let p = Packet::new_checked(&REQ[..]).unwrap();
        assert_eq!((p.htype(), p.ptype(), p.hlen(), p.plen(), p.oper()), (1, EtherType::Ipv4, 6, 4, 1));
        assert_eq!(p.sha(), &[0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(p.spa(), &REQ[field::ETH_IPV4_SPA]);
        assert_eq!(p.spa(), &[10, 0, 0, 1]);
        assert_eq!(p.tpa(), &REQ[field::ETH_IPV4_TPA]);
        assert_eq!(p.tha(), &[0; 6]);
        assert_eq!(p.len(), 28);
        assert!(Packet::new_checked(&REQ[..27]).is_err());
        let mut big = REQ;
        big[4] = 255;
        assert!(Packet::new_checked(&big[..]).is_err());
    }
}
