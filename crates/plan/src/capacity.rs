//! The rates of a mix on a saturated link: frames per second, bits of
//! frames and of the wire, and the storage rate of each format.
//!
//! At saturation the link's bits are all frames and their overhead, so
//! `pps = link_bps / 8 / mean(wire bytes per frame)`, where a frame of `L`
//! bytes (without FCS) costs `max(L, 60) + 4 + 8 + 12` wire bytes. The
//! storage rate of a format is `pps × mean(bytes per record)`, where a
//! record holds the *captured* bytes (padded frame, cut by a snapshot
//! length) behind the format's header.

use crate::ethernet::{padded, wire_len};
use crate::formats::StoreFormat;
use crate::mix::Mix;
use serde::{Deserialize, Serialize};

/// Storage rates in bits per second, per format.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Storage {
    pub pcap: f64,
    pub pcap_ns: f64,
    pub pcapng: f64,
    pub raw: f64,
    /// wirevault's index beside the capture (add it to the format `record` writes).
    pub wirevault_index: f64,
}

impl Storage {
    /// The rate of `f`.
    pub fn of(&self, f: StoreFormat) -> f64 {
        match f {
            StoreFormat::Pcap => self.pcap,
            StoreFormat::PcapNs => self.pcap_ns,
            StoreFormat::Pcapng => self.pcapng,
            StoreFormat::Raw => self.raw,
        }
    }
}

/// One mix on one link.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rates {
    /// The link's rate, bits/s.
    pub link_bps: f64,
    /// Mean frame bytes without FCS, padded to 60 (as a receiving capture
    /// sees them before any snapshot length).
    pub frame_bytes: f64,
    /// Mean bytes stored per frame (after the snapshot length).
    pub captured_bytes: f64,
    /// Mean bytes per frame on the wire: padded frame, FCS, preamble + SFD, gap.
    pub wire_bytes: f64,
    /// Frames per second.
    pub pps: f64,
    /// Bits per second of the frames as stored by pcap at full length
    /// (without FCS, preamble or gap).
    pub frame_bps: f64,
    /// Bits per second on the wire (frames with FCS, preamble + SFD, gap):
    /// the link's rate, since the link is saturated.
    pub wire_bps: f64,
    /// Storage rate per format, bits/s.
    pub storage_bps: Storage,
}

impl Rates {
    /// `mix` saturating a link of `link_bps`, with an index of
    /// `index_bytes_per_packet` per packet.
    pub fn saturated(mix: &Mix, link_bps: f64, index_bytes_per_packet: f64) -> Rates {
        let wire_bytes = mix.mean(|c| wire_len(c.frame) as f64);
        let frame_bytes = mix.mean(|c| padded(c.frame) as f64);
        let captured_bytes = mix.mean(|c| c.captured as f64);
        let pps = if wire_bytes > 0.0 { link_bps / 8.0 / wire_bytes } else { 0.0 };
        let rate = |f: StoreFormat| pps * 8.0 * mix.mean(|c| f.record_len(c.captured) as f64);
        Rates {
            link_bps,
            frame_bytes,
            captured_bytes,
            wire_bytes,
            pps,
            frame_bps: pps * 8.0 * frame_bytes,
            wire_bps: pps * 8.0 * wire_bytes,
            storage_bps: Storage {
                pcap: rate(StoreFormat::Pcap),
                pcap_ns: rate(StoreFormat::PcapNs),
                pcapng: rate(StoreFormat::Pcapng),
                raw: rate(StoreFormat::Raw),
                wirevault_index: pps * 8.0 * index_bytes_per_packet,
            },
        }
    }

    /// Bytes per second of `format`, plus the index when `index` is set.
    pub fn store_bytes_per_s(&self, format: StoreFormat, index: bool) -> f64 {
        (self.storage_bps.of(format) + if index { self.storage_bps.wirevault_index } else { 0.0 }) / 8.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::SizeConvention;
    use crate::mix::imix;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-6 * b.abs().max(1.0)
    }

