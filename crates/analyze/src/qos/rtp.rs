//! RTP streams recognised by their header on UDP (the test of tshark's
//! heuristic RTP dissector, `-o rtp.heuristic_rtp:TRUE`, and what its RTP
//! tap then counts: see [`header`]), keyed by addresses, ports and SSRC as
//! `tshark -z rtp,streams`: packets, lost packets from sequence numbers (expected
//! from the first to the highest extended sequence number, minus received:
//! negative when packets are duplicated), inter-arrival delta and the RFC 3550
//! interarrival jitter in ms, for payload types whose clock rate is fixed
//! (RFC 3551); a dynamic payload type (96-127) has no jitter.
//!
//! A UDP flow that merely looks like RTP is counted as one: tshark only
//! tries the heuristic on ports no other dissector claims, this module on
//! every port. The flow table ([`crate::flows`]) finds a packet's streams:
//! a UDP flow's state ([`crate::qos::udp::UdpFlow`]) holds the first of
//! its streams, each the next. Memory: at
//! most `max_flows` streams; packets of further streams (or of flows that
//! found the flow table full) are counted as untracked.

use crate::conv::Ip;
use crate::flows::FlowFrame;
use crate::{Config, Seen};
use serde::{Deserialize, Serialize};
use wv_wire::dissect::LayerKind;
use wv_wire::views::{be16, be32, get16};

/// The RTP clock rate of a static payload type (RFC 3551), 0 when unknown.
pub fn clock_rate(pt: u8) -> u32 {
    match pt {
        0 | 3 | 4 | 5 | 7 | 8 | 9 | 12 | 13 | 15 | 18 => 8000,
        6 => 16000,
        10 | 11 => 44100,
        14 | 25 | 26 | 28 | 31 | 32 | 33 | 34 => 90000,
        16 => 11025,
        17 => 22050,
        _ => 0,
    }
}

/// The RTP header fields used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpHeader {
    pub pt: u8,
    pub marker: bool,
    pub seq: u16,
    pub ts: u32,
    pub ssrc: u32,
}

/// The RTP header fields used, when a UDP payload of `reported` bytes, of
/// which `p` was captured, is a packet tshark 4.0's `-z rtp,streams`
/// counts (found by sending it crafted and random payloads): version 2; not
/// RTCP (a second byte of 192-223, the marker bit and payload type 64-95,
/// which tshark hands to its RTCP dissector, RFC 5761) nor payload type
/// 72-76; the CSRC list and extension header within the payload and
/// captured (tshark stops at the first byte the capture lacks, before its
/// tap sees the packet); with the padding bit, the whole payload captured
/// and a last byte of 1 up to the bytes after the header.
pub fn header(p: &[u8], reported: usize) -> Option<RtpHeader> {
    if p.len() < 12 || reported < p.len() || p[0] >> 6 != 2 {
        return None;
    }
    let pt = p[1] & 0x7f;
    if (72..=76).contains(&pt) || (192..=223).contains(&p[1]) {
        return None;
    }
    let cc = usize::from(p[0] & 0x0f);
    let mut hl = 12 + 4 * cc;
    if p[0] & 0x10 != 0 {
        // The extension's length word must be captured; its words need only be reported.
        let words = usize::from(get16(p, hl + 2)?);
        hl += 4 + 4 * words;
    } else if hl > p.len() {
        return None;
    }
    if hl > reported {
        return None;
    }
    if p[0] & 0x20 != 0 {
        let pad = usize::from(*p.last()?);
        if p.len() < reported || pad == 0 || pad > reported - hl {
            return None;
        }
    }
    // The fixed header's 12 bytes are there (checked above).
    let (seq, ts, ssrc) = (be16(p, 2..4), be32(p, 4..8), be32(p, 8..12));
    Some(RtpHeader { pt, marker: p[1] & 0x80 != 0, seq, ts, ssrc })
}

