//! `--flow-cutoff BYTES`: only the first bytes of each connection are
//! stored (as the Time Machine keeps only the start of each connection).
//! See [`Cutoff`].

use super::hash::{flow_hash_v4, flow_hash_v6, random_secret, FlowKeys};
use super::{Buckets, Judge, Verdict};

/// Bytes of a frame the cutoff parses (every header the index's key
/// extraction reads fits: Ethernet, 4 VLAN tags, IPv6 and its extension headers).
const HEAD_LEN: usize = 256;

/// A frame's connection as the cutoff sees it, or none ([`FlowHead::NONE`]).
///
/// Two words, so that it travels in registers. As an `Option` of a key, a
/// flag and the TCP flags it was written to the stack field by field and
/// read back as one 16-byte load, which the CPU cannot serve from those
/// stores: it waits until they reach the cache, behind the arena copy's
/// stores. `perf` put 60% of the batch loop's samples at 1514 bytes on
/// that load; with two words none stands out (2026-11-28; the time per
/// packet moved less than the machine's noise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowHead {
    /// The keyed hash of the connection, the same in both directions, its
    /// low [`STATE_BITS`] clear and bit 3 set; 0: no connection.
    key: u64,
    /// TCP flag bits (0 when not TCP or not captured) in bits 0-15; bit 16
    /// set when the frame comes from the connection's higher endpoint.
    meta: u64,
}

impl FlowHead {
    /// A frame that belongs to no connection.
    pub const NONE: FlowHead = FlowHead { key: 0, meta: 0 };
    const FROM_HIGH: u64 = 1 << 16;

    #[inline(always)]
    fn new(key: u64, from_high: bool, flags: u16) -> FlowHead {
        FlowHead { key, meta: u64::from(flags) | if from_high { Self::FROM_HIGH } else { 0 } }
    }

    /// True when the frame belongs to a connection.
    #[inline(always)]
    pub fn is_some(&self) -> bool {
        self.key != 0
    }

    #[inline(always)]
    fn flags(&self) -> u16 {
        self.meta as u16
    }

    #[inline(always)]
    fn is_from_high(&self) -> bool {
        self.meta & Self::FROM_HIGH != 0
    }
}

/// Connections per bucket of the cutoff's table.
const FLOW_WAYS: usize = 3;
/// The most a connection's byte count holds (2^40 - 1: 1 TiB); it stays
/// there. A cutoff above it never cuts.
const BYTES_MAX: u64 = (1 << 40) - 1;
/// Bits of a connection's key that hold its state instead.
const STATE_BITS: u64 = 7;

/// Three connections in one cache line (one memory load per packet).
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct FlowBucket {
    /// The connection's key (its low 3 bits cleared) with its state in the
    /// low 3 bits: FIN seen from the lower (bit 0) and the higher (bit 1)
    /// endpoint, ended (bit 2). 0: an empty way.
    key: [u64; FLOW_WAYS],
    last_ns: [u64; FLOW_WAYS],
    /// Original bytes of the connection so far (both directions), 40 bits
    /// little-endian, saturating at [`BYTES_MAX`].
    bytes: [[u8; 5]; FLOW_WAYS],
}

impl FlowBucket {
    #[inline]
    fn bytes(&self, i: usize) -> u64 {
        let b = self.bytes[i];
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], 0, 0, 0])
    }

    #[inline]
    fn set_bytes(&mut self, i: usize, n: u64) {
        self.bytes[i].copy_from_slice(&n.min(BYTES_MAX).to_le_bytes()[..5]);
    }

    #[inline]
    fn state(&self, i: usize) -> u8 {
        (self.key[i] & STATE_BITS) as u8
    }

    #[inline]
    fn add_state(&mut self, i: usize, bits: u8) {
        self.key[i] |= u64::from(bits);
    }
}

const FIN_LOW: u8 = 1;
const FIN_HIGH: u8 = 2;
const ENDED: u8 = 4;

