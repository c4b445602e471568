//! Tunnels: the frame or packet a dissected frame carries as its payload,
//! found where tshark finds one, so that the analysers count the inner
//! conversations as tshark does (each IP layer of a frame is one, each TCP
//! or UDP layer too).
//!
//! Entered: IP in IP (IPv4 or IPv6 in IPv4 or IPv6, protocols 4 and 41);
//! GRE version 0 without source routes carrying IPv4, IPv6, ARP, Ethernet
//! (0x6558: transparent bridging, NVGRE), MPLS, WCCP's redirected IPv4,
//! what Cisco's metadata header (0x8909) names, NSH, or ERSPAN (types I, II
//! and III: mirrored Ethernet frames); a PIM register's packet; over UDP,
//! VXLAN (4789), VXLAN-GPE (4790), Geneve (6081) and MPLS (6635), on the
//! IANA port, unless the other port is lower and a well-known one (below
//! 1024: tshark tries the lower port's dissector first, and most
//! well-known ports have one); and the Network Service Header (NSH, RFC
//! 8300: EtherType 0x894F, or VXLAN-GPE's next protocol), as tshark sizes
//! it. Geneve names its payload by EtherType, which tshark hands to its
//! EtherType table: IP, ARP, MPLS and VLAN tags are entered (what the
//! dissector walks after an EtherType), Ethernet (0x6558) and NSH too, not
//! MACsec nor Cisco's metadata. Cisco's metadata in GRE names its payload
//! from GRE's own table: IPv4, IPv6, ARP, Ethernet, MPLS and NSH are entered.
//!
//! Not entered: IP fragments (the payload is not whole; tshark reassembles
//! them first), GRE with routing or of version 1 (PPTP), ERSPAN type III of
//! another frame type than Ethernet, and everything else (ICMP errors'
//! quoted headers, sFlow samples, ...), which tshark decodes but does not
//! treat as the traffic of the link.

use crate::dissect::{Dissection, Encap, ProblemKind};
use crate::views::{ethertype, get16, ipproto};

/// A tunnel's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    IpInIp,
    Gre,
    Erspan,
    PimRegister,
    Vxlan,
    Geneve,
    MplsInUdp,
    VxlanGpe,
    /// A Network Service Header named by an EtherType of the frame's own
    /// (after Ethernet or Linux SLL, VLAN tags, MACsec; also inside an
    /// Ethernet frame a tunnel carries); behind GRE, Geneve or VXLAN-GPE it is
    /// part of that tunnel's header.
    Nsh,
}

/// The payload of a tunnel: it starts with `encap` at `at` and ends at `end`
/// (offsets in the outer frame; `end` is on the wire, by the outer length
/// fields: the captured bytes may end before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inner {
    pub kind: Kind,
    pub encap: Encap,
    pub at: usize,
    pub end: usize,
}

const GRE_C: u16 = 0x8000;
const GRE_R: u16 = 0x4000;
const GRE_K: u16 = 0x2000;
const GRE_S: u16 = 0x1000;
const GRE_VERSION: u16 = 0x0007;
/// GRE protocol types.
const TEB: u16 = 0x6558;
const ERSPAN_II: u16 = 0x88be;
const ERSPAN_III: u16 = 0x22eb;
const WCCP: u16 = 0x883e;
/// Cisco's metadata header (an SGT): the EtherType of what follows, version,
/// length, options and SGT, 8 bytes.
const CISCO_METADATA: u16 = 0x8909;
/// The Network Service Header's EtherType (RFC 8300).
const NSH: u16 = 0x894f;
/// PIM's protocol number, and its version 2 Register message's first byte.
const PIM: u8 = 103;
const PIM_V2_REGISTER: u8 = 0x21;
/// UDP ports (IANA).
const VXLAN_PORT: u16 = 4789;
const GENEVE_PORT: u16 = 6081;
const MPLS_UDP_PORT: u16 = 6635;
const VXLAN_GPE_PORT: u16 = 4790;

