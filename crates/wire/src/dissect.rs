//! The L2→L4 dissector for the analysers: walks one captured frame of a
//! given link type through the [`crate::views`] and reports the layers it
//! found (with their offsets), the flow key, and *what is wrong* with the
//! frame, instead of just failing.
//!
//! It never panics, never allocates, and does bounded work: at most
//! [`MAX_TAGS`] VLAN tags, [`MAX_LABELS`] MPLS labels and [`MAX_EXT_HEADERS`]
//! IPv6 extension headers, each reported as a problem when exceeded.
//!
//! It stops at the first transport header (TCP, UDP, ICMP, ICMPv6) or at
//! the first layer it does not decode: a tunnel (GRE, IP-in-IP, VXLAN, ...)
//! is not entered here, the flow is the outer one. [`crate::tunnel::inner`]
//! finds the frame a tunnel carries, and [`dissect_encap`] walks it.
//!
//! Capture cuts are not malformations: given the frame's length on the
//! wire, a header that continues past the captured bytes but not past the
//! wire length only sets [`Dissection::cut`]. Length fields are judged
//! against the wire length.
//!
//! This is stricter than [`crate::packet`], the index's key extraction,
//! which reads what libpcap's filters would read (IHL unchecked, and so on).

use crate::linktype;
use crate::packet::Addr;
use crate::views::{self, arp, ethernet, icmp, ipproto, ipv4, ipv6, mpls, sll, tcp, udp, vlan, EtherType};

/// Most VLAN tags walked. Standard stacks have one (802.1Q) or two
/// (802.1ad S-tag + C-tag); three appear in some provider setups. Eight
/// leaves room for anything deliberate, while a deeper stack is garbage or
/// a VLAN-hopping attempt; it also bounds the work and the key's size.
pub const MAX_TAGS: usize = 8;
/// Most MPLS label stack entries walked. Segment routing (SR-MPLS) pushes
/// the deepest real stacks, up to about 12 labels on current hardware; 16
/// covers them, and a longer stack is reported.
pub const MAX_LABELS: usize = 16;
/// Most IPv6 extension headers walked (RFC 8200 recommends each at most
/// once, Destination Options at most twice: 6 kinds, 7 headers).
pub const MAX_EXT_HEADERS: usize = 8;
/// Room for every layer: link, tags, MACsec, labels, IP, extension headers, L4.
pub const MAX_LAYERS: usize = 1 + MAX_TAGS + 1 + MAX_LABELS + 1 + MAX_EXT_HEADERS + 1;
/// MACsec's EtherType (IEEE 802.1AE).
const MACSEC: u16 = 0x88e5;
/// A SecTAG after its EtherType: TCI/AN, short length, packet number.
const MACSEC_TAG_LEN: usize = 6;
/// The secure channel identifier, present when the TCI's SC bit is set.
const MACSEC_SCI_LEN: usize = 8;
/// TCI bits: version (must be 0), SCI present, encrypted (E), changed text (C).
const MACSEC_V: u8 = 0x80;
const MACSEC_SC: u8 = 0x20;
const MACSEC_E: u8 = 0x08;
const MACSEC_C: u8 = 0x04;

/// Problems kept per frame; more are only counted ([`Dissection::problems_lost`]).
pub const MAX_PROBLEMS: usize = 8;

/// A layer of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LayerKind {
    Ethernet,
    /// 802.3 length frame (type field below 0x0600): an LLC header follows, not walked.
    Llc,
    LinuxSll,
    /// One 802.1Q/802.1ad tag; its offset is that of its TPID.
    Vlan,
    /// One MPLS label stack entry.
    Mpls,
    /// An 802.1AE MACsec SecTAG (EtherType 0x88E5); its offset is that of its EtherType. Its
    /// payload is walked when it is integrity-only (not encrypted), as tshark does.
    Macsec,
    Arp,
    Ipv4,
    Ipv6,
    /// An IPv6 extension header of this Next Header type.
    Ipv6Ext(u8),
    Tcp,
    Udp,
    Icmp,
    Icmpv6,
}

/// A layer found, and where it starts in the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layer {
    pub kind: LayerKind,
    pub offset: u32,
}

/// What is wrong with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProblemKind {
    /// The layer's header ends past the end of the frame (or past the end
    /// its enclosing layer's length allows), and the capture did not cut it.
    Truncated(LayerKind),
    /// More than [`MAX_TAGS`] VLAN tags.
    TagStackTooDeep,
    /// An S-tag TPID (0x88a8 or 0x9100) in the type field of a C-tag
    /// (0x8100), where 802.1Q expects an EtherType: the stack is in the
    /// wrong order. The tag is still walked.
    TpidAsEthertype,
    /// The frame ends on a label boundary before the bottom-of-stack entry.
    MplsNoBottom,
    /// More than [`MAX_LABELS`] labels without the bottom of stack.
    MplsStackTooDeep,
    /// A reserved label where it cannot stand ([`mpls::misplaced_reserved`]).
    MplsReservedLabel(u32),
    /// EtherType IPv4 or IPv6 (or raw IP) with another version nibble.
    IpVersion(u8),
    /// IPv4 IHL below 5 (the value in bytes).
    Ipv4HeaderLength(u8),
    /// IPv4 total length below the header length.
    Ipv4TotalLengthShort,
    /// IPv4 total length beyond the frame's end on the wire.
    Ipv4TotalLengthBeyondFrame,
    /// IPv4 header checksum does not add up.
    Ipv4Checksum,
    /// IPv6 payload length (or Jumbo Payload length) beyond the frame's end on the wire.
    Ipv6PayloadBeyondFrame,
    /// IPv6 payload length 0 before a Hop-by-Hop header without a Jumbo
    /// Payload option of more than 65,535 (RFC 2675 section 3): the
    /// payload's length is unknown, so the walk stops at the IP layer.
    Ipv6JumboMissing,
    /// More than [`MAX_EXT_HEADERS`] extension headers.
    Ipv6ExtChainTooLong,
    /// UDP length below 8 or beyond the IP payload.
    UdpLength(u16),
    /// TCP data offset below 5 words or beyond the segment (in bytes).
    TcpDataOffset(u8),
}

