//! One MPLS label stack entry (RFC 3032): label (20 bits), traffic class
//! (3), bottom of stack (1), TTL (8). A stack is a run of entries ending
//! with the one whose S bit is set.

use super::{be32, Error};

/// Byte range of one entry.
pub mod field {
    use crate::views::{Field, Rest};
    pub const ENTRY: Field = 0..4;
    pub const PAYLOAD: Rest = 4..;
}

/// Length of one entry.
pub const ENTRY_LEN: usize = field::PAYLOAD.start;

/// Reserved label values (RFC 3032, RFC 7274 and the IANA registry).
pub mod label {
    pub const IPV4_EXPLICIT_NULL: u32 = 0;
    pub const ROUTER_ALERT: u32 = 1;
    pub const IPV6_EXPLICIT_NULL: u32 = 2;
    /// Only ever signalled; never appears in a packet.
    pub const IMPLICIT_NULL: u32 = 3;
    /// Entropy label indicator (RFC 6790): an entropy label follows.
    pub const ELI: u32 = 7;
    /// Generic associated channel label (RFC 5586): must be at the bottom.
    pub const GAL: u32 = 13;
    /// Extension label (RFC 7274): an extended special label follows.
    pub const XL: u32 = 15;
    /// Labels below this are reserved (special-purpose).
    pub const FIRST_UNRESERVED: u32 = 16;
}

/// A view of one label stack entry.
#[derive(Debug, Clone)]
pub struct Entry<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Entry<T> {
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        if buffer.as_ref().len() < ENTRY_LEN {
            return Err(Error::Truncated);
        }
        Ok(Entry { buffer })
    }
    fn raw(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ENTRY)
    }
    pub fn label(&self) -> u32 {
        self.raw() >> 12
    }
    /// Traffic class (formerly EXP), 3 bits.
    pub fn tc(&self) -> u8 {
        ((self.raw() >> 9) & 7) as u8
    }
    pub fn bottom_of_stack(&self) -> bool {
        self.raw() & 0x100 != 0
    }
    pub fn ttl(&self) -> u8 {
        self.raw() as u8
    }
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Entry<T> {
    pub fn set(&mut self, label: u32, tc: u8, bottom: bool, ttl: u8) {
        let v = (label & 0xf_ffff) << 12 | u32::from(tc & 7) << 9 | u32::from(bottom) << 8 | u32::from(ttl);
        self.buffer.as_mut()[field::ENTRY].copy_from_slice(&v.to_be_bytes());
    }
}

/// Where a reserved label may not stand: `Some(reason)` when `label` is not
/// allowed at this position of the stack (`bottom`: it carries the S bit).
/// Labels 0 and 2 may stand anywhere (RFC 4182 lifted RFC 3032's
/// bottom-only rule); unassigned reserved values are not judged.
pub fn misplaced_reserved(label: u32, bottom: bool) -> bool {
    match label {
        label::IMPLICIT_NULL => true,
        label::ROUTER_ALERT | label::ELI | label::XL => bottom,
        label::GAL => !bottom,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Label 18, TC 0, S, TTL 255 (from tcpdump's mpls-ldp-hello.pcap style stacks).
    const ENTRY: [u8; 4] = [0x00, 0x01, 0x21, 0xff];

    #[test]
    fn take_apart() {
        let e = Entry::new_checked(&ENTRY[..]).unwrap();
        assert_eq!((e.label(), e.tc(), e.bottom_of_stack(), e.ttl()), (18, 0, true, 255));
        assert!(Entry::new_checked(&ENTRY[..3]).is_err());
        assert!(misplaced_reserved(3, false) && misplaced_reserved(1, true) && !misplaced_reserved(1, false));
        assert!(misplaced_reserved(13, false) && !misplaced_reserved(13, true) && !misplaced_reserved(0, false));
    }

    #[test]
    fn emit_into_dirty_buffer() {
        let mut buf = [0x5au8; 4];
        Entry::new_checked(&mut buf[..]).unwrap().set(18, 0, true, 255);
        assert_eq!(buf, ENTRY);
    }
}
