//! `wirevault analyze`: statistics over stored or captured packets in one
//! pass and bounded memory.
//!
//! The [`Analyzer`] is fed one frame at a time (in time order, as the query
//! layer merges them); it dissects each frame once with
//! [`wv_wire::dissect`] and hands the frame and its dissection to separate
//! accumulators, one module per family:
//!
//! * [`dups`]: identical frames within a time and frame-count window;
//! * [`malformed`]: malformed or unexpected frames by kind;
//! * [`mix`]: EtherTypes, IP protocols, VLANs, MPLS labels, size histogram;
//! * [`flows`]: the flow table, looked up once per frame, whose entries hold
//!   every per-flow state (counters, the TCP connection, the RTP streams);
//! * [`conv`]: conversations (IP, TCP, UDP) and IP endpoints, as tshark's
//!   `-z conv,*` and `-z endpoints,ip`, derived from the flow table;
//! * [`qos`]: throughput per interval (`-z io,stat`), TCP sequence analysis
//!   (retransmissions, out-of-order, duplicate ACKs, handshake RTT, as
//!   tshark's expert info), RTP streams (`-z rtp,streams`), and the
//!   inter-arrival jitter of UDP streams that are not RTP;
//! * [`delay`]: one-way delay of the same packets seen at two points.
//!
//! Memory is bounded by [`Config`]: the flow table holds at most
//! `max_flows` flows and at most `max_flows` RTP streams are kept (later
//! ones are counted as untracked, never evicted silently), the duplicate window at most `dup_frames` frames,
//! the throughput series at most `max_intervals` intervals. Nothing grows
//! with the number of packets.
#![deny(unsafe_code)]

pub mod conv;
pub mod delay;
pub mod dups;
pub mod flows;
pub mod hash;
pub mod malformed;
pub mod mix;
pub mod plot;
pub mod qos;
pub mod reasm;
pub mod report;
#[cfg(test)]
mod test_frames;

use serde::{Deserialize, Serialize};
use wv_wire::dissect::{dissect, Dissection};
use wv_wire::packet::Addr;

/// The choices an analysis is run with (the binary's flags, validated).
#[derive(Debug, Clone)]
pub struct Config {
    /// Duplicates: an identical frame at most this long before (ns).
    pub dup_window_ns: u64,
    /// Duplicates: among at most this many previous frames.
    pub dup_frames: usize,
    /// Frames whose network layer is longer than this are "over MTU".
    pub mtu: u32,
    /// Throughput interval (ns).
    pub step_ns: u64,
    /// Most flows (address pair, transport, port pair) in the flow table;
    /// also most RTP streams.
    pub max_flows: usize,
    /// Most throughput intervals kept: past them the step doubles
    /// (see [`qos::io`]).
    pub max_intervals: usize,
    /// Examples listed per duplicate / malformed kind.
    pub examples: usize,
    /// Rows of the "top" lists in the report.
    pub top: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dup_window_ns: 1_000_000,
            dup_frames: 1024,
            mtu: 1500,
            step_ns: 1_000_000_000,
            max_flows: 1 << 20,
            max_intervals: DEFAULT_MAX_INTERVALS,
            examples: 5,
            top: 10,
        }
    }
}

/// One frame to analyse.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub ts_ns: u64,
    pub linktype: u32,
    /// Length on the wire (at least `data.len()` is assumed).
    pub wire_len: u32,
    pub data: &'a [u8],
}

/// What every accumulator is handed: the frame, its number (1-based, as
/// tshark numbers frames) and its dissection.
pub struct Seen<'a> {
    pub no: u64,
    pub frame: &'a Frame<'a>,
    pub dissection: &'a Dissection,
    /// `wire_len`, at least the captured length.
    pub len: u32,
}

/// Packets and bytes (bytes on the wire).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Count {
    pub packets: u64,
    pub bytes: u64,
}

impl Count {
    pub fn add(&mut self, len: u32) {
        self.packets += 1;
        self.bytes += u64::from(len);
    }
}

/// A frame listed as an example (duplicates, malformed frames).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Example {
    /// Frame number in the analysed sequence (1-based).
    pub frame: u64,
    pub time_ns: u64,
    /// Length on the wire.
    pub size: u32,
    pub flow: String,
    /// What exactly (offset of the header concerned, a value).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

