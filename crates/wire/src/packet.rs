//! Zero-copy L2–L4 parse of one captured frame into a [`FlowKey`]: the VLAN
//! ids, network addresses, IP protocol and transport ports the index keeps.
//!
//! The parse reads the same bytes at the same offsets as the BPF code that
//! libpcap generates for `host`, `port`, `proto` and `vlan` primitives, and
//! deliberately validates *less* than a network stack would: libpcap does
//! not check the IPv4 version or header checksum, it takes the IPv4 header
//! length from the IHL nibble as it is (even below 5), and it decides IPv4
//! versus IPv6 on Ethernet by the EtherType alone. The index must never miss a
//! packet that a filter would select, so every field that libpcap could read
//! is reported whenever its bytes are inside the captured frame; what lies
//! beyond the end of the frame is reported as absent. The parse never panics
//! and never allocates.
//!
//! Supported link types: Ethernet (with 802.1Q / 802.1ad / 0x9100 VLAN
//! stacks), Linux cooked capture (SLL), raw IP (RAW, IPV4, IPV6). Any other
//! link type yields an empty key with [`FlowKey::linktype_supported`] false.
//!
//! Every offset comes from the header layouts in [`crate::views`] (their
//! `field` modules), the same ones the analysers' dissector
//! ([`crate::dissect`]) uses; only the leniency differs.

use crate::linktype;
use crate::views::{arp, ethernet, get16, get_arr, ipv4, ipv6, sll, tcp, udp, vlan};

/// Most VLAN tags reported (outermost first); deeper tags are skipped.
pub const MAX_VLANS: usize = 4;
/// Most IP protocol numbers reported for one packet (IPv6 header chain).
pub const MAX_PROTOS: usize = 4;

pub use crate::views::{ethertype, ipproto};

/// A network-layer address found in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Addr {
    /// Not present (not IP/ARP, or beyond the captured bytes).
    #[default]
    None,
    V4([u8; 4]),
    V6([u8; 16]),
}

/// What the index keeps of one frame. Fields that could not be parsed are
/// empty (`Addr::None`, `None`, zero counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FlowKey {
    /// False when the link type is not one this module parses.
    pub linktype_supported: bool,
    /// VLAN ids, outermost first; `n_vlans` of them are valid.
    pub vlans: [u16; MAX_VLANS],
    pub n_vlans: u8,
    /// EtherType (or SLL protocol) after the VLAN tags; 0 when unknown.
    pub ethertype: u16,
    /// Source address (IPv4/IPv6 source, or ARP sender protocol address).
    pub src: Addr,
    /// Destination address (IPv4/IPv6 destination, or ARP target protocol address).
    pub dst: Addr,
    /// IP protocol numbers: the IPv4 protocol, or every Next Header value of
    /// the IPv6 header chain (first the fixed header's). `n_protos` are valid.
    pub protos: [u8; MAX_PROTOS],
    pub n_protos: u8,
    /// Source and destination port of a TCP, UDP or SCTP header (first
    /// fragment only), when both are inside the captured bytes.
    pub ports: Option<(u16, u16)>,
    /// The flag bits of a TCP header (see [`crate::views::tcp::flags`]),
    /// when its flags field is inside the captured bytes. Not indexed: the
    /// recorder's per-flow cutoff reads it to see connections end.
    pub tcp_flags: Option<u16>,
}

impl FlowKey {
    /// The VLAN ids found, outermost first.
    pub fn vlans(&self) -> &[u16] {
        &self.vlans[..self.n_vlans as usize]
    }

    /// The IP protocol numbers found.
    pub fn protos(&self) -> &[u8] {
        &self.protos[..self.n_protos as usize]
    }

    #[inline]
    fn push_proto(&mut self, p: u8) {
        let n = self.n_protos as usize;
        if n < MAX_PROTOS && !self.protos[..n].contains(&p) {
            self.protos[n] = p;
            self.n_protos += 1;
        }
    }
}

