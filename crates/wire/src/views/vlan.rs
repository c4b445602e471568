//! IEEE 802.1Q tag (C-tag, TPID 0x8100) and 802.1ad service tag (S-tag,
//! TPID 0x88a8; 0x9100 is the pre-standard QinQ TPID): the 4 bytes that
//! follow a TPID are the TCI (PCP, DEI, VID) and the next type field.
//! The view starts at the TCI, i.e. after the TPID that announced it.

use super::{be16, ethertype, set_be16, Error, EtherType};

/// Byte ranges of one tag, counted from the TCI.
pub mod field {
    use crate::views::{Field, Rest};
    pub const TCI: Field = 0..2;
    pub const ETHERTYPE: Field = 2..4;
    pub const PAYLOAD: Rest = 4..;
}

/// Mask of the VLAN id in the TCI.
pub const VID_MASK: u16 = 0x0fff;

/// Length of one tag (after its TPID).
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// True for the type values that announce a tag.
#[inline]
pub const fn is_tpid(t: u16) -> bool {
    matches!(t, ethertype::VLAN | ethertype::QINQ | ethertype::VLAN_9100)
}

/// True for the TPIDs of service (outer) tags: 802.1ad and pre-standard QinQ.
#[inline]
pub const fn is_service_tpid(t: u16) -> bool {
    matches!(t, ethertype::QINQ | ethertype::VLAN_9100)
}

/// A view of one tag.
#[derive(Debug, Clone)]
pub struct Tag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Tag<T> {
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Tag { buffer })
    }
    pub fn tci(&self) -> u16 {
        be16(self.buffer.as_ref(), field::TCI)
    }
    /// Priority code point (3 bits).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> 13) as u8
    }
    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & 0x1000 != 0
    }
    /// VLAN id (12 bits).
    pub fn vid(&self) -> u16 {
        self.tci() & VID_MASK
    }
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

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tag<T> {
    pub fn set_tci(&mut self, pcp: u8, dei: bool, vid: u16) {
        let tci = u16::from(pcp & 7) << 13 | u16::from(dei) << 12 | (vid & VID_MASK);
        set_be16(self.buffer.as_mut(), field::TCI, tci);
    }
    pub fn set_ethertype(&mut self, t: EtherType) {
        set_be16(self.buffer.as_mut(), field::ETHERTYPE, t.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The inner tag of a QinQ frame: PCP 1, VID 200, then IPv4.
    const TAG: [u8; 4] = [0x20, 0xc8, 0x08, 0x00];

    #[test]
    fn take_apart() {
        let t = Tag::new_checked(&TAG[..]).unwrap();
        assert_eq!((t.pcp(), t.dei(), t.vid()), (1, false, 200));
        assert_eq!(t.ethertype(), EtherType::Ipv4);
        assert!(t.payload().is_empty());
        assert!(Tag::new_checked(&TAG[..3]).is_err());
        assert!(is_tpid(0x8100) && is_tpid(0x88a8) && is_tpid(0x9100) && !is_tpid(0x0800));
    }

    #[test]
    fn emit_into_dirty_buffer() {
        let mut buf = [0xffu8; 4];
        let mut t = Tag::new_checked(&mut buf[..]).unwrap();
        t.set_tci(1, false, 200);
        t.set_ethertype(EtherType::Ipv4);
        assert_eq!(buf, TAG);
    }
}
