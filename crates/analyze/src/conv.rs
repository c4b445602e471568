//! Conversations and endpoints, as tshark counts them: `-z conv,ip`
//! (IPv4 address pairs), `conv,ipv6`, `conv,udp` (address and port pairs),
//! `-z endpoints,ip`; TCP conversations are kept by [`crate::qos::tcp`],
//! which knows when a port pair starts a new connection. Bytes are frame
//! lengths on the wire. Side A of a conversation is the source of its first
//! packet (as in tshark's tables).
//!
//! Nothing here is looked up per packet: the tables are derived at the end
//! from the flow table ([`crate::flows`]), whose memory bound they share;
//! packets of flows that found it full are counted as untracked (the report
//! says how many), so the totals still add up and nothing tracked is ever
//! evicted.

use crate::flows::{FlowTable, Transport};
use crate::hash::FastMap;
use crate::{addr_text, Count};
use serde::{Deserialize, Serialize};
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

/// The addresses of a frame whose IP header (with IPv6's extension
/// headers) was read whole (what tshark's IP tap sees); `None` otherwise.
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
            // tshark's IPv6 tap runs after the extension headers: a chain
            // the snapshot length cuts is no IPv6 conversation there.
            ProblemKind::Truncated(LayerKind::Ipv4 | LayerKind::Ipv6 | LayerKind::Ipv6Ext(_))
                | ProblemKind::Ipv4HeaderLength(_)
                | ProblemKind::Ipv4TotalLengthShort
                | ProblemKind::IpVersion(_)
        )
    });
    // The capture stopped inside the extension-header chain (the last layer
    // read is an extension header, and the frame is cut).
    let chain_cut = d.cut && matches!(d.layers().last().map(|l| l.kind), Some(LayerKind::Ipv6Ext(_)));
    if bad || chain_cut {
        return None;
    }
    Some((Ip::of(&d.flow.src)?, Ip::of(&d.flow.dst)?))
}

