//! IPFIX messages (RFC 7011) of flow records, one biflow (RFC 5103) per record: the client to
//! server direction in the standard elements, server to client in the reverse elements
//! (enterprise bit set, PEN 29305). docs/ipfix.md lists the templates and why each element.

use wv_flows::{EndReason, FlowRecord};

/// IPFIX's version number (RFC 7011 section 3.1).
pub const VERSION: u16 = 10;
/// RFC 5103's Private Enterprise Number of the reverse information elements.
pub const PEN_REVERSE: u32 = 29305;
/// Set ids: template set (RFC 7011 section 3.3.2), and the templates' ids (>= 256).
pub const TEMPLATE_SET: u16 = 2;
pub const TEMPLATE_V4: u16 = 256;
pub const TEMPLATE_V6: u16 = 257;
/// Message header and set header sizes.
pub const HEADER_LEN: usize = 16;
const SET_HEADER_LEN: usize = 4;
/// A UDP message's largest size: fits a 1500-byte path MTU with IP and UDP headers and
/// room for tunnels (RFC 7011 section 10.3.3: no IP fragmentation).
pub const UDP_MAX: usize = 1400;
/// A message's largest size on TCP (the header's length field is 16 bits).
pub const TCP_MAX: usize = 65535;

/// One information element of a template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ie {
    pub id: u16,
    pub len: u16,
    /// A reverse element (RFC 5103): enterprise bit and PEN 29305.
    pub reverse: bool,
    pub name: &'static str,
}

const fn ie(id: u16, len: u16, name: &'static str) -> Ie {
    Ie { id, len, reverse: false, name }
}

const fn rev(id: u16, len: u16, name: &'static str) -> Ie {
    Ie { id, len, reverse: true, name }
}

/// The elements after the addresses, the same in both templates but for the ICMP element
/// (`icmp`: 32 icmpTypeCodeIPv4 or 139 icmpTypeCodeIPv6).
const fn tail(icmp: Ie) -> [Ie; 15] {
    [
        ie(7, 2, "sourceTransportPort"),
        ie(11, 2, "destinationTransportPort"),
        ie(4, 1, "protocolIdentifier"),
        icmp,
        ie(58, 2, "vlanId"),
        // Reverse before forward: nfdump 1.7 stores a reverse tcpControlBits in the forward
        // one's place (it has no reverse flags), so the forward flags written after it win.
        rev(6, 2, "reverseTcpControlBits"),
        ie(6, 2, "tcpControlBits"),
        ie(2, 8, "packetDeltaCount"),
        ie(1, 8, "octetDeltaCount"),
        ie(352, 8, "layer2OctetDeltaCount"),
        rev(2, 8, "reversePacketDeltaCount"),
        rev(1, 8, "reverseOctetDeltaCount"),
        rev(352, 8, "reverseLayer2OctetDeltaCount"),
        ie(136, 1, "flowEndReason"),
        ie(239, 1, "biflowDirection"),
    ]
}

const fn template(src: Ie, dst: Ie, icmp: Ie) -> [Ie; 19] {
    let t = tail(icmp);
    // Milliseconds, not nanoseconds: nfdump 1.7.1 reads 152/153 and skips 156/157.
    let mut out = [ie(152, 8, "flowStartMilliseconds"); 19];
    out[1] = ie(153, 8, "flowEndMilliseconds");
    out[2] = src;
    out[3] = dst;
    let mut i = 0;
    while i < t.len() {
        out[4 + i] = t[i];
        i += 1;
    }
    out
}

/// The IPv4 template's elements, in the order of a data record's fields.
pub const V4: [Ie; 19] =
    template(ie(8, 4, "sourceIPv4Address"), ie(12, 4, "destinationIPv4Address"), ie(32, 2, "icmpTypeCodeIPv4"));
/// The IPv6 template's elements.
pub const V6: [Ie; 19] =
    template(ie(27, 16, "sourceIPv6Address"), ie(28, 16, "destinationIPv6Address"), ie(139, 2, "icmpTypeCodeIPv6"));

/// The bytes of one data record of each template.
pub const fn record_len(t: &[Ie]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < t.len() {
        n += t[i].len as usize;
        i += 1;
    }
    n
}

/// flowEndReason's values (RFC 7011 / IANA): 1 idle, 2 active, 3 end of flow, 4 forced end,
/// 5 lack of resources.
pub fn end_reason(e: EndReason) -> u8 {
    match e {
        EndReason::Idle => 1,
        EndReason::Active => 2,
        EndReason::Fin | EndReason::Rst => 3,
        EndReason::Stop => 4,
        EndReason::Evicted => 5,
    }
}

