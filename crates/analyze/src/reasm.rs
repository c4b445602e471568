//! IP reassembly, as far as the statistics need it: tshark reassembles IPv4
//! and IPv6 fragments (`ip.defragment` and `ipv6.defragment`, on by
//! default) and dissects the datagram's TCP or UDP header once, at the frame
//! that completes it, with that frame's length; until then each fragment
//! counts in its IP conversation only, and a datagram never completed is
//! never a TCP or UDP packet.
//!
//! The datagram is not rebuilt: a fragment at offset 0 leaves its IP header
//! and the first [`HEAD`] bytes of its payload (every transport header and
//! RTP's fit), the others only the byte ranges they cover. The frame that
//! completes the cover gets a [`Datagram`]: that header, its length fields
//! set to the whole datagram, and those first bytes, which the analysers
//! dissect as a packet whose capture stopped there.
//!
//! A first fragment tshark cannot add (the capture cut its payload) it
//! dissects as it is, as TCP or UDP ([`Fed::FirstAsIs`]).
//!
//! Memory: at most `cap` datagrams in progress (a fragment of a new one that
//! finds the table full takes the place of those not added to for
//! [`STALE_NS`], or if there are none is counted in [`Reassembly::untracked`]
//! and stays a fragment) and [`MAX_RANGES`] separate ranges each (past them the datagram
//! is given up). A fragment whose bytes the capture cut is not added (tshark
//! cannot add it either), so its datagram never completes.

use crate::conv::Ip;
use std::collections::HashMap;
use wv_wire::dissect::{Dissection, Encap, LayerKind};
use wv_wire::views::{ipproto, ipv4, ipv6};

/// Payload bytes kept of a datagram's first fragment.
pub const HEAD: usize = 128;
/// Separate byte ranges a datagram may be in before it is given up.
pub const MAX_RANGES: usize = 64;
/// A datagram in progress whose last fragment came longer ago than this
/// (capture time) gives its place to a new one when the table is full (as
/// Linux's `ipfrag_time`, 30 s; tshark waits for ever, with no bound).
pub const STALE_NS: u64 = 30_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: Ip,
    dst: Ip,
    id: u32,
    proto: u8,
}

#[derive(Default)]
struct Pending {
    /// The first fragment's IP header (offset 0, no more-fragments flag)
    /// and up to [`HEAD`] bytes of its payload; empty until it is seen.
    head: Vec<u8>,
    /// Length of the IP header in `head`.
    head_hl: usize,
    /// Byte ranges of the payload seen, sorted, merged.
    ranges: Vec<(u32, u32)>,
    /// The payload's length, once the last fragment is seen.
    total: Option<u32>,
    /// When its latest fragment was seen.
    last_ns: u64,
}

/// What a frame is to the reassembly.
pub enum Fed {
    /// Not a fragment, or one held (its IP header counts, no transport).
    Nothing,
    /// The frame completes this datagram: its TCP or UDP header counts here.
    Complete(Datagram),
    /// A first fragment not added (the capture cut it), which tshark
    /// dissects as it is: its TCP or UDP header counts.
    FirstAsIs,
}

/// A reassembled datagram: its header and first bytes, dissected.
pub struct Datagram {
    pub data: Vec<u8>,
    /// The whole datagram's length (header included).
    pub wire_len: u32,
    pub encap: Encap,
}

/// One fragment as read from a frame's dissection.
struct Fragment {
    key: Key,
    v6: bool,
    /// Where the IP header starts in the frame, and its length (IPv6: the fixed header only).
    ip_at: usize,
    ip_hl: usize,
    /// The fragment's payload: offset in the datagram, where it starts in the frame, length.
    offset: u32,
    at: usize,
    len: usize,
    more: bool,
}

pub struct Reassembly {
    table: HashMap<Key, Pending>,
    cap: usize,
    /// When stale datagrams were last looked for (at most once a second of capture time).
    swept_ns: Option<u64>,
    /// Fragments of datagrams that found the table full.
    pub untracked: u64,
}

impl Reassembly {
    pub fn new(cap: usize) -> Reassembly {
        Reassembly { table: HashMap::new(), cap, swept_ns: None, untracked: 0 }
    }

