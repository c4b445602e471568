//! TCP sequence analysis, following tshark 4.0's `tcp_analyze_sequence_number`
//! (epan/dissectors/packet-tcp.c) rule for rule, so that the counts equal
//! tshark's expert info on the same packets:
//!
//! * `retransmission` counts every segment tshark marks
//!   `tcp.analysis.retransmission`, which includes its subtypes fast
//!   retransmission (after 2 or more duplicate ACKs from the other side,
//!   within 20 ms of that side's last segment) and spurious retransmission
//!   (data already acknowledged, tested first, whatever the highest sequence
//!   number seen);
//! * `out_of_order`: a segment below the highest sequence number, sent
//!   within the handshake RTT (3 ms when unknown) of the segment that set it,
//!   that does not end where the highest one did;
//! * `duplicate_ack`: a bare ACK with a window other than 0 that repeats
//!   the previous segment's window and acknowledgement number, at the
//!   highest sequence number seen.
//!
//! Sequence and acknowledgement numbers and windows are compared as they
//! are on the wire, as tshark 4.0 does: it analyses a segment before it makes
//! the numbers relative and before it scales the window, so its "not yet
//! seen" zero tests are on the absolute numbers and a duplicate ACK repeats
//! the window field, not the scaled window.
//! Handshake RTT is tshark's `tcp.analysis.initial_rtt`: from the last SYN
//! to the first ACK without SYN after it.
//!
//! A connection is a port pair until a SYN with another initial sequence
//! number reuses it (tshark's new `tcp.stream`). The flow table
//! ([`crate::flows`]) finds a segment's connection: a TCP flow holds the
//! index of its current one. Memory: one connection per TCP flow (at most
//! `max_flows`), at most `max_flows` replaced ones kept for the tables; each
//! keeps at most 10,000 unacknowledged segment ends per direction, as tshark
//! 4.0 does (`TCP_MAX_UNACKED_SEGMENTS`), and all together at most
//! `MAX_HELD` (64 MiB), a bound tshark does not have: past it a list stops
//! growing, which matters only if its count would have reached 10,000 when a
//! SYN or FIN comes (the count decides whether that adds one to the next
//! sequence number).

use crate::conv::{conv_table, Conv, ConvRow, Ip, Table};
use crate::flows::FlowFrame;
use crate::{Config, Count, Percentiles, Seen};
use serde::{Deserialize, Serialize};
use wv_wire::dissect::LayerKind;
use wv_wire::views::tcp;

const FIN: u16 = tcp::flags::FIN;
const SYN: u16 = tcp::flags::SYN;
const RST: u16 = tcp::flags::RST;
const ACK: u16 = tcp::flags::ACK;

/// Analysis flags of a segment (tshark's `TCP_A_*`).
pub mod flag {
    pub const RETRANSMISSION: u32 = 0x0001;
    pub const LOST_PACKET: u32 = 0x0002;
    pub const ACK_LOST_PACKET: u32 = 0x0004;
    pub const KEEP_ALIVE: u32 = 0x0008;
    pub const DUPLICATE_ACK: u32 = 0x0010;
    pub const ZERO_WINDOW: u32 = 0x0020;
    pub const ZERO_WINDOW_PROBE: u32 = 0x0040;
    pub const ZERO_WINDOW_PROBE_ACK: u32 = 0x0080;
    pub const KEEP_ALIVE_ACK: u32 = 0x0100;
    pub const OUT_OF_ORDER: u32 = 0x0200;
    pub const FAST_RETRANSMISSION: u32 = 0x0400;
    pub const WINDOW_UPDATE: u32 = 0x0800;
    pub const SPURIOUS_RETRANSMISSION: u32 = 0x4000;
}

/// tshark's "neutralized" count of duplicate ACKs: its -1 in an unsigned
/// field, so that it also counts as two or more for a fast retransmission.
const NEUTRALIZED: u32 = u32::MAX;

/// tshark 4.0's `TCP_MAX_UNACKED_SEGMENTS` (epan/dissectors/packet-tcp.h).
const MAX_UNACKED: usize = 10_000;
/// Unacknowledged segment ends held by all connections together (4 bytes
/// each): a capture of a million connections whose segments are never
/// acknowledged must not take tens of gigabytes.
const MAX_HELD: usize = 1 << 24;
/// Out-of-order threshold when the handshake RTT is unknown (3 ms).
const OOO_DEFAULT_NS: u64 = 3_000_000;
/// A retransmission this soon after a duplicate ACK is "fast" (20 ms).
const FAST_RETRANS_NS: u64 = 20_000_000;

