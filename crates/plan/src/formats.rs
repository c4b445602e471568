//! Bytes each capture format spends per stored packet.
//!
//! | format | per packet of `c` captured bytes |
//! |---|---|
//! | pcap (µs) and pcap-ns | 16-byte record header + `c` |
//! | pcapng | Enhanced Packet Block: type, length, interface, two timestamp words, captured and original length (28), `c` padded to 4, trailing length (4): `32 + pad4(c)` |
//! | RAW (HPCAP) | 12-byte header + `c` |
//! | wirevault index | [`INDEX_BYTES_PER_PACKET`] beside the capture (traffic-dependent, see there) |
//!
//! The pcap and pcapng numbers come from `wv_wire` (the same definitions the
//! writer uses), so they cannot drift from what `record` writes. File
//! headers (24 bytes per pcap file, a few dozen per pcapng file) are per
//! file, not per packet, and left out.

use wv_wire::Format;

/// HPCAP's "RAW" record header (Moreno et al.): 12 bytes per packet.
pub const RAW_HEADER_LEN: u64 = 12;

/// wirevault's index per packet, in bytes, on its worst case: every packet a
/// new 5-tuple (source addresses from 65,536 clients, 16 servers, random
/// ports, TCP and UDP), 1,000,000 packets in one capture file, blocks of 64
/// packets. Measured by building that index (test
/// `index_constant_matches_a_real_index` builds it again and fails if the
/// cost moves more than 5% from this constant). The cost depends on the
/// traffic: a key costs a directory entry once per file and about a byte
/// per block it occurs in, so more packets per file cost less (2,000,000:
/// 6.3; bench/RESULTS.md: 5.6 on trafgen's random 5-tuples) and ordinary
/// traffic with fewer distinct keys much less (0.15-0.3 for 100 flows).
/// `plan --from` uses the measured cost of the indexes it finds instead.
pub const INDEX_BYTES_PER_PACKET: f64 = 6.75;

/// A capture format whose per-packet cost `plan` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreFormat {
    /// pcap with microsecond stamps (tcpdump's default).
    Pcap,
    /// pcap with nanosecond stamps (what `record --format pcap` writes): the same 16 bytes.
    PcapNs,
    /// pcapng Enhanced Packet Blocks, no options (what `record --format pcapng` writes).
    Pcapng,
    /// HPCAP's RAW format.
    Raw,
}

impl StoreFormat {
    /// Every format, in the order tables show them.
    pub const ALL: [StoreFormat; 4] = [StoreFormat::Pcap, StoreFormat::PcapNs, StoreFormat::Pcapng, StoreFormat::Raw];

    /// The name on the command line and in JSON (`pcap`, `pcap_ns`, `pcapng`, `raw`).
    pub fn name(self) -> &'static str {
        match self {
            StoreFormat::Pcap => "pcap",
            StoreFormat::PcapNs => "pcap_ns",
            StoreFormat::Pcapng => "pcapng",
            StoreFormat::Raw => "raw",
        }
    }

    /// Bytes a packet of `caplen` captured bytes takes in a file of this format.
    pub fn record_len(self, caplen: u64) -> u64 {
        let c = u32::try_from(caplen).unwrap_or(u32::MAX);
        match self {
            StoreFormat::Pcap | StoreFormat::PcapNs => Format::Pcap.record_len(c),
            StoreFormat::Pcapng => Format::Pcapng.record_len(c),
            StoreFormat::Raw => RAW_HEADER_LEN + caplen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_lengths_by_hand() {
        for f in [StoreFormat::Pcap, StoreFormat::PcapNs] {
            assert_eq!(f.record_len(1514), 1530);
            assert_eq!(f.record_len(60), 76);
        }
        // 28 + pad4(c) + 4.
        assert_eq!(StoreFormat::Pcapng.record_len(1514), 28 + 1516 + 4);
        assert_eq!(StoreFormat::Pcapng.record_len(60), 92);
        assert_eq!(StoreFormat::Pcapng.record_len(61), 28 + 64 + 4);
        assert_eq!(StoreFormat::Pcapng.record_len(63), 96);
        assert_eq!(StoreFormat::Raw.record_len(1514), 1526);
    }

    /// The reference traffic of [`INDEX_BYTES_PER_PACKET`]: 1,000,000 60-byte
    /// frames, each a random 5-tuple (client 10.0.x.y of 65,536, server
    /// 192.168.0.1..16, random ports, TCP or UDP), 1 µs apart.
    fn reference_capture(path: &std::path::Path) -> u64 {
        use wv_wire::pcap::{emit_file_header, emit_record_header, FILE_HEADER_LEN, RECORD_HEADER_LEN};
        let n = 1_000_000u64;
        let mut out = Vec::with_capacity(FILE_HEADER_LEN + n as usize * (RECORD_HEADER_LEN + 60));
        let mut fh = [0u8; FILE_HEADER_LEN];
        emit_file_header(&mut fh, 262_144, wv_wire::linktype::ETHERNET);
        out.extend_from_slice(&fh);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..n {
            let r = rnd();
            let mut f = [0u8; 60];
            f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
            f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[16..18].copy_from_slice(&46u16.to_be_bytes());
            f[22] = 64;
            f[23] = if r & 1 == 0 { 6 } else { 17 };
            f[26..30].copy_from_slice(&[10, 0, (r >> 8) as u8, (r >> 16) as u8]);
            f[30..34].copy_from_slice(&[192, 168, 0, 1 + ((r >> 24) & 15) as u8]);
            f[34..36].copy_from_slice(&((r >> 28) as u16).to_be_bytes());
            f[36..38].copy_from_slice(&((r >> 44) as u16).to_be_bytes());
            if f[23] == 6 {
                f[46] = 0x50;
            } else {
                f[38..40].copy_from_slice(&26u16.to_be_bytes());
            }
            let mut rh = [0u8; RECORD_HEADER_LEN];
            emit_record_header(&mut rh, 1_700_000_000_000_000_000 + i * 1000, 60, 60);
            out.extend_from_slice(&rh);
            out.extend_from_slice(&f);
        }
        std::fs::write(path, out).unwrap();
        n
    }

    #[test]
    fn index_constant_matches_a_real_index() {
        let dir = wv_testkit::TempDir::new("plan-index-constant");
        let cap = dir.join("ref.pcap");
        let n = reference_capture(&cap);
        let done = wv_index::index_file(&cap).unwrap();
        assert_eq!(done.summary.packets, n);
        let bytes = std::fs::metadata(wv_index::index_path_for(&cap)).unwrap().len();
        let per = bytes as f64 / n as f64;
        assert!(
            (per / INDEX_BYTES_PER_PACKET - 1.0).abs() <= 0.05,
            "the index of the reference traffic costs {per:.3} bytes per packet; INDEX_BYTES_PER_PACKET is {INDEX_BYTES_PER_PACKET}: update it (and its documentation)"
        );
    }
}