impl Example {
    pub fn of(s: &Seen<'_>, detail: String) -> Example {
        Example { frame: s.no, time_ns: s.frame.ts_ns, size: s.len, flow: flow_text(s.dissection), detail }
    }
}

pub use wv_wire::names::addr_text;

/// "src:port > dst:port proto" for a dissected frame.
pub fn flow_text(d: &Dissection) -> String {
    let f = &d.flow;
    let (sp, dp) = match f.ports {
        Some((s, d)) => (format!(":{s}"), format!(":{d}")),
        None => (String::new(), String::new()),
    };
    let proto = match f.protocol {
        Some(6) => " tcp".to_string(),
        Some(17) => " udp".to_string(),
        Some(1) => " icmp".to_string(),
        Some(58) => " icmp6".to_string(),
        Some(p) => format!(" proto {p}"),
        None if f.ethertype != 0 => format!(" ethertype 0x{:04x}", f.ethertype),
        None => String::new(),
    };
    if f.src == Addr::None && f.dst == Addr::None {
        return proto.trim_start().to_string();
    }
    format!("{}{sp} > {}{dp}{proto}", addr_text(&f.src), addr_text(&f.dst))
}

/// The value at fraction `q` (0..=1) of sorted `v` (nearest rank).
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Percentiles of a set of durations (ns).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

impl Percentiles {
    pub fn of(mut v: Vec<u64>) -> Percentiles {
        v.sort_unstable();
        Percentiles {
            count: v.len() as u64,
            min_ns: v.first().copied().unwrap_or(0),
            p50_ns: percentile(&v, 0.5),
            p90_ns: percentile(&v, 0.9),
            p99_ns: percentile(&v, 0.99),
            max_ns: v.last().copied().unwrap_or(0),
        }
    }
}

/// The version of [`Report`]'s JSON (`analyze --json`): raised when a
/// field changes meaning or goes away, not when one is added.
pub const REPORT_VERSION: u32 = 1;

/// The whole report: `analyze --json` writes it, the text table is drawn
/// from it ([`report`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_VERSION`].
    pub version: u32,
    pub frames: u64,
    pub bytes: u64,
    /// The earliest and latest frame times.
    pub first_ns: u64,
    pub last_ns: u64,
    /// Frames of a link type the dissector does not walk (counted in the
    /// totals and throughput only).
    pub unsupported_linktype: u64,
    /// Frames that carry a tunnel analyze entered (GRE, ERSPAN, VXLAN, ...:
    /// see [`wv_wire::tunnel`]); their inner flows count in the
    /// conversations, endpoints and TCP, RTP and UDP analyses.
    pub tunnelled: u64,
    /// IP datagrams reassembled from their fragments (see [`reasm`]): each
    /// counts as a TCP or UDP packet at the frame that completed it.
    pub reassembled: u64,
    /// Fragments not reassembled because [`MAX_DATAGRAMS`] datagrams were in progress.
    pub fragments_untracked: u64,
    pub duplicates: dups::DupReport,
    pub malformed: malformed::MalformedReport,
    pub mix: mix::MixReport,
    pub conversations: conv::ConvReport,
    pub throughput: qos::io::IoReport,
    pub tcp: qos::tcp::TcpReport,
    pub rtp: qos::rtp::RtpReport,
    /// UDP streams that are not RTP: inter-arrival delta and jitter.
    pub udp_streams: qos::udp::UdpStreamsReport,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<delay::DelayReport>,
}

/// Why a configuration is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("--step must be more than 0")]
    ZeroStep,
    #[error("--dup-frames must be between 1 and {max}")]
    DupFrames { max: usize },
    #[error("--max-flows must be at least 1")]
    ZeroFlows,
    #[error("--max-intervals must be between 1 and {max}")]
    Intervals { max: usize },
}

/// Throughput intervals kept by default: a day at 1 s steps (27.7 hours),
/// 1.6 MB of counters, about 15 MB of JSON.
pub const DEFAULT_MAX_INTERVALS: usize = 100_000;

/// Most throughput intervals `--max-intervals` may ask for: about 1 GiB
/// of memory at the cap (16 bytes each while counting, up to twice that
/// as the vector grows, then 40 bytes each in the report), 2.5 GB of JSON.
pub const MAX_INTERVALS: usize = 1 << 24;