// tshark's LT_SEQ, GT_SEQ and LE_SEQ as written: two numbers exactly 2^31 apart are each
// "greater" than the other, and also "less or equal".
fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}
fn gt(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}
fn le(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) <= 0
}

/// One direction of a connection (tshark's `tcp_flow_t` and its sequence info).
#[derive(Debug, Clone, Default)]
struct Half {
    base: Option<u32>,
    nextseq: u32,
    nextseq_ns: u64,
    maxseqtobeacked: u32,
    lastack: u32,
    lastack_ns: u64,
    /// The last window field; `None` before the first segment.
    window: Option<u16>,
    /// Duplicate ACKs in a row; [`NEUTRALIZED`] after an ACK of an unseen
    /// segment from the other side.
    dupacknum: u32,
    lastsegmentflags: u32,
    /// Ends of segments not yet acknowledged.
    unacked: Vec<u32>,
}

#[derive(Debug, Clone)]
struct Connection {
    /// The ends, the first segment's source first: `half[0]` is its direction.
    ends: [(Ip, u16); 2],
    /// The conversation's counters, from its first shown segment (tshark's
    /// `conv,tcp` sees only those).
    conv: Option<Conv>,
    half: [Half; 2],
    mru_syn_ns: Option<u64>,
    first_rtt_ns: Option<u64>,
}

impl Connection {
    fn new(src: (Ip, u16), dst: (Ip, u16)) -> Connection {
        Connection { ends: [src, dst], conv: None, half: Default::default(), mru_syn_ns: None, first_rtt_ns: None }
    }

    /// The handshake RTT, after the segment's analysis as in tshark (ts_mru_syn, ts_first_rtt):
    /// from the last SYN to the first ACK without SYN; a zero time (or stamp) counts as none yet.
    /// Kept as tshark's unsigned out-of-order threshold: an ACK stamped before its SYN makes it
    /// huge.
    fn handshake(&mut self, flags: u16, ts: u64) {
        if flags & (SYN | ACK) == SYN {
            self.mru_syn_ns = Some(ts);
        } else if flags & (SYN | ACK) == ACK && self.first_rtt_ns.is_none() {
            if let Some(syn) = self.mru_syn_ns.filter(|&t| t != 0) {
                self.first_rtt_ns = Some(ts.wrapping_sub(syn)).filter(|&d| d != 0);
            }
        }
    }
}

/// One handshake's RTT.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RttRow {
    pub client: String,
    pub server: String,
    pub rtt_ns: u64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TcpCounts {
    /// Segments whose analysis tshark shows (analysed, with a sane and whole header).
    pub segments: u64,
    /// All of tshark's `tcp.analysis.retransmission` (fast and spurious included).
    pub retransmissions: u64,
    pub fast_retransmissions: u64,
    pub spurious_retransmissions: u64,
    pub out_of_order: u64,
    pub duplicate_acks: u64,
    /// "Previous segment not captured".
    pub lost_segments: u64,
    /// "ACKed unseen segment".
    pub acked_unseen: u64,
    pub keep_alives: u64,
    pub zero_windows: u64,
    pub window_updates: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TcpReport {
    #[serde(flatten)]
    pub counts: TcpCounts,
    pub conversations: Table<ConvRow>,
    /// Handshake RTTs (all connections that completed one).
    pub handshake_rtt: Percentiles,
    /// The slowest handshakes.
    pub slowest_handshakes: Vec<RttRow>,
    /// Frames (1-based) marked, the first few of each kind.
    pub first_retransmissions: Vec<u64>,
    pub first_out_of_order: Vec<u64>,
    pub first_duplicate_acks: Vec<u64>,
}

pub struct TcpAnalysis {
    /// The current connection of each TCP flow.
    conns: Vec<Connection>,
    /// Connections replaced by a reuse of their ports, for the tables.
    closed: Vec<Connection>,
    cap: usize,
    /// Unacknowledged segment ends held by all connections (at most [`MAX_HELD`]).
    held: usize,
    counts: TcpCounts,
    examples: usize,
    first: [Vec<u64>; 3],
}

/// A TCP segment as the analysis needs it.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    seq: u32,
    ack: u32,
    /// The data's length; `None` when the IP length leaves less than the
    /// header ("short segment"): tshark does not analyse it.
    seglen: Option<u32>,
    flags: u16,
    win: u16,
    /// A data offset of at least 5: tshark goes on past the header length
    /// to the handshake RTT.
    sane: bool,
    /// tshark shows the analysis (and counts the segment in `conv,tcp`):
    /// analysed, sane, and the options whole in the capture.
    shown: bool,
}

impl Segment {
    /// Whether tshark shows this segment's analysis.
    pub fn shown(&self) -> bool {
        self.shown
    }
}

