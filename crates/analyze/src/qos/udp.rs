//! UDP streams that are not RTP: each direction of a UDP flow whose
//! packets carry no RTP header, with its inter-arrival delta (min, mean,
//! max) and inter-arrival jitter.
//!
//! Without a media clock there is no sender time to measure against, so
//! the jitter is RFC 3550's estimator (A.8: `J += (|D| - J) / 16`) with the
//! sender's spacing taken as the stream's mean inter-arrival time so far:
//! `D` is a packet's delta less the mean of the deltas before it. For a
//! sender at a constant rate the mean is its period, and `D` is the
//! difference of two packets' transit times, as RFC 3550's: delays
//! spread uniformly over `J` ms give a jitter near `J/3` on RTP and plain
//! streams alike. A stream's first two packets give no jitter (there is no
//! mean before the second delta); the mean and maximum are over the
//! packets after. Tools that report jitter of plain UDP (iperf) read a send
//! time from the payload; this works on any stream.
//!
//! Memory: a UDP flow of the flow table holds an index here, to 64 bytes
//! (one cache line: its first RTP stream and side A's plain figures), and
//! 56 bytes more when side B sends plain packets (addresses are the
//! flow's); a flow table of at most `max_flows` flows bounds both. Packets
//! of flows that found the flow table full are counted as untracked.

use crate::conv::Ip;
use crate::flows::{Flow, Transport};
use serde::{Deserialize, Serialize};

/// The UDP state of one flow: one cache line, holding side A's plain
/// direction (the one a flow always has, unless it is RTP only) so that its
/// packets touch nothing else.
#[derive(Debug, Clone, Copy, Default)]
#[repr(align(64))]
pub struct UdpFlow {
    /// 1 + the index of the flow's first RTP stream ([`crate::qos::rtp`]), 0 for none.
    pub rtp: u32,
    /// 1 + the index of side B's plain direction, 0 for none.
    back: u32,
    /// Side A's plain direction (no packet yet: none).
    fwd: Plain,
}

/// One direction's figures (56 bytes; its addresses are its flow's).
#[derive(Debug, Clone, Copy, Default)]
struct Plain {
    packets: u64,
    first_ns: u64,
    last_ns: u64,
    min_delta_ns: i64,
    max_delta_ns: i64,
    sum_jitter_ns: f64,
    /// The running jitter and its maximum (ns; f32 keeps 0.1 µs of a 1 s jitter).
    jitter_ns: f32,
    max_jitter_ns: f32,
}

impl Plain {
    fn add(&mut self, ts: u64) {
        if self.packets == 0 {
            *self = Plain { packets: 1, first_ns: ts, last_ns: ts, ..Plain::default() };
            return;
        }
        // Signed: frames out of time order give negative deltas.
        let delta = ts as i64 - self.last_ns as i64;
        if self.packets == 1 {
            (self.min_delta_ns, self.max_delta_ns) = (delta, delta);
        } else {
            self.min_delta_ns = self.min_delta_ns.min(delta);
            self.max_delta_ns = self.max_delta_ns.max(delta);
            let j = f64::from(self.jitter_ns);
            let j = j + ((delta as f64 - self.mean_delta_ns()).abs() - j) / 16.0;
            self.jitter_ns = j as f32;
            self.max_jitter_ns = self.max_jitter_ns.max(self.jitter_ns);
            self.sum_jitter_ns += j;
        }
        self.packets += 1;
        self.last_ns = ts;
    }