/// A problem and the offset of the header it concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemKind,
    pub offset: u32,
}

/// The flow key of a frame: what the analysers group by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flow {
    vlans: [u16; MAX_TAGS],
    n_vlans: u8,
    labels: [u32; MAX_LABELS],
    n_labels: u8,
    /// The EtherType (or SLL protocol) of the network layer (after tags;
    /// 0x0800/0x86dd under MPLS or raw IP); 0 when there is none.
    pub ethertype: u16,
    /// Source address (IP, or ARP sender protocol address when it is IPv4).
    pub src: Addr,
    pub dst: Addr,
    /// The transport protocol: IPv4 protocol, or the IPv6 Next Header after
    /// the extension headers walked.
    pub protocol: Option<u8>,
    /// A fragment other than the first: no transport header here.
    pub later_fragment: bool,
    /// TCP or UDP ports.
    pub ports: Option<(u16, u16)>,
}

impl Flow {
    /// VLAN ids, outermost first.
    pub fn vlans(&self) -> &[u16] {
        &self.vlans[..usize::from(self.n_vlans)]
    }
    /// MPLS labels, top of stack first.
    pub fn labels(&self) -> &[u32] {
        &self.labels[..usize::from(self.n_labels)]
    }
}

/// The result of [`dissect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dissection {
    /// False when the link type is not one the dissector walks.
    pub linktype_supported: bool,
    layers: [Layer; MAX_LAYERS],
    n_layers: u8,
    pub flow: Flow,
    problems: [Problem; MAX_PROBLEMS],
    n_problems: u8,
    /// Problems beyond [`MAX_PROBLEMS`], counted only.
    pub problems_lost: u8,
    /// The capture cut the frame inside a header the dissector needed.
    pub cut: bool,
    /// Where the IP payload that holds the transport header ends (on the
    /// wire, by the IP length fields); 0 when no transport header was reached.
    /// A TCP segment's length is `l4_end - tcp offset - header length`.
    pub l4_end: u32,
    /// The transport header is in the first fragment of several: its
    /// lengths describe the whole datagram, not this frame.
    pub first_fragment: bool,
    /// Where the IP payload starts (the transport header, whatever the
    /// protocol); 0 when no IP payload was reached (a later fragment, a
    /// malformed or cut IP header).
    pub payload_at: u32,
    /// Where the network layer named by `flow.ethertype` starts; 0 when there
    /// is none, and when it starts the data (raw IP, a tunnel's payload).
    pub network_at: u32,
    /// The frame's length on the wire (at least its captured length).
    pub wire_len: u32,
}

impl Dissection {
    pub fn layers(&self) -> &[Layer] {
        &self.layers[..usize::from(self.n_layers)]
    }
    pub fn problems(&self) -> &[Problem] {
        &self.problems[..usize::from(self.n_problems)]
    }
    /// True when something is wrong with the frame.
    pub fn is_malformed(&self) -> bool {
        self.n_problems > 0
    }
    /// The first layer of `kind`.
    pub fn layer(&self, kind: LayerKind) -> Option<Layer> {
        self.layers().iter().copied().find(|l| l.kind == kind)
    }
}

const EMPTY_LAYER: Layer = Layer { kind: LayerKind::Ethernet, offset: 0 };
const EMPTY_PROBLEM: Problem = Problem { kind: ProblemKind::TagStackTooDeep, offset: 0 };

/// Dissects `data`, the captured bytes of a frame of `linktype` whose
/// length on the wire was `wire_len` (pass `data.len()` when unknown).
pub fn dissect(linktype: u32, data: &[u8], wire_len: u32) -> Dissection {
    let encap = match linktype & 0x03ff_ffff {
        linktype::ETHERNET => Encap::Ethernet,
        linktype::LINUX_SLL => Encap::LinuxSll,
        linktype::RAW => Encap::Ip,
        linktype::IPV4 => Encap::Ipv4,
        linktype::IPV6 => Encap::Ipv6,
        _ => {
            let mut w = Walk::new(data, wire_len);
            w.d.linktype_supported = false;
            return w.d;
        }
    };
    dissect_encap(encap, data, wire_len)
}

/// What a frame (or a tunnel's payload) starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encap {
    Ethernet,
    LinuxSll,
    /// IPv4 or IPv6, by the version nibble.
    Ip,
    Ipv4,
    Ipv6,
    /// An MPLS label stack (IP by the version nibble after it).
    Mpls,
    /// What an EtherType that is not in the data names (a tunnel header's
    /// protocol field: Geneve's): VLAN tags and the network layer, as after
    /// an Ethernet header.
    EtherType(u16),
}

/// Dissects `data` (of `wire_len` bytes on the wire) that starts with `encap`:
/// [`dissect`] for a link type, or a tunnel's payload ([`crate::tunnel::inner`]).
pub fn dissect_encap(encap: Encap, data: &[u8], wire_len: u32) -> Dissection {
    let mut w = Walk::new(data, wire_len);
    match encap {
        Encap::Ethernet => w.ethernet(),
        Encap::LinuxSll => w.sll(),
        Encap::Ip => w.raw_ip(0, true, true),
        Encap::Ipv4 => w.raw_ip(0, true, false),
        Encap::Ipv6 => w.raw_ip(0, false, true),
        Encap::Mpls => w.network(EtherType::MplsUnicast.into(), 0),
        Encap::EtherType(et) => w.after_type(et, 0),
    }
    w.d
}

struct Walk<'a> {
    data: &'a [u8],
    d: Dissection,
}

fn off32(x: usize) -> u32 {
    u32::try_from(x).unwrap_or(u32::MAX)
}