/// The template set announcing both templates.
pub fn template_set() -> Vec<u8> {
    let mut b = Vec::with_capacity(256);
    b.extend_from_slice(&TEMPLATE_SET.to_be_bytes());
    b.extend_from_slice(&[0, 0]);
    for (id, t) in [(TEMPLATE_V4, &V4[..]), (TEMPLATE_V6, &V6[..])] {
        b.extend_from_slice(&id.to_be_bytes());
        b.extend_from_slice(&(t.len() as u16).to_be_bytes());
        for e in t {
            let id = if e.reverse { e.id | 0x8000 } else { e.id };
            b.extend_from_slice(&id.to_be_bytes());
            b.extend_from_slice(&e.len.to_be_bytes());
            if e.reverse {
                b.extend_from_slice(&PEN_REVERSE.to_be_bytes());
            }
        }
    }
    let len = b.len() as u16;
    b[2..4].copy_from_slice(&len.to_be_bytes());
    b
}

/// Appends `r`'s data record (of template [`template_of`]`(r)`).
fn put_record(b: &mut Vec<u8>, r: &FlowRecord) {
    let v4 = r.client.as_v4().zip(r.server.as_v4());
    b.extend_from_slice(&(r.first_ns / 1_000_000).to_be_bytes());
    b.extend_from_slice(&(r.last_ns / 1_000_000).to_be_bytes());
    match v4 {
        Some((c, s)) => {
            b.extend_from_slice(&c);
            b.extend_from_slice(&s);
        }
        None => {
            b.extend_from_slice(&r.client.0);
            b.extend_from_slice(&r.server.0);
        }
    }
    b.extend_from_slice(&r.client_port.to_be_bytes());
    b.extend_from_slice(&r.server_port.to_be_bytes());
    b.push(r.protocol);
    let icmp = matches!(r.protocol, 1 | 58).then(|| u16::from(r.icmp_type) << 8 | u16::from(r.icmp_code));
    b.extend_from_slice(&icmp.unwrap_or(0).to_be_bytes());
    b.extend_from_slice(&r.vlans.first().copied().unwrap_or(0).to_be_bytes());
    b.extend_from_slice(&r.to_client.tcp_flags.to_be_bytes());
    b.extend_from_slice(&r.to_server.tcp_flags.to_be_bytes());
    for d in [&r.to_server, &r.to_client] {
        b.extend_from_slice(&d.packets.to_be_bytes());
        b.extend_from_slice(&d.ip_bytes.to_be_bytes());
        b.extend_from_slice(&d.frame_bytes.to_be_bytes());
    }
    b.push(end_reason(r.end));
    // biflowDirection 1, initiator: the source is the side that sent the first packet seen.
    b.push(1);
}

/// The template `r`'s data record uses: IPv4 when both addresses are (mapped) IPv4.
pub fn template_of(r: &FlowRecord) -> u16 {
    if r.client.as_v4().is_some() && r.server.as_v4().is_some() {
        TEMPLATE_V4
    } else {
        TEMPLATE_V6
    }
}

fn len_of(template: u16) -> usize {
    if template == TEMPLATE_V4 {
        record_len(&V4)
    } else {
        record_len(&V6)
    }
}

/// Makes the messages of one Transport Session and one Observation Domain: the sequence
/// number counts the data records sent before each message (RFC 7011 section 3.1).
#[derive(Debug, Clone)]
pub struct Encoder {
    domain: u32,
    max_len: usize,
    sequence: u32,
}

impl Encoder {
    /// Messages of at most `max_len` bytes ([`UDP_MAX`], [`TCP_MAX`]), for observation
    /// domain `domain`.
    pub fn new(domain: u32, max_len: usize) -> Encoder {
        Encoder { domain, max_len: max_len.clamp(HEADER_LEN + 256, TCP_MAX), sequence: 0 }
    }

    /// The data records sent so far (mod 2^32).
    pub fn sequence(&self) -> u32 {
        self.sequence
    }

    /// A message of the templates (when `templates`) and as many of `records` as fit, from
    /// the first; returns it and how many records it holds. `export_secs`: the export time,
    /// seconds since the epoch.
    pub fn message(&mut self, export_secs: u32, templates: bool, records: &[FlowRecord]) -> (Vec<u8>, usize) {
        let mut b = Vec::with_capacity(self.max_len);
        b.extend_from_slice(&VERSION.to_be_bytes());
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&export_secs.to_be_bytes());
        b.extend_from_slice(&self.sequence.to_be_bytes());
        b.extend_from_slice(&self.domain.to_be_bytes());
        if templates {
            b.extend_from_slice(&template_set());
        }
        let mut n = 0;
        // The open data set: its template and where its header starts.
        let mut set: Option<(u16, usize)> = None;
        for r in records {
            let t = template_of(r);
            let opens = set.is_none_or(|(open, _)| open != t);
            let need = len_of(t) + if opens { SET_HEADER_LEN } else { 0 };
            if b.len() + need > self.max_len {
                break;
            }
            if opens {
                close_set(&mut b, set);
                set = Some((t, b.len()));
                b.extend_from_slice(&t.to_be_bytes());
                b.extend_from_slice(&[0, 0]);
            }
            put_record(&mut b, r);
            n += 1;
        }
        close_set(&mut b, set);
        let len = b.len() as u16;
        b[2..4].copy_from_slice(&len.to_be_bytes());
        self.sequence = self.sequence.wrapping_add(n as u32);
        (b, n)
    }
}