/// Length of a type field (EtherType, or the type after a VLAN tag).
const TYPE_LEN: usize = ethernet::field::ETHERTYPE.end - ethernet::field::ETHERTYPE.start;

/// Parses `frame` captured with link type `linktype`.
pub fn parse(linktype: u32, frame: &[u8]) -> FlowKey {
    let mut k = FlowKey::default();
    match linktype {
        linktype::ETHERNET => {
            k.linktype_supported = true;
            parse_ethernet(frame, &mut k);
        }
        linktype::LINUX_SLL => {
            k.linktype_supported = true;
            if let Some(et) = get16(frame, sll::field::PROTOCOL.start) {
                k.ethertype = et;
                parse_l3(et, frame, sll::HEADER_LEN, &mut k);
            }
        }
        linktype::RAW | linktype::IPV4 | linktype::IPV6 => {
            k.linktype_supported = true;
            // libpcap decides by the version nibble on RAW (and checks it on IPV4/IPV6).
            let et = match frame.first().map(|b| b >> 4) {
                Some(4) if linktype != linktype::IPV6 => ethertype::IPV4,
                Some(6) if linktype != linktype::IPV4 => ethertype::IPV6,
                _ => return k,
            };
            k.ethertype = et;
            parse_l3(et, frame, 0, &mut k);
        }
        _ => {}
    }
    k
}

fn parse_ethernet(frame: &[u8], k: &mut FlowKey) {
    // `off` is where the current type field is.
    let mut off = ethernet::field::ETHERTYPE.start;
    let mut et = match get16(frame, off) {
        Some(et) => et,
        None => return,
    };
    // A VLAN stack: TPID, TCI, then the next type field.
    while vlan::is_tpid(et) {
        let tag = off + TYPE_LEN;
        let Some(tci) = get16(frame, tag + vlan::field::TCI.start) else {
            return;
        };
        if (k.n_vlans as usize) < MAX_VLANS {
            k.vlans[k.n_vlans as usize] = tci & vlan::VID_MASK;
            k.n_vlans += 1;
        }
        off = tag + vlan::field::ETHERTYPE.start;
        et = match get16(frame, off) {
            Some(et) => et,
            None => return,
        };
    }
    k.ethertype = et;
    parse_l3(et, frame, off + TYPE_LEN, k);
}

/// Parses the network layer starting at `l3` with EtherType `et`.
fn parse_l3(et: u16, b: &[u8], l3: usize, k: &mut FlowKey) {
    match et {
        ethertype::IPV4 => parse_ipv4(b, l3, k),
        ethertype::IPV6 => parse_ipv6(b, l3, k),
        ethertype::ARP | ethertype::RARP => {
            // libpcap's `arp host` reads the sender and target protocol
            // addresses where IPv4-over-Ethernet ARP has them, whatever the lengths say.
            if let Some(a) = get_arr::<4>(b, l3 + arp::field::ETH_IPV4_SPA.start) {
                k.src = Addr::V4(a);
            }
            if let Some(a) = get_arr::<4>(b, l3 + arp::field::ETH_IPV4_TPA.start) {
                k.dst = Addr::V4(a);
            }
        }
        _ => {}
    }
}

fn parse_ipv4(b: &[u8], l3: usize, k: &mut FlowKey) {
    if let Some(a) = get_arr::<4>(b, l3 + ipv4::field::SRC_ADDR.start) {
        k.src = Addr::V4(a);
    }
    if let Some(a) = get_arr::<4>(b, l3 + ipv4::field::DST_ADDR.start) {
        k.dst = Addr::V4(a);
    }
    let Some(&proto) = b.get(l3 + ipv4::field::PROTOCOL) else {
        return;
    };
    k.push_proto(proto);
    if !matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP) {
        return;
    }
    // Ports only in the first fragment, as libpcap (`jset #0x1fff`).
    match get16(b, l3 + ipv4::field::FLG_OFF.start) {
        Some(frag) if frag & ipv4::FRAG_OFFSET_MASK == 0 => {}
        _ => return,
    }
    // The header length as libpcap takes it: 4 * IHL, unchecked.
    let l4 = l3 + 4 * (b[l3 + ipv4::field::VER_IHL] & 0x0f) as usize;
    k.ports = ports(b, l4);
    if proto == ipproto::TCP {
        k.tcp_flags = tcp_flags(b, l4);
    }
}