impl<'a> Walk<'a> {
    /// A walk of `data`, `wire_len` bytes on the wire, that has found nothing yet.
    fn new(data: &'a [u8], wire_len: u32) -> Walk<'a> {
        Walk {
            data,
            d: Dissection {
                linktype_supported: true,
                layers: [EMPTY_LAYER; MAX_LAYERS],
                n_layers: 0,
                flow: Flow::default(),
                problems: [EMPTY_PROBLEM; MAX_PROBLEMS],
                n_problems: 0,
                problems_lost: 0,
                cut: false,
                l4_end: 0,
                first_fragment: false,
                payload_at: 0,
                network_at: 0,
                wire_len: wire_len.max(off32(data.len())),
            },
        }
    }

    /// Length of the frame on the wire (at least the captured length).
    fn wire(&self) -> usize {
        self.d.wire_len as usize
    }

    fn layer(&mut self, kind: LayerKind, at: usize) {
        let n = usize::from(self.d.n_layers);
        if n < MAX_LAYERS {
            self.d.layers[n] = Layer { kind, offset: off32(at) };
            self.d.n_layers += 1;
        }
    }

    fn problem(&mut self, kind: ProblemKind, at: usize) {
        let n = usize::from(self.d.n_problems);
        if n < MAX_PROBLEMS {
            self.d.problems[n] = Problem { kind, offset: off32(at) };
            self.d.n_problems += 1;
        } else {
            self.d.problems_lost = self.d.problems_lost.saturating_add(1);
        }
    }

    /// The header of `kind` at `at` needs bytes up to `need`, which its
    /// enclosing layer allows up to `bound` (on the wire): a cut when the
    /// capture stopped first, otherwise a truncated header.
    fn missing(&mut self, kind: LayerKind, at: usize, need: usize, bound: usize) {
        if need <= bound.min(self.wire()) && self.data.len() < need {
            self.d.cut = true;
        } else {
            self.problem(ProblemKind::Truncated(kind), at);
        }
    }

    /// The captured bytes from `at` to `end` (clamped; empty when `at` is past them).
    fn slice(&self, at: usize, end: usize) -> &'a [u8] {
        let data: &'a [u8] = self.data;
        data.get(at..end.min(data.len())).unwrap_or(&[])
    }

    fn ethernet(&mut self) {
        self.layer(LayerKind::Ethernet, 0);
        let Ok(f) = ethernet::Frame::new_checked(self.data) else {
            return self.missing(LayerKind::Ethernet, 0, ethernet::HEADER_LEN, usize::MAX);
        };
        let et = f.ethertype_raw();
        if et < ethernet::MIN_ETHERTYPE {
            return self.layer(LayerKind::Llc, ethernet::HEADER_LEN);
        }
        self.after_type(et, ethernet::field::ETHERTYPE.end);
    }

    fn sll(&mut self) {
        self.layer(LayerKind::LinuxSll, 0);
        let Ok(h) = sll::Header::new_checked(self.data) else {
            return self.missing(LayerKind::LinuxSll, 0, sll::HEADER_LEN, usize::MAX);
        };
        let et = h.protocol_raw();
        self.after_type(et, sll::field::PROTOCOL.end);
    }

    /// Walks the tags announced by the type field `et`, then the network
    /// layer; what the field announces starts at `at` (the field itself is
    /// just before it, or not in the data: a tunnel header named it).
    fn after_type(&mut self, mut et: u16, mut at: usize) {
        let mut prev_c_tag = false;
        while vlan::is_tpid(et) {
            // A tag's offset is its TPID's (at the start of the data when a tunnel named it).
            let type_at = at.saturating_sub(2);
            if usize::from(self.d.flow.n_vlans) == MAX_TAGS {
                return self.problem(ProblemKind::TagStackTooDeep, type_at);
            }
            if prev_c_tag && vlan::is_service_tpid(et) {
                self.problem(ProblemKind::TpidAsEthertype, type_at);
            }
            prev_c_tag = et == u16::from(EtherType::Vlan);
            self.layer(LayerKind::Vlan, type_at);
            let Ok(t) = vlan::Tag::new_checked(self.slice(at, usize::MAX)) else {
                return self.missing(LayerKind::Vlan, type_at, at + vlan::HEADER_LEN, usize::MAX);
            };
            let n = usize::from(self.d.flow.n_vlans);
            self.d.flow.vlans[n] = t.vid();
            self.d.flow.n_vlans += 1;
            et = t.ethertype_raw();
            at += vlan::field::ETHERTYPE.end;
        }
        self.network(et, at);
    }

    fn network(&mut self, et: u16, at: usize) {
        // Below 0x0600 the field is an 802.3 length (after a VLAN tag too):
        // LLC follows, as on an untagged frame.
        if et < ethernet::MIN_ETHERTYPE {
            return self.layer(LayerKind::Llc, at);
        }
        self.d.flow.ethertype = et;
        self.d.network_at = off32(at);
        match EtherType::from(et) {
            EtherType::Ipv4 => self.ipv4(at),
            EtherType::Ipv6 => self.ipv6(at),
            EtherType::Arp | EtherType::Rarp => self.arp(at),
            EtherType::MplsUnicast | EtherType::MplsMulticast => self.mpls(at),
            // A SecTAG's walk reads its EtherType: not one a tunnel header named.
            _ if et == MACSEC && at >= 2 => self.macsec(at - 2),
            _ => {}
        }
    }

