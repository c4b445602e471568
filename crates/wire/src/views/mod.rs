//! Packet views for the analysers, in smoltcp's style: one file per header,
//! each with a `mod field` of byte ranges (the one definition of that layout,
//! also used by the index's key extraction in [`crate::packet`]), a view
//! `Packet<T: AsRef<[u8]>>` whose `new_checked` checks once that every field
//! lies inside the buffer (after it no accessor can fail or panic), getters
//! per field, and setters where something builds headers.
//!
//! Views check *structure* (lengths, header-length fields); semantic checks
//! a network stack would make (checksums, length agreement between layers,
//! reserved values) are separate methods or belong to the dissector
//! ([`crate::dissect`]), which reports what is wrong instead of failing.
//! Nothing here allocates; unknown codes map to `Unknown(_)`.

pub mod arp;
pub mod ethernet;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod mpls;
pub mod sll;
pub mod tcp;
pub mod udp;
pub mod vlan;

/// Why a checked constructor refused a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The buffer ends before the header (or a length field says it does).
    #[error("header truncated")]
    Truncated,
    /// A length field is impossible (e.g. IPv4 IHL below 5, TCP data offset below 5).
    #[error("header malformed")]
    Malformed,
}

/// Field byte ranges.
pub type Field = core::ops::Range<usize>;
/// The rest of a header after a fixed offset.
pub type Rest = core::ops::RangeFrom<usize>;

/// Big-endian u16 at `f` (callers have checked the length).
#[inline]
pub(crate) fn be16(b: &[u8], f: Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

/// Big-endian u32 at `f` (callers have checked the length).
#[inline]
pub(crate) fn be32(b: &[u8], f: Field) -> u32 {
    u32::from_be_bytes([b[f.start], b[f.start + 1], b[f.start + 2], b[f.start + 3]])
}

#[inline]
pub(crate) fn set_be16(b: &mut [u8], f: Field, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Bounds-checked reads for code that must take what is there (the index's
/// key extraction reads each field whenever its bytes were captured).
#[inline]
pub fn get16(b: &[u8], at: usize) -> Option<u16> {
    b.get(at..at.checked_add(2)?).map(|s| u16::from_be_bytes([s[0], s[1]]))
}

/// `N` bytes at `at`, when they are inside `b`.
#[inline]
pub fn get_arr<const N: usize>(b: &[u8], at: usize) -> Option<[u8; N]> {
    b.get(at..at.checked_add(N)?).and_then(|s| s.try_into().ok())
}

/// The Internet checksum (RFC 1071) of `data`, folded, not complemented,
/// starting from `sum` (for pseudo-headers).
pub fn ones_sum(mut sum: u32, data: &[u8]) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
        sum = (sum & 0xffff) + (sum >> 16);
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Declares a `u8`/`u16` code enum with named values and `Unknown(_)`.
macro_rules! code_enum {
    ($(#[$m:meta])* pub enum $name:ident($t:ty) { $($(#[$vm:meta])* $v:ident = $n:expr,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $v,)*
            /// A value without a name here.
            Unknown($t),
        }
        impl From<$t> for $name {
            fn from(v: $t) -> Self {
                match v {
                    $($n => $name::$v,)*
                    other => $name::Unknown(other),
                }
            }
        }
        impl From<$name> for $t {
            fn from(v: $name) -> $t {
                match v {
                    $($name::$v => $n,)*
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
pub(crate) use code_enum;

code_enum! {
    /// EtherType (or Linux SLL protocol) values the views know.
    pub enum EtherType(u16) {
        Ipv4 = 0x0800,
        Arp = 0x0806,
        Vlan = 0x8100,
        Rarp = 0x8035,
        Ipv6 = 0x86dd,
        MplsUnicast = 0x8847,
        MplsMulticast = 0x8848,
        QinQ = 0x88a8,
        Vlan9100 = 0x9100,
    }
}

code_enum! {
    /// IP protocol / IPv6 Next Header values the views know.
    pub enum IpProtocol(u8) {
        HopByHop = 0,
        Icmp = 1,
        Igmp = 2,
        IpIp = 4,
        Tcp = 6,
        Udp = 17,
        Ipv6 = 41,
        Ipv6Route = 43,
        Ipv6Frag = 44,
        Gre = 47,
        Esp = 50,
        Ah = 51,
        Icmpv6 = 58,
        Ipv6NoNxt = 59,
        Ipv6Opts = 60,
        Sctp = 132,
    }
}