/// The tunnel payload `d` (the dissection of `data`) carries, if any. Its
/// start is past the header it was found behind, within the captured bytes
/// and not past its end (this check serves every kind: the headers it was
/// found behind are the captured bytes before it).
pub fn inner(d: &Dissection, data: &[u8]) -> Option<Inner> {
    find(d, data).filter(|t| t.at >= d.payload_at as usize && t.at <= t.end && t.at <= data.len())
}

/// What a GRE protocol type names, at `at` (tshark's `gre.proto` table, as
/// far as the dissector walks it): IPv4, IPv6, ARP, Ethernet (0x6558),
/// MPLS, or NSH's payload. `data` ends where the GRE packet does.
fn by_gre_proto(data: &[u8], proto: u16, at: usize) -> Option<(Encap, usize)> {
    match proto {
        ethertype::IPV4 => Some((Encap::Ipv4, at)),
        ethertype::IPV6 => Some((Encap::Ipv6, at)),
        ethertype::ARP => Some((Encap::EtherType(proto), at)),
        TEB => Some((Encap::Ethernet, at)),
        ethertype::MPLS | ethertype::MPLS_MULTICAST => Some((Encap::Mpls, at)),
        NSH => nsh(data, at),
        _ => None,
    }
}

/// What an EtherType in Geneve's header names, at `at` (tshark hands it to
/// its EtherType table): what the dissector walks after an EtherType (IP,
/// ARP, MPLS, VLAN tags), Ethernet, or NSH's payload. `data` ends where the
/// UDP datagram does.
fn by_ethertype(data: &[u8], et: u16, at: usize) -> Option<(Encap, usize)> {
    match et {
        TEB => Some((Encap::Ethernet, at)),
        NSH => nsh(data, at),
        ethertype::IPV4
        | ethertype::IPV6
        | ethertype::ARP
        | ethertype::RARP
        | ethertype::MPLS
        | ethertype::MPLS_MULTICAST
        | ethertype::VLAN
        | ethertype::QINQ
        | ethertype::VLAN_9100 => Some((Encap::EtherType(et), at)),
        _ => None,
    }
}

/// What VXLAN-GPE's or NSH's next protocol `p` names, at `at`.
fn by_next_protocol(data: &[u8], p: u8, at: usize) -> Option<(Encap, usize)> {
    match p {
        1 => Some((Encap::Ipv4, at)),
        2 => Some((Encap::Ipv6, at)),
        3 => Some((Encap::Ethernet, at)),
        4 => nsh(data, at),
        5 => Some((Encap::Mpls, at)),
        _ => None,
    }
}

/// The payload of the NSH at `at` (of the innermost, when NSH carries NSH),
/// as tshark finds it: 4 times the length field's words from the header's
/// start, but 24 bytes for MD type 1, at least 8 for MD type 2 and at
/// least 4 for the others. None when the header's fixed 8 bytes, an MD
/// type 2 context header or the payload's first byte lie past the end of
/// `data` (the captured bytes of the packet that carries the NSH: tshark
/// stops there with an exception, or finds nothing to decode).
fn nsh(data: &[u8], mut at: usize) -> Option<(Encap, usize)> {
    // A loop, not a recursion: each header is at least 8 bytes further in.
    loop {
        let h = data.get(at..at + 8)?;
        let words = 4 * usize::from(h[1] & 0x3f);
        let len = match h[2] {
            1 => 24,
            2 => words.max(8),
            _ => words.max(4),
        };
        if h[2] == 2 {
            // The context headers: class, type, length (7 bits) and value,
            // padded to 4 bytes; each must be captured.
            let mut off = at + 8;
            while off < at + len {
                let vlen = usize::from(*data.get(off + 3)? & 0x7f);
                if off + 4 + vlen > data.len() {
                    return None;
                }
                off += 4 + vlen.next_multiple_of(4);
            }
        }
        let next = at + len;
        if next >= data.len() {
            return None;
        }
        match h[3] {
            4 => at = next,
            p => return by_next_protocol(data, p, next),
        }
    }
}