/// Writes the length of the data set that starts at `set`'s offset.
fn close_set(b: &mut [u8], set: Option<(u16, usize)>) {
    if let Some((_, at)) = set {
        let len = (b.len() - at) as u16;
        b[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netflow_parser::variable_versions::field_value::{DataNumber, DurationValue, FieldValue};
    use netflow_parser::variable_versions::ipfix::lookup::IPFixField;
    use netflow_parser::variable_versions::ipfix::FlowSetBody;
    use netflow_parser::{NetflowPacket, NetflowParser};
    use std::collections::BTreeMap;
    use wv_flows::{Direction, IpAddr16};

    fn v4_record(i: u8) -> FlowRecord {
        FlowRecord {
            vlans: vec![100 + u16::from(i)],
            client: IpAddr16::v4([10, 0, 0, i]),
            server: IpAddr16::v4([10, 0, 1, 2]),
            protocol: 6,
            client_port: 40000 + u16::from(i),
            server_port: 443,
            first_ns: 1_764_650_000_123_456_789 + u64::from(i),
            last_ns: 1_764_650_003_987_654_321,
            to_server: Direction { packets: 10, frame_bytes: 1_000 + u64::from(i), ip_bytes: 860, tcp_flags: 0x1b },
            to_client: Direction { packets: 8, frame_bytes: 9_000, ip_bytes: 8_888, tcp_flags: 0x11a },
            end: EndReason::Fin,
            ..FlowRecord::default()
        }
    }

    fn v6_icmp() -> FlowRecord {
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = 1;
        let mut b = a;
        b[15] = 2;
        FlowRecord {
            client: IpAddr16(a),
            server: IpAddr16(b),
            protocol: 58,
            icmp_type: 128,
            first_ns: 5_000_000,
            last_ns: 9_999_999,
            to_server: Direction { packets: 3, frame_bytes: 354, ip_bytes: 312, tcp_flags: 0 },
            to_client: Direction { packets: 3, frame_bytes: 354, ip_bytes: 312, tcp_flags: 0 },
            end: EndReason::Idle,
            ..FlowRecord::default()
        }
    }

    /// A field's value as a number (addresses as their bytes' number).
    fn num(v: &FieldValue) -> u128 {
        match v {
            FieldValue::DataNumber(d) => match *d {
                DataNumber::U8(x) => x.into(),
                DataNumber::U16(x) => x.into(),
                DataNumber::U24(x) | DataNumber::U32(x) => x.into(),
                DataNumber::U64(x) => x.into(),
                ref o => panic!("unexpected number {o:?}"),
            },
            FieldValue::Duration(DurationValue::Millis { value, .. }) => (*value).into(),
            FieldValue::Ip4Addr(a) => u32::from(*a).into(),
            FieldValue::Ip6Addr(a) => u128::from(*a),
            FieldValue::ProtocolType(p) => u8::from(*p).into(),
            FieldValue::TcpControlBits(b, _) => u16::from(*b).into(),
            FieldValue::FlowEndReason(r) => u8::from(*r).into(),
            o => panic!("unexpected value {o:?}"),
        }
    }

    /// A data record as (reverse, element id) -> value.
    type Fields = BTreeMap<(bool, u16), u128>;

    /// Every data record of `msgs`, with the headers' (sequence, domain, export time).
    fn parse(msgs: &[Vec<u8>]) -> (Vec<Fields>, Vec<(u32, u32, u32)>) {
        let mut p = NetflowParser::default();
        let (mut recs, mut headers) = (Vec::new(), Vec::new());
        for m in msgs {
            let r = p.parse_bytes(m);
            assert!(r.error.is_none(), "{:?}", r.error);
            for pkt in r.packets {
                let NetflowPacket::IPFix(x) = pkt else { panic!("not IPFIX") };
                assert_eq!(x.header.length as usize, m.len());
                headers.push((x.header.sequence_number, x.header.observation_domain_id, x.header.export_time));
                for fs in x.flowsets {
                    let t: &[Ie] = if fs.header.header_id == TEMPLATE_V4 { &V4 } else { &V6 };
                    if let FlowSetBody::Data(d) = fs.body {
                        for rec in d.fields {
                            assert_eq!(rec.len(), t.len());
                            recs.push(
                                rec.iter()
                                    .zip(t)
                                    .map(|((f, v), ie)| {
                                        // The parser read the element as the template named it.
                                        let reverse = matches!(f, IPFixField::ReverseInformationElement(_));
                                        assert!(reverse || matches!(f, IPFixField::IANA(_)), "{f:?}");
                                        assert_eq!(reverse, ie.reverse, "{f:?} {ie:?}");
                                        ((ie.reverse, ie.id), num(v))
                                    })
                                    .collect(),
                            );
                        }
                    }
                }
            }
        }
        (recs, headers)
    }

    /// What the parser must read back for `r`.
    fn expect(r: &FlowRecord) -> BTreeMap<(bool, u16), u128> {
        let addr = |a: &IpAddr16| match a.as_v4() {
            Some(v4) => u32::from_be_bytes(v4).into(),
            None => u128::from_be_bytes(a.0),
        };
        let (src, dst) = if r.client.as_v4().is_some() { (8, 12) } else { (27, 28) };
        let icmp = if r.client.as_v4().is_some() { 32 } else { 139 };
        let f = |k: u16, v: u128| ((false, k), v);
        let b = |k: u16, v: u128| ((true, k), v);
        BTreeMap::from([
            f(152, (r.first_ns / 1_000_000).into()),
            f(153, (r.last_ns / 1_000_000).into()),
            f(src, addr(&r.client)),
            f(dst, addr(&r.server)),
            f(7, r.client_port.into()),
            f(11, r.server_port.into()),
            f(4, r.protocol.into()),
            f(icmp, (u16::from(r.icmp_type) << 8 | u16::from(r.icmp_code)).into()),
            f(58, r.vlans.first().copied().unwrap_or(0).into()),
            f(6, r.to_server.tcp_flags.into()),
            b(6, r.to_client.tcp_flags.into()),
            f(2, r.to_server.packets.into()),
            f(1, r.to_server.ip_bytes.into()),
            f(352, r.to_server.frame_bytes.into()),
            b(2, r.to_client.packets.into()),
            b(1, r.to_client.ip_bytes.into()),
            b(352, r.to_client.frame_bytes.into()),
            f(136, end_reason(r.end).into()),
            f(239, 1),
        ])
    }

    #[test]
    fn round_trips_through_netflow_parser() {
        let recs: Vec<FlowRecord> = (1..=40).map(v4_record).chain([v6_icmp(), v4_record(99), v6_icmp()]).collect();
        let mut enc = Encoder::new(7, UDP_MAX);
        let (mut msgs, mut counts, mut at) = (Vec::new(), Vec::new(), 0);
        while at < recs.len() {
            let (m, n) = enc.message(1_764_650_100, msgs.is_empty(), &recs[at..]);
            assert!(m.len() <= UDP_MAX, "{} bytes", m.len());
            assert!(n > 0);
            at += n;
            msgs.push(m);
            counts.push(n as u32);
        }
        assert!(msgs.len() >= 3, "40 records need several 1400-byte messages");
        let (got, headers) = parse(&msgs);
        assert_eq!(got, recs.iter().map(expect).collect::<Vec<_>>());
        // Sequence numbers count the data records sent before each message.
        let mut seq = 0;
        for (n, (s, domain, time)) in counts.iter().zip(&headers) {
            assert_eq!((*s, *domain, *time), (seq, 7, 1_764_650_100));
            seq += n;
        }
        assert_eq!(enc.sequence(), recs.len() as u32);
    }

    #[test]
    fn templates_alone_and_sizes() {
        let mut enc = Encoder::new(0, UDP_MAX);
        let (m, n) = enc.message(0, true, &[]);
        assert_eq!(n, 0);
        assert_eq!(m.len(), HEADER_LEN + template_set().len());
        // 19 elements of 4 bytes, 4 of them reverse (+4 for the PEN), and the record header.
        assert_eq!(template_set().len(), 4 + 2 * (4 + 19 * 4 + 4 * 4));
        assert_eq!((record_len(&V4), record_len(&V6)), (87, 111));
        let (got, _) = parse(&[m]);
        assert!(got.is_empty());
        // A message that holds nothing but the header still counts nothing.
        assert_eq!(enc.sequence(), 0);
    }

    #[test]
    fn a_message_never_exceeds_its_size() {
        let recs: Vec<FlowRecord> = (0..200).map(|i| if i % 3 == 0 { v6_icmp() } else { v4_record(i as u8) }).collect();
        let mut enc = Encoder::new(1, 600);
        let mut at = 0;
        while at < recs.len() {
            let (m, n) = enc.message(0, at == 0, &recs[at..]);
            assert!(m.len() <= 600 && n > 0);
            assert_eq!(u16::from_be_bytes([m[2], m[3]]) as usize, m.len());
            at += n;
        }
    }
}
