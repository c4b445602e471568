//! The flow table: one entry per address pair, transport and port pair,
//! holding every per-flow state of the analysis, looked up once per packet.
//!
//! A frame whose IP header tshark's IP tap would read (see
//! [`crate::conv::ip_pair`]) belongs to one flow of its address pair:
//!
//! * a TCP flow (the port pair) when tshark would read its segment's numbers
//!   (whether or not it then shows their analysis), holding the index of its
//!   TCP connection ([`crate::qos::tcp`]);
//! * a UDP flow (the port pair) when tshark would count it in `conv,udp`,
//!   holding its RTP streams ([`crate::qos::rtp`]) and its two directions'
//!   plain streams ([`crate::qos::udp`]): the UDP conversation is the
//!   flow's own counters;
//! * one "other" flow per address pair for everything else (ICMP, other
//!   protocols, fragments, TCP or UDP headers tshark would not read).
//!
//! Each entry counts its packets and bytes per direction, so that the IP
//! conversations (the sum of the flows of an address pair, side A the
//! source of the pair's first frame) and the IP endpoints (per address, the
//! sum of its conversations: what `tshark -z endpoints,ip` prints) are
//! derived once at the end instead of being looked up per packet.
//!
//! Memory: at most `max_flows` entries; a frame of a new flow that finds
//! the table full is counted as untracked (by transport), never attributed
//! and nothing tracked is evicted.

use crate::conv::{ip_pair, udp_ports, Conv, Ip};
use crate::hash::FastState;
use crate::qos::rtp::{rtp_of, RtpHeader};
use crate::qos::tcp::{segment as segment_of, Segment};
use crate::{Count, Seen};
use std::hash::{BuildHasher, Hash, Hasher};
use wv_sys::mem::{huge_vec, prefetch};

/// What a flow carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    Tcp,
    Udp,
    /// Everything else between the two addresses (ports 0 in the key).
    Other,
}

/// A flow's key: its two ends in canonical order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowKey {
    lo: (Ip, u16),
    hi: (Ip, u16),
    transport: Transport,
}

/// Two 64-bit words of an address for the hasher.
fn words(ip: &Ip) -> (u64, u64) {
    match ip {
        Ip::V4(b) => (u64::from(u32::from_le_bytes(*b)), 0),
        Ip::V6(b) => {
            let (x, y) = b.split_at(8);
            (u64::from_le_bytes(x.try_into().unwrap_or([0; 8])), u64::from_le_bytes(y.try_into().unwrap_or([0; 8])) ^ 1)
        }
    }
}

impl Hash for FlowKey {
    // Fixed-size words, not the derived field-by-field walk: two words for
    // an IPv4 flow, five for IPv6.
    fn hash<H: Hasher>(&self, h: &mut H) {
        let (l0, l1) = words(&self.lo.0);
        let (h0, h1) = words(&self.hi.0);
        let t = match self.transport {
            Transport::Tcp => 1u64,
            Transport::Udp => 2,
            Transport::Other => 3,
        };
        h.write_u64(l0 ^ (h0 << 32));
        h.write_u64(u64::from(self.lo.1) | (u64::from(self.hi.1) << 16) | (t << 32));
        if l1 | h1 != 0 {
            h.write_u64(l1);
            h.write_u64(h1);
            h.write_u64(h0);
        }
    }
}

/// One flow: its counters and the index of its transport state.
#[derive(Debug, Clone)]
pub struct Flow {
    /// Side A is the source of the flow's first frame.
    pub conv: Conv,
    /// Number of the flow's first frame (which side of an IP conversation
    /// is A: the source of the pair's first frame).
    pub first_no: u64,
    /// 1 + the index of the flow's state in its module (the TCP connection,
    /// the UDP flow's streams); 0 for none yet.
    pub state: u32,
    pub transport: Transport,
}

impl Flow {
    fn key(&self) -> FlowKey {
        let (x, y) = (self.conv.a, self.conv.b);
        let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
        FlowKey { lo, hi, transport: self.transport }
    }
}

/// A frame's place in the flow table and what its flow's state needs of
/// it: everything owned, so that the flow work can follow a frame later
/// (see [`FlowTable::prefetch`]).
pub struct FlowFrame {
    pub src: (Ip, u16),
    pub dst: (Ip, u16),
    pub transport: Transport,
    /// The TCP segment, for a TCP flow.
    pub segment: Option<Segment>,
    /// The RTP header, for a UDP flow whose payload has one.
    pub rtp: Option<RtpHeader>,
    /// Frame number, length on the wire, time.
    pub no: u64,
    pub len: u32,
    pub ts: u64,
    /// The hash of the flow's key.
    hash: u64,
}