/// `--flow-cutoff BYTES`: of each TCP, UDP or SCTP connection (both
/// directions, told apart by VLAN ids, addresses, protocol and ports), only
/// the frames that start before its first BYTES original bytes are stored.
/// A connection starts again (from zero) with a SYN without ACK, and after
/// `idle` without packets. Frames without ports (not TCP/UDP/SCTP, later
/// IP fragments, truncated headers) are always stored. The table is a fixed
/// number of entries, 3 per bucket (one cache line); a new connection whose bucket is full
/// takes the place of its least recently seen one, which, if it comes back,
/// starts from zero again (it keeps more than BYTES: counted in
/// [`Cutoff::evicted`]).
pub struct Cutoff {
    buckets: Buckets<FlowBucket>,
    limit: u64,
    idle_ns: u64,
    keys: FlowKeys,
    /// Connections still active that lost their entry to a new one.
    pub evicted: u64,
}

impl Cutoff {
    /// Connections tracked by default (at least; 64 B a bucket of 3,
    /// rounded up to a power of two: 1.5 M in 32 MiB).
    pub const DEFAULT_ENTRIES: usize = 1 << 20;

    pub fn new(limit: u64, idle_ns: u64, entries: usize) -> Cutoff {
        Cutoff {
            buckets: Buckets::new(entries, FLOW_WAYS),
            limit,
            idle_ns,
            keys: FlowKeys::new(&random_secret()),
            evicted: 0,
        }
    }

    /// Starts loading the bucket of a connection.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        self.buckets.prefetch(key);
    }

    /// The connection of a frame given in parts ([`FlowHead::NONE`]: it
    /// belongs to none).
    /// Ethernet frames with at most 4 VLAN tags and IPv4, or IPv6 directly
    /// followed by TCP/UDP/SCTP, whose headers are in the first part, are
    /// read at fixed offsets (`fast_head`); every other frame goes through
    /// the index's key extraction ([`wv_wire::packet::parse`]). Both give the
    /// same answer where the first applies (a unit test compares them).
    #[inline(always)]
    pub fn head(&self, linktype: u32, parts: &[&[u8]]) -> FlowHead {
        let first = parts.first().copied().unwrap_or(&[]);
        if linktype == wv_wire::linktype::ETHERNET {
            if let Some(h) = fast_head(first, &self.keys) {
                return h;
            }
        }
        // The headers only: the first bytes of the parts, joined on the
        // stack when the frame comes in several (a re-inserted VLAN tag).
        let mut head = [0u8; HEAD_LEN];
        let frame: &[u8] = match parts {
            [one] => one,
            _ => {
                let mut n = 0;
                for p in parts {
                    let k = p.len().min(HEAD_LEN - n);
                    head[n..n + k].copy_from_slice(&p[..k]);
                    n += k;
                }
                &head[..n]
            }
        };
        slow_head(linktype, frame, &self.keys)
    }

    /// True when the frame is stored: its connection's bytes before it are
    /// fewer than the cutoff (or it belongs to no connection).
    #[inline]
    pub fn keep(&mut self, ts_ns: u64, linktype: u32, origlen: u32, frame: &[u8]) -> bool {
        let h = self.head(linktype, &[frame]);
        self.keep_head(ts_ns, origlen, h)
    }

    /// [`Cutoff::keep`] of a frame by its [`Cutoff::head`].
    #[inline]
    pub fn keep_head(&mut self, ts_ns: u64, origlen: u32, head: FlowHead) -> bool {
        if !head.is_some() {
            return true;
        }
        let (key, from_high, flags) = (head.key, head.is_from_high(), head.flags());
        let bucket = self.buckets.of(key);
        let b = &mut self.buckets.b[bucket];
        let new_conn = flags & wv_wire::views::tcp::flags::SYN != 0 && flags & wv_wire::views::tcp::flags::ACK == 0;
        let slot = match (0..FLOW_WAYS).find(|&i| b.key[i] & !STATE_BITS == key) {
            Some(i) => {
                if new_conn || ts_ns.saturating_sub(b.last_ns[i]) >= self.idle_ns {
                    (b.key[i], b.bytes[i]) = (key, [0; 5]);
                }
                i
            }
            None => {
                // An empty way, else the least recently seen one.
                let mut v = 0;
                for i in 1..FLOW_WAYS {
                    if b.last_ns[i] < b.last_ns[v] {
                        v = i;
                    }
                }
                let live =
                    b.key[v] != 0 && b.state(v) & ENDED == 0 && ts_ns.saturating_sub(b.last_ns[v]) < self.idle_ns;
                self.evicted += u64::from(live);
                (b.key[v], b.bytes[v]) = (key, [0; 5]);
                v
            }
        };
        let bytes = b.bytes(slot);
        let keep = bytes < self.limit;
        b.set_bytes(slot, bytes.saturating_add(u64::from(origlen)));
        b.last_ns[slot] = b.last_ns[slot].max(ts_ns);
        if flags & wv_wire::views::tcp::flags::RST != 0 {
            b.add_state(slot, ENDED);
        } else if flags & wv_wire::views::tcp::flags::FIN != 0 {
            b.add_state(slot, if from_high { FIN_HIGH } else { FIN_LOW });
            if b.state(slot) & (FIN_LOW | FIN_HIGH) == FIN_LOW | FIN_HIGH {
                b.add_state(slot, ENDED);
            }
        }
        keep
    }
}