/// The TCP segment of a frame as far as tshark reads it: the first 16 bytes
/// of the header captured (its numbers, flags and window) and not an IP
/// fragment. tshark analyses a segment whose IP length covers its header,
/// before it looks at the header's length, then stops at a data offset
/// below 5 or at options the snapshot length cut: those segments change the
/// state but are not shown (tshark 4.0's `dissect_tcp`).
pub fn segment(s: &Seen<'_>) -> Option<Segment> {
    let l = s.dissection.layer(LayerKind::Tcp)?;
    if s.dissection.first_fragment || s.dissection.flow.later_fragment {
        return None;
    }
    let at = l.offset as usize;
    // The packet's own length (a tunnel's inner frame, a reassembled datagram), not the frame's.
    let end = (s.dissection.l4_end as usize).min(s.dissection.wire_len as usize);
    let captured = s.frame.data.get(at..(s.dissection.l4_end as usize).min(s.frame.data.len()))?;
    use tcp::field::{ACK_NUM, FLAGS, SEQ_NUM, WIN_SIZE};
    use wv_wire::views::{be16, be32};
    let h = captured.get(..WIN_SIZE.end)?;
    let hlen = 4 * usize::from(h[FLAGS.start] >> 4);
    let seglen = end.checked_sub(at + hlen).and_then(|n| u32::try_from(n).ok());
    let sane = hlen >= tcp::MIN_HEADER_LEN;
    Some(Segment {
        seq: be32(h, SEQ_NUM),
        ack: be32(h, ACK_NUM),
        seglen,
        flags: be16(h, FLAGS) & 0x0fff,
        win: be16(h, WIN_SIZE),
        sane,
        shown: seglen.is_some() && sane && captured.len() >= hlen,
    })
}

impl TcpAnalysis {
    pub fn new(cfg: &Config) -> TcpAnalysis {
        TcpAnalysis {
            conns: Vec::new(),
            closed: Vec::new(),
            cap: cfg.max_flows,
            held: 0,
            counts: TcpCounts::default(),
            examples: cfg.examples,
            first: Default::default(),
        }
    }

    /// Analyses segment `seg` of TCP flow `p`; `slot` is its flow's (1 +
    /// the index of the flow's connection, 0 before its first).
    pub fn feed(&mut self, p: &FlowFrame, seg: Segment, slot: &mut u32) {
        let (src, dst, ts) = (p.src, p.dst, p.ts);
        let i = match *slot {
            0 => {
                self.conns.push(Connection::new(src, dst));
                *slot = u32::try_from(self.conns.len()).unwrap_or(u32::MAX);
                self.conns.len() - 1
            }
            n => n as usize - 1,
        };
        let cap = self.cap;
        let c = &mut self.conns[i];
        let mut dir = usize::from(src != c.ends[0]);
        match (seg.flags & (SYN | ACK), c.half[dir].base) {
            // A new SYN with another initial sequence number: the ports are reused.
            (SYN, Some(b)) if b != seg.seq => {
                let mut old = std::mem::replace(c, Connection::new(src, dst));
                for h in &mut old.half {
                    self.held -= h.unacked.len();
                    h.unacked = Vec::new();
                }
                if self.closed.len() < cap {
                    self.closed.push(old);
                }
                dir = 0;
            }
            // The same SYN again: the highest sequence number goes back to the
            // highest acknowledgeable one (tshark, for a RST sent with the
            // sequence number it was acknowledged with, its issue 17616).
            (SYN, Some(_)) => c.half[dir].nextseq = c.half[dir].maxseqtobeacked,
            // A SYN-ACK with another sequence number: it is that side's base.
            (f, Some(b)) if f == SYN | ACK && b != seg.seq => c.half[dir].base = Some(seg.seq),
            _ => {}
        }
        if seg.shown {
            c.conv.get_or_insert_with(|| Conv::new(src, dst, ts)).add(src, p.len, ts);
        }
        let f = seg.seglen.map_or(0, |n| analyze(c, dir, ts, seg, n, &mut self.held));
        if seg.sane {
            c.handshake(seg.flags, ts);
        }
        if !seg.shown {
            return;
        }
        self.counts.segments += 1;
        let c = &mut self.counts;
        if f & (flag::RETRANSMISSION | flag::FAST_RETRANSMISSION | flag::SPURIOUS_RETRANSMISSION) != 0 {
            c.retransmissions += 1;
            if self.first[0].len() < self.examples {
                self.first[0].push(p.no);
            }
        }
        c.fast_retransmissions += u64::from(f & flag::FAST_RETRANSMISSION != 0);
        c.spurious_retransmissions += u64::from(f & flag::SPURIOUS_RETRANSMISSION != 0);
        if f & flag::OUT_OF_ORDER != 0 {
            c.out_of_order += 1;
            if self.first[1].len() < self.examples {
                self.first[1].push(p.no);
            }
        }
        if f & flag::DUPLICATE_ACK != 0 {
            c.duplicate_acks += 1;
            if self.first[2].len() < self.examples {
                self.first[2].push(p.no);
            }
        }
        c.lost_segments += u64::from(f & flag::LOST_PACKET != 0);
        c.acked_unseen += u64::from(f & flag::ACK_LOST_PACKET != 0);
        c.keep_alives += u64::from(f & flag::KEEP_ALIVE != 0);
        c.zero_windows += u64::from(f & flag::ZERO_WINDOW != 0);
        c.window_updates += u64::from(f & flag::WINDOW_UPDATE != 0);
    }