    /// The MACsec SecTAG whose EtherType is at `type_at`: TCI/AN, short length and packet
    /// number, and the secure channel identifier when the TCI's SC bit says so. An
    /// integrity-only frame (neither E nor C set) carries the rest in the clear: its EtherType
    /// (tags may follow) and payload, then the ICV (a trailer here). An encrypted one is not
    /// walked further.
    fn macsec(&mut self, type_at: usize) {
        // One SecTAG a frame (MACsec is hop by hop): a second is not walked, which also bounds
        // the walk of a crafted frame of nested tags.
        if self.d.layer(LayerKind::Macsec).is_some() {
            return;
        }
        self.layer(LayerKind::Macsec, type_at);
        let tci_at = type_at + 2;
        let Some(&tci) = self.data.get(tci_at) else {
            return self.missing(LayerKind::Macsec, type_at, tci_at + MACSEC_TAG_LEN, usize::MAX);
        };
        let tag = MACSEC_TAG_LEN + if tci & MACSEC_SC != 0 { MACSEC_SCI_LEN } else { 0 };
        if self.data.len() < tci_at + tag {
            return self.missing(LayerKind::Macsec, type_at, tci_at + tag, usize::MAX);
        }
        // Encrypted or changed, or a version tshark does not read as MACsec: not walked.
        if tci & (MACSEC_V | MACSEC_E | MACSEC_C) != 0 {
            return;
        }
        let inner_at = tci_at + tag;
        let Some(et) = views::get16(self.data, inner_at) else {
            return self.missing(LayerKind::Macsec, type_at, inner_at + 2, usize::MAX);
        };
        self.after_type(et, inner_at + 2);
    }

    /// Raw IP at `at`, by its version nibble (`v4`/`v6`: which are allowed).
    fn raw_ip(&mut self, at: usize, v4: bool, v6: bool) {
        let Some(&b) = self.data.get(at) else {
            return self.missing(if v4 { LayerKind::Ipv4 } else { LayerKind::Ipv6 }, at, at + 1, usize::MAX);
        };
        match b >> 4 {
            4 if v4 => {
                self.d.flow.ethertype = EtherType::Ipv4.into();
                self.d.network_at = off32(at);
                self.ipv4(at)
            }
            6 if v6 => {
                self.d.flow.ethertype = EtherType::Ipv6.into();
                self.d.network_at = off32(at);
                self.ipv6(at)
            }
            v => self.problem(ProblemKind::IpVersion(v), at),
        }
    }

    fn arp(&mut self, at: usize) {
        self.layer(LayerKind::Arp, at);
        match arp::Packet::new_checked(self.slice(at, usize::MAX)) {
            Ok(p) => {
                if let (Ok(s), Ok(t)) = (<[u8; 4]>::try_from(p.spa()), <[u8; 4]>::try_from(p.tpa())) {
                    self.d.flow.src = Addr::V4(s);
                    self.d.flow.dst = Addr::V4(t);
                }
            }
            Err(_) => {
                let b = self.slice(at, usize::MAX);
                let need = match (b.get(arp::field::HLEN), b.get(arp::field::PLEN)) {
                    (Some(&h), Some(&p)) => arp::field::SHA + 2 * (usize::from(h) + usize::from(p)),
                    _ => arp::field::SHA,
                };
                self.missing(LayerKind::Arp, at, at + need, usize::MAX);
            }
        }
    }

    fn mpls(&mut self, mut at: usize) {
        loop {
            if usize::from(self.d.flow.n_labels) == MAX_LABELS {
                return self.problem(ProblemKind::MplsStackTooDeep, at);
            }
            let Ok(e) = mpls::Entry::new_checked(self.slice(at, usize::MAX)) else {
                if at == self.data.len() && at == self.wire() {
                    return self.problem(ProblemKind::MplsNoBottom, at);
                }
                return self.missing(LayerKind::Mpls, at, at + mpls::ENTRY_LEN, usize::MAX);
            };
            self.layer(LayerKind::Mpls, at);
            let (label, bottom) = (e.label(), e.bottom_of_stack());
            let n = usize::from(self.d.flow.n_labels);
            self.d.flow.labels[n] = label;
            self.d.flow.n_labels += 1;
            if mpls::misplaced_reserved(label, bottom) {
                self.problem(ProblemKind::MplsReservedLabel(label), at);
            }
            at += mpls::ENTRY_LEN;
            if bottom {
                break;
            }
        }
        // The payload's type is not in the stack: IPv4 or IPv6 by the
        // version nibble; anything else (a pseudowire control word,
        // Ethernet) is not walked.
        match self.data.get(at).map(|b| b >> 4) {
            Some(4) => self.network(EtherType::Ipv4.into(), at),
            Some(6) => self.network(EtherType::Ipv6.into(), at),
            _ => {}
        }
    }

    fn ipv4(&mut self, at: usize) {
        self.layer(LayerKind::Ipv4, at);
        let b = self.slice(at, usize::MAX);
        if let Some(&v) = b.first() {
            if v >> 4 != 4 {
                return self.problem(ProblemKind::IpVersion(v >> 4), at);
            }
        }
        let p = match ipv4::Packet::new_checked(b) {
            Ok(p) => p,
            Err(views::Error::Malformed) => {
                return self.problem(ProblemKind::Ipv4HeaderLength(4 * (b[0] & 0x0f)), at);
            }
            Err(views::Error::Truncated) => {
                // A partial flow key: the addresses wholly inside the frame.
                if let Some(a) = views::get_arr(b, ipv4::field::SRC_ADDR.start) {
                    self.d.flow.src = Addr::V4(a);
                }
                if let Some(a) = views::get_arr(b, ipv4::field::DST_ADDR.start) {
                    self.d.flow.dst = Addr::V4(a);
                }
                let hl = b.first().map_or(ipv4::MIN_HEADER_LEN, |v| 4 * usize::from(v & 0x0f));
                return self.missing(LayerKind::Ipv4, at, at + hl.max(ipv4::MIN_HEADER_LEN), usize::MAX);
            }
        };
        let hl = p.header_len();
        let on_wire = self.wire() - at;
        // A total length of 0 is what TSO hands to the capture before it
        // segments: taken as "the rest of the frame" (as tshark does).
        let total = match usize::from(p.total_len()) {
            0 => on_wire,
            t if t < hl => return self.problem(ProblemKind::Ipv4TotalLengthShort, at),
            t if t > on_wire => {
                self.problem(ProblemKind::Ipv4TotalLengthBeyondFrame, at);
                on_wire
            }
            t => t,
        };
        if !p.verify_checksum() {
            self.problem(ProblemKind::Ipv4Checksum, at);
        }
        let proto = u8::from(p.next_header());
        self.d.flow.src = Addr::V4(p.src_addr());
        self.d.flow.dst = Addr::V4(p.dst_addr());
        self.d.flow.protocol = Some(proto);
        if p.frag_offset() != 0 {
            self.d.flow.later_fragment = true;
            return;
        }
        self.transport(proto, at + hl, at + total, false, p.more_frags());
    }

