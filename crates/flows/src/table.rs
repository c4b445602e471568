//! The flow table: packets in, bidirectional flow records out.
//!
//! One table per stream, fed by the writer thread in packet order (never the capture thread).
//! It is a fixed array of buckets of [`WAYS`] entries, allocated once: a packet costs one
//! dissection ([`wv_wire::dissect`]), one hash and the probe of the two buckets the hash
//! names, and allocates nothing. A new flow takes the emptier of its two buckets (two choices
//! keep the buckets even: with one, a table holding as many flows as it has entries overflowed
//! a third of its buckets, and each of their packets pushed out a flow); when both are full it
//! pushes out the least recently seen of their entries (its record ends
//! [`EndReason::Evicted`], counted in [`FlowTable::evicted`]), so memory is
//! [`FlowTable::memory_bytes`] whatever the traffic, plus the ended records until their file
//! closes ([`FlowTable::take_ended`]).
//!
//! Times are the packets' own: a flow is idle or past its active timeout when a later packet
//! of the stream says so. The table is swept once a second of packet time, so records end at
//! most a second late; their first and last times are those of their packets all the same.

use crate::record::{Direction, EndReason, FlowRecord, IpAddr16};
use wv_wire::dissect::{self, LayerKind};
use wv_wire::views::{icmp, ipproto, ipv4, ipv6, tcp};

/// VLAN ids kept in a key (outermost first); a deeper stack keys on its outer four.
pub const KEY_VLANS: usize = 4;
/// Entries per bucket: one probe reads them all (about two cache lines each).
pub const WAYS: usize = 8;
/// How long a flow stays after FIN from both sides or RST, so that the last ACK (or a
/// repeated RST) counts to it as tshark counts it to the conversation, not to a new flow.
pub const CLOSE_LINGER_NS: u64 = 2_000_000_000;
/// Packet time between two sweeps for idle and active timeouts.
const SWEEP_NS: u64 = 1_000_000_000;
/// Entries per flow of [`FlowConfig::max_flows`], in quarters: a table with one entry a flow
/// could not place them all (two hashed buckets fill unevenly), and at 65,536 flows seen in
/// turn 4% of them were pushed out each pass (a unit test); with a quarter more entries none are.
const HEADROOM_QUARTERS: usize = 5;
/// The bytes an entry of the table costs: the [`Entry`] and its tag.
pub const ENTRY_BYTES: usize = std::mem::size_of::<Entry>() + std::mem::size_of::<u32>();

/// Choices of a flow table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowConfig {
    /// A flow with no packet for this long ends ([`EndReason::Idle`]).
    pub idle_timeout_ns: u64,
    /// A flow open this long is reported and goes on in a new record ([`EndReason::Active`]).
    pub active_timeout_ns: u64,
    /// Flows held at once without pushing one out ([`EndReason::Evicted`]): the table has
    /// 1.25 entries a flow ([`FlowTable::capacity`]), in buckets of [`WAYS`], of
    /// [`ENTRY_BYTES`] (156) each: 195 bytes a flow, 12.2 MiB per stream at the default 65,536
    /// (`--max-flows`).
    pub max_flows: usize,
}

impl Default for FlowConfig {
    /// 60 s idle and 5 min active, as NetFlow/IPFIX exporters do; 65,536 flows.
    fn default() -> FlowConfig {
        FlowConfig { idle_timeout_ns: 60_000_000_000, active_timeout_ns: 300_000_000_000, max_flows: 65_536 }
    }
}

/// An address as [`IpAddr16`]'s bytes read as two big-endian words: compared, ordered and
/// hashed a word at a time. Bytes stored one by one and read back as words stalled each read
/// (a store-forwarding miss) on the writer's per-packet path.
type Addr = [u64; 2];

/// [`Addr`] of IPv4 address `a` (IPv4-mapped, as [`IpAddr16::v4`]).
#[inline]
fn addr_v4(a: u32) -> Addr {
    [0, 0xffff_0000_0000 | u64::from(a)]
}

/// [`Addr`] of an address's 16 bytes.
#[inline]
fn addr_of(b: [u8; 16]) -> Addr {
    let (h, l) = b.split_at(8);
    [u64::from_be_bytes(h.try_into().expect("8 bytes")), u64::from_be_bytes(l.try_into().expect("8 bytes"))]
}

/// The 16 bytes of an [`Addr`].
fn addr_bytes(a: Addr) -> IpAddr16 {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&a[0].to_be_bytes());
    b[8..].copy_from_slice(&a[1].to_be_bytes());
    IpAddr16(b)
}

/// The bidirectional key: the two endpoints in address (then port) order, so both
/// directions of a flow find one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
struct Key {
    lo: Addr,
    hi: Addr,
    vlans: [u16; KEY_VLANS],
    lo_port: u16,
    hi_port: u16,
    n_vlans: u8,
    protocol: u8,
}

impl Key {
    /// Two folded multiplies over the key's six words, then one mix: about a third of the
    /// six dependent rounds a mix per word costs, on the writer's per-packet path.
    #[inline]
    fn hash(&self, seed: u64) -> u64 {
        let ([a0, a1], [b0, b1]) = (self.lo, self.hi);
        let v = self.vlans.iter().fold(0u64, |h, &v| h << 16 | u64::from(v));
        let rest = u64::from(self.lo_port) << 32
            | u64::from(self.hi_port) << 16
            | u64::from(self.n_vlans) << 8
            | u64::from(self.protocol);
        let x = fold(a0 ^ seed, a1 ^ 0x243f_6a88_85a3_08d3) ^ fold(b0 ^ 0x1319_8a2e_0370_7344, b1 ^ seed);
        mix(x ^ fold(v ^ 0xa409_3822_299f_31d0, rest ^ seed.rotate_left(32)))
    }
}