/// Most frames the duplicate window may hold (memory: 48 bytes each).
pub const MAX_DUP_FRAMES: usize = 1 << 24;

/// Most IP datagrams whose fragments are held at once (a few hundred bytes each).
pub const MAX_DATAGRAMS: usize = 16_384;

/// Most tunnels entered inside one another in a frame.
pub const MAX_TUNNELS: usize = 4;

/// The one-pass analysis.
pub struct Analyzer {
    cfg: Config,
    frames: u64,
    bytes: u64,
    first_ns: Option<u64>,
    last_ns: u64,
    unsupported: u64,
    tunnelled: u64,
    reasm: reasm::Reassembly,
    reassembled: u64,
    dups: dups::Dups,
    malformed: malformed::Malformed,
    mix: mix::Mix,
    flows: flows::FlowTable,
    /// The last frame's flow work, done after the next frame's dissection.
    pending: Option<flows::FlowFrame>,
    io: qos::io::IoStat,
    tcp: qos::tcp::TcpAnalysis,
    rtp: qos::rtp::Rtp,
    udp: qos::udp::UdpStreams,
    delay: Option<delay::Delay>,
}

impl Analyzer {
    pub fn new(cfg: Config) -> Result<Analyzer, ConfigError> {
        if cfg.step_ns == 0 {
            return Err(ConfigError::ZeroStep);
        }
        if cfg.dup_frames == 0 || cfg.dup_frames > MAX_DUP_FRAMES {
            return Err(ConfigError::DupFrames { max: MAX_DUP_FRAMES });
        }
        if cfg.max_flows == 0 {
            return Err(ConfigError::ZeroFlows);
        }
        if cfg.max_intervals == 0 || cfg.max_intervals > MAX_INTERVALS {
            return Err(ConfigError::Intervals { max: MAX_INTERVALS });
        }
        Ok(Analyzer {
            dups: dups::Dups::new(&cfg),
            malformed: malformed::Malformed::new(&cfg),
            mix: mix::Mix::new(&cfg),
            // Flows hold u32 indexes into the TCP and RTP state.
            flows: flows::FlowTable::new(cfg.max_flows.min(u32::MAX as usize - 1)),
            pending: None,
            io: qos::io::IoStat::new(&cfg),
            tcp: qos::tcp::TcpAnalysis::new(&cfg),
            rtp: qos::rtp::Rtp::new(&cfg),
            udp: qos::udp::UdpStreams::default(),
            delay: None,
            cfg,
            frames: 0,
            bytes: 0,
            first_ns: None,
            last_ns: 0,
            unsupported: 0,
            tunnelled: 0,
            reasm: reasm::Reassembly::new(MAX_DATAGRAMS),
            reassembled: 0,
        })
    }