    fn ipv6(&mut self, at: usize) {
        self.layer(LayerKind::Ipv6, at);
        let b = self.slice(at, usize::MAX);
        if let Some(&v) = b.first() {
            if v >> 4 != 6 {
                return self.problem(ProblemKind::IpVersion(v >> 4), at);
            }
        }
        let Ok(p) = ipv6::Packet::new_checked(b) else {
            // A partial flow key: the addresses wholly inside the frame.
            if let Some(a) = views::get_arr(b, ipv6::field::SRC_ADDR.start) {
                self.d.flow.src = Addr::V6(a);
            }
            return self.missing(LayerKind::Ipv6, at, at + ipv6::HEADER_LEN, usize::MAX);
        };
        self.d.flow.src = Addr::V6(p.src_addr());
        self.d.flow.dst = Addr::V6(p.dst_addr());
        let on_wire = self.wire() - at - ipv6::HEADER_LEN;
        let first = at + ipv6::HEADER_LEN;
        let plen = match (usize::from(p.payload_len()), u8::from(p.next_header())) {
            // A jumbogram (RFC 2675): the length is in the Hop-by-Hop
            // header's Jumbo Payload option, and above 65,535. When that
            // header is not all here, the walk below judges it.
            (0, ipproto::HOPOPTS) => {
                match ipv6::ExtHeader::new_checked(self.slice(first, usize::MAX), ipproto::HOPOPTS) {
                    Ok(h) => match h.jumbo_payload_len().filter(|&j| j > u32::from(u16::MAX)) {
                        Some(j) if j as usize > on_wire => {
                            self.problem(ProblemKind::Ipv6PayloadBeyondFrame, at);
                            on_wire
                        }
                        Some(j) => j as usize,
                        None => return self.problem(ProblemKind::Ipv6JumboMissing, at),
                    },
                    Err(_) => on_wire,
                }
            }
            (0, ipproto::NONXT) => 0,
            // TSO, or Linux's BIG TCP, which since 6.x no longer inserts
            // the Jumbo option: the rest of the frame (tshark's
            // ipv6.tso_support, as IPv4 total length 0 above).
            (0, _) => on_wire,
            (l, _) if l > on_wire => {
                self.problem(ProblemKind::Ipv6PayloadBeyondFrame, at);
                on_wire
            }
            (l, _) => l,
        };
        let end = first + plen;
        let mut nh = u8::from(p.next_header());
        let mut off = first;
        let mut n = 0;
        let mut first_fragment = false;
        while ipv6::is_extension(nh) {
            if n == MAX_EXT_HEADERS {
                return self.problem(ProblemKind::Ipv6ExtChainTooLong, off);
            }
            n += 1;
            self.layer(LayerKind::Ipv6Ext(nh), off);
            let h = match ipv6::ExtHeader::new_checked(self.slice(off, end), nh) {
                Ok(h) => h,
                Err(_) => {
                    let need = ipv6::ext_header_len(nh, self.slice(off, end)).unwrap_or(2);
                    return self.missing(LayerKind::Ipv6Ext(nh), off, off + need, end);
                }
            };
            let (next, len, later) = (u8::from(h.next_header()), h.header_len(), h.frag_offset() != 0);
            first_fragment |= h.more_frags();
            self.d.flow.protocol = Some(next);
            if later {
                self.d.flow.later_fragment = true;
                return;
            }
            nh = next;
            off += len;
        }
        self.d.flow.protocol = Some(nh);
        self.transport(nh, off, end, true, first_fragment);
    }

    /// The transport header at `at`; the IP payload ends at `end` on the
    /// wire. In the first fragment of several (`fragment`) the L4 lengths
    /// describe the whole datagram, so they are not judged against `end`.
    fn transport(&mut self, proto: u8, at: usize, end: usize, v6: bool, fragment: bool) {
        let end_judged = if fragment { usize::MAX } else { end };
        self.d.l4_end = off32(end);
        self.d.payload_at = off32(at);
        self.d.first_fragment = fragment;
        let b = self.slice(at, end);
        let len = end.saturating_sub(at);
        match proto {
            ipproto::TCP => {
                self.layer(LayerKind::Tcp, at);
                match tcp::Packet::new_checked(b) {
                    Ok(t) => {
                        self.d.flow.ports = Some((t.src_port(), t.dst_port()));
                        if !fragment && t.header_len() > len {
                            self.problem(ProblemKind::TcpDataOffset(t.header_len() as u8), at);
                        }
                    }
                    Err(views::Error::Malformed) => {
                        let hl = 4 * (b[tcp::field::FLAGS.start] >> 4);
                        self.ports_from(b);
                        self.problem(ProblemKind::TcpDataOffset(hl), at);
                    }
                    Err(views::Error::Truncated) => {
                        let off = b.get(tcp::field::FLAGS.start).map(|v| 4 * usize::from(v >> 4));
                        let hl = off.unwrap_or(tcp::MIN_HEADER_LEN);
                        let need = at + hl.max(tcp::MIN_HEADER_LEN);
                        if !fragment
                            && need > end
                            && end <= self.data.len()
                            && off.is_some_and(|o| o >= tcp::MIN_HEADER_LEN)
                        {
                            // The whole segment is here and the offset points past it
                            // (when the segment ends before the offset, the header is truncated).
                            self.ports_from(b);
                            return self.problem(ProblemKind::TcpDataOffset(hl as u8), at);
                        }
                        // A partial flow key: the ports when they are here.
                        self.ports_from(b);
                        self.missing(LayerKind::Tcp, at, need, end_judged);
                    }
                }
            }
            ipproto::UDP => {
                self.layer(LayerKind::Udp, at);
                let Ok(u) = udp::Packet::new_checked(b) else {
                    self.ports_from(b);
                    return self.missing(LayerKind::Udp, at, at + udp::HEADER_LEN, end_judged);
                };
                self.d.flow.ports = Some((u.src_port(), u.dst_port()));
                let ulen = u.len();
                if usize::from(ulen) < udp::HEADER_LEN || (!fragment && usize::from(ulen) > len) {
                    // Zero over IPv6 is a jumbogram's UDP length (RFC 2675).
                    if !(v6 && ulen == 0) {
                        self.problem(ProblemKind::UdpLength(ulen), at);
                    }
                }
            }
            ipproto::ICMP | ipproto::ICMPV6 => {
                let (kind, min) = if proto == ipproto::ICMP {
                    (LayerKind::Icmp, icmp::MIN_LEN_V4)
                } else {
                    (LayerKind::Icmpv6, icmp::MIN_LEN_V6)
                };
                self.layer(kind, at);
                if b.len() < min {
                    self.missing(kind, at, at + min, end_judged);
                }
            }
            _ => {}
        }
    }