fn find(d: &Dissection, data: &[u8]) -> Option<Inner> {
    // NSH is never the start of the data (a tunnel hands it on as the payload of its own header).
    if d.flow.ethertype == NSH && d.network_at != 0 {
        let (encap, at) = nsh(data, d.network_at as usize)?;
        return Some(Inner { kind: Kind::Nsh, encap, at, end: d.wire_len as usize });
    }
    let at = d.payload_at as usize;
    if at == 0 || d.first_fragment || d.flow.later_fragment {
        return None;
    }
    let end = d.l4_end as usize;
    let at_end = |kind, encap, at| Some(Inner { kind, encap, at, end });
    match d.flow.protocol? {
        ipproto::IPIP => at_end(Kind::IpInIp, Encap::Ipv4, at),
        ipproto::IPV6 => at_end(Kind::IpInIp, Encap::Ipv6, at),
        ipproto::GRE => gre(data, at, end).map(|(kind, encap, off)| Inner { kind, encap, at: off, end }),
        PIM if data.get(at) == Some(&PIM_V2_REGISTER) => at_end(Kind::PimRegister, Encap::Ip, at + 8),
        ipproto::UDP => udp(d, data, at, end),
        _ => None,
    }
}

/// The payload of the GRE header at `at`, in a packet that ends at `end`.
fn gre(data: &[u8], at: usize, end: usize) -> Option<(Kind, Encap, usize)> {
    let flags = get16(data, at)?;
    let proto = get16(data, at + 2)?;
    if flags & (GRE_R | GRE_VERSION) != 0 {
        return None;
    }
    let seq = flags & GRE_S != 0;
    let off = at + 4 + [GRE_C, GRE_K, GRE_S].iter().filter(|&&f| flags & f != 0).count() * 4;
    // What the GRE packet carries: its bytes, not the frame's padding.
    let packet = &data[..end.min(data.len())];
    match proto {
        // Type I has no sequence number and no ERSPAN header; type II's
        // header (version 1) is 8 bytes, type III's (version 2) 12.
        ERSPAN_II if !seq => Some((Kind::Erspan, Encap::Ethernet, off)),
        ERSPAN_II => match data.get(off)? >> 4 {
            1 => Some((Kind::Erspan, Encap::Ethernet, off + 8)),
            2 => erspan_iii(data, off),
            _ => None,
        },
        ERSPAN_III => erspan_iii(data, off),
        // What follows Cisco's metadata is named from the same table as GRE's own protocol.
        CISCO_METADATA => by_gre_proto(packet, get16(data, off)?, off + 8).map(|(e, at)| (Kind::Gre, e, at)),
        // WCCP's redirection: IPv4, behind a 4-byte redirect header (version 2)
        // unless the first byte reads as IPv4's (version 1), as tshark decides.
        WCCP => Some((Kind::Gre, Encap::Ipv4, if data.get(off)? >> 4 == 4 { off } else { off + 4 })),
        _ => by_gre_proto(packet, proto, off).map(|(e, at)| (Kind::Gre, e, at)),
    }
}

/// The frame behind the ERSPAN type III header at `at`: 12 bytes, and an
/// 8-byte platform-specific subheader when its O bit is set; its frame
/// type (FT) 0 is Ethernet.
fn erspan_iii(data: &[u8], at: usize) -> Option<(Kind, Encap, usize)> {
    let hdr = data.get(at..at + 12)?;
    if (hdr[10] >> 2) & 0x1f != 0 {
        return None;
    }
    Some((Kind::Erspan, Encap::Ethernet, at + 12 + if hdr[11] & 1 != 0 { 8 } else { 0 }))
}

