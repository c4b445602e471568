//! RTP streams recognised by their header on UDP (version 2, a payload
//! type outside RTCP's 72-76, the CSRC list and extension header inside the
//! payload: the test of tshark's heuristic RTP dissector, `-o
//! rtp.heuristic_rtp:TRUE`), keyed by addresses, ports and SSRC as `tshark
//! -z rtp,streams`: packets, lost packets from sequence numbers (expected
//! from the first to the highest extended sequence number, minus received:
//! negative when packets are duplicated), inter-arrival delta and the RFC 3550
//! interarrival jitter in ms, for payload types whose clock rate is fixed
//! (RFC 3551); a dynamic payload type (96-127) has no jitter.
//!
//! A UDP flow that merely looks like RTP is counted as one: tshark only
//! tries the heuristic on ports no other dissector claims, this module on
//! every port. The flow table ([`crate::flows`]) finds a packet's streams:
//! a UDP flow holds the first of its streams, each the next. Memory: at
//! most `max_flows` streams; packets of further streams (or of flows that
//! found the flow table full) are counted as untracked.

use crate::conv::Ip;
use crate::flows::Placed;
use crate::{Config, Seen};
use serde::Serialize;
use wv_wire::dissect::LayerKind;

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

/// The RTP header fields used: payload type, sequence number, timestamp, SSRC.
pub type RtpHeader = (u8, u16, u32, u32);

/// The RTP header fields used, when `p` (a UDP payload) passes the test.
pub fn header(p: &[u8]) -> Option<RtpHeader> {
    if p.len() < 12 || p[0] >> 6 != 2 {
        return None;
    }
    let pt = p[1] & 0x7f;
    if (72..=76).contains(&pt) {
        return None;
    }
    let cc = usize::from(p[0] & 0x0f);
    let mut hl = 12 + 4 * cc;
    if p[0] & 0x10 != 0 {
        let words = usize::from(u16::from_be_bytes([*p.get(hl + 2)?, *p.get(hl + 3)?]));
        hl += 4 + 4 * words;
    }
    if hl > p.len() {
        return None;
    }
    let seq = u16::from_be_bytes([p[2], p[3]]);
    let ts = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
    let ssrc = u32::from_be_bytes([p[8], p[9], p[10], p[11]]);
    Some((pt, seq, ts, ssrc))
}

type Key = ((Ip, u16), (Ip, u16), u32);

#[derive(Debug, Clone)]
struct Stream {
    key: Key,
    /// 1 + the index of the next stream of the same UDP flow, 0 at the end.
    next: u32,
    pt: u8,
    packets: u64,
    first_ns: u64,
    last_ns: u64,
    base_seq: i64,
    max_seq: i64,
    last_seq: i64,
    first_rtp_ts: u64,
    last_rtp_ts: i64,
    /// Arrival and nominal (RTP clock) times of the previous packet, ms.
    last_arrival_ms: f64,
    last_nominal_ms: f64,
    jitter_ms: f64,
    max_jitter_ms: f64,
    sum_jitter_ms: f64,
    min_delta_ms: f64,
    max_delta_ms: f64,
    sum_delta_ms: f64,
    sequence_errors: u64,
}

#[derive(Debug, Clone, Serialize)]
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
    pub min_delta_ms: f64,
    pub mean_delta_ms: f64,
    pub max_delta_ms: f64,
    /// `None` when the payload type's clock rate is not fixed.
    pub max_jitter_ms: Option<f64>,
    pub mean_jitter_ms: Option<f64>,
    /// Packets whose sequence number was not the previous one plus one.
    pub sequence_errors: u64,
    pub first_ns: u64,
    pub last_ns: u64,
}