/// The connection of a frame by the index's key extraction.
#[inline]
fn slow_head(linktype: u32, frame: &[u8], keys: &FlowKeys) -> FlowHead {
    use wv_wire::packet::Addr;
    let k = wv_wire::packet::parse(linktype, frame);
    let Some((sport, dport)) = k.ports else {
        return FlowHead::NONE;
    };
    let (proto, flags) = (k.protos().last().copied().unwrap_or(0), k.tcp_flags.unwrap_or(0));
    match (k.src, k.dst) {
        (Addr::V4(s), Addr::V4(d)) => {
            let (s, d) = (u32::from_be_bytes(s), u32::from_be_bytes(d));
            flow_head_v4(k.vlans(), proto, (s, sport), (d, dport), flags, keys)
        }
        (Addr::V6(s), Addr::V6(d)) => {
            let (s, d) = (u128::from_be_bytes(s), u128::from_be_bytes(d));
            flow_head_v6(k.vlans(), proto, (s, sport), (d, dport), flags, keys)
        }
        _ => FlowHead::NONE,
    }
}

/// The connection of an Ethernet frame read at fixed offsets, when its
/// headers are simple and inside `b`: Some(answer) as [`slow_head`] would
/// give it ([`FlowHead::NONE`] included), None to ask [`slow_head`]. The same leniency as the index's
/// parse (IPv4 header length from the IHL nibble, unchecked).
#[inline(always)]
fn fast_head(b: &[u8], keys: &FlowKeys) -> Option<FlowHead> {
    use wv_wire::packet::{ethertype, ipproto, MAX_VLANS};
    use wv_wire::views::{get16, get_arr, ipv4, ipv6, tcp, udp, vlan};
    let be16 = |at: usize| get16(b, at);
    let mut vlans = [0u16; MAX_VLANS];
    let mut n = 0;
    let mut off = 12;
    let mut et = be16(off)?;
    while vlan::is_tpid(et) {
        if n == MAX_VLANS {
            return None;
        }
        vlans[n] = be16(off + 2)? & vlan::VID_MASK;
        n += 1;
        off += 4;
        et = be16(off)?;
    }
    let l3 = off + 2;
    // The ports and TCP flags of a transport header at `l4`.
    // (Inlined: as a call it cost 24 instructions a packet, callgrind 2026-11-28.)
    #[inline(always)]
    fn ports(b: &[u8], l4: usize, proto: u8) -> Option<(u16, u16, u16)> {
        let ports: [u8; 4] = get_arr(b, l4 + udp::field::SRC_PORT.start)?;
        let flags = if proto == ipproto::TCP { get16(b, l4 + tcp::field::FLAGS.start)? & 0x01ff } else { 0 };
        Some((u16::from_be_bytes([ports[0], ports[1]]), u16::from_be_bytes([ports[2], ports[3]]), flags))
    }
    match et {
        ethertype::IPV4 => {
            let h: [u8; 20] = get_arr(b, l3)?;
            let proto = h[ipv4::field::PROTOCOL];
            let frag = u16::from_be_bytes([h[ipv4::field::FLG_OFF.start], h[ipv4::field::FLG_OFF.start + 1]]);
            if !matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP) || frag & ipv4::FRAG_OFFSET_MASK != 0 {
                return Some(FlowHead::NONE);
            }
            let l4 = l3 + 4 * (h[ipv4::field::VER_IHL] & 0x0f) as usize;
            let addr = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
            let (sport, dport, flags) = ports(b, l4, proto)?;
            let (src, dst) = (addr(ipv4::field::SRC_ADDR.start), addr(ipv4::field::DST_ADDR.start));
            Some(flow_head_v4(&vlans[..n], proto, (src, sport), (dst, dport), flags, keys))
        }
        ethertype::IPV6 => {
            let h: [u8; ipv6::HEADER_LEN] = get_arr(b, l3)?;
            let proto = h[ipv6::field::NXT_HDR];
            if !matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP) {
                return None;
            }
            let addr = |at: usize| u128::from_be_bytes(get_arr(&h, at).unwrap_or_default());
            let (sport, dport, flags) = ports(b, l3 + ipv6::HEADER_LEN, proto)?;
            let (src, dst) = (addr(ipv6::field::SRC_ADDR.start), addr(ipv6::field::DST_ADDR.start));
            Some(flow_head_v6(&vlans[..n], proto, (src, sport), (dst, dport), flags, keys))
        }
        // ARP and the rest: no ports.
        _ => Some(FlowHead::NONE),
    }
}