/// The flag bits of the TCP header at `l4`.
#[inline]
fn tcp_flags(b: &[u8], l4: usize) -> Option<u16> {
    Some(get16(b, l4 + tcp::field::FLAGS.start)? & 0x01ff)
}

/// Source and destination port of the TCP, UDP or SCTP header at `l4`
/// (all three have them in the same place).
#[inline]
fn ports(b: &[u8], l4: usize) -> Option<(u16, u16)> {
    Some((get16(b, l4 + udp::field::SRC_PORT.start)?, get16(b, l4 + udp::field::DST_PORT.start)?))
}

fn parse_ipv6(b: &[u8], l3: usize, k: &mut FlowKey) {
    if let Some(a) = get_arr::<16>(b, l3 + ipv6::field::SRC_ADDR.start) {
        k.src = Addr::V6(a);
    }
    if let Some(a) = get_arr::<16>(b, l3 + ipv6::field::DST_ADDR.start) {
        k.dst = Addr::V6(a);
    }
    let Some(&first) = b.get(l3 + ipv6::field::NXT_HDR) else {
        return;
    };
    let mut nh = first;
    let mut off = l3 + ipv6::HEADER_LEN;
    k.push_proto(nh);
    // Walk the extension header chain (bounded).
    for _ in 0..8 {
        match nh {
            ipproto::HOPOPTS | ipproto::ROUTING | ipproto::DSTOPTS | ipproto::AH => {
                let ext = b.get(off..).unwrap_or(&[]);
                let (Some(&next), Some(len)) = (ext.get(ipv6::ext_field::NXT_HDR), ipv6::ext_header_len(nh, ext))
                else {
                    return;
                };
                nh = next;
                off += len;
            }
            ipproto::FRAGMENT => {
                let Some(&next) = b.get(off + ipv6::ext_field::NXT_HDR) else {
                    return;
                };
                k.push_proto(next);
                match get16(b, off + ipv6::ext_field::FRAG_OFF_M.start) {
                    Some(fo) if fo & ipv6::FRAG_OFFSET_MASK == 0 => {}
                    // A later fragment: no transport header here.
                    _ => return,
                }
                nh = next;
                off += ipv6::FRAG_HEADER_LEN;
            }
            _ => break,
        }
        k.push_proto(nh);
    }
    if matches!(nh, ipproto::TCP | ipproto::UDP | ipproto::SCTP) {
        k.ports = ports(b, off);
    }
    if nh == ipproto::TCP {
        k.tcp_flags = tcp_flags(b, off);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Ethernet / IPv4 / TCP SYN 192.168.1.10:51000 -> 93.184.216.34:80 (from a
    // real capture): the same frame the Ethernet view's tests take apart.
    use crate::views::ethernet::tests::ETH_TCP;

    #[test]
    fn ethernet_ipv4_tcp() {
        let k = parse(1, &ETH_TCP);
        assert!(k.linktype_supported);
        assert_eq!(k.vlans(), &[] as &[u16]);
        assert_eq!(k.ethertype, 0x0800);
        assert_eq!(k.src, Addr::V4([192, 168, 1, 10]));
        assert_eq!(k.dst, Addr::V4([93, 184, 216, 34]));
        assert_eq!(k.protos(), &[6]);
        assert_eq!(k.ports, Some((51000, 80)));
        assert_eq!(k.tcp_flags, Some(tcp::flags::SYN));
    }

    #[test]
    fn truncated_never_panics_and_reports_prefix() {
        for n in 0..ETH_TCP.len() {
            let k = parse(1, &ETH_TCP[..n]);
            if n < 30 {
                assert_eq!(k.src, Addr::None, "len {n}");
            } else {
                assert_eq!(k.src, Addr::V4([192, 168, 1, 10]));
            }
            assert_eq!(k.dst != Addr::None, n >= 34, "len {n}");
            assert_eq!(k.ports.is_some(), n >= 38, "len {n}");
        }
        // Every link type, every prefix of junk.
        let junk: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        for lt in [0, 1, 101, 113, 228, 229, 9999] {
            for n in 0..junk.len() {
                let _ = parse(lt, &junk[..n]);
            }
        }
    }

    #[test]
    fn qinq_stack() {
        let mut f = Vec::new();
        f.extend_from_slice(&ETH_TCP[..12]);
        f.extend_from_slice(&[0x88, 0xa8, 0x00, 0x64]); // S-tag 100
        f.extend_from_slice(&[0x81, 0x00, 0x20, 0xc8]); // C-tag 200, PCP 1
        f.extend_from_slice(&ETH_TCP[12..]);
        let k = parse(1, &f);
        assert_eq!(k.vlans(), &[100, 200]);
        assert_eq!(k.ethertype, 0x0800);
        assert_eq!(k.ports, Some((51000, 80)));
    }

    #[test]
    fn ipv4_bogus_ihl_follows_libpcap() {
        // IHL 0: libpcap reads the "ports" at the start of the IP header.
        let mut f = ETH_TCP;
        f[14] = 0x40;
        let k = parse(1, &f);
        assert_eq!(k.ports, Some((0x4000, 0x003c)));
        // Non-first fragment: no ports.
        let mut f = ETH_TCP;
        f[20] = 0x00;
        f[21] = 0x10;
        assert_eq!(parse(1, &f).ports, None);
    }

    #[test]
    fn arp_addresses() {
        // ARP request who-has 10.0.0.2 tell 10.0.0.1.
        let f: [u8; 42] = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x08, 0x06, //
            0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, //
            10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2,
        ];
        let k = parse(1, &f);
        assert_eq!(k.src, Addr::V4([10, 0, 0, 1]));
        assert_eq!(k.dst, Addr::V4([10, 0, 0, 2]));
        assert_eq!(k.n_protos, 0);
    }

    // Raw IPv6 / Hop-by-hop / Fragment (first) / UDP 5353 -> 53: the IPv6
    // view's test frame.
    use crate::views::ipv6::tests::ipv6_ext;

    #[test]
    fn raw_ipv6_extension_headers() {
        let f = ipv6_ext();
        for lt in [101, 229] {
            let k = parse(lt, &f);
            assert_eq!(k.ethertype, 0x86dd);
            assert!(matches!(k.src, Addr::V6(a) if a[15] == 1));
            assert!(matches!(k.dst, Addr::V6(a) if a[15] == 2));
            assert_eq!(k.protos(), &[0, 44, 17]);
            assert_eq!(k.ports, Some((5353, 53)));
        }
        // An IPv6 packet on the IPv4 link type is not parsed.
        assert_eq!(parse(228, &f).src, Addr::None);
        // A later fragment has no ports but still names its protocol.
        let mut g = f.clone();
        g[51] = 0x08;
        let k = parse(101, &g);
        assert_eq!(k.ports, None);
        assert_eq!(k.protos(), &[0, 44, 17]);
    }

    #[test]
    fn linux_sll() {
        let mut f = vec![0, 0, 0, 1, 0, 6, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 0, 0x08, 0x00];
        f.extend_from_slice(&ETH_TCP[14..]);
        let k = parse(113, &f);
        assert_eq!(k.src, Addr::V4([192, 168, 1, 10]));
        assert_eq!(k.ports, Some((51000, 80)));
        assert!(!parse(105, &f).linktype_supported);
    }
}