    /// The report; `untracked`: segments of flows that found the flow table full.
    pub fn finish(self, top: usize, untracked: Count) -> TcpReport {
        let mut all = Vec::with_capacity(self.closed.len() + self.conns.len());
        let mut rtts = Vec::new();
        let mut rows = Vec::new();
        for c in self.closed.into_iter().chain(self.conns) {
            if let Some(d) = c.first_rtt_ns {
                // An ACK stamped before its SYN (tshark prints a negative RTT): 0.
                let r = if (d as i64) < 0 { 0 } else { d };
                rtts.push(r);
                rows.push(RttRow { client: end_text(c.ends[0]), server: end_text(c.ends[1]), rtt_ns: r });
            }
            all.extend(c.conv);
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.rtt_ns));
        rows.truncate(top);
        let [r, o, d] = self.first;
        TcpReport {
            counts: self.counts,
            conversations: conv_table(all, true, untracked),
            handshake_rtt: Percentiles::of(rtts),
            slowest_handshakes: rows,
            first_retransmissions: r,
            first_out_of_order: o,
            first_duplicate_acks: d,
        }
    }
}

fn end_text((ip, port): (Ip, u16)) -> String {
    match ip {
        Ip::V4(_) => format!("{}:{port}", ip.text()),
        Ip::V6(_) => format!("[{}]:{port}", ip.text()),
    }
}