type Key = ((Ip, u16), (Ip, u16), u32);

#[derive(Debug, Clone)]
struct Stream {
    key: Key,
    /// 1 + the index of the next stream of the same UDP flow, 0 at the end.
    next: u32,
    /// The first packet's payload type (the report's) and the last one's.
    pt: u8,
    last_pt: u8,
    packets: u64,
    first_ns: u64,
    last_ns: u64,
    base_seq: i64,
    max_seq: i64,
    last_seq: i64,
    last_rtp_ts: i64,
    /// The extended RTP timestamp of the last packet with a clock rate,
    /// which the next one's jitter is measured from.
    clocked_rtp_ts: i64,
    /// Arrival of the previous packet, ms since the stream's first.
    last_arrival_ms: f64,
    jitter_ms: f64,
    min_jitter_ms: f64,
    max_jitter_ms: f64,
    mean_jitter_ms: f64,
    min_delta_ms: f64,
    max_delta_ms: f64,
    mean_delta_ms: f64,
    /// Packets that counted in the delta statistics (see [`Rtp::feed`]).
    regular: u64,
    sequence_errors: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamRow {
    pub src: String,
    pub src_port: u16,
    pub dst: String,
    pub dst_port: u16,
    pub ssrc: u32,
    pub payload_type: u8,
    pub packets: u64,
    /// Expected minus received (negative: duplicates).
    pub lost: i64,
    pub lost_percent: f64,
    /// Delta statistics over the regular packets (see [`Rtp::feed`]);
    /// 0 when there is none.
    pub min_delta_ms: f64,
    pub mean_delta_ms: f64,
    pub max_delta_ms: f64,
    /// `None` when the payload type's clock rate is not fixed.
    pub min_jitter_ms: Option<f64>,
    pub max_jitter_ms: Option<f64>,
    pub mean_jitter_ms: Option<f64>,
    /// Packets whose sequence number was not the previous one plus one.
    pub sequence_errors: u64,
    /// Packets that counted in the delta (and jitter) statistics: not the first,
    /// a talk spurt's or comfort noise (see [`Rtp::feed`]). With none, nothing was
    /// measured and the table says `n/a`.
    pub regular_packets: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RtpReport {
    pub streams: Vec<StreamRow>,
    pub untracked_packets: u64,
}

pub struct Rtp {
    /// In the order they were first seen (the report's).
    streams: Vec<Stream>,
    cap: usize,
    untracked_packets: u64,
}

/// The RTP header of a UDP frame's payload, when it passes the test.
pub fn rtp_of(s: &Seen<'_>) -> Option<RtpHeader> {
    let at = s.dissection.layer(LayerKind::Udp)?.offset as usize;
    let ulen = usize::from(get16(s.frame.data, at + 4)?);
    let end = (at + ulen).min(s.frame.data.len());
    header(s.frame.data.get(at + 8..end)?, ulen.checked_sub(8)?)
}

impl Rtp {
    pub fn new(cfg: &Config) -> Rtp {
        Rtp { streams: Vec::new(), cap: cfg.max_flows, untracked_packets: 0 }
    }

    /// An RTP packet of a flow that found the flow table full.
    pub fn untracked(&mut self) {
        self.untracked_packets += 1;
    }

    /// An RTP packet of UDP flow `p` (whose ports tshark's UDP tap reads);
    /// `slot` is its flow's (1 + the index of the flow's first stream, 0
    /// before one is seen).
    ///
    /// The figures follow the RTP analysis of tshark 4.0 (Debian 12's;
    /// `ui/tap-rtp-analysis.c`), which the report must agree with. A
    /// packet's delta is its arrival less the previous packet's, its jitter
    /// RFC 3550's (A.8) against the previous packet, with the clock rate in
    /// whole kHz as tshark divides. Only regular packets count in the
    /// minimum, mean and maximum of delta and jitter: not the first, not
    /// one with the marker bit (a talk spurt after a silence), not comfort
    /// noise (payload type 13 or 19) nor the packet after it. The means
    /// are tshark's running average, whose weight is every packet seen
    /// before. A packet whose payload type has no clock rate (RFC 4733
    /// DTMF events, a dynamic type) has no jitter; the next packet's is
    /// measured from its arrival but from the RTP timestamp of the last
    /// packet that had a clock rate, as tshark 4.0 does. (Later tshark
    /// versions measure it from the packet before whatever its type, and
    /// leave out a packet whose RTP timestamp steps back, measuring the
    /// next from the packet before.)
    pub fn feed(&mut self, p: &FlowFrame, h: RtpHeader, slot: &mut u32) {
        let (src, dst) = (p.src, p.dst);
        let RtpHeader { pt, marker, seq, ts: rtp_ts, ssrc } = h;
        let mut i = *slot;
        while i != 0 && !(self.streams[i as usize - 1].key.0 == src && self.streams[i as usize - 1].key.2 == ssrc) {
            i = self.streams[i as usize - 1].next;
        }
        let ts = p.ts;
        if i == 0 {
            if self.streams.len() >= self.cap {
                self.untracked_packets += 1;
                return;
            }
            self.streams.push(Stream {
                key: (src, dst, ssrc),
                next: *slot,
                pt,
                last_pt: pt,
                packets: 1,
                first_ns: ts,
                last_ns: ts,
                base_seq: i64::from(seq),
                max_seq: i64::from(seq),
                last_seq: i64::from(seq),
                last_rtp_ts: i64::from(rtp_ts),
                clocked_rtp_ts: i64::from(rtp_ts),
                last_arrival_ms: 0.0,
                jitter_ms: 0.0,
                min_jitter_ms: f64::MAX,
                max_jitter_ms: 0.0,
                mean_jitter_ms: 0.0,
                min_delta_ms: f64::MAX,
                max_delta_ms: 0.0,
                mean_delta_ms: 0.0,
                regular: 0,
                sequence_errors: 0,
            });
            *slot = u32::try_from(self.streams.len()).unwrap_or(u32::MAX);
            return;
        }
        let st = &mut self.streams[i as usize - 1];
        // Extended sequence number and RTP timestamp: nearest to the last.
        let ext_seq = st.last_seq + i64::from(seq.wrapping_sub(st.last_seq as u16) as i16);
        let ext_ts = st.last_rtp_ts + i64::from(rtp_ts.wrapping_sub(st.last_rtp_ts as u32) as i32);
        if ext_seq != st.last_seq + 1 {
            st.sequence_errors += 1;
        }
        let arrival_ms = ts.saturating_sub(st.first_ns) as f64 / 1e6;
        let comfort_noise = |pt| pt == 13 || pt == 19;
        let regular = !marker && !comfort_noise(pt) && !comfort_noise(st.last_pt);
        let khz = clock_rate(pt) / 1000;
        let delta = arrival_ms - st.last_arrival_ms;
        if khz > 0 {
            let nominal_ms = (ext_ts - st.clocked_rtp_ts) as f64 / f64::from(khz);
            st.jitter_ms = (15.0 * st.jitter_ms + (delta - nominal_ms).abs()) / 16.0;
            st.clocked_rtp_ts = ext_ts;
        }
        if regular {
            // tshark's weight: the packets before this one, all of them.
            let before = st.packets as f64;
            st.min_delta_ms = st.min_delta_ms.min(delta);
            st.max_delta_ms = st.max_delta_ms.max(delta);
            st.mean_delta_ms = (st.mean_delta_ms * (before - 1.0) + delta) / before;
            if khz > 0 {
                st.min_jitter_ms = st.min_jitter_ms.min(st.jitter_ms);
                st.max_jitter_ms = st.max_jitter_ms.max(st.jitter_ms);
                st.mean_jitter_ms = (st.mean_jitter_ms * (before - 1.0) + st.jitter_ms) / before;
            }
            st.regular += 1;
        }
        st.packets += 1;
        st.last_arrival_ms = arrival_ms;
        st.last_pt = pt;
        st.last_ns = ts;
        st.last_seq = ext_seq;
        st.max_seq = st.max_seq.max(ext_seq);
        st.base_seq = st.base_seq.min(ext_seq);
        st.last_rtp_ts = ext_ts;
    }

    pub fn finish(self) -> RtpReport {
        let mut streams = Vec::new();
        for st in self.streams {
            let ((src, sp), (dst, dp), ssrc) = st.key;
            let expected = st.max_seq - st.base_seq + 1;
            let lost = expected - st.packets as i64;
            let jitter = clock_rate(st.pt) > 0;
            let some = st.regular > 0;
            streams.push(StreamRow {
                src: src.text(),
                src_port: sp,
                dst: dst.text(),
                dst_port: dp,
                ssrc,
                payload_type: st.pt,
                packets: st.packets,
                lost,
                lost_percent: if expected > 0 { lost as f64 * 100.0 / expected as f64 } else { 0.0 },
                min_delta_ms: if some { st.min_delta_ms } else { 0.0 },
                mean_delta_ms: st.mean_delta_ms,
                max_delta_ms: st.max_delta_ms,
                min_jitter_ms: jitter.then_some(if some { st.min_jitter_ms } else { 0.0 }),
                max_jitter_ms: jitter.then_some(st.max_jitter_ms),
                mean_jitter_ms: jitter.then_some(st.mean_jitter_ms),
                sequence_errors: st.sequence_errors,
                regular_packets: st.regular,
                first_ns: st.first_ns,
                last_ns: st.last_ns,
            });
        }
        RtpReport { streams, untracked_packets: self.untracked_packets }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_test() {
        let whole = |p: &[u8]| header(p, p.len());
        let mut p = vec![0x80, 0x00, 0x00, 0x05, 0, 0, 0x01, 0x40, 1, 2, 3, 4];
        assert_eq!(whole(&p), Some(RtpHeader { pt: 0, marker: false, seq: 5, ts: 320, ssrc: 0x0102_0304 }));
        p[1] = 0x80 | 8;
        assert_eq!(whole(&p), Some(RtpHeader { pt: 8, marker: true, seq: 5, ts: 320, ssrc: 0x0102_0304 }));
        p[1] = 72; // payload type 72: RTCP's sender report without the marker bit
        assert_eq!(whole(&p), None);
        for rtcp in [192, 200, 223] {
            p[1] = rtcp; // the marker bit and payload type 64-95: tshark's RTCP
            assert_eq!(whole(&p), None, "{rtcp}");
        }
        p[1] = 0x80 | 63;
        assert!(whole(&p).is_some());
        p[1] = 0xe0;
        assert!(whole(&p).is_some());
        p[1] = 0;
        p[0] = 0x81; // one CSRC that is not there
        assert_eq!(whole(&p), None);
        p[0] = 0x40;
        assert_eq!(whole(&p), None);
        assert_eq!(whole(&p[..11]), None);
        // Padding: 1 up to the bytes after the header, all of them captured.
        p[0] = 0xa0;
        assert_eq!(whole(&p), None);
        p.extend_from_slice(&[0, 0, 0, 4]);
        assert!(whole(&p).is_some());
        assert_eq!(header(&p, 20), None, "padding the capture cut");
        for bad in [0, 5] {
            p[15] = bad;
            assert_eq!(whole(&p), None, "padding count {bad}");
        }
        // An extension: its length word captured, its words reported.
        p[0] = 0x90;
        p[12..16].copy_from_slice(&[0xbe, 0xde, 0, 1]);
        assert_eq!(whole(&p), None, "a word more than the payload");
        assert!(header(&p, 20).is_some());
        assert_eq!(header(&p[..15], 20), None, "the length word cut");
    }

    #[test]
    fn clock_rates_are_rfc_3551s() {
        let rates: Vec<u32> = [0, 8, 9, 13, 6, 10, 16, 17, 26, 34, 19, 96, 127].into_iter().map(clock_rate).collect();
        assert_eq!(rates, [8000, 8000, 8000, 8000, 16000, 44100, 11025, 22050, 90000, 90000, 0, 0, 0]);
    }

    /// The RTP streams of packets (arrival in ms, payload type with the
    /// marker bit, sequence number, RTP timestamp) of one SSRC.
    fn streams(packets: &[(u64, u8, u16, u32)]) -> RtpReport {
        let mut a = crate::Analyzer::new(Config::default()).unwrap();
        for &(ms, pt, seq, ts) in packets {
            let f = crate::test_frames::udp(
                [10, 0, 0, 1],
                4000,
                [10, 0, 0, 2],
                5004,
                &crate::test_frames::rtp(pt, seq, ts, 7),
            );
            crate::test_frames::feed(&mut a, ms * 1_000_000, &f);
        }
        a.finish().rtp
    }

    #[test]
    fn losses_count_from_the_extended_sequence_numbers() {
        let r = streams(&[(0, 0, 1, 0), (20, 0, 2, 160), (60, 0, 4, 480), (80, 0, 5, 640)]);
        let s = &r.streams[0];
        assert_eq!((s.ssrc, s.packets, s.lost, s.lost_percent, s.sequence_errors), (7, 4, 1, 20.0, 1));
        assert_eq!((s.src.as_str(), s.src_port, s.dst_port), ("10.0.0.1", 4000, 5004));
        // Across the wrap of the sequence number: nothing lost.
        let r = streams(&[(0, 0, 65534, 0), (20, 0, 65535, 160), (40, 0, 0, 320), (60, 0, 1, 480)]);
        assert_eq!((r.streams[0].lost, r.streams[0].sequence_errors), (0, 0));
        // A duplicate: one lost less than none.
        let r = streams(&[(0, 0, 1, 0), (20, 0, 2, 160), (21, 0, 2, 160)]);
        assert_eq!((r.streams[0].lost, r.streams[0].sequence_errors), (-1, 1));
    }

    #[test]
    fn jitter_is_rfc_3550s_with_tsharks_running_means() {
        // 8 kHz, 20 ms apart; the third packet 4 ms late.
        let r = streams(&[(0, 0, 1, 0), (20, 0, 2, 160), (44, 0, 3, 320), (60, 0, 4, 480)]);
        let s = &r.streams[0];
        // J = 4/16, then (15 * 0.25 + 4) / 16; the means weigh all packets before.
        assert_eq!((s.min_jitter_ms, s.max_jitter_ms), (Some(0.0), Some(0.484375)));
        assert_eq!(s.mean_jitter_ms, Some((0.125 * 2.0 + 0.484375) / 3.0));
        assert_eq!((s.min_delta_ms, s.max_delta_ms, s.mean_delta_ms, s.regular_packets), (16.0, 24.0, 20.0, 3));
    }

    #[test]
    fn a_dynamic_payload_type_has_no_jitter_and_a_marked_packet_no_delta() {
        let r = streams(&[(0, 96, 1, 0), (20, 96, 2, 160), (50, 0x80 | 96, 3, 320), (80, 96, 4, 480)]);
        let s = &r.streams[0];
        assert_eq!((s.payload_type, s.min_jitter_ms, s.mean_jitter_ms), (96, None, None));
        // The marked packet's delta is left out, but it weighs in the mean
        // as tshark's: (20 * 2 + 30) / 3, not (20 + 30) / 2.
        assert_eq!((s.regular_packets, s.min_delta_ms, s.max_delta_ms), (2, 20.0, 30.0));
        assert_eq!(s.mean_delta_ms, 70.0 / 3.0);
    }
}