    #[test]
    fn the_papers_1514_line() {
        // 812,744 pps x (1514 + 16) x 8 = 9.948 Gb/s of disk with pcap headers.
        let r = Rates::saturated(&Mix::single(1514, "1514".into()), 10e9, 0.0);
        assert_eq!(r.pps.round(), 812_744.0);
        assert!(close(r.storage_bps.pcap, 10e9 / 1538.0 * 1530.0));
        assert_eq!((r.storage_bps.pcap / 1e6).round(), 9948.0);
        assert!(close(r.storage_bps.pcap_ns, r.storage_bps.pcap));
        assert!(close(r.storage_bps.raw, 10e9 / 1538.0 * 1526.0));
        assert!(close(r.storage_bps.pcapng, 10e9 / 1538.0 * 1548.0));
        assert!(close(r.frame_bps, 10e9 / 1538.0 * 1514.0));
        assert!(close(r.wire_bps, 10e9));
    }

    #[test]
    fn sixty_four_bytes_with_fcs_every_format() {
        let f = SizeConvention::WithFcs.frame_len(64).unwrap();
        let r = Rates::saturated(&Mix::single(f, "64".into()), 10e9, 8.0);
        assert_eq!(r.pps.round(), 14_880_952.0);
        let pps = 10e9 / 8.0 / 84.0;
        // Frames as stored: 60 bytes; pcap 76; pcapng 28 + 60 + 4 = 92; RAW 72.
        assert!(close(r.frame_bps, pps * 60.0 * 8.0));
        assert!(close(r.storage_bps.pcap, pps * 76.0 * 8.0));
        assert!(close(r.storage_bps.pcapng, pps * 92.0 * 8.0));
        assert!(close(r.storage_bps.raw, pps * 72.0 * 8.0));
        assert!(close(r.storage_bps.wirevault_index, pps * 8.0 * 8.0));
        assert!(close(r.store_bytes_per_s(StoreFormat::Pcap, true), pps * 84.0));
        assert!(close(r.store_bytes_per_s(StoreFormat::Pcap, false), pps * 76.0));
    }

    #[test]
    fn every_link_speed_and_format_by_hand() {
        // (link, size without FCS, pps, pcap, pcapng, raw), pps = link/8/(max(s,60)+24),
        // storage = pps * 8 * record bytes; all computed by hand.
        for link in [1e9, 10e9, 25e9, 40e9, 100e9] {
            for (size, wire, pcap, pcapng, raw) in [
                (60u64, 84.0, 76.0, 92.0, 72.0),
                (64, 88.0, 80.0, 96.0, 76.0),
                (128, 152.0, 144.0, 160.0, 140.0),
                (1514, 1538.0, 1530.0, 1548.0, 1526.0),
                (9000, 9024.0, 9016.0, 9032.0, 9012.0),
            ] {
                let r = Rates::saturated(&Mix::single(size, String::new()), link, 0.0);
                let pps = link / 8.0 / wire;
                assert!(close(r.pps, pps), "{link} {size}");
                assert!(close(r.storage_bps.pcap, pps * 8.0 * pcap), "{link} {size}");
                assert!(close(r.storage_bps.pcap_ns, pps * 8.0 * pcap), "{link} {size}");
                assert!(close(r.storage_bps.pcapng, pps * 8.0 * pcapng), "{link} {size}");
                assert!(close(r.storage_bps.raw, pps * 8.0 * raw), "{link} {size}");
            }
        }
    }

    #[test]
    fn imix_on_10g() {
        // Wire bytes: (7*84 + 4*614 + 1538)/12 = 4582/12; pcap records (7*76 + 4*606 + 1530)/12 = 4486/12;
        // pcapng: (7*92 + 4*(28+592+4) + 1548)/12 = 4688/12.
        let r = Rates::saturated(&imix(), 10e9, 0.0);
        let pps = 10e9 / 8.0 / (4582.0 / 12.0);
        assert!(close(r.pps, pps));
        assert_eq!(r.pps.round(), 3_273_680.0);
        assert!(close(r.storage_bps.pcap, pps * 8.0 * 4486.0 / 12.0));
        assert!(close(r.storage_bps.pcapng, pps * 8.0 * 4688.0 / 12.0));
    }

    #[test]
    fn snaplen_lowers_storage_not_the_wire() {
        let r = Rates::saturated(&Mix::single(1514, String::new()).with_snaplen(Some(128)), 10e9, 0.0);
        assert_eq!(r.pps.round(), 812_744.0);
        assert!(close(r.storage_bps.pcap, 10e9 / 1538.0 * 144.0));
        assert!(close(r.frame_bps, 10e9 / 1538.0 * 1514.0));
    }
}
