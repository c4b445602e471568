//! Conversations and endpoints, as tshark counts them: `-z conv,ip`
//! (IPv4 address pairs), `conv,ipv6`, `conv,udp` (address and port pairs),
//! `-z endpoints,ip`; TCP conversations are kept by [`crate::qos::tcp`],
//! which knows when a port pair starts a new connection. Bytes are frame
//! lengths on the wire. Side A of a conversation is the source of its first
//! packet (as in tshark's tables).
//!
//! Memory: each table holds at most `max_flows` entries; packets of a key
//! that finds its table full are counted as untracked (the report says how
//! many), so the totals still add up and nothing tracked is ever evicted.

use crate::hash::FastMap;
use crate::{addr_text, Config, Count, Seen};
use serde::Serialize;
use std::hash::Hash;
use wv_wire::dissect::{Dissection, LayerKind, ProblemKind};
use wv_wire::packet::Addr;

/// An IP address as a table key (ordered as tshark orders addresses: IPv4
/// before IPv6, then by bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ip {
    V4([u8; 4]),
    V6([u8; 16]),
}

impl Ip {
    pub fn of(a: &Addr) -> Option<Ip> {
        match a {
            Addr::V4(b) => Some(Ip::V4(*b)),
            Addr::V6(b) => Some(Ip::V6(*b)),
            Addr::None => None,
        }
    }
    pub fn text(&self) -> String {
        match self {
            Ip::V4(b) => addr_text(&Addr::V4(*b)),
            Ip::V6(b) => addr_text(&Addr::V6(*b)),
        }
    }
}

/// The addresses of a frame whose IP header was read whole (what tshark's
/// IP tap sees); `None` otherwise.
pub fn ip_pair(d: &Dissection, data: &[u8]) -> Option<(Ip, Ip)> {
    let l = d.layers().iter().find(|l| matches!(l.kind, LayerKind::Ipv4 | LayerKind::Ipv6))?;
    let at = l.offset as usize;
    let hl = match l.kind {
        LayerKind::Ipv4 => 4 * usize::from(data.get(at)? & 0x0f),
        _ => 40,
    };
    if at + hl > data.len() {
        return None;
    }
    let bad = d.problems().iter().any(|p| {
        matches!(
            p.kind,
            ProblemKind::Truncated(LayerKind::Ipv4 | LayerKind::Ipv6)
                | ProblemKind::Ipv4HeaderLength(_)
                | ProblemKind::Ipv4TotalLengthShort
                | ProblemKind::IpVersion(_)
        )
    });
    if bad {
        return None;
    }
    Some((Ip::of(&d.flow.src)?, Ip::of(&d.flow.dst)?))
}

/// One conversation: side A is the first packet's source.
#[derive(Debug, Clone, Serialize)]
pub struct ConvRow {
    pub a: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_a: Option<u16>,
    pub b: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_b: Option<u16>,
    pub a_to_b: Count,
    pub b_to_a: Count,
    pub first_ns: u64,
    pub last_ns: u64,
}

impl ConvRow {
    pub fn total(&self) -> Count {
        Count { packets: self.a_to_b.packets + self.b_to_a.packets, bytes: self.a_to_b.bytes + self.b_to_a.bytes }
    }
}

/// A conversation being counted.
#[derive(Debug, Clone)]
pub struct Conv {
    /// Side A (the first packet's source) and its port.
    pub a: (Ip, u16),
    pub b: (Ip, u16),
    pub a_to_b: Count,
    pub b_to_a: Count,
    pub first_ns: u64,
    pub last_ns: u64,
}

impl Conv {
    pub fn new(src: (Ip, u16), dst: (Ip, u16), ts: u64) -> Conv {
        Conv { a: src, b: dst, a_to_b: Count::default(), b_to_a: Count::default(), first_ns: ts, last_ns: ts }
    }
    /// Counts a packet from `src`.
    pub fn add(&mut self, src: (Ip, u16), len: u32, ts: u64) {
        if src == self.a {
            self.a_to_b.add(len);
        } else {
            self.b_to_a.add(len);
        }
        self.first_ns = self.first_ns.min(ts);
        self.last_ns = self.last_ns.max(ts);
    }
    pub fn row(&self, ports: bool) -> ConvRow {
        ConvRow {
            a: self.a.0.text(),
            port_a: ports.then_some(self.a.1),
            b: self.b.0.text(),
            port_b: ports.then_some(self.b.1),
            a_to_b: self.a_to_b,
            b_to_a: self.b_to_a,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
        }
    }
}

/// An (address, port) pair in canonical order: a TCP or UDP conversation's key.
pub type PairKey = ((Ip, u16), (Ip, u16));

/// The unordered key of a pair of (address, port).
pub fn pair_key(x: (Ip, u16), y: (Ip, u16)) -> PairKey {
    if x <= y {
        (x, y)
    } else {
        (y, x)
    }
}

/// A table of at most `cap` entries; what does not fit is counted.
#[derive(Debug)]
pub struct Capped<K, V> {
    pub map: FastMap<K, V>,
    pub cap: usize,
    pub untracked: Count,
}