#[derive(Debug, Clone, Serialize)]
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
    let at = s.d.layer(LayerKind::Udp)?.offset as usize;
    let ulen = s.f.data.get(at + 4..at + 6).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))?;
    let end = (at + ulen).min(s.f.data.len());
    header(s.f.data.get(at + 8..end)?)
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
    pub fn feed(&mut self, p: &Placed, (pt, seq, rtp_ts, ssrc): RtpHeader, slot: &mut u32) {
        let (src, dst) = (p.src, p.dst);
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
                packets: 0,
                first_ns: ts,
                last_ns: ts,
                base_seq: i64::from(seq),
                max_seq: i64::from(seq),
                last_seq: i64::from(seq),
                first_rtp_ts: u64::from(rtp_ts),
                last_rtp_ts: i64::from(rtp_ts),
                last_arrival_ms: 0.0,
                last_nominal_ms: 0.0,
                jitter_ms: 0.0,
                max_jitter_ms: 0.0,
                sum_jitter_ms: 0.0,
                min_delta_ms: f64::MAX,
                max_delta_ms: 0.0,
                sum_delta_ms: 0.0,
                sequence_errors: 0,
            });
            i = u32::try_from(self.streams.len()).unwrap_or(u32::MAX);
            *slot = i;
        }
        let st = &mut self.streams[i as usize - 1];
        // Extended sequence number and RTP timestamp: nearest to the last.
        let ext_seq = st.last_seq + i64::from(seq.wrapping_sub(st.last_seq as u16) as i16);
        let ext_ts = st.last_rtp_ts + i64::from(rtp_ts.wrapping_sub(st.last_rtp_ts as u32) as i32);
        let arrival_ms = ts.saturating_sub(st.first_ns) as f64 / 1e6;
        let rate = clock_rate(pt);
        let nominal_ms =
            if rate > 0 { (ext_ts - st.first_rtp_ts as i64) as f64 * 1000.0 / f64::from(rate) } else { 0.0 };
        if st.packets > 0 {
            if ext_seq != st.last_seq + 1 {
                st.sequence_errors += 1;
            }
            let delta = arrival_ms - st.last_arrival_ms;
            st.min_delta_ms = st.min_delta_ms.min(delta);
            st.max_delta_ms = st.max_delta_ms.max(delta);
            st.sum_delta_ms += delta;
            if rate > 0 {
                // RFC 3550 A.8: J += (|D(i-1, i)| - J) / 16.
                let d = (arrival_ms - st.last_arrival_ms) - (nominal_ms - st.last_nominal_ms);
                st.jitter_ms += (d.abs() - st.jitter_ms) / 16.0;
                st.max_jitter_ms = st.max_jitter_ms.max(st.jitter_ms);
            }
        }
        st.sum_jitter_ms += st.jitter_ms;
        st.packets += 1;
        st.last_ns = ts;
        st.last_seq = ext_seq;
        st.max_seq = st.max_seq.max(ext_seq);
        st.base_seq = st.base_seq.min(ext_seq);
        st.last_rtp_ts = ext_ts;
        st.last_arrival_ms = arrival_ms;
        st.last_nominal_ms = nominal_ms;
    }

    pub fn finish(self) -> RtpReport {
        let mut streams = Vec::new();
        for st in self.streams {
            let ((src, sp), (dst, dp), ssrc) = st.key;
            let expected = st.max_seq - st.base_seq + 1;
            let lost = expected - st.packets as i64;
            let jitter = clock_rate(st.pt) > 0;
            let deltas = st.packets.saturating_sub(1);
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
                min_delta_ms: if deltas > 0 { st.min_delta_ms } else { 0.0 },
                mean_delta_ms: if deltas > 0 { st.sum_delta_ms / deltas as f64 } else { 0.0 },
                max_delta_ms: st.max_delta_ms,
                max_jitter_ms: jitter.then_some(st.max_jitter_ms),
                // Over the packets after the first, as tshark averages it
                // (the first has no jitter of its own).
                mean_jitter_ms: jitter.then(|| st.sum_jitter_ms / st.packets.saturating_sub(1).max(1) as f64),
                sequence_errors: st.sequence_errors,
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
        let mut p = vec![0x80, 0x00, 0x00, 0x05, 0, 0, 0x01, 0x40, 1, 2, 3, 4];
        assert_eq!(header(&p), Some((0, 5, 320, 0x0102_0304)));
        p[1] = 72; // RTCP sender report
        assert_eq!(header(&p), None);
        p[1] = 0;
        p[0] = 0x81; // one CSRC that is not there
        assert_eq!(header(&p), None);
        p[0] = 0x40;
        assert_eq!(header(&p), None);
        assert_eq!(header(&p[..11]), None);
    }
}
