//! Traffic mix: packets and bytes per EtherType, IP protocol, VLAN id and
//! MPLS label, and the frame size histogram (the buckets of tshark's
//! `-z plen,tree`). Top talkers and top flows come from [`crate::conv`].
//! The frames' own headers count in the mix; the packets tunnels carry
//! (the innermost of each frame that carries one) count in the same tables
//! of their own, `inner`: a sensor fed by ERSPAN or VXLAN sees the mix of
//! the traffic mirrored to it, not only GRE or UDP to its collector.
//!
//! Memory: EtherTypes, protocols and VLAN ids are bounded by their ranges;
//! MPLS labels (2^20 values) by `max_flows` in each of the two, beyond which
//! they are counted as untracked.

use crate::hash::FastMap;
use crate::{Config, Count, Seen};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use wv_wire::dissect::{Dissection, Flow};
use wv_wire::names::{ethertype_name, protocol_name};

/// Lower bounds of the size buckets (tshark's packet length tree).
pub const SIZE_BUCKETS: [u32; 10] = [0, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120];

pub struct Mix {
    outer: Layers,
    inner: Layers,
    sizes: [Count; SIZE_BUCKETS.len()],
    min_size: u32,
    max_size: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row<K: Serialize> {
    pub key: K,
    pub name: String,
    pub packets: u64,
    pub bytes: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizeBucket {
    /// Inclusive bounds; `max` is `None` for the last bucket.
    pub min: u32,
    pub max: Option<u32>,
    pub packets: u64,
    pub bytes: u64,
}

/// EtherTypes, IP protocols, VLAN ids and MPLS labels of a set of packets.
struct Layers {
    ethertypes: BTreeMap<u16, Count>,
    protocols: BTreeMap<u8, Count>,
    vlans: BTreeMap<u16, Count>,
    labels: FastMap<u32, Count>,
    labels_untracked: Count,
    max_labels: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayersReport {
    pub ethertypes: Vec<Row<u16>>,
    pub ip_protocols: Vec<Row<u8>>,
    pub vlans: Vec<Row<u16>>,
    pub mpls_labels: Vec<Row<u32>>,
    pub mpls_labels_untracked: Count,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MixReport {
    /// The frames' own headers (the outer ones of a tunnelled frame).
    #[serde(flatten)]
    pub outer: LayersReport,
    /// The innermost packet of each frame that carries a tunnel (the deepest
    /// analyze enters: 4 tunnels), counted with the frame's length (empty
    /// when no frame carries one).
    pub inner: LayersReport,
    pub sizes: Vec<SizeBucket>,
    pub min_size: u32,
    pub max_size: u32,
}

fn rows<K: Copy + Serialize>(m: impl IntoIterator<Item = (K, Count)>, name: impl Fn(K) -> String) -> Vec<Row<K>> {
    let mut v: Vec<Row<K>> =
        m.into_iter().map(|(k, c)| Row { key: k, name: name(k), packets: c.packets, bytes: c.bytes }).collect();
    v.sort_by(|a, b| b.packets.cmp(&a.packets).then(b.bytes.cmp(&a.bytes)));
    v
}

impl Layers {
    fn new(max_labels: usize) -> Layers {
        Layers {
            ethertypes: BTreeMap::new(),
            protocols: BTreeMap::new(),
            vlans: BTreeMap::new(),
            labels: FastMap::default(),
            labels_untracked: Count::default(),
            max_labels,
        }
    }

    /// A packet's EtherType, protocol, VLANs and labels, counted with `len`.
    fn feed(&mut self, f: &Flow, len: u32) {
        self.ethertypes.entry(f.ethertype).or_default().add(len);
        if let Some(p) = f.protocol {
            self.protocols.entry(p).or_default().add(len);
        }
        // A frame counts once per VLAN id and label in its stack.
        for (i, v) in f.vlans().iter().enumerate() {
            if !f.vlans()[..i].contains(v) {
                self.vlans.entry(*v).or_default().add(len);
            }
        }
        for (i, l) in f.labels().iter().enumerate() {
            if f.labels()[..i].contains(l) {
                continue;
            }
            if let Some(c) = self.labels.get_mut(l) {
                c.add(len);
            } else if self.labels.len() < self.max_labels {
                self.labels.entry(*l).or_default().add(len);
            } else {
                self.labels_untracked.add(len);
            }
        }
    }

    fn finish(self) -> LayersReport {
        LayersReport {
            ethertypes: rows(self.ethertypes, |t| ethertype_name(t).to_string()),
            ip_protocols: rows(self.protocols, |p| protocol_name(p).to_string()),
            vlans: rows(self.vlans, |_| String::new()),
            mpls_labels: rows(self.labels, |_| String::new()),
            mpls_labels_untracked: self.labels_untracked,
        }
    }
}

impl Mix {
    pub fn new(cfg: &Config) -> Mix {
        Mix {
            outer: Layers::new(cfg.max_flows),
            inner: Layers::new(cfg.max_flows),
            sizes: [Count::default(); SIZE_BUCKETS.len()],
            min_size: u32::MAX,
            max_size: 0,
        }
    }

    /// A frame's size (every frame, whatever its link type).
    pub fn size(&mut self, len: u32) {
        let b = SIZE_BUCKETS.iter().rposition(|&m| len >= m).unwrap_or(0);
        self.sizes[b].add(len);
        self.min_size = self.min_size.min(len);
        self.max_size = self.max_size.max(len);
    }

    /// A dissected frame's protocols, VLANs and labels.
    pub fn feed(&mut self, s: &Seen<'_>) {
        self.outer.feed(&s.dissection.flow, s.len);
    }

    /// The innermost packet `d` a frame of length `len` carries in tunnels.
    pub fn feed_inner(&mut self, d: &Dissection, len: u32) {
        self.inner.feed(&d.flow, len);
    }

    pub fn finish(self) -> MixReport {
        let sizes = SIZE_BUCKETS
            .iter()
            .enumerate()
            .map(|(i, &min)| SizeBucket {
                min,
                max: SIZE_BUCKETS.get(i + 1).map(|m| m - 1),
                packets: self.sizes[i].packets,
                bytes: self.sizes[i].bytes,
            })
            .collect();
        MixReport {
            outer: self.outer.finish(),
            inner: self.inner.finish(),
            sizes,
            min_size: if self.max_size == 0 && self.min_size == u32::MAX { 0 } else { self.min_size },
            max_size: self.max_size,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::test_frames::{feed, udp};
    use crate::{Analyzer, Config, Frame};

    #[test]
    fn sizes_fall_in_tsharks_buckets_by_their_lower_bounds() {
        let mut a = Analyzer::new(Config::default()).unwrap();
        for len in [19u32, 20, 1279, 1280, 5119, 5120, 9000] {
            a.feed(&Frame { ts_ns: 1, linktype: 1, wire_len: len, data: &[0; 14] });
        }
        let r = a.finish().mix;
        let packets: Vec<u64> = r.sizes.iter().map(|b| b.packets).collect();
        assert_eq!(packets, [1, 1, 0, 0, 0, 0, 1, 1, 1, 2]);
        assert_eq!((r.sizes[0].min, r.sizes[0].max, r.sizes[1].min), (0, Some(19), 20));
        assert_eq!((r.sizes[9].min, r.sizes[9].max, r.sizes[9].bytes), (5120, None, 5120 + 9000));
        assert_eq!((r.min_size, r.max_size), (19, 9000));
    }

    #[test]
    fn no_frame_gives_sizes_of_zero() {
        let r = Analyzer::new(Config::default()).unwrap().finish().mix;
        assert_eq!((r.min_size, r.max_size), (0, 0));
    }

    #[test]
    fn ethertypes_and_protocols_are_named_and_ranked_by_packets() {
        let mut a = Analyzer::new(Config::default()).unwrap();
        let u = udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 18]);
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        for f in [&arp, &u, &u] {
            feed(&mut a, 1, f);
        }
        let r = a.finish().mix;
        let e: Vec<(u16, &str, u64)> = r.outer.ethertypes.iter().map(|x| (x.key, x.name.as_str(), x.packets)).collect();
        assert_eq!(e, [(0x0800, "IPv4", 2), (0x0806, "ARP", 1)]);
        let p: Vec<(u8, &str, u64, u64)> =
            r.outer.ip_protocols.iter().map(|x| (x.key, x.name.as_str(), x.packets, x.bytes)).collect();
        assert_eq!(p, [(17, "UDP", 2, 120)]);
        assert!(r.inner.ethertypes.is_empty());
    }

    #[test]
    fn a_vlan_id_twice_in_one_stack_counts_the_frame_once() {
        let mut a = Analyzer::new(Config::default()).unwrap();
        let mut f = vec![0u8; 12];
        // Two 802.1Q tags of VLAN 5, then IPv4 (the UDP frame's, from its EtherType on).
        for _ in 0..2 {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        f.extend_from_slice(&udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 18])[12..]);
        feed(&mut a, 1, &f);
        let r = a.finish().mix;
        let v: Vec<(u16, u64)> = r.outer.vlans.iter().map(|x| (x.key, x.packets)).collect();
        assert_eq!(v, [(5, 1)]);
    }
}