    /// Adds the frame's fragment, if it is one (the frame seen at `ts_ns`).
    pub fn feed(&mut self, d: &Dissection, data: &[u8], ts_ns: u64) -> Fed {
        if !(d.first_fragment || d.flow.later_fragment) {
            return Fed::Nothing;
        }
        let Some(f) = fragment(d, data) else {
            return Fed::Nothing;
        };
        // tshark adds a fragment whose payload is all captured and not
        // empty; a first fragment it does not add, it dissects as it is.
        if f.len == 0 || f.at + f.len > data.len() {
            return if f.offset == 0 { Fed::FirstAsIs } else { Fed::Nothing };
        }
        self.add(&f, data, ts_ns).map_or(Fed::Nothing, Fed::Complete)
    }

    /// Drops the datagrams whose latest fragment is [`STALE_NS`] older than
    /// `now`, at most once a second of capture time (a full table of fresh
    /// ones is not walked per fragment).
    fn sweep(&mut self, now: u64) {
        if self.swept_ns.is_some_and(|t| now.abs_diff(t) < 1_000_000_000) {
            return;
        }
        self.swept_ns = Some(now);
        self.table.retain(|_, p| now.saturating_sub(p.last_ns) < STALE_NS);
    }

    /// Adds a fragment; the datagram when it completes one.
    fn add(&mut self, f: &Fragment, data: &[u8], ts_ns: u64) -> Option<Datagram> {
        if !self.table.contains_key(&f.key) && self.table.len() >= self.cap {
            self.sweep(ts_ns);
            if self.table.len() >= self.cap {
                self.untracked += 1;
                return None;
            }
        }
        let p = self.table.entry(f.key).or_default();
        p.last_ns = p.last_ns.max(ts_ns);
        let end = f.offset.checked_add(u32::try_from(f.len).ok()?)?;
        if !add_range(&mut p.ranges, (f.offset, end)) {
            return None;
        }
        if !f.more {
            p.total = Some(end);
        }
        if f.offset == 0 && p.head.is_empty() {
            p.head_hl = f.ip_hl;
            p.head.extend_from_slice(&data[f.ip_at..f.ip_at + p.head_hl]);
            p.head.extend_from_slice(&data[f.at..f.at + f.len.min(HEAD)]);
            if f.v6 {
                // The fixed header's next header becomes the fragment header's.
                p.head[6] = f.key.proto;
            }
        }
        let total = p.total?;
        if p.head.is_empty() || p.ranges != [(0, total)] {
            return None;
        }
        let p = self.table.remove(&f.key)?;
        Some(datagram(p, f.v6, total))
    }
}

/// The datagram of a complete entry: length fields of the whole (0 where
/// they do not fit 16 bits: "the rest of the packet", as for TSO).
fn datagram(mut p: Pending, v6: bool, total: u32) -> Datagram {
    let wire_len = p.head_hl as u32 + total;
    if v6 {
        let plen = u16::try_from(total).unwrap_or(0);
        p.head[4..6].copy_from_slice(&plen.to_be_bytes());
    } else {
        // Not fragmented: no flags, offset 0.
        p.head[6..8].copy_from_slice(&[0, 0]);
        if let Ok(mut h) = ipv4::Packet::new_checked(&mut p.head[..]) {
            h.set_total_len(u16::try_from(wire_len).unwrap_or(0));
            h.fill_checksum();
        }
    }
    Datagram { data: p.head, wire_len, encap: if v6 { Encap::Ipv6 } else { Encap::Ipv4 } }
}

/// Adds `r` to the sorted, merged `ranges`; false when there would be too many.
fn add_range(ranges: &mut Vec<(u32, u32)>, r: (u32, u32)) -> bool {
    if r.0 >= r.1 {
        return true;
    }
    let i = ranges.partition_point(|x| x.1 < r.0);
    let mut j = i;
    let (mut lo, mut hi) = r;
    while j < ranges.len() && ranges[j].0 <= hi {
        lo = lo.min(ranges[j].0);
        hi = hi.max(ranges[j].1);
        j += 1;
    }
    if i == j && ranges.len() >= MAX_RANGES {
        return false;
    }
    ranges.splice(i..j, [(lo, hi)]);
    true
}