/// tshark's `tcp_analyze_sequence_number` for one segment sent in
/// direction `dir`; returns its analysis flags.
/// `seglen`: the segment's data length; `held`: the unacknowledged segment
/// ends all connections hold.
fn analyze(c: &mut Connection, dir: usize, ts: u64, s: Segment, seglen: u32, held: &mut usize) -> u32 {
    use flag::*;
    let (fwd_i, rev_i) = (dir, 1 - dir);
    // Each side's base (its first sequence number, or one less when that segment is not a SYN, or
    // one less than the first ACK of it) is tshark's, kept only to tell a reused port pair; the
    // analysis compares the numbers on the wire, as tshark does before it makes them relative.
    c.half[fwd_i].base.get_or_insert(if s.flags & SYN != 0 { s.seq } else { s.seq.wrapping_sub(1) });
    if s.flags & ACK != 0 {
        c.half[rev_i].base.get_or_insert(s.ack.wrapping_sub(1));
    }
    let (seq, ack, window) = (s.seq, s.ack, s.win);
    let flags = s.flags;
    let synfin = flags & (SYN | FIN) != 0;
    let plain = flags & (SYN | FIN | RST) == 0;

    let mut f = 0u32;
    let [a, b] = &mut c.half;
    let (fwd, rev) = if dir == 0 { (a, b) } else { (b, a) };
    'fwd: {
        // Zero window probe.
        if seglen == 1 && seq == fwd.nextseq && rev.window == Some(0) {
            f |= ZERO_WINDOW_PROBE;
            break 'fwd;
        }
        // Zero window.
        if window == 0 && plain {
            f |= ZERO_WINDOW;
        }
        // Previous segment not captured.
        if fwd.nextseq != 0 && gt(seq, fwd.nextseq) && flags & RST == 0 {
            f |= LOST_PACKET;
        }
        // Keep-alive.
        if seglen <= 1 && seq == fwd.nextseq.wrapping_sub(1) && plain {
            f |= KEEP_ALIVE;
        }
        // Window update.
        if seglen == 0 && window != 0 && Some(window) != fwd.window && seq == fwd.nextseq && ack == fwd.lastack && plain
        {
            f |= WINDOW_UPDATE;
        }
        // Keep-alive ACK.
        if seglen == 0
            && window != 0
            && Some(window) == fwd.window
            && seq == fwd.nextseq
            && ack == fwd.lastack
            && rev.lastsegmentflags & KEEP_ALIVE != 0
            && plain
        {
            f |= KEEP_ALIVE_ACK;
            break 'fwd;
        }
        // Zero window probe ACK.
        if seglen == 0
            && window == 0
            && Some(window) == fwd.window
            && seq == fwd.nextseq
            && ack == fwd.lastack
            && rev.lastsegmentflags & ZERO_WINDOW_PROBE != 0
            && plain
        {
            f |= ZERO_WINDOW_PROBE_ACK;
            break 'fwd;
        }
        // Duplicate ACK.
        if seglen == 0 && window != 0 && Some(window) == fwd.window && seq == fwd.nextseq && ack == fwd.lastack && plain
        {
            fwd.dupacknum = if fwd.dupacknum == NEUTRALIZED { 1 } else { fwd.dupacknum + 1 };
            f |= DUPLICATE_ACK;
        }
    }
    // The count of duplicate ACKs starts again when the acknowledged number
    // changes, not at every other segment: a window update between two runs
    // of the same ACK keeps it (tshark since 1.x; a fast retransmission after
    // "dup, dup, window update" is one for tshark).
    if ack != fwd.lastack {
        fwd.dupacknum = 0;
    }
    // ACKed unseen segment.
    if rev.maxseqtobeacked != 0 && gt(ack, rev.maxseqtobeacked) && flags & ACK != 0 {
        if lt(rev.maxseqtobeacked, rev.nextseq) {
            rev.maxseqtobeacked = rev.nextseq;
            f |= ACK_LOST_PACKET;
        } else {
            // The other side stalls with bare ACKs: said once, and its count of
            // duplicate ACKs is neutralized (the next one counts as the first).
            if rev.dupacknum == 0 {
                f |= ACK_LOST_PACKET;
            }
            rev.dupacknum = NEUTRALIZED;
        }
    }
    // Spurious retransmission, fast retransmission, out of order,
    // retransmission, in tshark's order (its default `fastrt_supersedes_ooo`).
    if (seglen > 0 || synfin) && f & KEEP_ALIVE == 0 {
        // A segment one byte below the highest that adds data follows a
        // (possible) zero window probe: not a step back.
        let not_advanced =
            fwd.nextseq != 0 && lt(seq, fwd.nextseq) && !(seglen > 1 && fwd.nextseq.wrapping_sub(1) == seq);
        'kind: {
            // Data the other side has already acknowledged, whatever the
            // highest sequence number seen.
            if seglen > 0 && rev.lastack != 0 && le(seq.wrapping_add(seglen), rev.lastack) {
                f |= SPURIOUS_RETRANSMISSION;
                break 'kind;
            }
            if !not_advanced {
                break 'kind;
            }
            // Times as tshark subtracts them, in unsigned 64 bits: a segment stamped
            // before the one it is compared with is "long after" it (captures from
            // several queues are not always in time order).
            if rev.dupacknum >= 2 && rev.lastack == seq && ts.wrapping_sub(rev.lastack_ns) < FAST_RETRANS_NS {
                f |= FAST_RETRANSMISSION;
                break 'kind;
            }
            let since = ts.wrapping_sub(fwd.nextseq_ns);
            let ooo = c.first_rtt_ns.unwrap_or(OOO_DEFAULT_NS);
            if since < ooo && fwd.nextseq != seq.wrapping_add(seglen).wrapping_add(u32::from(synfin)) {
                f |= OUT_OF_ORDER;
                break 'kind;
            }
            f |= RETRANSMISSION;
        }
    }
    let mut nextseq = seq.wrapping_add(seglen);
    if (seglen > 0 || synfin) && fwd.unacked.len() < MAX_UNACKED {
        if synfin {
            nextseq = nextseq.wrapping_add(1);
        }
        if *held < MAX_HELD {
            fwd.unacked.push(nextseq);
            *held += 1;
        }
    }
    // The highest sequence number seen (any segment, a bare ACK included).
    if (fwd.nextseq == 0 || gt(nextseq, fwd.nextseq)) && f & ZERO_WINDOW_PROBE == 0 {
        fwd.nextseq = nextseq;
        fwd.nextseq_ns = ts;
    }
    if (seq == fwd.maxseqtobeacked || fwd.maxseqtobeacked == 0) && f & ZERO_WINDOW_PROBE == 0 {
        fwd.maxseqtobeacked = fwd.nextseq;
    }
    fwd.window = Some(window);
    fwd.lastack = ack;
    fwd.lastack_ns = ts;
    fwd.lastsegmentflags = f;
    // Segments of the other direction this acknowledges: by the acknowledgement number field
    // whatever the flags, as tshark does (a SYN's zero field drops about half of them).
    let before = rev.unacked.len();
    rev.unacked.retain(|&end| gt(end, ack));
    *held -= before - rev.unacked.len();
    f
}