/// The folded multiply (high and low halves of the 128-bit product xored), as foldhash
/// and wyhash mix two words at once.
#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a).wrapping_mul(u128::from(b));
    (p as u64) ^ ((p >> 64) as u64)
}

/// A multiply-xorshift round (the finaliser of splitmix64).
#[inline]
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The tag of hash `h` (never 0, which marks a free entry): the low 16 bits of each half, the
/// bits the buckets' range reduction ([`FlowTable::buckets`]) depends on least, so that flows of
/// one bucket seldom share a tag.
#[inline]
fn tag_of(h: u64) -> u32 {
    (h as u32 & 0xffff | (h >> 16) as u32 & 0xffff_0000) | 1
}

/// How a TCP flow closed, while it lingers ([`CLOSE_LINGER_NS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Closed {
    #[default]
    Open,
    Fin,
    Rst,
}

/// One flow's state: 152 bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Entry {
    key: Key,
    /// The client (the sender of the first packet seen) is the key's `lo` side.
    client_lo: bool,
    /// FIN seen from the client (bit 0) and the server (bit 1).
    fins: u8,
    closed: Closed,
    icmp_type: u8,
    icmp_code: u8,
    first_ns: u64,
    last_ns: u64,
    /// When `closed` went from open: the linger runs from here.
    closed_ns: u64,
    /// The stream's file that held its first packet ([`FlowTable::set_file`]).
    first_file: u64,
    /// To the server, to the client.
    dir: [Direction; 2],
}

impl Entry {
    fn packets(&self) -> u64 {
        self.dir[0].packets + self.dir[1].packets
    }
}

/// A record that ended, as the table holds it until its file closes (no allocation: the
/// strings and lists of a [`FlowRecord`] are made when it is written).
#[derive(Debug, Clone, Copy)]
pub struct Ended {
    entry: Entry,
    pub end: EndReason,
    /// The stream's file that held its last packet.
    pub last_file: u64,
}

impl Ended {
    /// The first and last file of the stream that hold its packets ([`FlowTable::set_file`]).
    pub fn files(&self) -> (u64, u64) {
        (self.entry.first_file, self.last_file)
    }

    /// The record, with the recorder's node name, its stream and the names of its files.
    pub fn record(&self, node: &str, stream: u32, files: Vec<String>) -> FlowRecord {
        let e = &self.entry;
        let (client, server, client_port, server_port) = if e.client_lo {
            (e.key.lo, e.key.hi, e.key.lo_port, e.key.hi_port)
        } else {
            (e.key.hi, e.key.lo, e.key.hi_port, e.key.lo_port)
        };
        FlowRecord {
            vlans: e.key.vlans[..usize::from(e.key.n_vlans)].to_vec(),
            client: addr_bytes(client),
            server: addr_bytes(server),
            protocol: e.key.protocol,
            client_port,
            server_port,
            icmp_type: e.icmp_type,
            icmp_code: e.icmp_code,
            first_ns: e.first_ns,
            last_ns: e.last_ns,
            to_server: e.dir[0],
            to_client: e.dir[1],
            end: self.end,
            node: node.to_string(),
            stream,
            files,
        }
    }
}

/// What a packet tells the table, read by [`parse`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Seen {
    src: Addr,
    dst: Addr,
    src_port: u16,
    dst_port: u16,
    vlans: [u16; KEY_VLANS],
    n_vlans: u8,
    protocol: u8,
    ip_bytes: u64,
    tcp_flags: u16,
    icmp: Option<(u8, u8)>,
}

/// Reads a frame's flow key and what the record counts of it; `None` for a frame with no IP
/// addresses (ARP, other EtherTypes, a link type the dissector does not walk).
#[inline]
fn parse(linktype: u32, frame: &[u8], origlen: u32) -> Option<Seen> {
    match parse_eth_ipv4(linktype, frame, origlen) {
        Some(s) => Some(s),
        None => parse_dissected(linktype, frame, origlen),
    }
}