/// The fragment a frame's first IP header (and IPv6 fragment header) describes.
fn fragment(d: &Dissection, data: &[u8]) -> Option<Fragment> {
    let ip = d.layers().iter().find(|l| matches!(l.kind, LayerKind::Ipv4 | LayerKind::Ipv6))?;
    let at = ip.offset as usize;
    let (src, dst) = (Ip::of(&d.flow.src)?, Ip::of(&d.flow.dst)?);
    if ip.kind == LayerKind::Ipv4 {
        let p = ipv4::Packet::new_checked(data.get(at..)?).ok()?;
        let (hl, total) = (p.header_len(), usize::from(p.total_len()));
        return Some(Fragment {
            key: Key { src, dst, id: u32::from(p.ident()), proto: p.next_header().into() },
            v6: false,
            ip_at: at,
            ip_hl: hl,
            offset: u32::from(p.frag_offset()),
            at: at + hl,
            len: total.checked_sub(hl)?,
            more: p.more_frags(),
        });
    }
    let p = ipv6::Packet::new_checked(data.get(at..)?).ok()?;
    let end = at + ipv6::HEADER_LEN + usize::from(p.payload_len());
    let fh = d.layers().iter().find(|l| l.kind == LayerKind::Ipv6Ext(ipproto::FRAGMENT))?.offset as usize;
    let h = ipv6::ExtHeader::new_checked(data.get(fh..)?, ipproto::FRAGMENT).ok()?;
    // The identification: the fragment header's last 4 bytes (`data` starts at its third).
    let id = u32::from_be_bytes(wv_wire::views::get_arr(h.data(), 2)?);
    Some(Fragment {
        key: Key { src, dst, id, proto: h.next_header().into() },
        v6: true,
        ip_at: at,
        ip_hl: ipv6::HEADER_LEN,
        offset: u32::from(h.frag_offset()),
        at: fh + h.header_len(),
        len: end.checked_sub(fh + h.header_len())?,
        more: h.more_frags(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use wv_wire::dissect::dissect;

    /// An Ethernet frame of an IPv4 UDP fragment of datagram `id` (40 payload bytes).
    fn fragment_frame(id: u16, offset_words: u16, more: bool) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let mut ip = vec![0x45, 0, 0, 60, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        ip[6..8].copy_from_slice(&(offset_words | if more { 0x2000 } else { 0 }).to_be_bytes());
        let c = !wv_wire::views::ones_sum(0, &ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        let mut payload = vec![0u8; 40];
        payload[..8].copy_from_slice(&[0x04, 0x57, 0x08, 0xae, 0, 80, 0, 0]);
        f.extend_from_slice(&payload);
        f
    }

    fn feed(r: &mut Reassembly, f: &[u8], ts: u64) -> Option<u32> {
        match r.feed(&dissect(1, f, f.len() as u32), f, ts) {
            Fed::Complete(g) => Some(g.wire_len),
            _ => None,
        }
    }

    #[test]
    fn a_full_table_gives_stale_datagrams_place() {
        let mut r = Reassembly::new(2);
        // Two datagrams' first halves fill the table.
        assert_eq!(feed(&mut r, &fragment_frame(1, 0, true), 0), None);
        assert_eq!(feed(&mut r, &fragment_frame(2, 0, true), 1), None);
        // A third, 10 s later: nothing stale yet, not tracked.
        assert_eq!(feed(&mut r, &fragment_frame(3, 0, true), 10_000_000_000), None);
        assert_eq!(r.untracked, 1);
        // Datagram 2 completes (20 s); datagram 5 takes its place (21 s).
        assert_eq!(feed(&mut r, &fragment_frame(2, 5, false), 20_000_000_000), Some(20 + 80));
        assert_eq!(feed(&mut r, &fragment_frame(5, 0, true), 21_000_000_000), None);
        // 35 s in, the table is full: datagram 1 (0 s) is stale and gives its place, 5 is not.
        assert_eq!(feed(&mut r, &fragment_frame(4, 0, true), 35_000_000_000), None);
        assert_eq!(feed(&mut r, &fragment_frame(4, 5, false), 35_000_000_001), Some(100));
        assert_eq!(r.untracked, 1);
        // Datagram 1's second half: its first is gone, and the table is full of fresh ones.
        assert_eq!(feed(&mut r, &fragment_frame(6, 0, true), 35_500_000_000), None);
        assert_eq!(feed(&mut r, &fragment_frame(1, 5, false), 36_000_000_000), None);
        assert_eq!(r.untracked, 2);
        assert_eq!(feed(&mut r, &fragment_frame(5, 5, false), 37_000_000_000), Some(100), "5 was kept");
    }

    #[test]
    fn ranges_merge_and_are_bounded() {
        let mut r = Vec::new();
        assert!(add_range(&mut r, (100, 200)));
        assert!(add_range(&mut r, (0, 50)));
        assert!(add_range(&mut r, (300, 400)));
        assert_eq!(r, [(0, 50), (100, 200), (300, 400)]);
        assert!(add_range(&mut r, (50, 100)), "adjacent ranges join");
        assert_eq!(r, [(0, 200), (300, 400)]);
        assert!(add_range(&mut r, (150, 350)), "overlaps join");
        assert_eq!(r, [(0, 400)]);
        let mut many = Vec::new();
        for i in 0..MAX_RANGES as u32 {
            assert!(add_range(&mut many, (i * 10, i * 10 + 5)));
        }
        assert!(!add_range(&mut many, (10_000, 10_005)), "one range too many");
        assert!(add_range(&mut many, (5, 10)), "joining two never adds one");
    }

    #[test]
    fn fragments_in_any_order_make_one_datagram_with_its_whole_length() {
        let mut r = Reassembly::new(16);
        let (first, last) = (fragment_frame(7, 0, true), fragment_frame(7, 5, false));
        assert_eq!(feed(&mut r, &last, 0), None);
        let g = match r.feed(&dissect(1, &first, first.len() as u32), &first, 1) {
            Fed::Complete(g) => g,
            _ => panic!("not complete"),
        };
        assert_eq!((g.wire_len, g.data.len(), g.encap), (100, 20 + 40, Encap::Ipv4));
        // Total length 100, no fragment flags or offset, a right checksum.
        assert_eq!((&g.data[2..4], &g.data[6..8]), (&[0u8, 100][..], &[0u8, 0][..]));
        assert_eq!(wv_wire::views::ones_sum(0, &g.data[..20]), 0xffff);
        assert_eq!(&g.data[20..28], &[0x04, 0x57, 0x08, 0xae, 0, 80, 0, 0]);
    }

    #[test]
    fn a_gap_or_a_repeated_fragment_completes_nothing() {
        let mut r = Reassembly::new(16);
        // Bytes 0-40 and 80-120 (the last): 40-80 missing.
        assert_eq!(feed(&mut r, &fragment_frame(1, 0, true), 0), None);
        assert_eq!(feed(&mut r, &fragment_frame(1, 10, false), 1), None);
        assert_eq!(feed(&mut r, &fragment_frame(1, 0, true), 2), None, "the first again");
        assert_eq!(feed(&mut r, &fragment_frame(1, 5, true), 3), Some(20 + 120));
        // A datagram of another identification is apart.
        assert_eq!(feed(&mut r, &fragment_frame(2, 5, false), 4), None);
    }

    #[test]
    fn a_fragment_the_capture_cut_is_not_added_and_a_first_one_is_dissected_as_it_is() {
        let mut r = Reassembly::new(16);
        let fed = |r: &mut Reassembly, f: &[u8]| match r.feed(&dissect(1, &f[..54], f.len() as u32), &f[..54], 0) {
            Fed::Nothing => "nothing",
            Fed::Complete(_) => "complete",
            Fed::FirstAsIs => "first as is",
        };
        assert_eq!(fed(&mut r, &fragment_frame(1, 0, true)), "first as is");
        assert_eq!(fed(&mut r, &fragment_frame(1, 5, false)), "nothing");
        // Neither was added: the whole last one completes nothing.
        assert_eq!(feed(&mut r, &fragment_frame(1, 5, false), 1), None);
        // Not a fragment at all.
        assert_eq!(fed(&mut r, &fragment_frame(9, 0, false)), "nothing");
    }
}
