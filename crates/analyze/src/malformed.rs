//! Malformed or unexpected frames, by kind: everything
//! [`wv_wire::dissect`] reports (bad VLAN and MPLS stacks, truncated
//! headers, IPv4 header and total length, IPv4 header checksum, TCP data
//! offset and UDP length that do not fit the IP payload, ...), plus two
//! judged here: Ethernet frames shorter than the 60-byte minimum (without
//! FCS) and frames whose network layer is longer than the MTU.
//!
//! The frames a tunnel carries ([`wv_wire::tunnel`]) are judged too, by the
//! dissector's problems (a mirrored frame's bad VLAN stack or checksum is
//! the finding an ERSPAN or VXLAN feed is recorded for); their offsets are
//! given in the outer frame. The runt and MTU checks read the outer frame.
//! A frame counts once per kind, whichever of its layers the kind is in.
//!
//! A capture cut (snap length) is not a malformation. Frames sent by the
//! capturing host itself are captured before the NIC pads them, so on a
//! host's own traffic short frames are expected.

use crate::{Config, Count, Example, Seen};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use wv_wire::dissect::{LayerKind, ProblemKind};
use wv_wire::linktype;

/// Ethernet minimum frame length without the FCS.
pub const ETHERNET_MIN: u32 = 60;

/// The largest network layer an Ethernet frame carries (jumbo frames of 9,216 bytes on the
/// wire, the most switches take): a segment beyond it never crossed a wire as one frame.
pub const JUMBO_MAX: u32 = 9216;

/// Every kind this module reports, in report order: (name, what it means).
pub const KINDS: &[(&str, &str)] = &[
    ("vlan_tpid_as_ethertype", "S-tag TPID where a C-tag's EtherType belongs (stack in the wrong order)"),
    ("vlan_too_many_tags", "more VLAN tags than allowed"),
    ("vlan_truncated_tag", "VLAN tag cut short by the end of the frame"),
    ("mpls_no_bottom_of_stack", "MPLS stack ends without a bottom-of-stack entry"),
    ("mpls_truncated", "MPLS label stack entry cut short"),
    ("mpls_reserved_label", "reserved MPLS label where it cannot stand"),
    ("mpls_too_many_labels", "more MPLS labels than allowed"),
    ("truncated_l2", "link-layer header cut short"),
    ("truncated_l3", "network-layer header cut short (IPv4, IPv6, extension header, ARP)"),
    ("truncated_l4", "transport header cut short (TCP, UDP, ICMP)"),
    ("ip_version", "IP version does not match the EtherType"),
    ("ipv4_header_length", "IPv4 header length below 20 bytes"),
    ("ipv4_total_length_short", "IPv4 total length below the header length"),
    ("ipv4_total_length_beyond_frame", "IPv4 total length beyond the end of the frame"),
    ("ipv4_checksum", "IPv4 header checksum wrong"),
    ("ipv6_payload_beyond_frame", "IPv6 payload length beyond the end of the frame"),
    ("ipv6_jumbo_missing", "IPv6 payload length 0 without a Jumbo Payload option"),
    ("ipv6_too_many_ext_headers", "more IPv6 extension headers than allowed"),
    ("udp_length", "UDP length below 8 or beyond the IP payload"),
    ("tcp_data_offset", "TCP data offset below 20 bytes or beyond the segment"),
    ("runt", "Ethernet frame shorter than 60 bytes (64 with FCS); normal for frames the capturing host sent (the NIC pads them after capture) and on loopback"),
    ("over_mtu", "network layer longer than the MTU"),
];