    /// The mean of the deltas so far (0 before the second packet).
    fn mean_delta_ns(&self) -> f64 {
        match self.packets {
            0 | 1 => 0.0,
            n => (self.last_ns as i64 - self.first_ns as i64) as f64 / (n - 1) as f64,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UdpStreamRow {
    #[serde(serialize_with = "ip_text", deserialize_with = "ip_of_text")]
    pub src: Ip,
    pub src_port: u16,
    #[serde(serialize_with = "ip_text", deserialize_with = "ip_of_text")]
    pub dst: Ip,
    pub dst_port: u16,
    pub packets: u64,
    /// Inter-arrival delta over the stream (0 for a single packet).
    pub min_delta_ms: f64,
    pub mean_delta_ms: f64,
    pub max_delta_ms: f64,
    /// `None` for a stream of fewer than 3 packets.
    pub mean_jitter_ms: Option<f64>,
    pub max_jitter_ms: Option<f64>,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// Addresses as text only when written: a row holds the address itself.
fn ip_text<S: serde::Serializer>(ip: &Ip, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&ip.text())
}

/// The address back from its text, for a report read back.
fn ip_of_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Ip, D::Error> {
    let text = String::deserialize(d)?;
    match text.parse::<std::net::IpAddr>().map_err(serde::de::Error::custom)? {
        std::net::IpAddr::V4(a) => Ok(Ip::V4(a.octets())),
        std::net::IpAddr::V6(a) => Ok(Ip::V6(a.octets())),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UdpStreamsReport {
    /// By packets, descending (then by first packet).
    pub streams: Vec<UdpStreamRow>,
    /// Packets of UDP flows that found the flow table full.
    pub untracked_packets: u64,
}

#[derive(Default)]
pub struct UdpStreams {
    flows: Vec<UdpFlow>,
    plain: Vec<Plain>,
    untracked_packets: u64,
}

impl UdpStreams {
    /// The UDP state of a flow whose `slot` (its `state`) is 1 + its index
    /// here, 0 before its first packet (given one then).
    pub fn flow(&mut self, slot: &mut u32) -> &mut UdpFlow {
        if *slot == 0 {
            self.flows.push(UdpFlow::default());
            // The flow table holds at most u32::MAX - 1 flows.
            *slot = u32::try_from(self.flows.len()).unwrap_or(u32::MAX);
        }
        &mut self.flows[*slot as usize - 1]
    }

    /// A plain packet of a flow that found the flow table full.
    pub fn untracked(&mut self) {
        self.untracked_packets += 1;
    }

    /// A packet (time `ts`) without an RTP header of the UDP flow whose index
    /// here is `slot` (see [`UdpStreams::flow`]); `from_a`: sent by the flow's side A.
    pub fn feed(&mut self, slot: u32, from_a: bool, ts: u64) {
        let u = &mut self.flows[slot as usize - 1];
        if from_a {
            return u.fwd.add(ts);
        }
        if u.back == 0 {
            self.plain.push(Plain::default());
            u.back = u32::try_from(self.plain.len()).unwrap_or(u32::MAX);
        }
        self.plain[u.back as usize - 1].add(ts);
    }

    /// The report; `flows` is the flow table's, whose UDP flows' `state`
    /// indexes here (their addresses are the streams').
    pub fn finish(self, flows: &[Flow]) -> UdpStreamsReport {
        let ms = |ns: f64| ns / 1e6;
        let mut streams = Vec::with_capacity(self.plain.len());
        for f in flows.iter().filter(|f| f.transport == Transport::Udp && f.state != 0) {
            let u = &self.flows[f.state as usize - 1];
            let back = u.back.checked_sub(1).map(|i| &self.plain[i as usize]);
            for (s, (src, dst)) in [(Some(&u.fwd), (f.conv.a, f.conv.b)), (back, (f.conv.b, f.conv.a))] {
                let Some(s) = s.filter(|s| s.packets > 0) else {
                    continue;
                };
                let jittered = s.packets.saturating_sub(2);
                streams.push(UdpStreamRow {
                    src: src.0,
                    src_port: src.1,
                    dst: dst.0,
                    dst_port: dst.1,
                    packets: s.packets,
                    min_delta_ms: ms(s.min_delta_ns as f64),
                    mean_delta_ms: ms(s.mean_delta_ns()),
                    max_delta_ms: ms(s.max_delta_ns as f64),
                    mean_jitter_ms: (jittered > 0).then(|| ms(s.sum_jitter_ns / jittered as f64)),
                    max_jitter_ms: (jittered > 0).then(|| ms(f64::from(s.max_jitter_ns))),
                    first_ns: s.first_ns,
                    last_ns: s.last_ns,
                });
            }
        }
        // A total order (a stream is its flow and direction): the same on every run.
        streams.sort_unstable_by(|x, y| {
            y.packets
                .cmp(&x.packets)
                .then(x.first_ns.cmp(&y.first_ns))
                .then((x.src, x.src_port, x.dst, x.dst_port).cmp(&(y.src, y.src_port, y.dst, y.dst_port)))
        });
        UdpStreamsReport { streams, untracked_packets: self.untracked_packets }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Analyzer, Config, Frame};
    use wv_wire::views::ipv4::Repr;
    use wv_wire::views::IpProtocol;

    /// An Ethernet/IPv4/UDP frame from 10.0.0.1:5000 to 10.0.0.2:6000 (or back).
    fn frame(back: bool) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let (src, dst) = if back { ([10, 0, 0, 2], [10, 0, 0, 1]) } else { ([10, 0, 0, 1], [10, 0, 0, 2]) };
        let ip = Repr { src, dst, protocol: IpProtocol::Udp, payload_len: 28, ttl: 64, ident: 0, dont_frag: false };
        ip.emit(&mut f[14..34]).unwrap();
        let (sp, dp) = if back { (6000u16, 5000u16) } else { (5000, 6000) };
        f[34..36].copy_from_slice(&sp.to_be_bytes());
        f[36..38].copy_from_slice(&dp.to_be_bytes());
        f[38..40].copy_from_slice(&28u16.to_be_bytes());
        f
    }

    #[test]
    fn jitter_is_rfc3550s_against_the_mean_delta() {
        let mut a = Analyzer::new(Config::default()).unwrap();
        let (out, back) = (frame(false), frame(true));
        // A 20 ms stream whose third and fifth packets are 2 ms late; one
        // packet the other way.
        let delays_ms = [0u64, 0, 2, 0, 2, 0];
        for (i, d) in delays_ms.iter().enumerate() {
            let ts_ns = (i as u64 * 20 + d) * 1_000_000;
            a.feed(&Frame { ts_ns, linktype: 1, wire_len: 62, data: &out });
        }
        a.feed(&Frame { ts_ns: 7_000_000, linktype: 1, wire_len: 62, data: &back });
        let r = a.finish().udp_streams;
        assert_eq!(r.streams.len(), 2);
        let (s, b) = (&r.streams[0], &r.streams[1]);
        assert_eq!((s.src.text(), s.src_port, s.packets), ("10.0.0.1".to_string(), 5000, 6));
        assert_eq!((b.src.text(), b.packets, b.mean_jitter_ms), ("10.0.0.2".to_string(), 1, None));
        assert_eq!((s.min_delta_ms, s.max_delta_ms, s.mean_delta_ms), (18.0, 22.0, 20.0));
        // Deltas 20, 22, 18, 22, 18; the means before the last four: 20, 21, 20, 20.5.
        let mut j = 0.0f64;
        let mut js = Vec::new();
        for (delta, mean) in [(22.0f64, 20.0), (18.0, 21.0), (22.0, 20.0), (18.0, 20.5)] {
            j += ((delta - mean).abs() - j) / 16.0;
            js.push(j);
        }
        // Within 1 ns: the running jitter is kept as f32.
        let close = |x: f64, y: f64| (x - y).abs() < 1e-6;
        assert!(close(s.max_jitter_ms.unwrap(), js.iter().copied().fold(0.0, f64::max)), "{s:?}");
        assert!(close(s.mean_jitter_ms.unwrap(), js.iter().sum::<f64>() / 4.0), "{s:?}");
    }

    /// The plain UDP streams of frames (time in ms, sent back or not), with at most `max_flows` flows.
    fn streams(max_flows: usize, fed: &[(u64, bool)]) -> super::UdpStreamsReport {
        let mut a = Analyzer::new(Config { max_flows, ..Config::default() }).unwrap();
        let (out, back) = (frame(false), frame(true));
        for &(ms, b) in fed {
            let data = if b { &back } else { &out };
            a.feed(&Frame { ts_ns: ms * 1_000_000, linktype: 1, wire_len: 62, data });
        }
        a.finish().udp_streams
    }

    #[test]
    fn two_packets_give_a_delta_and_no_jitter() {
        let r = streams(10, &[(0, false), (30, false)]);
        let s = &r.streams[0];
        assert_eq!((s.packets, s.min_delta_ms, s.mean_delta_ms, s.max_delta_ms), (2, 30.0, 30.0, 30.0));
        assert_eq!((s.mean_jitter_ms, s.max_jitter_ms, s.first_ns, s.last_ns), (None, None, 0, 30_000_000));
    }

    #[test]
    fn a_constant_rate_has_no_jitter() {
        let r = streams(10, &[(0, false), (10, false), (20, false), (30, false)]);
        assert_eq!((r.streams[0].mean_jitter_ms, r.streams[0].max_jitter_ms), (Some(0.0), Some(0.0)));
    }

    #[test]
    fn streams_are_listed_by_packets_then_first_packet() {
        let r = streams(10, &[(5, true), (6, false), (7, false), (8, true), (9, false)]);
        let order: Vec<(u16, u64)> = r.streams.iter().map(|s| (s.src_port, s.packets)).collect();
        assert_eq!(order, [(5000, 3), (6000, 2)]);
        // A tie in packets: the earlier first packet first.
        let r = streams(10, &[(5, true), (6, false)]);
        assert_eq!(r.streams.iter().map(|s| s.src_port).collect::<Vec<_>>(), [6000, 5000]);
    }

    #[test]
    fn packets_of_a_flow_the_full_table_refused_are_untracked() {
        let mut a = Analyzer::new(Config { max_flows: 1, ..Config::default() }).unwrap();
        let other = crate::test_frames::udp([10, 0, 0, 9], 1, [10, 0, 0, 2], 2, &[0; 20]);
        for (ts_ns, data) in [(0, frame(false)), (1, other.clone()), (2, other)] {
            a.feed(&Frame { ts_ns, linktype: 1, wire_len: data.len() as u32, data: &data });
        }
        let r = a.finish().udp_streams;
        assert_eq!((r.streams.len(), r.untracked_packets), (1, 2));
    }
}