fn is_tunnel_port(p: u16) -> bool {
    matches!(p, VXLAN_PORT | VXLAN_GPE_PORT | GENEVE_PORT | MPLS_UDP_PORT)
}

/// The payload of a UDP tunnel whose UDP header is at `at`, by the lower port.
fn udp(d: &Dissection, data: &[u8], at: usize, end: usize) -> Option<Inner> {
    let (sp, dp) = d.flow.ports?;
    if d.problems().iter().any(|p| matches!(p.kind, ProblemKind::UdpLength(_) | ProblemKind::Truncated(_))) {
        return None;
    }
    // The UDP length bounds the payload (it was judged to fit the IP payload;
    // 0 is a jumbogram's, over IPv6: the IP payload's end holds).
    let end = match get16(data, at + 4) {
        Some(l) if usize::from(l) >= 8 => (at + usize::from(l)).min(end),
        _ => end,
    };
    let body = at + 8;
    // What the datagram carries: its bytes, not the frame's padding.
    let datagram = &data[..end.min(data.len())];
    // tshark tries the lower port's dissector first: a well-known port
    // below the tunnel's (its dissector is most likely registered) wins.
    let (lo, hi) = (sp.min(dp), sp.max(dp));
    let port = if lo < 1024 || is_tunnel_port(lo) { lo } else { hi };
    let (kind, encap, off) = match port {
        VXLAN_PORT => (Kind::Vxlan, Encap::Ethernet, body + 8),
        GENEVE_PORT => {
            let first = *data.get(body)?;
            if first >> 6 != 0 {
                return None;
            }
            let (encap, at) = by_ethertype(datagram, get16(data, body + 2)?, body + 8 + 4 * usize::from(first & 0x3f))?;
            (Kind::Geneve, encap, at)
        }
        MPLS_UDP_PORT => (Kind::MplsInUdp, Encap::Mpls, body),
        // The next protocol whatever the P flag and version say, as tshark reads it.
        VXLAN_GPE_PORT => {
            let (encap, at) = by_next_protocol(datagram, *data.get(body + 3)?, body + 8)?;
            (Kind::VxlanGpe, encap, at)
        }
        _ => return None,
    };
    Some(Inner { kind, encap, at: off, end })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dissect::{dissect, dissect_encap, LayerKind};
    use crate::packet::Addr;

    /// An IPv4 header (checksum filled in) of protocol `proto` around `payload`.
    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
        let r = crate::views::ipv4::Repr {
            src,
            dst,
            protocol: proto.into(),
            payload_len: payload.len() as u16,
            ttl: 64,
            ident: 0,
            dont_frag: true,
        };
        let mut h = vec![0; 20];
        r.emit(&mut h).expect("20 bytes");
        h.extend_from_slice(payload);
        h
    }

    fn ether(et: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        f.extend_from_slice(&et.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    fn udp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = Vec::new();
        for v in [sp, dp, (8 + payload.len()) as u16, 0] {
            u.extend_from_slice(&v.to_be_bytes());
        }
        u.extend_from_slice(payload);
        u
    }

    const A: [u8; 4] = [192, 0, 2, 1];
    const B: [u8; 4] = [192, 0, 2, 2];
    const C: [u8; 4] = [10, 1, 1, 1];
    const D: [u8; 4] = [10, 1, 1, 2];

    /// The innermost flow of `f` (an Ethernet frame), and the tunnels crossed.
    fn walk(f: &[u8]) -> (Vec<Kind>, Dissection) {
        let mut d = dissect(1, f, f.len() as u32);
        let mut data = f;
        let mut kinds = Vec::new();
        while let Some(t) = inner(&d, data) {
            kinds.push(t.kind);
            data = &data[t.at..t.end.min(data.len())];
            d = dissect_encap(t.encap, data, data.len() as u32);
        }
        (kinds, d)
    }

    fn inner_udp() -> Vec<u8> {
        ipv4(17, C, D, &udp(1000, 2000, b"hello"))
    }

    #[test]
    fn ip_in_ip_and_gre_carry_ip() {
        let f = ether(0x0800, &ipv4(4, A, B, &inner_udp()));
        let (kinds, d) = walk(&f);
        assert_eq!(kinds, [Kind::IpInIp]);
        assert_eq!((d.flow.src, d.flow.ports), (Addr::V4(C), Some((1000, 2000))));
        // GRE with a key and a sequence number.
        let mut gre = vec![0x30, 0, 0x08, 0, 0, 0, 0, 7, 0, 0, 0, 1];
        gre.extend_from_slice(&inner_udp());
        let (kinds, d) = walk(&ether(0x0800, &ipv4(47, A, B, &gre)));
        assert_eq!(kinds, [Kind::Gre]);
        assert_eq!(d.flow.dst, Addr::V4(D));
        // Cisco's metadata header: its EtherType, then 6 bytes.
        let g = [&[0x20, 0x00, 0x89, 0x09, 0, 0, 0, 0x28, 0x08, 0x00, 1, 1, 0, 1, 0, 0][..], &inner_udp()].concat();
        let (kinds, d) = walk(&ether(0x0800, &ipv4(47, A, B, &g)));
        assert_eq!((kinds, d.flow.src), (vec![Kind::Gre], Addr::V4(C)));
        // WCCP: IPv4 directly (version 1) or behind a 4-byte redirect header (version 2).
        for redirect in [&[][..], &[0x05, 0x59, 0x00, 0x48]] {
            let g = [&[0x00, 0x00, 0x88, 0x3e][..], redirect, &inner_udp()].concat();
            let (kinds, d) = walk(&ether(0x0800, &ipv4(47, A, B, &g)));
            assert_eq!((kinds, d.flow.src), (vec![Kind::Gre], Addr::V4(C)));
        }
        // With routing (RFC 1701's source routes): not entered.
        gre[0] |= 0x40;
        assert_eq!(walk(&ether(0x0800, &ipv4(47, A, B, &gre))).0, []);
    }

    #[test]
    fn erspan_vxlan_and_geneve_carry_ethernet() {
        let eth = ether(0x0800, &inner_udp());
        // ERSPAN type II: GRE with a sequence number, an 8-byte header of version 1.
        let mut gre = vec![0x10, 0, 0x88, 0xbe, 0, 0, 0, 1, 0x10, 0, 0, 0, 0, 0, 0, 0];
        gre.extend_from_slice(&eth);
        let (kinds, d) = walk(&ether(0x0800, &ipv4(47, A, B, &gre)));
        assert_eq!(kinds, [Kind::Erspan]);
        assert_eq!(d.layers()[0].kind, LayerKind::Ethernet);
        assert_eq!(d.flow.ports, Some((1000, 2000)));
        // Type III with the platform subheader (O bit), frame type 0.
        let mut gre = vec![0x10, 0, 0x22, 0xeb, 0, 0, 0, 1, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        gre.extend_from_slice(&[0; 8]);
        gre.extend_from_slice(&eth);
        assert_eq!(walk(&ether(0x0800, &ipv4(47, A, B, &gre))).1.flow.src, Addr::V4(C));
        // VXLAN in VXLAN: both entered.
        let vx = |p: &[u8]| ipv4(17, A, B, &udp(50000, 4789, &[[8, 0, 0, 0, 0, 0, 1, 0].as_slice(), p].concat()));
        let twice = ether(0x0800, &vx(&ether(0x0800, &vx(&eth))));
        let (kinds, d) = walk(&twice);
        assert_eq!(kinds, [Kind::Vxlan, Kind::Vxlan]);
        assert_eq!(d.flow.ports, Some((1000, 2000)));
        // Not when the other port is a lower, well-known one.
        let other =
            ether(0x0800, &ipv4(17, A, B, &udp(53, 4789, &[[8, 0, 0, 0, 0, 0, 1, 0].as_slice(), &eth].concat())));
        assert_eq!(walk(&other).0, []);
        // Geneve with 4 bytes of options, carrying IPv4.
        let gen = [[0x01, 0, 0x08, 0x00, 0, 0, 1, 0, 0, 0, 0, 0].as_slice(), &inner_udp()].concat();
        let (kinds, d) = walk(&ether(0x0800, &ipv4(17, A, B, &udp(40000, 6081, &gen))));
        assert_eq!(kinds, [Kind::Geneve]);
        assert_eq!(d.flow.src, Addr::V4(C));
    }

    /// An NSH of MD type 2 and `words` 4-byte words, then `payload` of next protocol `next`.
    fn nsh(next: u8, words: u8, payload: &[u8]) -> Vec<u8> {
        let mut h = vec![0, words, 2, next, 0, 0, 1, 255];
        h.resize(4 * usize::from(words).max(2), 0);
        h.extend_from_slice(payload);
        h
    }

    #[test]
    fn service_headers_and_named_ethertypes_are_entered() {
        let gpe = |next: u8, p: &[u8]| {
            ether(0x0800, &ipv4(17, A, B, &udp(50000, 4790, &[[0x0c, 0, 0, next, 0, 0, 1, 0].as_slice(), p].concat())))
        };
        let eth = ether(0x0800, &inner_udp());
        let mpls = [[0, 0x64, 0x11, 64].as_slice(), &inner_udp()].concat();
        for (f, want) in [
            (gpe(1, &inner_udp()), vec![Kind::VxlanGpe]),
            (gpe(3, &eth), vec![Kind::VxlanGpe]),
            (gpe(5, &mpls), vec![Kind::VxlanGpe]),
            // NSH in VXLAN-GPE is part of its header; NSH in NSH too.
            (gpe(4, &nsh(1, 4, &inner_udp())), vec![Kind::VxlanGpe]),
            (gpe(4, &nsh(4, 2, &nsh(3, 2, &eth))), vec![Kind::VxlanGpe]),
            // NSH over Ethernet, behind a VLAN tag too; MD type 1 is 24 bytes whatever its length says.
            (ether(0x894f, &nsh(1, 2, &inner_udp())), vec![Kind::Nsh]),
            (ether(0x8100, &[[0, 7, 0x89, 0x4f].as_slice(), &nsh(1, 2, &inner_udp())].concat()), vec![Kind::Nsh]),
            (ether(0x894f, &[[0, 2, 1, 1].as_slice(), &[0; 20], &inner_udp()].concat()), vec![Kind::Nsh]),
            // GRE carrying NSH; Geneve carrying MPLS and a VLAN tag; Cisco's metadata carrying Ethernet.
            (
                ether(0x0800, &ipv4(47, A, B, &[[0, 0, 0x89, 0x4f].as_slice(), &nsh(1, 2, &inner_udp())].concat())),
                vec![Kind::Gre],
            ),
            (
                ether(
                    0x0800,
                    &ipv4(17, A, B, &udp(40000, 6081, &[[0, 0, 0x88, 0x47, 0, 0, 1, 0].as_slice(), &mpls].concat())),
                ),
                vec![Kind::Geneve],
            ),
            (
                ether(
                    0x0800,
                    &ipv4(
                        17,
                        A,
                        B,
                        &udp(40000, 6081, &[[0, 0, 0x81, 0, 0, 0, 1, 0, 0, 5, 8, 0].as_slice(), &inner_udp()].concat()),
                    ),
                ),
                vec![Kind::Geneve],
            ),
            (
                ether(
                    0x0800,
                    &ipv4(47, A, B, &[[0, 0, 0x89, 0x09, 0x65, 0x58, 1, 1, 0, 1, 0, 0].as_slice(), &eth].concat()),
                ),
                vec![Kind::Gre],
            ),
        ] {
            let (kinds, d) = walk(&f);
            assert_eq!(kinds, want, "{f:02x?}");
            assert_eq!((d.flow.src, d.flow.ports), (Addr::V4(C), Some((1000, 2000))), "{f:02x?}");
        }
        // Not entered: an unknown next protocol, an NSH that ends where the capture does,
        // and an EtherType the dissector does not walk.
        assert_eq!(walk(&gpe(9, &inner_udp())).0, []);
        assert_eq!(walk(&ether(0x894f, &nsh(1, 2, &[]))).0, []);
        // An NSH that ends where its GRE packet or UDP datagram does, the frame padded after
        // it: nothing carried (tshark decodes no payload).
        let padded = |f: Vec<u8>| [f, vec![0; 16]].concat();
        assert_eq!(
            walk(&padded(ether(0x0800, &ipv4(47, A, B, &[[0, 0, 0x89, 0x4f].as_slice(), &nsh(1, 2, &[])].concat())))).0,
            []
        );
        assert_eq!(walk(&padded(gpe(4, &nsh(1, 2, &[])))).0, []);
        // A context header longer than the capture, a base header cut before its
        // service path header: tshark stops with an exception.
        let long_tlv = [[0, 3, 2, 1, 0, 0, 1, 255, 0, 1, 2, 127].as_slice(), &inner_udp()].concat();
        assert_eq!(walk(&ether(0x894f, &long_tlv)).0, []);
        assert_eq!(walk(&ether(0x0800, &ipv4(47, A, B, &[0, 0, 0x89, 0x4f, 0, 1, 0, 1, 0x45, 0]))).0, []);
        // Cisco's metadata names its payload from GRE's table, where VLAN tags are not;
        // GRE carries ARP.
        let cmd_vlan = [[0, 0, 0x89, 0x09, 0x81, 0, 1, 1, 0, 1, 0, 0, 0, 9, 8, 0].as_slice(), &inner_udp()].concat();
        assert_eq!(walk(&ether(0x0800, &ipv4(47, A, B, &cmd_vlan))).0, []);
        let arp = [[0, 0, 0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1].as_slice(), &[0; 20]].concat();
        let (kinds, d) = walk(&ether(0x0800, &ipv4(47, A, B, &arp)));
        assert_eq!((kinds, d.layers()[0].kind), (vec![Kind::Gre], LayerKind::Arp));
        let g = ether(
            0x0800,
            &ipv4(17, A, B, &udp(40000, 6081, &[[0, 0, 0x12, 0x34, 0, 0, 1, 0].as_slice(), &eth].concat())),
        );
        assert_eq!(walk(&g).0, []);
    }

    #[test]
    fn fragments_and_cut_headers_are_not_entered() {
        let mut ip = ipv4(4, A, B, &inner_udp());
        ip[6] |= 0x20; // more fragments
        let c = !crate::views::ones_sum(0, &[&ip[..10], &[0, 0], &ip[12..20]].concat());
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        assert_eq!(walk(&ether(0x0800, &ip)).0, []);
        // A GRE header the capture cut.
        let f = ether(0x0800, &ipv4(47, A, B, &[0x00, 0x00, 0x08, 0x00]));
        let d = dissect(1, &f[..f.len() - 2], f.len() as u32);
        assert_eq!(inner(&d, &f[..f.len() - 2]), None);
    }

    #[test]
    fn each_tunnel_starts_further_into_the_frame() {
        // A crafted stack of 200 IP-in-IP headers: each payload starts 20 bytes further in,
        // so a walk ends (the analysers also stop at a depth).
        let mut p = inner_udp();
        for _ in 0..200 {
            p = ipv4(4, A, B, &p);
        }
        let (kinds, d) = walk(&ether(0x0800, &p));
        assert_eq!(kinds.len(), 200);
        assert_eq!(d.flow.ports, Some((1000, 2000)));
    }
}