/// An IPv6 connection's keyed hash, the same for both directions, and
/// whether the frame comes from the higher endpoint (by address, then port).
#[inline(always)]
fn flow_head_v6(vlans: &[u16], proto: u8, src: (u128, u16), dst: (u128, u16), flags: u16, keys: &FlowKeys) -> FlowHead {
    let from_high = src > dst;
    let ((lo, lp), (hi, hp)) = if from_high { (dst, src) } else { (src, dst) };
    let h = flow_hash_v6(keys, flow_word(vlans, proto), ports_word(lp, hp, true), lo, hi);
    flow_key(h, from_high, flags)
}

/// [`flow_head_v6`] of an IPv4 connection: endpoints compared and hashed
/// as 48-bit words (address, port).
#[inline(always)]
fn flow_head_v4(vlans: &[u16], proto: u8, src: (u32, u16), dst: (u32, u16), flags: u16, keys: &FlowKeys) -> FlowHead {
    let (s, d) = (u64::from(src.0) << 16 | u64::from(src.1), u64::from(dst.0) << 16 | u64::from(dst.1));
    let from_high = s > d;
    let (lo, hi) = if from_high { (d, s) } else { (s, d) };
    let addrs = (lo >> 16) << 32 | hi >> 16;
    let h = flow_hash_v4(keys, flow_word(vlans, proto), ports_word(lo as u16, hi as u16, false), addrs);
    flow_key(h, from_high, flags)
}