impl FlowFrame {
    /// `None` when the frame has no IP header that tshark would read.
    pub fn of(s: &Seen<'_>, table: &FlowTable) -> Option<FlowFrame> {
        let (sip, dip) = ip_pair(s.dissection, s.frame.data)?;
        let (mut src, mut dst) = ((sip, 0), (dip, 0));
        let (mut transport, mut segment, mut rtp) = (Transport::Other, None, None);
        match (segment_of(s), s.dissection.flow.ports) {
            (Some(seg), Some((sp, dp))) => {
                (src.1, dst.1, transport, segment) = (sp, dp, Transport::Tcp, Some(seg));
            }
            _ => {
                if let Some((sp, dp)) = udp_ports(s.dissection, s.frame.data) {
                    (src.1, dst.1, transport, rtp) = (sp, dp, Transport::Udp, rtp_of(s));
                }
            }
        }
        let (lo, hi) = if src <= dst { (src, dst) } else { (dst, src) };
        let hash = table.hasher.hash_one(FlowKey { lo, hi, transport });
        Some(FlowFrame { src, dst, transport, segment, rtp, no: s.no, len: s.len, ts: s.frame.ts_ns, hash })
    }

    fn key(&self) -> FlowKey {
        let (lo, hi) = if self.src <= self.dst { (self.src, self.dst) } else { (self.dst, self.src) };
        FlowKey { lo, hi, transport: self.transport }
    }
}

/// The table: the flows in the order they were first seen, and an open
/// addressing index over them (linear probing, at most half full; flows are
/// never removed). Each index slot holds 32 bits of the key's hash and the
/// flow's position, so that a probe reads the flow itself only when the
/// hashes agree: the index (8 bytes per slot) stays in cache where a map of
/// whole entries would not, and both are backed by huge pages when large,
/// which spares a TLB miss per lookup (in a VM, a walk of two page tables).
pub struct FlowTable {
    flows: Vec<Flow>,
    /// 0: empty; else (hash >> 32) << 32 | (1 + position).
    slots: Vec<u64>,
    hasher: FastState,
    cap: usize,
    /// Frames of flows that found the table full, by transport (TCP: the segments tshark shows;
    /// the others count as other).
    pub untracked_tcp: Count,
    pub untracked_udp: Count,
    pub untracked_other: Count,
}

/// Slots of a new table.
const FIRST_SLOTS: usize = 1 << 12;

impl FlowTable {
    /// A table of at most `cap` flows (at most `u32::MAX - 1`: positions are 32-bit).
    pub fn new(cap: usize) -> FlowTable {
        FlowTable {
            flows: Vec::new(),
            slots: vec![0; FIRST_SLOTS],
            hasher: FastState::default(),
            cap: cap.min(u32::MAX as usize - 1),
            untracked_tcp: Count::default(),
            untracked_udp: Count::default(),
            untracked_other: Count::default(),
        }
    }

    /// Starts loading the index slot where `p`'s flow is found: the
    /// analyzer does this a frame ahead of [`FlowTable::count`], so that the
    /// cache miss overlaps the next frame's work instead of stalling.
    pub fn prefetch(&self, p: &FlowFrame) {
        let i = p.hash as usize & (self.slots.len() - 1);
        prefetch(self.slots.as_ptr().wrapping_add(i).cast());
    }