    /// Measures one-way delay against `reference`: the same packets seen
    /// at another point (see [`delay::Delay`]).
    pub fn with_delay(&mut self, reference: delay::Delay) {
        self.delay = Some(reference);
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Frames fed so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Analyses one frame.
    pub fn feed(&mut self, f: &Frame<'_>) {
        self.frames += 1;
        let len = f.wire_len.max(u32::try_from(f.data.len()).unwrap_or(u32::MAX));
        self.bytes += u64::from(len);
        // The earliest and latest stamps, as capinfos reports them (frames
        // may come out of order).
        self.first_ns = Some(self.first_ns.map_or(f.ts_ns, |t| t.min(f.ts_ns)));
        self.last_ns = self.last_ns.max(f.ts_ns);
        let d = dissect(f.linktype, f.data, len);
        let s = Seen { no: self.frames, frame: f, dissection: &d, len };
        self.io.feed(&s);
        self.dups.feed(&s);
        if let Some(x) = self.delay.as_mut() {
            x.feed(&s);
        }
        self.mix.size(len);
        if !d.linktype_supported {
            self.unsupported += 1;
            return;
        }
        self.malformed.feed(&s);
        self.mix.feed(&s);
        // The flow work of this frame follows the next one's dissection,
        // its flow table slot loading meanwhile.
        let p = self.place(&s);
        if let Some(p) = &p {
            self.flows.prefetch(p);
        }
        if let Some(prev) = std::mem::replace(&mut self.pending, p) {
            self.flow_work(&prev);
        }
        if let Some(t) = wv_wire::tunnel::inner(&d, f.data) {
            self.tunnels(f, t, len);
        }
    }

    /// A packet's place in the flow table, once the reassembly has seen it:
    /// a packet that completes an IP datagram is placed as the datagram (its
    /// TCP or UDP header), the other fragments as IP only.
    fn place(&mut self, s: &Seen<'_>) -> Option<flows::FlowFrame> {
        match self.reasm.feed(s.dissection, s.frame.data, s.frame.ts_ns) {
            reasm::Fed::Complete(g) => {
                self.reassembled += 1;
                let d = wv_wire::dissect::dissect_encap(g.encap, &g.data, g.wire_len);
                let frame = Frame { data: &g.data, wire_len: g.wire_len, ..*s.frame };
                flows::FlowFrame::of(&Seen { frame: &frame, dissection: &d, ..*s }, &self.flows)
            }
            reasm::Fed::FirstAsIs => {
                let mut whole = *s.dissection;
                whole.first_fragment = false;
                flows::FlowFrame::of(&Seen { dissection: &whole, ..*s }, &self.flows)
            }
            reasm::Fed::Nothing => flows::FlowFrame::of(s, &self.flows),
        }
    }

    /// The flows a frame's tunnels carry (each IP, TCP or UDP layer inside is
    /// one more conversation, as in tshark), after the frame's own flow work
    /// (done now, not after the next frame's dissection: their flows may be
    /// the same). At most [`MAX_TUNNELS`] deep.
    fn tunnels(&mut self, f: &Frame<'_>, mut t: wv_wire::tunnel::Inner, len: u32) {
        if let Some(own) = self.pending.take() {
            self.flow_work(&own);
        }
        self.tunnelled += 1;
        let mut data = f.data;
        let mut depth = 0;
        // Where `data` starts in the frame.
        let mut base = 0usize;
        loop {
            let inner = data.get(t.at..t.end.min(data.len())).unwrap_or(&[]);
            base += t.at;
            let wire = u32::try_from(t.end.saturating_sub(t.at)).unwrap_or(u32::MAX);
            let d = wv_wire::dissect::dissect_encap(t.encap, inner, wire);
            let frame = Frame { data: inner, wire_len: wire, ..*f };
            let s = Seen { no: self.frames, frame: &frame, dissection: &d, len };
            self.malformed.feed_inner(&s, u32::try_from(base).unwrap_or(u32::MAX));
            if let Some(p) = self.place(&s) {
                self.flow_work(&p);
            }
            depth += 1;
            match wv_wire::tunnel::inner(&d, inner) {
                Some(next) if depth < MAX_TUNNELS => (data, t) = (inner, next),
                _ => {
                    self.mix.feed_inner(&d, len);
                    break;
                }
            }
        }
    }

    /// A frame's work on its flow: counters, TCP analysis, RTP and plain UDP streams.
    fn flow_work(&mut self, p: &flows::FlowFrame) {
        let udp = p.transport == flows::Transport::Udp;
        match (self.flows.count(p), p.segment, p.rtp) {
            (Some(flow), Some(seg), _) => self.tcp.feed(p, seg, &mut flow.state),
            (Some(flow), None, Some(h)) if udp => self.rtp.feed(p, h, &mut self.udp.flow(&mut flow.state).rtp),
            (Some(flow), None, None) if udp => {
                let from_a = p.src == flow.conv.a;
                self.udp.flow(&mut flow.state);
                self.udp.feed(flow.state, from_a, p.ts);
            }
            (None, None, Some(_)) => self.rtp.untracked(),
            (None, None, None) if udp => self.udp.untracked(),
            _ => {}
        }
    }

    /// The report (consumes the analyzer).
    pub fn finish(mut self) -> Report {
        if let Some(p) = self.pending.take() {
            self.flow_work(&p);
        }
        let untracked_tcp = self.flows.untracked_tcp;
        let udp_streams = self.udp.finish(self.flows.flows());
        Report {
            version: REPORT_VERSION,
            frames: self.frames,
            bytes: self.bytes,
            first_ns: self.first_ns.unwrap_or(0),
            last_ns: self.last_ns,
            unsupported_linktype: self.unsupported,
            tunnelled: self.tunnelled,
            reassembled: self.reassembled,
            fragments_untracked: self.reasm.untracked,
            duplicates: self.dups.finish(),
            malformed: self.malformed.finish(),
            mix: self.mix.finish(),
            conversations: conv::report(self.flows),
            throughput: self.io.finish(),
            tcp: self.tcp.finish(self.cfg.top, untracked_tcp),
            rtp: self.rtp.finish(),
            udp_streams,
            delay: self.delay.map(delay::Delay::finish),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_of_a_link_type_not_dissected_count_in_the_sizes() {
        let mut a = Analyzer::new(Config::default()).unwrap();
        for len in [40u32, 1500] {
            a.feed(&Frame { ts_ns: 1, linktype: 107, wire_len: len, data: &vec![0; len as usize] });
        }
        let r = a.finish();
        assert_eq!((r.unsupported_linktype, r.mix.min_size, r.mix.max_size), (2, 40, 1500));
        assert_eq!(r.mix.sizes.iter().map(|b| b.packets).sum::<u64>(), 2);
    }

    #[test]
    fn the_span_is_earliest_to_latest_whatever_the_order() {
        let mut a = Analyzer::new(Config::default()).unwrap();
        for ts in [5_000, 1_000, 9_000, 3_000] {
            a.feed(&Frame { ts_ns: ts, linktype: 1, wire_len: 60, data: &[0; 60] });
        }
        let r = a.finish();
        assert_eq!((r.first_ns, r.last_ns), (1_000, 9_000));
    }

    /// Throughput of frames at `ts` (ns) with `step_ns` and `max_intervals`.
    fn throughput(ts: &[u64], step_ns: u64, max_intervals: usize) -> qos::io::IoReport {
        let mut a = Analyzer::new(Config { step_ns, max_intervals, ..Config::default() }).unwrap();
        for (i, &t) in ts.iter().enumerate() {
            let len = 60 + (i % 7) as u32;
            a.feed(&Frame { ts_ns: t, linktype: 1, wire_len: len, data: &vec![0; len as usize] });
        }
        a.finish().throughput
    }

    /// Past `max_intervals` the step doubles until the capture fits, and
    /// the intervals are exactly those of the wider step given from the
    /// start; frames out of time order too.
    #[test]
    fn throughput_widens_its_step_to_fit_and_counts_exactly() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut ts: Vec<u64> = (0..5000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                1_700_000_000_000_000_000 + i * 3_000_000 + x % 9_000_000
            })
            .collect();
        ts.swap(10, 4000);
        let step = 1_000_000;
        for max in [1usize, 2, 3, 7, 100, 1000] {
            let r = throughput(&ts, step, max);
            assert!(r.intervals.len() <= max, "{max}: {} intervals", r.intervals.len());
            assert_eq!(r.requested_step_ns, step);
            assert!(r.step_ns >= step && (r.step_ns / step).is_power_of_two(), "{max}: step {}", r.step_ns);
            // The smallest doubling that fits.
            let direct = throughput(&ts, r.step_ns, MAX_INTERVALS);
            assert!(r.step_ns == step || throughput(&ts, r.step_ns / 2, MAX_INTERVALS).intervals.len() > max);
            let rows = |r: &qos::io::IoReport| {
                r.intervals.iter().map(|i| (i.start_ns, i.packets, i.bytes)).collect::<Vec<_>>()
            };
            assert_eq!(rows(&r), rows(&direct), "{max}");
            assert_eq!(r.beyond.packets, 0);
        }
        let r = throughput(&ts, step, MAX_INTERVALS);
        assert_eq!(r.step_ns, step);
        assert!(r.intervals.len() > 1000);
    }

    /// Only one interval allowed and a span no step fits into one: the
    /// later frame is counted past it, not lost, and the step (1 ns raised to
    /// 1 µs) stops at its last doubling below 2^64.
    #[test]
    fn throughput_counts_what_no_step_fits_as_beyond() {
        let r = throughput(&[0, u64::MAX - 1000], 1, 1);
        assert_eq!((r.intervals.len(), r.intervals[0].packets, r.beyond.packets), (1, 1, 1));
        assert_eq!((r.requested_step_ns, r.step_ns), (1, qos::io::MIN_STEP_NS << 54));
        let r = throughput(&[0, u64::MAX - 1000], 1, 2);
        assert_eq!((r.intervals.iter().map(|i| i.packets).sum::<u64>(), r.beyond.packets), (2, 0));
    }

    #[test]
    fn percentile_is_the_nearest_rank() {
        let v: Vec<u64> = (1..=10).map(|i| i * 10).collect();
        // Rank ceil(q * n): 5th, 9th, 10th (ceil 9.9), and at least the first.
        assert_eq!([0.5, 0.9, 0.99, 0.0, 1.0].map(|q| percentile(&v, q)), [50, 90, 100, 10, 100]);
        assert_eq!(percentile(&[7], 0.5), 7);
        assert_eq!(percentile(&[], 0.5), 0);
        // 0.51 of 4 is rank 3 (ceil 2.04), not 2.
        assert_eq!(percentile(&[1, 2, 3, 4], 0.51), 3);
    }

    #[test]
    fn percentiles_sort_their_input() {
        let p = Percentiles::of(vec![500, 100, 300]);
        assert_eq!((p.count, p.min_ns, p.p50_ns, p.p90_ns, p.p99_ns, p.max_ns), (3, 100, 300, 500, 500, 500));
        let none = Percentiles::of(Vec::new());
        assert_eq!((none.count, none.min_ns, none.p50_ns, none.max_ns), (0, 0, 0, 0));
    }

    #[test]
    fn a_config_out_of_bounds_is_refused_with_its_flag() {
        let refused = |c: Config| Analyzer::new(c).err();
        let d = Config::default;
        assert_eq!(refused(Config { step_ns: 0, ..d() }), Some(ConfigError::ZeroStep));
        let dups = Some(ConfigError::DupFrames { max: MAX_DUP_FRAMES });
        assert_eq!(refused(Config { dup_frames: 0, ..d() }), dups);
        assert_eq!(refused(Config { dup_frames: MAX_DUP_FRAMES + 1, ..d() }), dups);
        assert!(refused(Config { dup_frames: MAX_DUP_FRAMES, ..d() }).is_none());
        assert_eq!(refused(Config { max_flows: 0, ..d() }), Some(ConfigError::ZeroFlows));
        let intervals = Some(ConfigError::Intervals { max: MAX_INTERVALS });
        assert_eq!(refused(Config { max_intervals: 0, ..d() }), intervals);
        assert_eq!(refused(Config { max_intervals: MAX_INTERVALS + 1, ..d() }), intervals);
        assert_eq!(ConfigError::DupFrames { max: 4 }.to_string(), "--dup-frames must be between 1 and 4");
    }

    #[test]
    fn flow_text_names_ports_and_protocol() {
        use wv_wire::views::IpProtocol;
        let f = test_frames::udp([10, 0, 0, 1], 5000, [10, 0, 0, 2], 53, &[0; 4]);
        let text = |f: &[u8]| flow_text(&dissect(1, f, f.len() as u32));
        assert_eq!(text(&f), "10.0.0.1:5000 > 10.0.0.2:53 udp");
        let proto99 = test_frames::ipv4([192, 168, 1, 1], [192, 168, 1, 2], IpProtocol::Unknown(99), &[0; 8]);
        assert_eq!(text(&proto99), "192.168.1.1 > 192.168.1.2 proto 99");
        // Neither IP nor addresses: the EtherType alone.
        let mut other = vec![0u8; 60];
        other[12..14].copy_from_slice(&[0x88, 0xb5]);
        assert_eq!(text(&other), "ethertype 0x88b5");
    }

    #[test]
    fn totals_count_the_wire_length_and_at_least_the_captured_one() {
        let mut a = Analyzer::new(Config::default()).unwrap();
        let f = test_frames::udp([10, 0, 0, 1], 1, [10, 0, 0, 2], 2, &[0; 18]);
        a.feed(&Frame { ts_ns: 1, linktype: 1, wire_len: 1000, data: &f });
        // A wire length below the captured one (a bad record) counts the captured bytes.
        a.feed(&Frame { ts_ns: 2, linktype: 1, wire_len: 10, data: &f });
        assert_eq!(a.frames(), 2);
        let r = a.finish();
        assert_eq!((r.version, r.frames, r.bytes), (REPORT_VERSION, 2, 1000 + 60));
    }
}