/// [`parse`] of the most common frame, untagged IPv4 without options on Ethernet, read
/// straight from the bytes: what [`parse_dissected`] reads of it (a unit test holds the two
/// to the same answer over tcpdump's corpus), at a fraction of a whole dissection's cost.
/// `None` for every other frame, and for the odd IPv4 header the dissector judges (a total
/// length below the header's).
#[inline]
fn parse_eth_ipv4(linktype: u32, f: &[u8], origlen: u32) -> Option<Seen> {
    const L3: usize = 14;
    const L4: usize = L3 + 20;
    if linktype != wv_wire::linktype::ETHERNET || f.len() < L4 || f[12..14] != [0x08, 0x00] || f[L3] != 0x45 {
        return None;
    }
    let wire = (origlen as usize).max(f.len());
    let total = usize::from(u16::from_be_bytes([f[L3 + 2], f[L3 + 3]]));
    if total != 0 && total < 20 {
        return None;
    }
    let b4 = |at: usize| u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]]);
    let mut s = Seen {
        src: addr_v4(b4(L3 + 12)),
        dst: addr_v4(b4(L3 + 16)),
        protocol: f[L3 + 9],
        ip_bytes: if total == 0 { (wire - L3) as u64 } else { total as u64 },
        ..Seen::default()
    };
    if u16::from_be_bytes([f[L3 + 6], f[L3 + 7]]) & ipv4::FRAG_OFFSET_MASK != 0 {
        return Some(s);
    }
    // The transport header as the dissector bounds it: within the IP datagram and the frame.
    let end = L3 + if total == 0 { wire - L3 } else { total.min(wire - L3) };
    let l4_len = end.min(f.len()).saturating_sub(L4);
    match s.protocol {
        ipproto::TCP | ipproto::UDP => {
            if l4_len >= 4 {
                s.src_port = u16::from_be_bytes([f[L4], f[L4 + 1]]);
                s.dst_port = u16::from_be_bytes([f[L4 + 2], f[L4 + 3]]);
            }
            if s.protocol == ipproto::TCP && f.len() >= L4 + 14 {
                s.tcp_flags = u16::from_be_bytes([f[L4 + 12], f[L4 + 13]]) & 0x01ff;
            }
        }
        ipproto::ICMP | ipproto::ICMPV6 if f.len() >= L4 + 2 => s.icmp = Some((f[L4], f[L4 + 1])),
        _ => {}
    }
    Some(s)
}

/// [`parse`] of any frame, from its whole dissection.
#[inline(never)]
fn parse_dissected(linktype: u32, frame: &[u8], origlen: u32) -> Option<Seen> {
    let d = dissect::dissect(linktype, frame, origlen);
    let f = &d.flow;
    let addr = |a: wv_wire::packet::Addr| match a {
        wv_wire::packet::Addr::V4(a) => Some(addr_v4(u32::from_be_bytes(a))),
        wv_wire::packet::Addr::V6(a) => Some(addr_of(a)),
        wv_wire::packet::Addr::None => None,
    };
    let (src, dst) = (addr(f.src)?, addr(f.dst)?);
    let mut s = Seen { src, dst, protocol: f.protocol?, ..Seen::default() };
    let vl = f.vlans();
    let n = vl.len().min(KEY_VLANS);
    s.vlans[..n].copy_from_slice(&vl[..n]);
    s.n_vlans = n as u8;
    let wire_left = |at: u32| u64::from(d.wire_len.saturating_sub(at));
    let be16 = |at: usize| frame.get(at..at + 2).map(|b| u64::from(u16::from_be_bytes([b[0], b[1]])));
    for l in d.layers() {
        let at = l.offset as usize;
        match l.kind {
            // 0: the rest of the frame (TSO), as the dissector reads it.
            LayerKind::Ipv4 if s.ip_bytes == 0 => {
                s.ip_bytes = match be16(at + ipv4::field::LENGTH.start) {
                    Some(0) | None => wire_left(l.offset),
                    Some(n) => n,
                }
            }
            LayerKind::Ipv6 if s.ip_bytes == 0 => {
                s.ip_bytes = match be16(at + ipv6::field::LENGTH.start) {
                    Some(0) | None => wire_left(l.offset),
                    Some(n) => ipv6::field::PAYLOAD.start as u64 + n,
                }
            }
            LayerKind::Tcp => {
                if let Some(b) = frame.get(at + tcp::field::FLAGS.start..at + tcp::field::FLAGS.end) {
                    s.tcp_flags = u16::from_be_bytes([b[0], b[1]]) & 0x01ff;
                }
            }
            LayerKind::Icmp | LayerKind::Icmpv6 => {
                if let (Some(&t), Some(&c)) = (frame.get(at + icmp::field::TYPE), frame.get(at + icmp::field::CODE)) {
                    s.icmp = Some((t, c));
                }
            }
            _ => {}
        }
    }
    if let Some((sp, dp)) = f.ports.filter(|_| !f.later_fragment) {
        s.src_port = sp;
        s.dst_port = dp;
    }
    Some(s)
}

/// A frame [`FlowTable::prepare`]d for [`FlowTable::apply`]: small, as a tap holds a few
/// dozen and moves each twice.
pub struct Prepared {
    ts_ns: u64,
    origlen: u32,
    /// Its flow (`None`: no IP flow).
    flow: Option<Keyed>,
}

/// What a frame tells its flow, with the flow's key.
struct Keyed {
    key: Key,
    /// The key's hash.
    h: u64,
    /// Its source is the key's `lo` side.
    src_lo: bool,
    ip_bytes: u64,
    tcp_flags: u16,
    icmp: Option<(u8, u8)>,
}

/// `n` copies of `v` in huge pages: the table is probed at random, and with 4 KiB pages a
/// probe's TLB miss stalled even the prefetch of its entry (perf on bench/live.sh).
fn filled<T: Clone>(n: usize, v: T) -> Vec<T> {
    let mut t = wv_sys::mem::huge_vec(n);
    t.resize(n, v);
    t
}