    /// Ports from the first 4 bytes of a TCP or UDP header the view refused
    /// (both put them there).
    fn ports_from(&mut self, b: &[u8]) {
        if let (Some(s), Some(d)) =
            (views::get16(b, tcp::field::SRC_PORT.start), views::get16(b, tcp::field::DST_PORT.start))
        {
            self.d.flow.ports = Some((s, d));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::views::ethernet::tests::ETH_TCP;
    use crate::views::ipv6::tests::ipv6_ext;

    /// ETH_TCP with its IPv4 checksum filled in.
    fn eth_tcp() -> Vec<u8> {
        let mut f = ETH_TCP.to_vec();
        f[24..26].copy_from_slice(&0x26e9u16.to_be_bytes());
        f
    }

    fn kinds(d: &Dissection) -> Vec<ProblemKind> {
        d.problems().iter().map(|p| p.kind).collect()
    }

    #[test]
    fn ethernet_ipv4_tcp() {
        let f = eth_tcp();
        let d = dissect(1, &f, f.len() as u32);
        let l: Vec<_> = d.layers().iter().map(|l| (l.kind, l.offset)).collect();
        assert_eq!(l, [(LayerKind::Ethernet, 0), (LayerKind::Ipv4, 14), (LayerKind::Tcp, 34)]);
        assert!(!d.is_malformed() && !d.cut);
        assert_eq!(d.flow.src, Addr::V4([192, 168, 1, 10]));
        assert_eq!(d.flow.dst, Addr::V4([93, 184, 216, 34]));
        assert_eq!((d.flow.ethertype, d.flow.protocol, d.flow.ports), (0x0800, Some(6), Some((51000, 80))));
        // The capture's own frame had the checksum offloaded.
        let d = dissect(1, &ETH_TCP, 74);
        assert_eq!(d.problems(), &[Problem { kind: ProblemKind::Ipv4Checksum, offset: 14 }]);
    }

    #[test]
    fn cut_by_capture_is_not_malformed_but_short_frame_is() {
        let f = eth_tcp();
        for n in 0..f.len() {
            let d = dissect(1, &f[..n], 74);
            assert!(!d.is_malformed(), "cut at {n}: {:?}", d.problems());
            assert!(d.cut, "cut at {n}");
            let d = dissect(1, &f[..n], n as u32);
            assert!(d.is_malformed(), "short at {n}");
        }
    }

    #[test]
    fn tag_stacks() {
        let f = eth_tcp();
        let mut q = f[..12].to_vec();
        q.extend_from_slice(&[0x88, 0xa8, 0x00, 0x64, 0x81, 0x00, 0x20, 0xc8]);
        q.extend_from_slice(&f[12..]);
        let d = dissect(1, &q, q.len() as u32);
        assert_eq!(d.flow.vlans(), &[100, 200]);
        assert!(!d.is_malformed());
        assert_eq!(d.layer(LayerKind::Ipv4).unwrap().offset, 22);
        // C-tag outside an S-tag: the S-tag TPID stands where an EtherType belongs.
        q[12..14].copy_from_slice(&[0x81, 0x00]);
        q[16..18].copy_from_slice(&[0x88, 0xa8]);
        let d = dissect(1, &q, q.len() as u32);
        assert_eq!(d.problems(), &[Problem { kind: ProblemKind::TpidAsEthertype, offset: 16 }]);
        assert_eq!(d.flow.ports, Some((51000, 80)));
        // Nine tags.
        let mut deep = f[..12].to_vec();
        for _ in 0..9 {
            deep.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
        }
        deep.extend_from_slice(&f[12..]);
        let d = dissect(1, &deep, deep.len() as u32);
        assert_eq!(kinds(&d), [ProblemKind::TagStackTooDeep]);
        assert_eq!(d.problems()[0].offset, 12 + 4 * 8);
        assert_eq!(d.flow.vlans().len(), MAX_TAGS);
        // A truncated tag.
        let d = dissect(1, &deep[..15], 15);
        assert_eq!(kinds(&d), [ProblemKind::Truncated(LayerKind::Vlan)]);
    }

    #[test]
    fn mpls_stacks() {
        let f = eth_tcp();
        let mut m = f[..12].to_vec();
        m.extend_from_slice(&[0x88, 0x47, 0x00, 0x01, 0x20, 0x40, 0x00, 0x01, 0x31, 0x3f]); // 18, then 19 bottom
        m.extend_from_slice(&f[14..]);
        let d = dissect(1, &m, m.len() as u32);
        assert_eq!(d.flow.labels(), &[18, 19]);
        assert!(!d.is_malformed(), "{:?}", d.problems());
        assert_eq!(d.flow.ports, Some((51000, 80)));
        assert_eq!(d.layer(LayerKind::Ipv4).unwrap().offset, 22);
        // No bottom of stack before the end of the frame.
        let d = dissect(1, &m[..18], 18);
        assert_eq!(kinds(&d), [ProblemKind::MplsNoBottom]);
        let d = dissect(1, &m[..20], 20);
        assert_eq!(kinds(&d), [ProblemKind::Truncated(LayerKind::Mpls)]);
        // Implicit null (3) never appears in a packet; router alert not at the bottom.
        m[14..17].copy_from_slice(&[0x00, 0x00, 0x30]);
        m[18..21].copy_from_slice(&[0x00, 0x00, 0x11]);
        let d = dissect(1, &m, m.len() as u32);
        assert_eq!(kinds(&d), [ProblemKind::MplsReservedLabel(3), ProblemKind::MplsReservedLabel(1)]);
    }

    #[test]
    fn macsec_integrity_only_is_walked_encrypted_is_not() {
        let f = eth_tcp();
        // SecTAG: TCI with SC (an 8-byte SCI follows), SL 0, PN 1; then the frame's EtherType
        // and IPv4/TCP; then a 16-byte ICV.
        let mut m = f[..12].to_vec();
        m.extend_from_slice(&[0x88, 0xe5, 0x20, 0x00, 0, 0, 0, 1]);
        m.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0, 1]);
        m.extend_from_slice(&f[12..]);
        m.extend_from_slice(&[0xee; 16]);
        let d = dissect(1, &m, m.len() as u32);
        assert_eq!(d.layer(LayerKind::Macsec).unwrap().offset, 12);
        assert_eq!(d.layer(LayerKind::Ipv4).unwrap().offset, 12 + 16 + 2);
        assert_eq!(d.flow.ports, Some((51000, 80)));
        assert!(!d.is_malformed(), "{:?}", d.problems());
        // Without an SCI.
        let mut n = f[..12].to_vec();
        n.extend_from_slice(&[0x88, 0xe5, 0x00, 0x00, 0, 0, 0, 1]);
        n.extend_from_slice(&f[12..]);
        let d = dissect(1, &n, n.len() as u32);
        assert_eq!(d.layer(LayerKind::Ipv4).unwrap().offset, 12 + 8 + 2);
        // Encrypted (E and C): the payload is not read.
        m[14] |= 0x0c;
        let d = dissect(1, &m, m.len() as u32);
        assert!(d.layer(LayerKind::Macsec).is_some() && d.layer(LayerKind::Ipv4).is_none());
        assert_eq!(d.flow.ports, None);
        // Cut inside the SecTAG.
        let d = dissect(1, &m[..18], 60);
        assert!(d.cut && d.layer(LayerKind::Ipv4).is_none());
        // A SecTAG inside one is not walked (nor are thousands of them).
        let mut nested = f[..12].to_vec();
        for _ in 0..4000 {
            nested.extend_from_slice(&[0x88, 0xe5, 0x00, 0x00, 0, 0, 0, 1]);
        }
        nested.extend_from_slice(&f[12..]);
        let d = dissect(1, &nested, nested.len() as u32);
        assert_eq!(d.layers().iter().filter(|l| l.kind == LayerKind::Macsec).count(), 1);
        assert!(d.layer(LayerKind::Ipv4).is_none());
    }