/// The name and detail of a dissector problem.
pub fn kind_of(k: ProblemKind) -> (&'static str, String) {
    use LayerKind as L;
    use ProblemKind as P;
    match k {
        P::Truncated(L::Vlan) => ("vlan_truncated_tag", String::new()),
        P::Truncated(L::Mpls) => ("mpls_truncated", String::new()),
        P::Truncated(l @ (L::Ethernet | L::Llc | L::LinuxSll | L::Macsec)) => ("truncated_l2", format!("{l:?}")),
        P::Truncated(l @ (L::Arp | L::Ipv4 | L::Ipv6 | L::Ipv6Ext(_))) => ("truncated_l3", format!("{l:?}")),
        P::Truncated(l @ (L::Tcp | L::Udp | L::Icmp | L::Icmpv6)) => ("truncated_l4", format!("{l:?}")),
        P::TagStackTooDeep => ("vlan_too_many_tags", String::new()),
        P::TpidAsEthertype => ("vlan_tpid_as_ethertype", String::new()),
        P::MplsNoBottom => ("mpls_no_bottom_of_stack", String::new()),
        P::MplsStackTooDeep => ("mpls_too_many_labels", String::new()),
        P::MplsReservedLabel(l) => ("mpls_reserved_label", format!("label {l}")),
        P::IpVersion(v) => ("ip_version", format!("version {v}")),
        P::Ipv4HeaderLength(l) => ("ipv4_header_length", format!("{l} bytes")),
        P::Ipv4TotalLengthShort => ("ipv4_total_length_short", String::new()),
        P::Ipv4TotalLengthBeyondFrame => ("ipv4_total_length_beyond_frame", String::new()),
        P::Ipv4Checksum => ("ipv4_checksum", String::new()),
        P::Ipv6PayloadBeyondFrame => ("ipv6_payload_beyond_frame", String::new()),
        P::Ipv6JumboMissing => ("ipv6_jumbo_missing", String::new()),
        P::Ipv6ExtChainTooLong => ("ipv6_too_many_ext_headers", String::new()),
        P::UdpLength(l) => ("udp_length", format!("length {l}")),
        P::TcpDataOffset(o) => ("tcp_data_offset", format!("{o} bytes")),
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KindReport {
    /// Owned, not `&'static str`, so that a report read back holds its own.
    pub kind: std::borrow::Cow<'static, str>,
    pub description: std::borrow::Cow<'static, str>,
    pub packets: u64,
    pub bytes: u64,
    /// What likely made them, where it can be told: for `over_mtu`, TCP and UDP segments
    /// over the MTU are the super-frames a capturing host's offloads (GRO, TSO/GSO) make.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    pub first: Vec<Example>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MalformedReport {
    /// Frames with at least one problem.
    pub packets: u64,
    pub mtu: u32,
    /// Only the kinds seen, in [`KINDS`] order.
    pub kinds: Vec<KindReport>,
}

pub struct Malformed {
    mtu: u32,
    max_examples: usize,
    packets: u64,
    kinds: BTreeMap<usize, (Count, Vec<Example>)>,
    /// The kinds noted of the last frame fed (bit per [`KINDS`] entry), which
    /// its tunnels' frames add to ([`Malformed::feed_inner`]).
    seen: u32,
    /// Of the `over_mtu` frames: TCP or UDP segments, and of them those larger than any
    /// Ethernet frame ([`JUMBO_MAX`]).
    segments_over_mtu: u64,
    beyond_jumbo: u64,
}

impl Malformed {
    pub fn new(cfg: &Config) -> Malformed {
        Malformed {
            mtu: cfg.mtu,
            max_examples: cfg.examples,
            packets: 0,
            kinds: BTreeMap::new(),
            seen: 0,
            segments_over_mtu: 0,
            beyond_jumbo: 0,
        }
    }

    fn note(&mut self, s: &Seen<'_>, name: &str, detail: String, seen: &mut u32) {
        let i = KINDS.iter().position(|(k, _)| *k == name).unwrap_or(0);
        // Each kind once per frame (a frame with two bad tags counts once).
        if *seen & (1 << i) != 0 {
            return;
        }
        *seen |= 1 << i;
        let (c, ex) = self.kinds.entry(i).or_default();
        c.add(s.len);
        if ex.len() < self.max_examples {
            ex.push(Example::of(s, detail));
        }
    }

    /// The dissector's problems of `s`, whose offsets are `base` bytes into the frame.
    fn problems(&mut self, s: &Seen<'_>, base: u32, seen: &mut u32) {
        for p in s.dissection.problems() {
            let (name, detail) = kind_of(p.kind);
            let at = u64::from(base) + u64::from(p.offset);
            let inner = if base > 0 { " (inside a tunnel)" } else { "" };
            let detail = if detail.is_empty() {
                format!("at offset {at}{inner}")
            } else {
                format!("{detail} at offset {at}{inner}")
            };
            self.note(s, name, detail, seen);
        }
    }

    /// The frame a tunnel in the frame last fed carries: `s` is its
    /// dissection (with the frame's number, time and length), starting
    /// `base` bytes into the frame.
    pub fn feed_inner(&mut self, s: &Seen<'_>, base: u32) {
        let mut seen = self.seen;
        self.problems(s, base, &mut seen);
        if self.seen == 0 && seen != 0 {
            self.packets += 1;
        }
        self.seen = seen;
    }

    pub fn feed(&mut self, s: &Seen<'_>) {
        let mut seen = 0u32;
        self.problems(s, 0, &mut seen);
        let lt = s.frame.linktype & 0x03ff_ffff;
        if lt == linktype::ETHERNET && s.len < ETHERNET_MIN {
            self.note(s, "runt", format!("{} bytes", s.len), &mut seen);
        }
        if let Some(l3) = network_offset(s) {
            let l3_len = s.len.saturating_sub(l3);
            if l3_len > self.mtu {
                let transport = if s.dissection.layer(LayerKind::Tcp).is_some() {
                    Some("TCP")
                } else if s.dissection.layer(LayerKind::Udp).is_some() {
                    Some("UDP")
                } else {
                    None
                };
                let detail = match transport {
                    Some(t) => {
                        self.segments_over_mtu += 1;
                        let beyond = l3_len > JUMBO_MAX;
                        self.beyond_jumbo += u64::from(beyond);
                        let what = if beyond { ", larger than any Ethernet frame" } else { "" };
                        format!("{l3_len} bytes of network layer, one {t} segment{what}: an offload super-frame?")
                    }
                    None => format!("{l3_len} bytes of network layer"),
                };
                self.note(s, "over_mtu", detail, &mut seen);
            }
        }
        if seen != 0 {
            self.packets += 1;
        }
        self.seen = seen;
    }

    pub fn finish(self) -> MalformedReport {
        let (segments, beyond) = (self.segments_over_mtu, self.beyond_jumbo);
        let hint = |kind: &str| {
            (kind == "over_mtu" && segments > 0).then(|| {
                let wire = if beyond > 0 {
                    format!(", {beyond} larger than any Ethernet frame ({JUMBO_MAX} bytes)")
                } else {
                    String::new()
                };
                format!(
                    "{segments} of them are TCP or UDP segments over the MTU{wire}: super-frames the capturing host's offloads make (GRO merges what it receives, TSO/GSO capture what it sends before the NIC cuts it); `wirevault tune IF --apply` turns them off"
                )
            })
        };
        MalformedReport {
            packets: self.packets,
            mtu: self.mtu,
            kinds: self
                .kinds
                .into_iter()
                .map(|(i, (c, first))| KindReport {
                    kind: KINDS[i].0.into(),
                    description: KINDS[i].1.into(),
                    packets: c.packets,
                    bytes: c.bytes,
                    hint: hint(KINDS[i].0),
                    first,
                })
                .collect(),
        }
    }
}

/// Where the network layer starts: the first layer that is not link
/// layer, VLAN tag or MPLS label; `None` when there is none.
fn network_offset(s: &Seen<'_>) -> Option<u32> {
    s.dissection
        .layers()
        .iter()
        .find(|l| {
            !matches!(
                l.kind,
                LayerKind::Ethernet | LayerKind::LinuxSll | LayerKind::Vlan | LayerKind::Mpls | LayerKind::Macsec
            )
        })
        .map(|l| l.offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_frames::{feed, udp};
    use crate::Analyzer;

    fn malformed(mtu: u32, frames: &[Vec<u8>]) -> MalformedReport {
        let mut a = Analyzer::new(Config { mtu, ..Config::default() }).unwrap();
        for f in frames {
            feed(&mut a, 1, f);
        }
        a.finish().malformed
    }

    fn kinds(r: &MalformedReport) -> Vec<(&str, u64)> {
        r.kinds.iter().map(|k| (&*k.kind, k.packets)).collect()
    }

    #[test]
    fn an_ethernet_frame_under_60_bytes_is_a_runt() {
        let short = udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 17]);
        let r = malformed(1500, &[short, udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 18])]);
        assert_eq!((r.packets, kinds(&r)), (1, vec![("runt", 1)]));
        assert_eq!(r.kinds[0].first[0].detail, "59 bytes");
    }

    #[test]
    fn a_network_layer_over_the_mtu_is_flagged_with_the_offload_hint() {
        // 20 + 8 + 1472 = 1500 bytes of IP: at the MTU, not over it.
        let at = udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 1472]);
        let over = udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 1473]);
        let r = malformed(1500, &[at, over]);
        assert_eq!(kinds(&r), [("over_mtu", 1)]);
        let k = &r.kinds[0];
        assert_eq!(k.first[0].detail, "1501 bytes of network layer, one UDP segment: an offload super-frame?");
        assert!(k.hint.as_deref().unwrap().starts_with("1 of them are TCP or UDP segments over the MTU: "), "{k:?}");
        let jumbo = udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 9200]);
        let r = malformed(1500, &[jumbo]);
        let hint = r.kinds[0].hint.clone().unwrap();
        assert!(hint.starts_with(
            "1 of them are TCP or UDP segments over the MTU, 1 larger than any Ethernet frame (9216 bytes)"
        ));
    }

    #[test]
    fn a_frame_counts_once_however_many_kinds_it_has() {
        // A runt whose IPv4 checksum is wrong: one frame, two kinds, in KINDS order.
        let mut f = udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 4]);
        f[24] ^= 0xff;
        let r = malformed(1500, &[f]);
        assert_eq!((r.packets, kinds(&r)), (1, vec![("ipv4_checksum", 1), ("runt", 1)]));
        assert_eq!(r.kinds[0].first[0].detail, "at offset 14");
    }

    #[test]
    fn every_problem_maps_to_a_listed_kind() {
        use LayerKind as L;
        use ProblemKind as P;
        for p in [
            P::Truncated(L::Vlan),
            P::Truncated(L::Ethernet),
            P::Truncated(L::Ipv6),
            P::Truncated(L::Udp),
            P::TagStackTooDeep,
            P::MplsReservedLabel(3),
            P::Ipv4HeaderLength(16),
            P::UdpLength(3),
            P::TcpDataOffset(12),
        ] {
            let (name, _) = kind_of(p);
            assert!(KINDS.iter().any(|(k, _)| *k == name), "{p:?}: {name}");
        }
        assert_eq!(kind_of(P::Truncated(L::Tcp)), ("truncated_l4", "Tcp".to_string()));
        assert_eq!(kind_of(P::UdpLength(3)), ("udp_length", "length 3".to_string()));
        assert_eq!(kind_of(P::MplsReservedLabel(3)), ("mpls_reserved_label", "label 3".to_string()));
    }

    #[test]
    fn a_kind_found_again_in_a_tunnelled_frame_counts_once() {
        let mut f = udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 18]);
        f[24] ^= 0xff;
        let d = wv_wire::dissect::dissect(1, &f, f.len() as u32);
        let frame = crate::Frame { ts_ns: 1, linktype: 1, wire_len: 60, data: &f };
        let s = Seen { no: 1, frame: &frame, dissection: &d, len: 60 };
        let mut m = Malformed::new(&Config::default());
        m.feed(&s);
        // The same problem in the frame the tunnel carries, 14 bytes in.
        m.feed_inner(&s, 14);
        let r = m.finish();
        assert_eq!((r.packets, kinds(&r)), (1, vec![("ipv4_checksum", 1)]));
        // A frame of its own with it counts again.
        let mut m = Malformed::new(&Config::default());
        m.feed(&s);
        m.feed(&Seen { no: 2, ..s });
        assert_eq!(kinds(&m.finish()), [("ipv4_checksum", 2)]);
    }
}