/// One conversation: side A is the first packet's source.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConvRow {
    pub a: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port_a: Option<u16>,
    pub b: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
    pub fn total(&self) -> Count {
        Count { packets: self.a_to_b.packets + self.b_to_a.packets, bytes: self.a_to_b.bytes + self.b_to_a.bytes }
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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndpointRow {
    pub address: String,
    pub tx: Count,
    pub rx: Count,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Table<R: Serialize> {
    /// Entries in the table (all of them, though `rows` may list fewer).
    pub count: usize,
    /// Packets that found the table full.
    pub untracked: Count,
    /// All rows when asked for (`--json`), the top ones otherwise; by
    /// packets, then bytes, descending.
    pub rows: Vec<R>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConvReport {
    pub ipv4: Table<ConvRow>,
    pub ipv6: Table<ConvRow>,
    pub udp: Table<ConvRow>,
    /// Endpoints (IPv4 and IPv6): the top talkers.
    pub endpoints: Table<EndpointRow>,
}

/// The rows of conversations, by packets then bytes, descending (then by
/// first packet).
pub fn conv_table(mut convs: Vec<Conv>, ports: bool, untracked: Count) -> Table<ConvRow> {
    convs.sort_unstable_by(|x, y| {
        let (a, b) = (x.total(), y.total());
        b.packets.cmp(&a.packets).then(b.bytes.cmp(&a.bytes)).then(x.first_ns.cmp(&y.first_ns)).then(x.a.cmp(&y.a))
    });
    let rows: Vec<ConvRow> = convs.iter().map(|c| c.row(ports)).collect();
    Table { count: rows.len(), untracked, rows }
}

/// The conversation tables and endpoints, derived from the flow table
/// (see [`crate::flows`]): the UDP conversations are the UDP flows; an IP
/// conversation sums the flows of its address pair, side A the source of
/// the pair's first frame; an endpoint sums the IP conversations it is in,
/// as tshark's endpoints tap does (a frame from an address to itself counts
/// as sent and received).
pub fn report(flows: FlowTable) -> ConvReport {
    let untracked = flows.untracked();
    let untracked_udp = flows.untracked_udp;
    let flows = flows.into_flows();
    let mut udp = Vec::new();
    // (pair) -> (the pair's first frame number, its conversation).
    let mut ip: FastMap<(Ip, Ip), (u64, Conv)> = FastMap::default();
    ip.reserve(flows.len());
    for f in flows {
        let c = &f.conv;
        let (x, y) = (c.a.0, c.b.0);
        let pair = if x <= y { (x, y) } else { (y, x) };
        let e = ip.entry(pair).or_insert_with(|| (f.first_no, Conv::new((x, 0), (y, 0), c.first_ns)));
        if f.first_no < e.0 {
            // This flow's first frame is the pair's first: its source is side A.
            e.0 = f.first_no;
            if e.1.a.0 != x {
                std::mem::swap(&mut e.1.a, &mut e.1.b);
                std::mem::swap(&mut e.1.a_to_b, &mut e.1.b_to_a);
            }
        }
        let ic = &mut e.1;
        if x == y {
            ic.a_to_b.packets += c.a_to_b.packets + c.b_to_a.packets;
            ic.a_to_b.bytes += c.a_to_b.bytes + c.b_to_a.bytes;
        } else {
            let (to_b, to_a) = if ic.a.0 == x { (c.a_to_b, c.b_to_a) } else { (c.b_to_a, c.a_to_b) };
            ic.a_to_b.packets += to_b.packets;
            ic.a_to_b.bytes += to_b.bytes;
            ic.b_to_a.packets += to_a.packets;
            ic.b_to_a.bytes += to_a.bytes;
        }
        ic.first_ns = ic.first_ns.min(c.first_ns);
        ic.last_ns = ic.last_ns.max(c.last_ns);
        if f.transport == Transport::Udp {
            udp.push(f.conv);
        }
    }
    let mut eps: FastMap<Ip, (Count, Count)> = FastMap::default();
    eps.reserve(2 * ip.len());
    let (mut v4, mut v6) = (Vec::new(), Vec::new());
    for (pair, (_, c)) in ip {
        let a = eps.entry(c.a.0).or_default();
        add(&mut a.0, c.a_to_b);
        add(&mut a.1, c.b_to_a);
        let b = eps.entry(c.b.0).or_default();
        add(&mut b.0, c.b_to_a);
        add(&mut b.1, c.a_to_b);
        if matches!(pair.0, Ip::V4(_)) {
            v4.push(c);
        } else {
            v6.push(c);
        }
    }
    // By packets, then bytes, descending, then by address: the same rows in the same
    // order on every run (the map's order is seeded per run).
    let mut eps: Vec<(Ip, (Count, Count))> = eps.into_iter().collect();
    eps.sort_unstable_by(|(xa, (xt, xr)), (ya, (yt, yr))| {
        let (a, b) = (xt.packets + xr.packets, yt.packets + yr.packets);
        b.cmp(&a).then((yt.bytes + yr.bytes).cmp(&(xt.bytes + xr.bytes))).then(xa.cmp(ya))
    });
    let endpoints: Vec<EndpointRow> =
        eps.into_iter().map(|(a, (tx, rx))| EndpointRow { address: a.text(), tx, rx }).collect();
    ConvReport {
        ipv4: conv_table(v4, false, untracked),
        ipv6: conv_table(v6, false, Count::default()),
        udp: conv_table(udp, true, untracked_udp),
        endpoints: Table { count: endpoints.len(), untracked, rows: endpoints },
    }
}

fn add(c: &mut Count, x: Count) {
    c.packets += x.packets;
    c.bytes += x.bytes;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::tests::frame;

    fn ip(n: u8) -> Ip {
        Ip::V4([10, 0, 0, n])
    }

    #[test]
    fn ip_conversations_and_endpoints_sum_the_flows() {
        let mut t = FlowTable::new(100);
        let (x, y, z) = (ip(1), ip(2), ip(3));
        // Frame 1: ICMP-like from x to y (side A of the pair is x); frames
        // 2-4: a UDP flow started by y; frames 5-6: z to itself.
        let frames = [
            ((x, 0), (y, 0), Transport::Other),
            ((y, 53), (x, 4000), Transport::Udp),
            ((x, 4000), (y, 53), Transport::Udp),
            ((y, 53), (x, 4000), Transport::Udp),
            ((z, 1), (z, 2), Transport::Tcp),
            ((z, 2), (z, 1), Transport::Tcp),
        ];
        for (no, (s, d, tr)) in frames.into_iter().enumerate() {
            let p = frame(&t, s, d, tr, no as u64 + 1);
            t.count(&p);
        }
        let r = report(t);
        assert_eq!(r.ipv4.count, 2);
        let xy = r.ipv4.rows.iter().find(|c| c.a == "10.0.0.1").unwrap();
        assert_eq!((xy.b.as_str(), xy.a_to_b.packets, xy.b_to_a.packets), ("10.0.0.2", 2, 2));
        let zz = r.ipv4.rows.iter().find(|c| c.a == "10.0.0.3").unwrap();
        assert_eq!((zz.a_to_b.packets, zz.b_to_a.packets), (2, 0));
        assert_eq!(r.udp.count, 1);
        let u = &r.udp.rows[0];
        assert_eq!((u.a.as_str(), u.port_a, u.a_to_b.packets, u.b_to_a.packets), ("10.0.0.2", Some(53), 2, 1));
        let ep = |a: &str| {
            let e = r.endpoints.rows.iter().find(|e| e.address == a).unwrap();
            (e.tx.packets, e.rx.packets)
        };
        assert_eq!((ep("10.0.0.1"), ep("10.0.0.2"), ep("10.0.0.3")), ((2, 2), (2, 2), (2, 2)));
    }

    /// The IPv4 and UDP conversation counts of one UDP frame whose length field is `ulen`.
    fn conversations_of_udp_length(ulen: u16) -> (usize, usize) {
        let mut a = crate::Analyzer::new(crate::Config::default()).unwrap();
        let mut f = crate::test_frames::udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 18]);
        f[38..40].copy_from_slice(&ulen.to_be_bytes());
        crate::test_frames::feed(&mut a, 1, &f);
        let r = a.finish().conversations;
        (r.ipv4.count, r.udp.count)
    }

    #[test]
    fn a_udp_length_under_8_is_no_udp_conversation_but_one_beyond_the_payload_is() {
        assert_eq!(conversations_of_udp_length(26), (1, 1));
        assert_eq!(conversations_of_udp_length(7), (1, 0));
        assert_eq!(conversations_of_udp_length(500), (1, 1));
    }

    #[test]
    fn an_ip_header_the_capture_cut_is_no_conversation() {
        let f = crate::test_frames::udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 18]);
        let d = wv_wire::dissect::dissect(1, &f[..30], f.len() as u32);
        assert_eq!(ip_pair(&d, &f[..30]), None);
        let d = wv_wire::dissect::dissect(1, &f, f.len() as u32);
        assert_eq!(ip_pair(&d, &f), Some((ip(1), ip(2))));
        assert_eq!(udp_ports(&d, &f), Some((1, 2)));
    }

    #[test]
    fn conversations_rank_by_packets_then_bytes_then_first_packet() {
        let conv = |n: u8, packets: u64, bytes: u64, first_ns: u64| Conv {
            a: (ip(n), 0),
            b: (ip(100), 0),
            a_to_b: Count { packets, bytes },
            b_to_a: Count::default(),
            first_ns,
            last_ns: first_ns,
        };
        let t = conv_table(
            vec![conv(1, 1, 900, 0), conv(2, 2, 10, 5), conv(3, 2, 10, 3), conv(4, 2, 20, 9)],
            false,
            Count::default(),
        );
        let order: Vec<&str> = t.rows.iter().map(|r| r.a.as_str()).collect();
        assert_eq!(order, ["10.0.0.4", "10.0.0.3", "10.0.0.2", "10.0.0.1"]);
        assert_eq!((t.count, t.rows[0].port_a), (4, None));
    }
}
