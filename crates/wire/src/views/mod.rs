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

/// Big-endian u16 at `f`, for a caller that has checked the length (it
/// panics past the end of `b`, as indexing does).
#[inline]
pub fn be16(b: &[u8], f: Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}

/// Big-endian u32 at `f`, for a caller that has checked the length (it
/// panics past the end of `b`, as indexing does).
#[inline]
pub fn be32(b: &[u8], f: Field) -> u32 {
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
    ($(#[$m:meta])* pub enum $name:ident($t:ty) { $($(#[$vm:meta])* $v:ident = $n:path,)* }) => {
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

/// EtherType values (the one list; [`EtherType`] names them).
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    pub const RARP: u16 = 0x8035;
    pub const VLAN: u16 = 0x8100;
    pub const IPV6: u16 = 0x86dd;
    pub const MPLS: u16 = 0x8847;
    pub const MPLS_MULTICAST: u16 = 0x8848;
    pub const QINQ: u16 = 0x88a8;
    pub const VLAN_9100: u16 = 0x9100;
}

/// IP protocol numbers (the one list; [`IpProtocol`] names them).
pub mod ipproto {
    pub const HOPOPTS: u8 = 0;
    pub const ICMP: u8 = 1;
    pub const IGMP: u8 = 2;
    pub const IPIP: u8 = 4;
    pub const TCP: u8 = 6;
    pub const UDP: u8 = 17;
    pub const IPV6: u8 = 41;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const GRE: u8 = 47;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const ICMPV6: u8 = 58;
    pub const NONXT: u8 = 59;
    pub const DSTOPTS: u8 = 60;
    pub const SCTP: u8 = 132;
}

code_enum! {
    /// EtherType (or Linux SLL protocol) values the views know.
    pub enum EtherType(u16) {
        Ipv4 = ethertype::IPV4,
        Arp = ethertype::ARP,
        Vlan = ethertype::VLAN,
        Rarp = ethertype::RARP,
        Ipv6 = ethertype::IPV6,
        MplsUnicast = ethertype::MPLS,
        MplsMulticast = ethertype::MPLS_MULTICAST,
        QinQ = ethertype::QINQ,
        Vlan9100 = ethertype::VLAN_9100,
    }
}

code_enum! {
    /// IP protocol / IPv6 Next Header values the views know.
    pub enum IpProtocol(u8) {
        HopByHop = ipproto::HOPOPTS,
        Icmp = ipproto::ICMP,
        Igmp = ipproto::IGMP,
        IpIp = ipproto::IPIP,
        Tcp = ipproto::TCP,
        Udp = ipproto::UDP,
        Ipv6 = ipproto::IPV6,
        Ipv6Route = ipproto::ROUTING,
        Ipv6Frag = ipproto::FRAGMENT,
        Gre = ipproto::GRE,
        Esp = ipproto::ESP,
        Ah = ipproto::AH,
        Icmpv6 = ipproto::ICMPV6,
        Ipv6NoNxt = ipproto::NONXT,
        Ipv6Opts = ipproto::DSTOPTS,
        Sctp = ipproto::SCTP,
    }
}