/// VLAN ids (12 bits each, at most 4) and their number, and the transport
/// protocol, as one word of a connection's hash.
#[inline(always)]
fn flow_word(vlans: &[u16], proto: u8) -> u64 {
    let tags = vlans.iter().fold(0u64, |t, &v| t << 12 | u64::from(v & 0x0fff));
    tags | (vlans.len() as u64) << 48 | u64::from(proto) << 56
}

/// The ports of the lower and the higher endpoint and the family, as one
/// word of a connection's hash.
#[inline(always)]
fn ports_word(lp: u16, hp: u16, v6: bool) -> u64 {
    u64::from(lp) << 16 | u64::from(hp) | u64::from(v6) << 32
}

/// A connection's table key from its hash: the low bits hold the
/// connection's state in the table; never 0 (an empty way has key 0).
#[inline(always)]
fn flow_key(h: u64, from_high: bool, flags: u16) -> FlowHead {
    FlowHead::new((h & !STATE_BITS) | 8, from_high, flags)
}

impl Judge for Cutoff {
    /// The frame's connection ([`Cutoff::head`]).
    type Prepared = FlowHead;
    type Pending = ();

    #[inline(always)]
    fn prepare(&self, linktype: u32, _origlen: u32, parts: &[&[u8]]) -> FlowHead {
        let h = self.head(linktype, parts);
        self.touch(&h);
        h
    }

    #[inline(always)]
    fn judge(
        &mut self,
        ts_ns: u64,
        origlen: u32,
        head: &FlowHead,
        _same: impl FnMut(u64) -> bool,
    ) -> Result<(), Verdict> {
        if self.keep_head(ts_ns, origlen, *head) {
            Ok(())
        } else {
            Err(Verdict::Cut)
        }
    }

    #[inline(always)]
    fn stored(&mut self, (): (), _ts_ns: u64, _at: u64) {}