    #[test]
    fn ipv4_problems() {
        let f = eth_tcp();
        let mut g = f.clone();
        g[14] = 0x44;
        assert_eq!(kinds(&dissect(1, &g, 74)), [ProblemKind::Ipv4HeaderLength(16)]);
        g[14] = 0x65;
        assert_eq!(kinds(&dissect(1, &g, 74)), [ProblemKind::IpVersion(6)]);
        let mut g = f.clone();
        g[17] = 19; // total length 19 < 20
        assert!(kinds(&dissect(1, &g, 74)).contains(&ProblemKind::Ipv4TotalLengthShort));
        let mut g = f.clone();
        g[17] = 61;
        let k = kinds(&dissect(1, &g, 74));
        assert!(k.contains(&ProblemKind::Ipv4TotalLengthBeyondFrame), "{k:?}");
        // Total length says the segment ends inside the TCP header.
        let mut g = f.clone();
        g[17] = 50;
        g[24..26].copy_from_slice(&0x26f3u16.to_be_bytes());
        let d = dissect(1, &g, 74);
        assert_eq!(kinds(&d), [ProblemKind::TcpDataOffset(40)], "{:?}", d.problems());
        assert_eq!(d.flow.ports, Some((51000, 80)));
    }

    #[test]
    fn ipv6_udp_and_extension_headers() {
        let f = ipv6_ext();
        let d = dissect(101, &f, f.len() as u32);
        assert!(!d.is_malformed(), "{:?}", d.problems());
        let l: Vec<_> = d.layers().iter().map(|l| (l.kind, l.offset)).collect();
        assert_eq!(
            l,
            [(LayerKind::Ipv6, 0), (LayerKind::Ipv6Ext(0), 40), (LayerKind::Ipv6Ext(44), 48), (LayerKind::Udp, 56)]
        );
        assert_eq!((d.flow.protocol, d.flow.ports), (Some(17), Some((5353, 53))));
        // The payload length ends inside the hop-by-hop header.
        let mut g = f.clone();
        g[5] = 4;
        let d = dissect(101, &g[..44], 44);
        assert_eq!(kinds(&d), [ProblemKind::Truncated(LayerKind::Ipv6Ext(0))]);
        // UDP length beyond the IP payload (judged once the datagram is
        // not fragmented: in a first fragment it is the whole datagram's).
        let mut g = f.clone();
        g[61] = 9;
        assert!(!dissect(101, &g, 64).is_malformed());
        g[51] = 0;
        assert_eq!(kinds(&dissect(101, &g, 64)), [ProblemKind::UdpLength(9)]);
        // Payload length beyond the frame.
        g[61] = 8;
        g[5] = 30;
        assert_eq!(kinds(&dissect(101, &g, 64)), [ProblemKind::Ipv6PayloadBeyondFrame]);
    }