/// The flow table of one stream.
pub struct FlowTable {
    cfg: FlowConfig,
    entries: Vec<Entry>,
    /// Per entry, a tag of its key's hash (never 0) or 0 when the entry is free: a probe reads
    /// its bucket's [`WAYS`] tags (one half cache line) and compares a key only where the tag
    /// matches, instead of reading [`WAYS`] entries (19 cache lines).
    tags: Vec<u32>,
    /// Buckets, any number: a hash names one by multiply-shift range reduction, so the
    /// table is not rounded up to a power of two (which would double it for a `max_flows`
    /// just above one).
    nbuckets: u64,
    seed: u64,
    ended: Vec<Ended>,
    next_sweep: u64,
    /// The current file of the stream, for new flows' `first_file`.
    file: u64,
    live: usize,
    /// Records that ended because a new flow needed their place.
    pub evicted: u64,
    /// Frames with no IP flow (ARP, ...), not in any record.
    pub not_ip: u64,
}

impl FlowTable {
    pub fn new(cfg: FlowConfig) -> FlowTable {
        let buckets = (cfg.max_flows.saturating_mul(HEADROOM_QUARTERS) / 4).div_ceil(WAYS).max(1);
        // A random seed: traffic cannot aim its flows at one bucket it knows.
        let seed = {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x5eed);
            h.finish()
        };
        FlowTable {
            cfg,
            entries: filled(buckets * WAYS, Entry::default()),
            tags: filled(buckets * WAYS, 0),
            nbuckets: buckets as u64,
            seed,
            ended: Vec::new(),
            next_sweep: 0,
            file: 0,
            live: 0,
            evicted: 0,
            not_ip: 0,
        }
    }

    pub fn config(&self) -> &FlowConfig {
        &self.cfg
    }

    /// Its entries: the most flows held at once (`max_flows` with a quarter more, rounded
    /// up to whole buckets).
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// The table's fixed memory: [`ENTRY_BYTES`] an entry.
    pub fn memory_bytes(&self) -> usize {
        self.entries.len() * ENTRY_BYTES
    }

    /// Flows open now.
    pub fn live(&self) -> usize {
        self.live
    }

    /// The stream's current file (a number the caller gives each file, rising): new flows
    /// start in it, ending ones end in it.
    pub fn set_file(&mut self, file: u64) {
        self.file = file;
    }

    /// One frame of `linktype`: `ts_ns` its time, `frame` its captured bytes, `origlen` its
    /// length on the wire.
    #[inline]
    pub fn add(&mut self, linktype: u32, ts_ns: u64, frame: &[u8], origlen: u32) {
        self.apply(self.prepare(linktype, ts_ns, frame, origlen));
    }

    /// The first part of [`FlowTable::add`]: the frame read, its key hashed and its two
    /// buckets' tags asked of memory (a prefetch), without changing the table. A caller that
    /// prepares frames ahead, [`FlowTable::prefetch`]es them a few frames later and applies
    /// them a few frames later again (in order, as the stream's tap does) waits for neither
    /// the tags nor the entry: at 65,536 flows the table is 12.2 MiB, and their cache misses
    /// were most of a packet's cost (more so beside 1514-byte frames, which push the tags out
    /// of the cache).
    #[inline]
    pub fn prepare(&self, linktype: u32, ts_ns: u64, frame: &[u8], origlen: u32) -> Prepared {
        let Some(s) = parse(linktype, frame, origlen) else {
            return Prepared { ts_ns, origlen, flow: None };
        };
        let src_lo = (s.src, s.src_port) <= (s.dst, s.dst_port);
        let (lo, hi, lo_port, hi_port) =
            if src_lo { (s.src, s.dst, s.src_port, s.dst_port) } else { (s.dst, s.src, s.dst_port, s.src_port) };
        let key = Key { lo, hi, vlans: s.vlans, lo_port, hi_port, n_vlans: s.n_vlans, protocol: s.protocol };
        let h = key.hash(self.seed);
        let (b1, b2) = self.buckets(h);
        wv_sys::mem::prefetch(std::ptr::from_ref(&self.tags[b1]).cast());
        wv_sys::mem::prefetch(std::ptr::from_ref(&self.tags[b2]).cast());
        let flow = Keyed { key, h, src_lo, ip_bytes: s.ip_bytes, tcp_flags: s.tcp_flags, icmp: s.icmp };
        Prepared { ts_ns, origlen, flow: Some(flow) }
    }

    /// The second part: the entry whose tag matches the prepared frame's asked of memory. A
    /// hint only: [`FlowTable::apply`] looks the flow up again, after the frames before it
    /// changed the table.
    #[inline]
    pub fn prefetch(&self, p: &Prepared) {
        let Some(Keyed { h, .. }) = p.flow else { return };
        let (b1, b2) = self.buckets(h);
        let tag = tag_of(h);
        let hit = |b: usize| self.tags[b..b + WAYS].iter().position(|&t| t == tag).map(|j| b + j);
        if let Some(i) = hit(b1).or_else(|| hit(b2)) {
            let at = std::ptr::from_ref(&self.entries[i]).cast::<u8>();
            for off in [0, 64, 128, std::mem::size_of::<Entry>() - 1] {
                wv_sys::mem::prefetch_write(at.wrapping_add(off));
            }
        }
    }

    /// The last part of [`FlowTable::add`], for a frame [`FlowTable::prepare`]d: frames must
    /// be applied in the order they were prepared.
    #[inline]
    pub fn apply(&mut self, p: Prepared) {
        let ts_ns = p.ts_ns;
        if ts_ns >= self.next_sweep {
            self.sweep(ts_ns);
        }
        let Some(s) = p.flow else {
            self.not_ip += 1;
            return;
        };
        let Keyed { key, h, src_lo, .. } = s;
        let origlen = p.origlen;
        let (b1, b2) = self.buckets(h);
        let tag = tag_of(h);
        let syn_only =
            key.protocol == ipproto::TCP && s.tcp_flags & (tcp::flags::SYN | tcp::flags::ACK) == tcp::flags::SYN;
        let mut slot = self.find(b1, tag, &key);
        if slot.is_none() && b2 != b1 {
            slot = self.find(b2, tag, &key);
        }
        // A new connection on the ports of one that closed (a SYN after FIN or RST) is a new flow.
        if let Some(i) = slot.filter(|&i| syn_only && self.entries[i].closed != Closed::Open) {
            let reason = if self.entries[i].closed == Closed::Fin { EndReason::Fin } else { EndReason::Rst };
            self.end(i, reason);
            slot = None;
        }
        let i = match slot {
            Some(i) => i,
            None => {
                let i = self.free_slot(b1, b2);
                self.tags[i] = tag;
                self.entries[i] = Entry {
                    key,
                    client_lo: src_lo,
                    first_ns: ts_ns,
                    last_ns: ts_ns,
                    first_file: self.file,
                    icmp_type: s.icmp.map_or(0, |t| t.0),
                    icmp_code: s.icmp.map_or(0, |t| t.1),
                    ..Entry::default()
                };
                self.live += 1;
                i
            }
        };
        let e = &mut self.entries[i];
        let to_client = usize::from(src_lo != e.client_lo);
        if e.packets() == 0 {
            // The first packet of an active-timeout slice.
            e.first_ns = ts_ns;
            e.first_file = self.file;
        }
        e.last_ns = e.last_ns.max(ts_ns);
        let d = &mut e.dir[to_client];
        d.packets += 1;
        d.frame_bytes += u64::from(origlen);
        d.ip_bytes += s.ip_bytes;
        d.tcp_flags |= s.tcp_flags;
        if key.protocol == ipproto::TCP && e.closed == Closed::Open {
            if s.tcp_flags & tcp::flags::RST != 0 {
                e.closed = Closed::Rst;
                e.closed_ns = ts_ns;
            } else if s.tcp_flags & tcp::flags::FIN != 0 {
                e.fins |= 1 << to_client;
                if e.fins == 3 {
                    e.closed = Closed::Fin;
                    e.closed_ns = ts_ns;
                }
            }
        }
    }

    /// The first entries of the two buckets of hash `h`, by multiply-shift range reduction
    /// (`h * buckets / 2^64`): the first from the hash's high bits, the second from the high
    /// bits of its low half (the tag takes the low bits of each half, [`tag_of`]).
    #[inline]
    fn buckets(&self, h: u64) -> (usize, usize) {
        let reduce = |x: u64| ((u128::from(x) * u128::from(self.nbuckets)) >> 64) as usize * WAYS;
        (reduce(h), reduce(h.rotate_left(32)))
    }

    /// The entry of `key` in the bucket at `base`, if it is there.
    #[inline]
    fn find(&self, base: usize, tag: u32, key: &Key) -> Option<usize> {
        let tags = &self.tags[base..base + WAYS];
        (0..WAYS).find(|&j| tags[j] == tag && self.entries[base + j].key == *key).map(|j| base + j)
    }

    /// A free entry of the emptier of the buckets at `b1` and `b2` (the same bucket in a table
    /// of one), pushing out their least recently seen flow when both are full (a closed one
    /// first).
    fn free_slot(&mut self, b1: usize, b2: usize) -> usize {
        let free = |b: usize| self.tags[b..b + WAYS].iter().filter(|&&t| t == 0).count();
        let (f1, f2) = (free(b1), if b2 == b1 { 0 } else { free(b2) });
        if f1 > 0 || f2 > 0 {
            let b = if f1 >= f2 { b1 } else { b2 };
            return b + self.tags[b..b + WAYS].iter().position(|&t| t == 0).expect("a free entry");
        }
        // Both full: a flow of theirs whose other bucket has room moves there (one step of
        // cuckoo hashing; it keeps a table 15/16 full from pushing out flows).
        for i in (b1..b1 + WAYS).chain((b2..b2 + WAYS).filter(|_| b2 != b1)) {
            let (o1, o2) = self.buckets(self.entries[i].key.hash(self.seed));
            let other = if i / WAYS * WAYS == o1 { o2 } else { o1 };
            if let Some(j) = self.tags[other..other + WAYS].iter().position(|&t| t == 0) {
                self.entries[other + j] = self.entries[i];
                self.tags[other + j] = self.tags[i];
                self.tags[i] = 0;
                return i;
            }
        }
        let candidates = (b1..b1 + WAYS).chain((b2..b2 + WAYS).filter(|_| b2 != b1));
        let i = candidates
            .min_by_key(|&i| (self.entries[i].closed == Closed::Open, self.entries[i].last_ns))
            .expect("WAYS > 0");
        let e = &self.entries[i];
        let reason = match e.closed {
            Closed::Fin => EndReason::Fin,
            Closed::Rst => EndReason::Rst,
            Closed::Open => {
                self.evicted += 1;
                EndReason::Evicted
            }
        };
        self.end(i, reason);
        i
    }

    /// Ends entry `i` for `reason`: its record (if it has packets) joins the ended ones.
    fn end(&mut self, i: usize, reason: EndReason) {
        let e = std::mem::take(&mut self.entries[i]);
        self.tags[i] = 0;
        self.live -= 1;
        if e.packets() > 0 {
            self.ended.push(Ended { entry: e, end: reason, last_file: self.file });
        }
    }

    /// Ends the flows that are idle, past their active timeout or done lingering at `now`.
    pub fn sweep(&mut self, now: u64) {
        self.next_sweep = now.saturating_add(SWEEP_NS);
        for i in 0..self.entries.len() {
            if self.tags[i] == 0 {
                continue;
            }
            let e = &self.entries[i];
            let reason = match e.closed {
                Closed::Fin if now.saturating_sub(e.closed_ns) >= CLOSE_LINGER_NS => Some(EndReason::Fin),
                Closed::Rst if now.saturating_sub(e.closed_ns) >= CLOSE_LINGER_NS => Some(EndReason::Rst),
                _ if now.saturating_sub(e.last_ns) >= self.cfg.idle_timeout_ns => Some(EndReason::Idle),
                Closed::Open if e.packets() > 0 && now.saturating_sub(e.first_ns) >= self.cfg.active_timeout_ns => {
                    // Reported now; the flow goes on in the same entry (its client stays the
                    // client), counting from its next packet.
                    let e = &mut self.entries[i];
                    self.ended.push(Ended { entry: *e, end: EndReason::Active, last_file: self.file });
                    e.dir = [Direction::default(); 2];
                    None
                }
                _ => None,
            };
            if let Some(r) = reason {
                self.end(i, r);
            }
        }
    }

    /// Ends every flow (the recording stops): closed ones for how they closed, the others
    /// [`EndReason::Stop`].
    pub fn stop(&mut self) {
        for i in 0..self.entries.len() {
            if self.tags[i] == 0 {
                continue;
            }
            let reason = match self.entries[i].closed {
                Closed::Fin => EndReason::Fin,
                Closed::Rst => EndReason::Rst,
                Closed::Open => EndReason::Stop,
            };
            self.end(i, reason);
        }
    }

    /// The records that ended since the last [`FlowTable::take_ended`], without taking them
    /// (the exporters see them as they end, the flow file when its file closes).
    pub fn ended(&self) -> &[Ended] {
        &self.ended
    }

    /// The records that ended since the last call, in the order they ended.
    pub fn take_ended(&mut self) -> Vec<Ended> {
        std::mem::take(&mut self.ended)
    }

    /// The oldest file an open flow started in (`None`: no flow is open).
    pub fn oldest_file(&self) -> Option<u64> {
        self.entries.iter().zip(&self.tags).filter(|(_, &t)| t != 0).map(|(e, _)| e.first_file).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wv_wire::linktype;

    const A: [u8; 4] = [10, 0, 0, 1];
    const B: [u8; 4] = [10, 0, 0, 2];

    /// An Ethernet frame of IPv4 `proto` from `src` to `dst` with `l4` after the IP header
    /// and `pad` bytes of payload, under `vlan` when given.
    fn frame(vlan: Option<u16>, src: [u8; 4], dst: [u8; 4], proto: u8, l4: &[u8], pad: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if let Some(v) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let total = 20 + l4.len() + pad;
        let mut ip = vec![0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, proto, 0, 0];
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let sum = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum::<u32>();
        let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(l4);
        f.resize(f.len() + pad, 0);
        f
    }

    fn tcp_hdr(sp: u16, dp: u16, flags: u16) -> Vec<u8> {
        let mut h = vec![0u8; 20];
        h[0..2].copy_from_slice(&sp.to_be_bytes());
        h[2..4].copy_from_slice(&dp.to_be_bytes());
        h[12] = 5 << 4 | (flags >> 8) as u8;
        h[13] = flags as u8;
        h
    }

    fn udp_hdr(sp: u16, dp: u16, payload: usize) -> Vec<u8> {
        let mut h = vec![0u8; 8];
        h[0..2].copy_from_slice(&sp.to_be_bytes());
        h[2..4].copy_from_slice(&dp.to_be_bytes());
        h[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        h
    }

    fn add(t: &mut FlowTable, ts: u64, f: &[u8]) {
        t.add(linktype::ETHERNET, ts, f, f.len() as u32);
    }

    fn records(t: &mut FlowTable) -> Vec<FlowRecord> {
        t.take_ended().iter().map(|e| e.record("n", 0, Vec::new())).collect()
    }

    const SEC: u64 = 1_000_000_000;
    use tcp::flags::{ACK, FIN, PSH, RST, SYN};

    #[test]
    fn tcp_connection_with_clean_close() {
        let mut t = FlowTable::new(FlowConfig::default());
        let c = |fl| frame(None, A, B, ipproto::TCP, &tcp_hdr(40000, 80, fl), 0);
        let s = |fl| frame(None, B, A, ipproto::TCP, &tcp_hdr(80, 40000, fl), 0);
        add(&mut t, 10, &c(SYN));
        add(&mut t, 20, &s(SYN | ACK));
        add(&mut t, 30, &c(ACK));
        let data = frame(None, A, B, ipproto::TCP, &tcp_hdr(40000, 80, PSH | ACK), 100);
        add(&mut t, 40, &data);
        add(&mut t, 50, &s(FIN | ACK));
        add(&mut t, 60, &c(FIN | ACK));
        add(&mut t, 70, &s(ACK));
        assert!(records(&mut t).is_empty(), "lingers for the last ACK");
        add(&mut t, 70 + CLOSE_LINGER_NS + SEC, &frame(None, [1; 4], [2; 4], ipproto::UDP, &udp_hdr(1, 2, 0), 0));
        let r = records(&mut t);
        assert_eq!(r.len(), 1);
        let r = &r[0];
        assert_eq!((r.client.as_v4(), r.server.as_v4(), r.client_port, r.server_port), (Some(A), Some(B), 40000, 80));
        assert_eq!((r.first_ns, r.last_ns, r.end, r.protocol), (10, 70, EndReason::Fin, 6));
        assert_eq!((r.to_server.packets, r.to_client.packets), (4, 3));
        assert_eq!(r.to_server.frame_bytes, 3 * 54 + 154);
        assert_eq!(r.to_server.ip_bytes, 3 * 40 + 140);
        assert_eq!((r.to_server.tcp_flags, r.to_client.tcp_flags), (SYN | ACK | PSH | FIN, SYN | ACK | FIN));
    }

    #[test]
    fn reset_ends_and_a_new_syn_starts_a_new_flow() {
        let mut t = FlowTable::new(FlowConfig::default());
        add(&mut t, 1, &frame(None, A, B, ipproto::TCP, &tcp_hdr(1234, 22, SYN), 0));
        add(&mut t, 2, &frame(None, B, A, ipproto::TCP, &tcp_hdr(22, 1234, RST | ACK), 0));
        add(&mut t, 3, &frame(None, A, B, ipproto::TCP, &tcp_hdr(1234, 22, SYN), 0));
        let r = records(&mut t);
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].end, r[0].to_server.packets, r[0].to_client.packets), (EndReason::Rst, 1, 1));
        t.stop();
        let r = records(&mut t);
        assert_eq!((r.len(), r[0].end, r[0].first_ns), (1, EndReason::Stop, 3));
    }

    #[test]
    fn udp_icmp_vlan_and_the_client_is_the_first_sender() {
        let mut t = FlowTable::new(FlowConfig::default());
        // The reply's side sends first: it is the client.
        add(&mut t, 5, &frame(Some(7), B, A, ipproto::UDP, &udp_hdr(53, 5353, 10), 10));
        add(&mut t, 6, &frame(Some(7), A, B, ipproto::UDP, &udp_hdr(5353, 53, 0), 0));
        // The same ports on another VLAN: another flow.
        add(&mut t, 7, &frame(Some(8), A, B, ipproto::UDP, &udp_hdr(5353, 53, 0), 0));
        let echo = |ty| [ty, 0, 0, 0, 0, 1, 0, 1];
        add(&mut t, 8, &frame(None, A, B, ipproto::ICMP, &echo(8), 56));
        add(&mut t, 9, &frame(None, B, A, ipproto::ICMP, &echo(0), 56));
        t.stop();
        let mut r = records(&mut t);
        r.sort_by_key(|r| r.first_ns);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].vlans.as_slice(), r[0].client.as_v4(), r[0].client_port), (&[7u16][..], Some(B), 53));
        assert_eq!((r[0].to_server.packets, r[0].to_client.packets), (1, 1));
        assert_eq!(r[0].to_server.ip_bytes, 20 + 8 + 10);
        assert_eq!(r[1].vlans, vec![8]);
        assert_eq!((r[2].protocol, r[2].icmp_type, r[2].client_port), (1, 8, 0));
        assert_eq!((r[2].to_server.packets, r[2].to_client.packets), (1, 1));
    }

    #[test]
    fn idle_and_active_timeouts() {
        let cfg = FlowConfig { idle_timeout_ns: 10 * SEC, active_timeout_ns: 30 * SEC, max_flows: 64 };
        let mut t = FlowTable::new(cfg);
        let u = frame(None, A, B, ipproto::UDP, &udp_hdr(1, 2, 0), 0);
        let other = frame(None, [9; 4], B, ipproto::UDP, &udp_hdr(3, 4, 0), 0);
        add(&mut t, SEC, &u);
        add(&mut t, 5 * SEC, &other);
        add(&mut t, 12 * SEC, &other);
        let r = records(&mut t);
        assert_eq!((r.len(), r[0].end, r[0].last_ns), (1, EndReason::Idle, SEC));
        // `other` every 5 s: reported at 30 s, then goes on.
        for s in (17..=50).step_by(5) {
            add(&mut t, s * SEC, &other);
        }
        let r = records(&mut t);
        assert_eq!((r.len(), r[0].end, r[0].first_ns, r[0].last_ns), (1, EndReason::Active, 5 * SEC, 32 * SEC));
        t.stop();
        let r = records(&mut t);
        assert_eq!((r.len(), r[0].first_ns, r[0].to_server.packets), (1, 37 * SEC, 3));
    }

    /// Nearly as many flows as entries, seen in turn again and again (a link with that many
    /// open connections): two choices of bucket hold them all but a few, where one choice
    /// overflowed a third of the buckets and pushed out a flow at every packet of theirs.
    #[test]
    fn a_nearly_full_table_keeps_its_flows() {
        let mut t = FlowTable::new(FlowConfig::default());
        let n = t.capacity() as u32 * 15 / 16;
        for round in 0..3u64 {
            for k in 0..n {
                let src = [10, 1, (k >> 8) as u8, k as u8];
                add(&mut t, round, &frame(None, src, B, ipproto::UDP, &udp_hdr(40000 + (k >> 16) as u16, 53, 0), 0));
            }
        }
        assert!(t.evicted < u64::from(n) / 1000, "{} of {n} flows pushed out", t.evicted);
    }

    /// `max_flows` flows open at once (the default 65,536), a few packets each in turn, 2 µs
    /// apart (bench/flow_size.sh's traffic): the table holds them without pushing any out.
    /// Sized at exactly `max_flows` entries, 4% of the flows did not fit each pass, and every
    /// packet of theirs pushed out another flow (10,955 evictions in these four passes).
    #[test]
    fn max_flows_concurrent_flows_are_not_evicted() {
        let cfg = FlowConfig::default();
        let mut t = FlowTable::new(cfg);
        let n = cfg.max_flows as u32;
        let mut ts = 0;
        for _ in 0..4 {
            for k in 0..n {
                let src = [10, 1, (k >> 8) as u8, k as u8];
                let dst = [10, 2, 0, 1 + (k % 16) as u8];
                let l4 = udp_hdr(1024 + (k * 7919 % 64000) as u16, 1 + (k % 1024) as u16, 0);
                add(&mut t, ts, &frame(None, src, dst, ipproto::UDP, &l4, 0));
                ts += 2_000;
            }
        }
        assert!(t.evicted < u64::from(n) / 1000, "{} of {n} flows pushed out", t.evicted);
        assert_eq!(t.memory_bytes(), 81_920 * 156, "docs/flows.md and --max-flows's help state it");
    }

    #[test]
    fn a_full_table_evicts_and_counts() {
        // One flow: one bucket (the flow's quarter more of an entry rounds up to a bucket).
        let mut t = FlowTable::new(FlowConfig { max_flows: 1, ..FlowConfig::default() });
        assert_eq!(t.capacity(), WAYS);
        for p in 0..(WAYS as u16 + 3) {
            add(&mut t, u64::from(p), &frame(None, A, B, ipproto::UDP, &udp_hdr(1000 + p, 53, 0), 0));
        }
        assert_eq!((t.evicted, t.live()), (3, WAYS));
        let r = records(&mut t);
        assert_eq!(r.iter().map(|r| r.client_port).collect::<Vec<_>>(), vec![1000, 1001, 1002]);
        assert!(r.iter().all(|r| r.end == EndReason::Evicted));
        assert_eq!(std::mem::size_of::<Entry>(), 152, "docs/flows.md states it");
    }

    /// The fast path reads what the dissector reads, on every frame it takes: `frame` cut at
    /// every length, with `origlen` at and beyond it.
    fn assert_parsers_agree(f: &[u8], origlen: u32, what: &str) {
        if let Some(fast) = parse_eth_ipv4(linktype::ETHERNET, f, origlen) {
            assert_eq!(Some(fast), parse_dissected(linktype::ETHERNET, f, origlen), "{what}: {f:02x?}");
        }
    }

    #[test]
    fn the_fast_path_agrees_with_the_dissector_on_odd_headers() {
        let mut frames = Vec::new();
        for proto in [ipproto::TCP, ipproto::UDP, ipproto::ICMP, ipproto::ICMPV6, ipproto::SCTP, 47] {
            let l4 = match proto {
                ipproto::TCP => tcp_hdr(40000, 80, SYN | ACK | 0x100),
                ipproto::UDP => udp_hdr(53, 5353, 12),
                _ => vec![8, 0, 1, 2, 3, 4, 5, 6],
            };
            frames.push(frame(None, A, B, proto, &l4, 12));
        }
        for base in frames {
            for total in [0u16, 1, 19, 20, 21, 24, 28, 40, 60, 1500] {
                for frag in [0u16, 0x2000, 0x0001, 0x4000] {
                    let mut f = base.clone();
                    f[16..18].copy_from_slice(&total.to_be_bytes());
                    f[20..22].copy_from_slice(&frag.to_be_bytes());
                    for cut in 0..=f.len() {
                        for extra in [0, 3, 100] {
                            let what = format!("total {total} frag {frag:#x} cut {cut} +{extra}");
                            assert_parsers_agree(&f[..cut], (cut + extra) as u32, &what);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_fast_path_agrees_with_the_dissector_on_the_corpus() {
        let Some(files) = wv_testkit::corpus_files("the_fast_path_agrees_with_the_dissector_on_the_corpus") else {
            return;
        };
        let mut taken = 0u64;
        for path in files {
            let Ok(file) = std::fs::File::open(&path) else { continue };
            let Ok(mut r) = wv_wire::reader::Reader::new(file) else { continue };
            while let Ok(Some(p)) = r.next_packet() {
                if p.linktype == linktype::ETHERNET {
                    taken += u64::from(parse_eth_ipv4(p.linktype, p.data, p.origlen).is_some());
                    assert_parsers_agree(p.data, p.origlen, &path.display().to_string());
                }
            }
        }
        assert!(taken > 1_000, "the corpus has many untagged IPv4 frames on Ethernet, {taken} taken");
    }

    #[test]
    fn non_ip_is_counted_not_kept() {
        let mut t = FlowTable::new(FlowConfig::default());
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        add(&mut t, 1, &arp);
        assert_eq!((t.not_ip, t.live()), (1, 0));
    }
}