    #[inline(always)]
    fn touch(&self, head: &FlowHead) {
        if head.is_some() {
            self.prefetch(head.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::tests::{tcp, A, B};
    use wv_wire::views::tcp::flags::{ACK, FIN, RST, SYN};

    #[test]
    fn cutoff_keeps_frames_that_start_before_the_limit_both_directions() {
        let mut c = Cutoff::new(1000, 60_000_000_000, 1024);
        let mut t = 0;
        let mut keep = |c: &mut Cutoff, f: &[u8]| {
            t += 1;
            c.keep(t, 1, f.len() as u32, f)
        };
        assert!(keep(&mut c, &tcp(A, B, SYN, 60)));
        assert!(keep(&mut c, &tcp(B, A, SYN | ACK, 60)));
        assert!(keep(&mut c, &tcp(A, B, ACK, 500))); // 120 before
        assert!(keep(&mut c, &tcp(B, A, ACK, 500))); // 620 before
        assert!(!keep(&mut c, &tcp(A, B, ACK, 60)), "1120 before: cut");
        assert!(!keep(&mut c, &tcp(B, A, FIN | ACK, 60)));
        // Another connection is its own.
        let other = ([10, 0, 0, 3], 5000);
        assert!(keep(&mut c, &tcp(other, B, ACK, 1500)));
        assert!(!keep(&mut c, &tcp(other, B, ACK, 60)));
        // A new SYN on the same ports starts from zero.
        assert!(keep(&mut c, &tcp(A, B, SYN, 60)));
        assert!(keep(&mut c, &tcp(A, B, ACK, 60)));
        assert_eq!(c.evicted, 0);
    }

    #[test]
    fn cutoff_restarts_after_idle_and_rst_is_counted_as_end() {
        let mut c = Cutoff::new(100, 1_000, 1024);
        assert!(c.keep(0, 1, 200, &tcp(A, B, ACK, 200)));
        assert!(!c.keep(10, 1, 60, &tcp(A, B, ACK, 60)));
        assert!(c.keep(2_000, 1, 60, &tcp(A, B, ACK, 60)), "idle past 1 us: a new connection");
        assert!(c.keep(2_001, 1, 60, &tcp(A, B, RST, 60)));
        assert!(!c.keep(2_002, 1, 60, &tcp(A, B, ACK, 60)), "after RST, stragglers still count");
    }

    #[test]
    fn cutoff_table_full_fails_open_and_counts() {
        // One bucket: one connection more than it holds.
        let mut c = Cutoff::new(100, u64::MAX, 1);
        for p in 0..=FLOW_WAYS as u16 {
            assert!(c.keep(u64::from(p) + 1, 1, 200, &tcp(([10, 0, 0, 9], p), B, ACK, 200)));
        }
        assert_eq!(c.evicted, 1, "the last connection evicted the least recently seen");
        // The evicted one (port 0) comes back: starts from zero, stored.
        assert!(c.keep(10, 1, 200, &tcp(([10, 0, 0, 9], 0), B, ACK, 200)));
    }

    #[test]
    fn byte_counts_saturate_at_one_tib() {
        let big = u32::MAX; // 4 GiB frames (as origlen)
        let run = |limit: u64| {
            let mut c = Cutoff::new(limit, u64::MAX, 64);
            (1..=300u64).filter(|&t| c.keep(t, 1, big, &tcp(A, B, ACK, 60))).count()
        };
        // 256 frames reach 2^40 - 256 bytes: under the largest count, then cut.
        assert_eq!(run(BYTES_MAX), 257);
        // Above the largest count, nothing is ever cut (fails open).
        assert_eq!(run(BYTES_MAX + 1), 300);
        assert_eq!(run(10_000), 1);
    }

    #[test]
    fn frames_without_ports_are_never_cut() {
        let mut c = Cutoff::new(0, u64::MAX, 64);
        let mut f = tcp(A, B, ACK, 60);
        f[23] = 1; // ICMP
        assert!(c.keep(1, 1, 60, &f));
        assert!(c.keep(2, 1, 60, &[0u8; 10]));
        assert!(!c.keep(3, 1, 60, &tcp(A, B, ACK, 60)), "limit 0 cuts every TCP frame");
    }

    /// The fixed-offset reading of a frame's connection gives what the
    /// index's parse gives, on every shape it takes and on the ones it
    /// leaves to the parse (VLAN stacks, IPv6, fragments, truncations).
    #[test]
    fn fast_head_agrees_with_the_parse() {
        let keys = FlowKeys::new(&random_secret());
        let fast_answers = std::cell::Cell::new(0);
        let same = |f: &[u8]| {
            let slow = slow_head(wv_wire::linktype::ETHERNET, f, &keys);
            if let Some(fast) = fast_head(f, &keys) {
                assert_eq!(fast, slow, "{f:02x?}");
                fast_answers.set(fast_answers.get() + 1);
            }
            slow
        };
        let base = tcp(A, B, SYN | ACK, 60);
        let mut frames = vec![base.clone(), tcp(B, A, FIN, 80)];
        // UDP, SCTP, ICMP, ARP, a later fragment, a first fragment, IHL 6 and 3.
        for (at, v) in [(23, 17u8), (23, 132), (23, 1), (12, 0x08)] {
            let mut f = base.clone();
            f[at] = v;
            if v == 0x08 {
                f[13] = 0x06;
            }
            frames.push(f);
        }
        for (b20, b21, ihl) in [(0x00, 0x10, 0x45), (0x20, 0x00, 0x45), (0x40, 0x00, 0x46), (0x00, 0x00, 0x43)] {
            let mut f = base.clone();
            (f[20], f[21], f[14]) = (b20, b21, ihl);
            frames.push(f);
        }
        // VLAN stacks of 1 to 6 tags (802.1Q, 802.1ad, 0x9100).
        for n in 1..=6 {
            let mut f = base[..12].to_vec();
            for i in 0..n {
                let tpid: u16 = [0x8100, 0x88a8, 0x9100][i % 3];
                f.extend_from_slice(&tpid.to_be_bytes());
                f.extend_from_slice(&(0xe000u16 | (100 + i as u16)).to_be_bytes());
            }
            f.extend_from_slice(&base[12..]);
            frames.push(f);
        }
        // IPv6/TCP, IPv6/UDP, IPv6 with a hop-by-hop header.
        for nh in [6u8, 17, 0] {
            let mut f = base[..12].to_vec();
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 20, nh, 64]);
            f.extend((0..32).map(|i| i as u8 * 7));
            if nh == 0 {
                f.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]);
            }
            f.extend_from_slice(&base[34..54]);
            frames.push(f);
        }
        // Every truncation of each frame.
        let cuts: Vec<Vec<u8>> = frames.iter().flat_map(|f| (0..f.len()).map(|len| f[..len].to_vec())).collect();
        frames.extend(cuts);
        let with_flow = frames.iter().filter(|f| same(f).is_some()).count();
        assert!(with_flow > 20, "the cases must include connections: {with_flow}");
        assert!(fast_answers.get() > 200, "the fixed offsets must answer many: {}", fast_answers.get());
        // Both directions of a connection are one connection, IPv4 and IPv6.
        let (ab, ba) = (same(&tcp(A, B, ACK, 60)), same(&tcp(B, A, ACK, 60)));
        assert!(ab.is_some() && ab.key == ba.key);
        assert_ne!(ab.is_from_high(), ba.is_from_high());
        let v6 = |a: u128, b: u128, ports: (u16, u16)| flow_head_v6(&[], 6, (a, ports.0), (b, ports.1), 0, &keys);
        let (ab, ba) = (v6(1 << 100, 7, (1, 2)), v6(7, 1 << 100, (2, 1)));
        assert!(ab.is_some() && ab.key == ba.key);
        assert_ne!(ab.is_from_high(), ba.is_from_high());
    }

    /// Connections that differ in any one part (an address, a port, which
    /// end has which port, the protocol, the family, a VLAN id) have
    /// different keys, and many connections spread evenly over buckets.
    #[test]
    fn flow_keys_tell_connections_apart_and_spread() {
        let keys = FlowKeys::new(&random_secret());
        let v4 =
            |vlans: &[u16], proto: u8, a: (u32, u16), b: (u32, u16)| flow_head_v4(vlans, proto, a, b, 0, &keys).key;
        let base = v4(&[], 6, (0x0a00_0001, 40000), (0x0a00_0002, 80));
        for other in [
            v4(&[], 6, (0x0a00_0003, 40000), (0x0a00_0002, 80)),
            v4(&[], 6, (0x0a00_0001, 40001), (0x0a00_0002, 80)),
            v4(&[], 6, (0x0a00_0001, 80), (0x0a00_0002, 40000)),
            v4(&[], 17, (0x0a00_0001, 40000), (0x0a00_0002, 80)),
            v4(&[5], 6, (0x0a00_0001, 40000), (0x0a00_0002, 80)),
            flow_head_v6(&[], 6, (0x0a00_0001, 40000), (0x0a00_0002, 80), 0, &keys).key,
        ] {
            assert_ne!(base, other);
        }
        // 2^18 connections (one host to many, ports counting up, as a scan
        // or the benchmark's flows): no two keys equal, and no bucket of
        // 4096 holds more than twice its share.
        let mut seen = std::collections::HashSet::new();
        let mut load = vec![0u32; 4096];
        for i in 0..1u32 << 18 {
            let k = v4(&[], 17, (0xc0a8_0001, i as u16), (0x0a00_0000 | i >> 16, 53));
            assert!(seen.insert(k), "connection {i}: key {k:x} seen before");
            load[((k >> 32) & 4095) as usize] += 1;
        }
        let max = load.iter().max().copied().unwrap_or(0);
        assert!(max < 2 * (1 << 18) / 4096, "fullest bucket {max} of an average {}", (1 << 18) / 4096);
    }
}