    #[test]
    fn partial_ip_header_gives_the_addresses_it_holds() {
        // IPv4 ending inside the destination address (19 of 20 bytes).
        let f = eth_tcp();
        let d = dissect(1, &f[..33], 33);
        assert_eq!(kinds(&d), [ProblemKind::Truncated(LayerKind::Ipv4)]);
        assert_eq!((d.flow.src, d.flow.dst), (Addr::V4([192, 168, 1, 10]), Addr::None));
        // IHL 15 (options) cut by the capture after both addresses.
        let mut g = f.clone();
        g[14] = 0x4f;
        let d = dissect(1, &g[..60], 1000);
        assert!(!d.is_malformed() && d.cut);
        assert_eq!((d.flow.src, d.flow.dst), (Addr::V4([192, 168, 1, 10]), Addr::V4([93, 184, 216, 34])));
        assert_eq!(d.flow.ports, None);
        // IPv6 cut after the source address.
        let v6 = ipv6_ext();
        let d = dissect(101, &v6[..25], 64);
        assert!(!d.is_malformed() && d.cut);
        assert_eq!(d.flow.src, Addr::V6(v6[8..24].try_into().unwrap()));
        assert_eq!(d.flow.dst, Addr::None);
        // Not even the source: nothing.
        let d = dissect(101, &v6[..23], 23);
        assert_eq!((d.flow.src, kinds(&d)), (Addr::None, vec![ProblemKind::Truncated(LayerKind::Ipv6)]));
    }

    /// Raw IPv6 with payload length 0 and Next Header `nh`, then `rest`.
    fn ipv6_plen0(nh: u8, rest: &[u8]) -> Vec<u8> {
        let mut f = ipv6_ext()[..40].to_vec();
        f[4..6].copy_from_slice(&[0, 0]);
        f[6] = nh;
        f.extend_from_slice(rest);
        f
    }

    const UDP_5353_53: [u8; 8] = [0x14, 0xe9, 0x00, 0x35, 0, 0, 0, 0];

    #[test]
    fn ipv6_payload_length_zero() {
        // A jumbogram whose Jumbo Payload length (70,000) is on the wire.
        let mut hbh = vec![17, 0, 0xc2, 4, 0, 1, 0x11, 0x70];
        hbh.extend_from_slice(&UDP_5353_53);
        let f = ipv6_plen0(0, &hbh);
        let d = dissect(101, &f, 40 + 70_000);
        assert!(!d.is_malformed(), "{:?}", d.problems());
        assert_eq!(d.flow.ports, Some((5353, 53)));
        // ... and beyond it.
        let d = dissect(101, &f, f.len() as u32);
        assert_eq!(kinds(&d), [ProblemKind::Ipv6PayloadBeyondFrame]);
        assert_eq!(d.flow.ports, Some((5353, 53)));
        // A Jumbo Payload length of 65,535 or less is no jumbogram, and a
        // Hop-by-Hop header without the option leaves the length unknown.
        let mut small = hbh.clone();
        small[4..8].copy_from_slice(&16u32.to_be_bytes());
        let mut none = hbh.clone();
        none[2..8].copy_from_slice(&[1, 4, 0, 0, 0, 0]);
        for h in [small, none] {
            let d = dissect(101, &ipv6_plen0(0, &h), 56);
            assert_eq!(kinds(&d), [ProblemKind::Ipv6JumboMissing]);
            assert_eq!((d.flow.protocol, d.flow.ports), (None, None));
        }
        // TSO or BIG TCP (no Hop-by-Hop header): the rest of the frame.
        let f = ipv6_plen0(17, &UDP_5353_53);
        let d = dissect(101, &f, f.len() as u32);
        assert!(!d.is_malformed(), "{:?}", d.problems());
        assert_eq!(d.flow.ports, Some((5353, 53)));
        // No Next Header: an empty payload.
        let d = dissect(101, &ipv6_plen0(59, &[]), 40);
        assert!(!d.is_malformed() && !d.cut);
    }

    #[test]
    fn truncated_l4_header_gives_its_ports() {
        let f = eth_tcp();
        // Cut by the capture 6 bytes into the TCP header.
        let d = dissect(1, &f[..40], 74);
        assert!(!d.is_malformed() && d.cut);
        assert_eq!(d.flow.ports, Some((51000, 80)));
        // The frame really ends there.
        let d = dissect(1, &f[..40], 40);
        assert!(kinds(&d).contains(&ProblemKind::Truncated(LayerKind::Tcp)));
        assert_eq!(d.flow.ports, Some((51000, 80)));
        // Three bytes: no ports.
        let d = dissect(1, &f[..37], 74);
        assert_eq!(d.flow.ports, None);
        // UDP cut after its ports.
        let v6 = ipv6_ext();
        let d = dissect(101, &v6[..60], 64);
        assert!(!d.is_malformed() && d.cut);
        assert_eq!(d.flow.ports, Some((5353, 53)));
    }

    #[test]
    fn ipv6_under_ipv4_ethertype_is_a_wrong_version_only() {
        // The dissector does not decode by the version nibble against the
        // EtherType (tshark does, and then judges that IPv6 header too).
        let mut f = ETH_TCP[..14].to_vec();
        f.extend_from_slice(&ipv6_ext());
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let d = dissect(1, &f, f.len() as u32);
        assert_eq!(d.problems(), &[Problem { kind: ProblemKind::IpVersion(6), offset: 14 }]);
        assert_eq!((d.flow.src, d.flow.ports), (Addr::None, None));
    }

    #[test]
    fn junk_never_panics() {
        let mut x = 0x1234_5678u32;
        let mut buf = [0u8; 256];
        for _ in 0..20_000 {
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            // Plausible starts, so that the walk goes deep.
            buf[12..14]
                .copy_from_slice(&[[0x08, 0x00], [0x86, 0xdd], [0x81, 0x00], [0x88, 0x47]][(x >> 8) as usize % 4]);
            let n = (x >> 16) as usize % 256;
            for lt in [1, 101, 113, 228, 229, 0] {
                let d = dissect(lt, &buf[..n], (x >> 3) % 300);
                assert!(d.layers().len() <= MAX_LAYERS && d.problems().len() <= MAX_PROBLEMS);
            }
        }
    }
}