    /// The flow of `p`, its counters updated with this frame; `None` (and
    /// the frame counted as untracked) when it is new and the table full.
    pub fn count(&mut self, p: &FlowFrame) -> Option<&mut Flow> {
        let (len, ts) = (p.len, p.ts);
        let key = p.key();
        let h = p.hash;
        let tag = h & !0xffff_ffff;
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                break;
            }
            if slot & !0xffff_ffff == tag {
                let at = (slot & 0xffff_ffff) as usize - 1;
                if self.flows[at].key() == key {
                    let f = &mut self.flows[at];
                    f.conv.add(p.src, len, ts);
                    return Some(f);
                }
            }
            i = (i + 1) & mask;
        }
        if self.flows.len() >= self.cap {
            match p.transport {
                // tshark's `conv,tcp` counts only the segments it shows.
                Transport::Tcp if p.segment.is_some_and(|s| s.shown()) => self.untracked_tcp.add(len),
                Transport::Udp => self.untracked_udp.add(len),
                _ => self.untracked_other.add(len),
            }
            return None;
        }
        if self.flows.len() == self.flows.capacity() {
            let mut v = huge_vec((2 * self.flows.len()).max(1024).min(self.cap));
            v.append(&mut self.flows);
            self.flows = v;
        }
        self.flows.push(Flow { conv: Conv::new(p.src, p.dst, ts), first_no: p.no, state: 0, transport: p.transport });
        // 1 + position fits: at most u32::MAX - 1 flows.
        self.slots[i] = tag | self.flows.len() as u64;
        if 2 * self.flows.len() > self.slots.len() {
            self.grow();
        }
        let f = self.flows.last_mut()?;
        f.conv.add(p.src, len, ts);
        Some(f)
    }

    /// Twice the slots, every flow placed again.
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let mut slots = huge_vec(n);
        slots.resize(n, 0u64);
        let mask = slots.len() - 1;
        for (n, f) in self.flows.iter().enumerate() {
            let h = self.hasher.hash_one(f.key());
            let mut i = h as usize & mask;
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = (h & !0xffff_ffff) | (n as u64 + 1);
        }
        self.slots = slots;
    }

    /// The flows so far, in the order they were first seen.
    pub fn flows(&self) -> &[Flow] {
        &self.flows
    }

    /// The flows, in the order they were first seen.
    pub fn into_flows(self) -> Vec<Flow> {
        self.flows
    }

    /// Every frame that found the table full.
    pub fn untracked(&self) -> Count {
        let mut c = self.untracked_tcp;
        for x in [self.untracked_udp, self.untracked_other] {
            c.packets += x.packets;
            c.bytes += x.bytes;
        }
        c
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn v4(n: u32) -> Ip {
        Ip::V4(n.to_be_bytes())
    }

    /// A frame of `transport` from `src` to `dst`, placed in `t`.
    pub(crate) fn frame(t: &FlowTable, src: (Ip, u16), dst: (Ip, u16), transport: Transport, no: u64) -> FlowFrame {
        let mut p = FlowFrame { src, dst, transport, segment: None, rtp: None, no, len: 100, ts: no * 1000, hash: 0 };
        p.hash = t.hasher.hash_one(p.key());
        p
    }

    #[test]
    fn every_flow_is_found_again_after_the_index_grows() {
        let mut t = FlowTable::new(1 << 20);
        let n = 20_000u32;
        for round in 0..2u64 {
            for i in 0..n {
                let (a, b) = ((v4(i), 1000), (v4(i), 2000));
                let transport = if i % 2 == 0 { Transport::Udp } else { Transport::Tcp };
                // Round 0 from a, round 1 from b: one flow, both directions.
                let (s, d) = if round == 0 { (a, b) } else { (b, a) };
                let p = frame(&t, s, d, transport, round * u64::from(n) + u64::from(i) + 1);
                assert!(t.count(&p).is_some());
            }
        }
        assert!(t.slots.len() >= 2 * n as usize);
        let flows = t.into_flows();
        assert_eq!(flows.len(), n as usize);
        for (i, f) in flows.iter().enumerate() {
            assert_eq!(f.conv.a, (v4(i as u32), 1000));
            assert_eq!((f.conv.a_to_b.packets, f.conv.b_to_a.packets, f.first_no), (1, 1, i as u64 + 1));
        }
    }

    #[test]
    fn ipv6_flows_that_differ_in_any_word_are_apart() {
        let mut t = FlowTable::new(1 << 20);
        let v6 = |i: usize, b: u8| {
            let mut a = [0u8; 16];
            a[i] = b;
            Ip::V6(a)
        };
        let mut n = 0;
        for i in 0..16 {
            for b in [1u8, 2] {
                n += 1;
                let p = frame(&t, (v6(i, b), 1), (v6(15 - i, 9), 2), Transport::Udp, n);
                assert_eq!(t.count(&p).map(|f| f.first_no), Some(n));
            }
        }
        assert_eq!(t.into_flows().len(), 32);
    }

    #[test]
    fn a_full_table_counts_new_flows_as_untracked_by_transport() {
        let mut t = FlowTable::new(2);
        let (x, y) = ((v4(1), 1), (v4(2), 2));
        for (no, transport) in
            [Transport::Tcp, Transport::Udp, Transport::Other, Transport::Tcp].into_iter().enumerate()
        {
            let p = frame(&t, x, y, transport, no as u64 + 1);
            let tracked = t.count(&p).is_some();
            assert_eq!(tracked, transport != Transport::Other, "{transport:?}");
        }
        assert_eq!(t.untracked_other, Count { packets: 1, bytes: 100 });
        assert_eq!(t.untracked(), Count { packets: 1, bytes: 100 });
        // The same ports on other transports are other flows.
        assert_eq!(t.into_flows().len(), 2);
    }
}