impl<K: Hash + Eq, V> Capped<K, V> {
    pub fn new(cap: usize) -> Self {
        Capped { map: FastMap::default(), cap, untracked: Count::default() }
    }
    /// The entry of `k`, created by `new` when there is room; `None` (and
    /// the packet counted as untracked) when the table is full.
    pub fn get_or(&mut self, k: K, len: u32, new: impl FnOnce() -> V) -> Option<&mut V> {
        let full = self.map.len() >= self.cap;
        match self.map.entry(k) {
            std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
            std::collections::hash_map::Entry::Vacant(_) if full => {
                self.untracked.add(len);
                None
            }
            std::collections::hash_map::Entry::Vacant(e) => Some(e.insert(new())),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct EndpointRow {
    pub address: String,
    pub tx: Count,
    pub rx: Count,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Table<R: Serialize> {
    /// Entries in the table (all of them, though `rows` may list fewer).
    pub count: usize,
    /// Packets that found the table full.
    pub untracked: Count,
    /// All rows when asked for (`--json`), the top ones otherwise; by
    /// packets, then bytes, descending.
    pub rows: Vec<R>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConvReport {
    pub ipv4: Table<ConvRow>,
    pub ipv6: Table<ConvRow>,
    pub udp: Table<ConvRow>,
    /// Endpoints (IPv4 and IPv6): the top talkers.
    pub endpoints: Table<EndpointRow>,
}

pub struct Conversations {
    ip: Capped<(Ip, Ip), Conv>,
    udp: Capped<PairKey, Conv>,
    endpoints: Capped<Ip, (Count, Count)>,
}

/// The rows of a conversation map, by packets then bytes, descending.
pub fn conv_table<K>(c: Capped<K, Conv>, ports: bool, keep: impl Fn(&Conv) -> bool) -> Table<ConvRow> {
    let mut rows: Vec<ConvRow> = c.map.values().filter(|v| keep(v)).map(|v| v.row(ports)).collect();
    rows.sort_by(|x, y| {
        let (a, b) = (x.total(), y.total());
        b.packets.cmp(&a.packets).then(b.bytes.cmp(&a.bytes)).then(x.first_ns.cmp(&y.first_ns))
    });
    Table { count: rows.len(), untracked: c.untracked, rows }
}

impl Conversations {
    pub fn new(cfg: &Config) -> Conversations {
        Conversations {
            ip: Capped::new(cfg.max_flows),
            udp: Capped::new(cfg.max_flows),
            endpoints: Capped::new(cfg.max_flows),
        }
    }

    pub fn feed(&mut self, s: &Seen<'_>) {
        let Some((src, dst)) = ip_pair(s.d, s.f.data) else {
            return;
        };
        let (len, ts) = (s.len, s.f.ts_ns);
        let k = if src <= dst { (src, dst) } else { (dst, src) };
        if let Some(c) = self.ip.get_or(k, len, || Conv::new((src, 0), (dst, 0), ts)) {
            c.add((src, 0), len, ts);
        }
        if let Some(e) = self.endpoints.get_or(src, len, Default::default) {
            e.0.add(len);
        }
        if src != dst {
            if let Some(e) = self.endpoints.get_or(dst, len, Default::default) {
                e.1.add(len);
            }
        } else if let Some(e) = self.endpoints.map.get_mut(&dst) {
            e.1.add(len);
        }
        if let Some((sp, dp)) = udp_ports(s.d, s.f.data) {
            let (x, y) = ((src, sp), (dst, dp));
            if let Some(c) = self.udp.get_or(pair_key(x, y), len, || Conv::new(x, y, ts)) {
                c.add(x, len, ts);
            }
        }
    }

    pub fn finish(self, _top: usize) -> ConvReport {
        let ip = self.ip;
        let (mut v4, mut v6) = (Capped::new(ip.cap), Capped::new(ip.cap));
        for (k, c) in ip.map {
            if matches!(k.0, Ip::V4(_)) {
                v4.map.insert(k, c);
            } else {
                v6.map.insert(k, c);
            }
        }
        v4.untracked = ip.untracked;
        let mut endpoints: Vec<EndpointRow> =
            self.endpoints.map.into_iter().map(|(a, (tx, rx))| EndpointRow { address: a.text(), tx, rx }).collect();
        endpoints.sort_by(|x, y| {
            let (a, b) = (x.tx.packets + x.rx.packets, y.tx.packets + y.rx.packets);
            b.cmp(&a).then((y.tx.bytes + y.rx.bytes).cmp(&(x.tx.bytes + x.rx.bytes)))
        });
        ConvReport {
            ipv4: conv_table(v4, false, |_| true),
            ipv6: conv_table(v6, false, |_| true),
            udp: conv_table(self.udp, true, |_| true),
            endpoints: Table { count: endpoints.len(), untracked: self.endpoints.untracked, rows: endpoints },
        }
    }
}

/// The UDP ports of a frame whose UDP header tshark would read and count
/// (whole header, a length of at least 8, not a fragment; a length beyond
/// the IP payload is counted, as tshark does).
pub fn udp_ports(d: &Dissection, data: &[u8]) -> Option<(u16, u16)> {
    let l = d.layer(LayerKind::Udp)?;
    if l.offset as usize + 8 > data.len() {
        return None;
    }
    if d.first_fragment || d.flow.later_fragment {
        return None;
    }
    let bad = d
        .problems()
        .iter()
        .any(|p| matches!(p.kind, ProblemKind::UdpLength(0..8) | ProblemKind::Truncated(LayerKind::Udp)));
    if bad {
        return None;
    }
    d.flow.ports
}
