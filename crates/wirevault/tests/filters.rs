//! Filters as `tcpdump -r` compiles them, on the link types whose filters
//! differ from Ethernet's: DLT_NULL (host and network byte order, so
//! byte-swapped captures too) and LINKTYPE_ATM_CLIP. `query --count` and
//! `record -r` with a filter select what tcpdump selects.

use crate::util::*;
use std::fs;
use std::path::Path;

fn query_count(file: &Path, filter: &str) -> u64 {
    let o = run_wirevault(&["query", file.to_str().unwrap(), "--count", filter]);
    o.expect(0, &format!("query --count {filter} on {}", file.display()));
    o.stdout.trim().parse().unwrap()
}

fn record_read_written(file: &Path, filter: &str, tmp: &TempDir, n: usize) -> u64 {
    let s = tmp.join(format!("rec-{n}"));
    let o = run_wirevault(&[
        "record",
        "-r",
        file.to_str().unwrap(),
        "-o",
        s.to_str().unwrap(),
        "-q",
        "--buffer",
        "64M",
        "--",
        filter,
    ]);
    o.expect(0, &format!("record --read {} {filter}", file.display()));
    final_counters(&s).written
}

const NULL_FILES: &[&str] = &[
    "quic_handshake.pcap",
    "icmpv6-RFC2894-RR.pcap",
    "quic_handshake_truncated.pcap",
    "quic_retry.pcap",
    "quic_vn.pcap",
];

const FILTERS: &[&str] = &["udp", "ip6", "tcp", "port 443", "icmp6", "ip", "not ip6"];

/// `src` rewritten as a big-endian pcap (headers and the DLT_NULL address
/// family, as a big-endian machine writes them).
fn to_big_endian(src: &Path, dst: &Path) {
    let b = fs::read(src).unwrap();
    let le = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    assert_eq!(le(0), 0xa1b2_c3d4, "{} is a little-endian microsecond pcap", src.display());
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_be_bytes());
    out.extend_from_slice(&2u16.to_be_bytes());
    out.extend_from_slice(&4u16.to_be_bytes());
    for o in [8, 12, 16, 20] {
        out.extend_from_slice(&le(o).to_be_bytes());
    }
    let mut o = 24;
    while o + 16 <= b.len() {
        let caplen = le(o + 8) as usize;
        for f in 0..4 {
            out.extend_from_slice(&le(o + 4 * f).to_be_bytes());
        }
        let mut data = b[o + 16..o + 16 + caplen].to_vec();
        if data.len() >= 4 {
            let af = u32::from_le_bytes(data[0..4].try_into().unwrap());
            data[0..4].copy_from_slice(&af.to_be_bytes());
        }
        out.extend_from_slice(&data);
        o += 16 + caplen;
    }
    fs::write(dst, out).unwrap();
}

wvtest!(dlt_null_filters_match_tcpdump, needs = ["tcpdump", corpus], |t| {
    let tmp = TempDir::new("hr-null");
    let mut n = 0;
    for name in NULL_FILES {
        let f = t.corpus_file(name);
        let be = tmp.join(format!("be-{name}"));
        to_big_endian(&f, &be);
        for file in [f.clone(), be] {
            for filter in FILTERS {
                let want = tcpdump_count(&file, filter);
                assert_eq!(query_count(&file, filter), want, "query {} --count {filter}", file.display());
                n += 1;
                assert_eq!(
                    record_read_written(&file, filter, &tmp, n),
                    want,
                    "record --read {} {filter}",
                    file.display()
                );
            }
        }
    }
    // A v6 address of quic_handshake.pcap.
    let f = t.corpus_file("quic_handshake.pcap");
    let want = tcpdump_count(&f, "host ::1");
    assert!(want > 0);
    assert_eq!(query_count(&f, "host ::1"), want);
});

wvtest!(atm_clip_filters_compile_as_tcpdump_r, needs = ["tcpdump", corpus], |t| {
    let f = t.corpus_file("heap-overflow-2.pcap");
    let tmp = TempDir::new("hr-atm");
    for filter in ["tcp", "ip", "udp"] {
        let want = tcpdump_count(&f, filter);
        assert_eq!(query_count(&f, filter), want, "query --count {filter}");
        assert_eq!(record_read_written(&f, filter, &tmp, filter.len()), want, "record --read {filter}");
    }
});