/// Packets and bytes of the connections (for the mix's top flows).
pub fn total(r: &TcpReport) -> Count {
    let mut c = Count::default();
    for row in &r.conversations.rows {
        let t = row.total();
        c.packets += t.packets;
        c.bytes += t.bytes;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`analyze`] of a segment with its data length.
    fn an(c: &mut Connection, dir: usize, ts: u64, s: Segment, held: &mut usize) -> u32 {
        analyze(c, dir, ts, s, s.seglen.unwrap(), held)
    }

    /// A segment below the highest sequence number but stamped before the
    /// segment that set it is a retransmission for tshark (its unsigned time
    /// difference is huge), not out of order (seen live: frames of two
    /// fanout queues merged with a stamp 449 ns back).
    #[test]
    fn a_segment_stamped_before_the_highest_is_a_retransmission() {
        let (a, b) = ((Ip::V4([10, 0, 0, 1]), 1000), (Ip::V4([10, 0, 0, 2]), 80));
        let (mut c, mut held) = (Connection::new(a, b), 0);
        let seg = |seq| Segment { seq, ack: 0, seglen: Some(100), flags: 0, win: 1000, sane: true, shown: true };
        assert_eq!(an(&mut c, 0, 10_000, seg(5000), &mut held), 0);
        assert_eq!(an(&mut c, 0, 20_000, seg(5200), &mut held) & flag::LOST_PACKET, flag::LOST_PACKET);
        assert_eq!(an(&mut c, 0, 19_000, seg(5100), &mut held), flag::RETRANSMISSION);
        // Stamped after it, within the out-of-order window: out of order.
        let mut c = Connection::new(a, b);
        an(&mut c, 0, 10_000, seg(5000), &mut held);
        an(&mut c, 0, 20_000, seg(5200), &mut held);
        assert_eq!(an(&mut c, 0, 21_000, seg(5100), &mut held), flag::OUT_OF_ORDER);
    }

    /// Two duplicate ACKs, a window update with the same ACK, then the
    /// segment they ask for: a fast retransmission for tshark, whose count
    /// of duplicates starts again only when the acknowledged number changes
    /// (seen live: tshark 4.0 against a count reset by the window update).
    #[test]
    fn a_window_update_keeps_the_count_of_duplicate_acks() {
        let (a, b) = ((Ip::V4([10, 0, 0, 1]), 1000), (Ip::V4([10, 0, 0, 2]), 80));
        let (mut c, mut held) = (Connection::new(a, b), 0);
        let data = |seq| Segment { seq, ack: 5001, seglen: Some(100), flags: ACK, win: 1000, sane: true, shown: true };
        let ack = |ack, win| Segment { seq: 5001, ack, seglen: Some(0), flags: ACK, win, sane: true, shown: true };
        for (i, seq) in [1001, 1101, 1201].into_iter().enumerate() {
            an(&mut c, 0, 1_000 * (i as u64 + 1), data(seq), &mut held);
        }
        assert_eq!(an(&mut c, 1, 4_000, ack(1101, 1000), &mut held) & flag::DUPLICATE_ACK, 0);
        assert_eq!(an(&mut c, 1, 4_100, ack(1101, 1000), &mut held), flag::DUPLICATE_ACK);
        assert_eq!(an(&mut c, 1, 4_200, ack(1101, 1000), &mut held), flag::DUPLICATE_ACK);
        assert_eq!(an(&mut c, 1, 4_300, ack(1101, 2000), &mut held), flag::WINDOW_UPDATE);
        assert_eq!(an(&mut c, 0, 4_400, data(1101), &mut held), flag::FAST_RETRANSMISSION);
        // A new acknowledged number starts the count again.
        an(&mut c, 1, 4_500, ack(1301, 2000), &mut held);
        assert_eq!(c.half[1].dupacknum, 0);
    }

    #[test]
    fn sequence_comparisons_wrap() {
        assert!(lt(u32::MAX, 1));
        assert!(gt(1, u32::MAX));
        assert!(le(5, 5));
        // tshark's macros exactly 2^31 apart: each is greater than the other, and less or equal.
        let (x, y) = (7u32, 7u32.wrapping_add(1 << 31));
        assert!(gt(x, y) && gt(y, x) && le(x, y) && le(y, x) && lt(x, y) && lt(y, x));
    }

    /// A fresh connection from 10.0.0.1:1000 to 10.0.0.2:80.
    fn conn() -> Connection {
        Connection::new((Ip::V4([10, 0, 0, 1]), 1000), (Ip::V4([10, 0, 0, 2]), 80))
    }

    /// A shown segment: sequence and acknowledgement numbers, data length, flags, window.
    fn seg(seq: u32, ack: u32, len: u32, flags: u16, win: u16) -> Segment {
        Segment { seq, ack, seglen: Some(len), flags, win, sane: true, shown: true }
    }

    #[test]
    fn a_window_of_zero_on_a_plain_segment_is_a_zero_window() {
        let (mut c, mut held) = (conn(), 0);
        assert_eq!(an(&mut c, 1, 1_000, seg(5001, 1001, 0, ACK, 0), &mut held), flag::ZERO_WINDOW);
        // Not on a SYN, FIN or RST.
        assert_eq!(an(&mut c, 1, 2_000, seg(5001, 1001, 0, ACK | RST, 0), &mut held) & flag::ZERO_WINDOW, 0);
    }

    #[test]
    fn a_segment_one_below_the_next_is_a_keep_alive_and_its_answer_a_keep_alive_ack() {
        let (mut c, mut held) = (conn(), 0);
        an(&mut c, 0, 1_000, seg(1001, 5001, 100, ACK, 1000), &mut held);
        an(&mut c, 1, 2_000, seg(5001, 1101, 0, ACK, 2000), &mut held);
        assert_eq!(an(&mut c, 0, 10_000_000, seg(1100, 5001, 0, ACK, 1000), &mut held), flag::KEEP_ALIVE);
        assert_eq!(an(&mut c, 1, 10_001_000, seg(5001, 1101, 0, ACK, 2000), &mut held), flag::KEEP_ALIVE_ACK);
    }

    #[test]
    fn data_already_acknowledged_is_a_spurious_retransmission() {
        let (mut c, mut held) = (conn(), 0);
        an(&mut c, 0, 1_000, seg(1001, 5001, 100, ACK, 1000), &mut held);
        an(&mut c, 1, 2_000, seg(5001, 1101, 0, ACK, 2000), &mut held);
        assert_eq!(an(&mut c, 0, 3_000, seg(1001, 5001, 100, ACK, 1000), &mut held), flag::SPURIOUS_RETRANSMISSION);
    }

    #[test]
    fn a_step_back_after_the_out_of_order_window_is_a_retransmission() {
        let (mut c, mut held) = (conn(), 0);
        an(&mut c, 0, 1_000, seg(1001, 5001, 100, ACK, 1000), &mut held);
        an(&mut c, 0, 2_000, seg(1101, 5001, 100, ACK, 1000), &mut held);
        // 3 ms (no handshake RTT known) after the highest: not out of order any more.
        assert_eq!(
            an(&mut c, 0, 2_000 + OOO_DEFAULT_NS, seg(1001, 5001, 100, ACK, 1000), &mut held),
            flag::RETRANSMISSION
        );
        // A known handshake RTT is the window instead.
        let mut c = conn();
        c.first_rtt_ns = Some(10_000_000);
        an(&mut c, 0, 1_000, seg(1001, 5001, 100, ACK, 1000), &mut held);
        an(&mut c, 0, 2_000, seg(1101, 5001, 100, ACK, 1000), &mut held);
        assert_eq!(
            an(&mut c, 0, 2_000 + OOO_DEFAULT_NS, seg(1001, 5001, 100, ACK, 1000), &mut held),
            flag::OUT_OF_ORDER
        );
    }

    #[test]
    fn an_ack_beyond_the_data_seen_is_an_acked_unseen_segment() {
        let (mut c, mut held) = (conn(), 0);
        an(&mut c, 0, 1_000, seg(1001, 5001, 100, ACK, 1000), &mut held);
        assert_eq!(an(&mut c, 1, 2_000, seg(5001, 1201, 0, ACK, 2000), &mut held), flag::ACK_LOST_PACKET);
    }

    #[test]
    fn one_byte_into_a_zero_window_is_a_probe() {
        let (mut c, mut held) = (conn(), 0);
        an(&mut c, 0, 1_000, seg(1001, 5001, 100, ACK, 1000), &mut held);
        an(&mut c, 1, 2_000, seg(5001, 1101, 0, ACK, 0), &mut held);
        assert_eq!(an(&mut c, 0, 3_000, seg(1101, 5001, 1, ACK, 1000), &mut held), flag::ZERO_WINDOW_PROBE);
        // The probe does not move the highest sequence number.
        assert_eq!(c.half[0].nextseq, 1101);
    }

    #[test]
    fn unacknowledged_ends_are_held_until_acknowledged() {
        let (mut c, mut held) = (conn(), 0);
        an(&mut c, 0, 1_000, seg(1001, 5001, 100, ACK, 1000), &mut held);
        an(&mut c, 0, 2_000, seg(1101, 5001, 100, ACK, 1000), &mut held);
        assert_eq!((held, c.half[0].unacked.as_slice()), (2, [1101, 1201].as_slice()));
        an(&mut c, 1, 3_000, seg(5001, 1101, 0, ACK, 2000), &mut held);
        assert_eq!((held, c.half[0].unacked.as_slice()), (1, [1201].as_slice()));
    }

    #[test]
    fn the_handshake_rtt_runs_from_the_last_syn_to_the_first_ack() {
        let mut c = conn();
        c.handshake(SYN, 1_000);
        c.handshake(SYN, 5_000);
        c.handshake(SYN | ACK, 6_000);
        c.handshake(ACK, 9_000);
        c.handshake(ACK, 20_000);
        assert_eq!(c.first_rtt_ns, Some(4_000));
        // A SYN stamped 0 counts as none.
        let mut c = conn();
        c.handshake(SYN, 0);
        c.handshake(ACK, 9_000);
        assert_eq!(c.first_rtt_ns, None);
    }

    /// The TCP report of segments (time, from the client or not, seq, ack, flags, data length)
    /// between 10.0.0.1:1000 (the client) and 10.0.0.2:80.
    fn report(segs: &[(u64, bool, u32, u32, u16, usize)]) -> TcpReport {
        let mut a = crate::Analyzer::new(Config::default()).unwrap();
        let (c, s) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        for &(ts, from_client, seq, ack, flags, len) in segs {
            let f = if from_client {
                crate::test_frames::tcp(c, 1000, s, 80, seq, ack, flags, len)
            } else {
                crate::test_frames::tcp(s, 80, c, 1000, seq, ack, flags, len)
            };
            crate::test_frames::feed(&mut a, ts, &f);
        }
        a.finish().tcp
    }

    #[test]
    fn a_handshake_gives_its_rtt_and_the_segments_one_conversation() {
        // From 1 µs: a SYN stamped 0 gives no RTT (tshark's "not yet" zero).
        let r = report(&[
            (1_000, true, 100, 0, SYN, 0),
            (1_001_000, false, 500, 101, SYN | ACK, 0),
            (3_001_000, true, 101, 501, ACK, 0),
        ]);
        assert_eq!((r.handshake_rtt.count, r.handshake_rtt.p50_ns), (1, 3_000_000));
        let h = &r.slowest_handshakes[0];
        assert_eq!((h.client.as_str(), h.server.as_str(), h.rtt_ns), ("10.0.0.1:1000", "10.0.0.2:80", 3_000_000));
        assert_eq!((r.counts.segments, r.conversations.count), (3, 1));
        let row = &r.conversations.rows[0];
        assert_eq!(
            (row.a.as_str(), row.port_a, row.a_to_b.packets, row.b_to_a.packets),
            ("10.0.0.1", Some(1000), 2, 1)
        );
    }

    #[test]
    fn the_slowest_handshakes_come_first() {
        let r = report(&[
            (1_000, true, 100, 0, SYN, 0),
            (3_001_000, true, 101, 501, ACK, 0),
            // The ports again, a new connection: 10 ms.
            (20_000_000, true, 7_000, 0, SYN, 0),
            (30_000_000, true, 7_001, 801, ACK, 0),
        ]);
        let rtts: Vec<u64> = r.slowest_handshakes.iter().map(|h| h.rtt_ns).collect();
        assert_eq!(rtts, [10_000_000, 3_000_000]);
        assert_eq!((r.handshake_rtt.count, r.handshake_rtt.min_ns, r.handshake_rtt.max_ns), (2, 3_000_000, 10_000_000));
    }

    #[test]
    fn a_syn_with_another_initial_sequence_number_is_a_new_connection() {
        let r = report(&[
            (0, true, 100, 0, SYN, 0),
            (1_000, true, 101, 0, ACK, 10),
            // The same SYN again is a retransmission of it, in the same connection.
            (2_000_000_000, true, 100, 0, SYN, 0),
            (3_000_000_000, true, 9_000, 0, SYN, 0),
        ]);
        assert_eq!((r.conversations.count, r.counts.retransmissions), (2, 1));
        let packets: Vec<u64> = r.conversations.rows.iter().map(|c| c.a_to_b.packets).collect();
        assert_eq!(packets, [3, 1]);
        assert_eq!(r.first_retransmissions, [3]);
    }
}
