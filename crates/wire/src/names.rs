//! Names of EtherTypes and IP protocol numbers, and addresses as text, as
//! reports and the API show them: one table for every crate (analyze's mix
//! and conversations, serve's packet list).

use crate::packet::Addr;

/// A name for an EtherType.
pub fn ethertype_name(t: u16) -> &'static str {
    match t {
        0x0800 => "IPv4",
        0x0806 => "ARP",
        0x8035 => "RARP",
        0x86dd => "IPv6",
        0x8847 => "MPLS",
        0x8848 => "MPLS multicast",
        0x8100 => "802.1Q",
        0x88a8 => "802.1ad",
        0x88cc => "LLDP",
        0x8863 | 0x8864 => "PPPoE",
        0x888e => "EAPOL",
        0x88f7 => "PTP",
        0x9000 => "loopback",
        0 => "none (802.3 LLC or unknown)",
        _ => "",
    }
}

/// A name for an IP protocol number.
pub fn protocol_name(p: u8) -> &'static str {
    match p {
        1 => "ICMP",
        2 => "IGMP",
        4 => "IPv4-in-IP",
        6 => "TCP",
        17 => "UDP",
        41 => "IPv6-in-IP",
        47 => "GRE",
        50 => "ESP",
        51 => "AH",
        58 => "ICMPv6",
        59 => "no next header",
        89 => "OSPF",
        103 => "PIM",
        112 => "VRRP",
        132 => "SCTP",
        _ => "",
    }
}

/// An address as text ("" when absent).
pub fn addr_text(a: &Addr) -> String {
    match a {
        Addr::None => String::new(),
        Addr::V4(b) => v4_text(*b),
        Addr::V6(b) => std::net::Ipv6Addr::from(*b).to_string(),
    }
}

/// Dotted decimal, as `Ipv4Addr`'s `Display` without the formatting
/// machinery (the tables of a big capture hold millions of addresses).
fn v4_text(b: [u8; 4]) -> String {
    let mut s = String::with_capacity(15);
    for (i, x) in b.into_iter().enumerate() {
        if i > 0 {
            s.push('.');
        }
        if x >= 100 {
            s.push(char::from(b'0' + x / 100));
        }
        if x >= 10 {
            s.push(char::from(b'0' + x / 10 % 10));
        }
        s.push(char::from(b'0' + x % 10));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(ethertype_name(0x0800), "IPv4");
        assert_eq!(ethertype_name(0x86dd), "IPv6");
        assert_eq!(ethertype_name(0x0806), "ARP");
        assert_eq!(ethertype_name(0x1234), "");
        assert_eq!(protocol_name(6), "TCP");
        assert_eq!(protocol_name(17), "UDP");
        assert_eq!(protocol_name(58), "ICMPv6");
        assert_eq!(protocol_name(255), "");
    }

    #[test]
    fn v4_text_is_dotted_decimal() {
        for b in [[0, 0, 0, 0], [10, 200, 90, 165], [255, 9, 100, 99], [1, 20, 255, 0]] {
            assert_eq!(v4_text(b), std::net::Ipv4Addr::from(b).to_string());
        }
    }
}
