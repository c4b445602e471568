//! `wirevault analyze` end to end: a capture built here with known numbers
//! of duplicates, malformed frames of every kind, TCP retransmissions,
//! out-of-order segments, duplicate ACKs and a jittered RTP stream (every
//! count exact, and equal to tshark's where tshark has the statistic), and
//! tcpdump's corpus against tshark's TCP expert info.

use crate::util::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

pub(crate) const T0: u64 = 1_700_000_000_000_000_000;
pub(crate) const MS: u64 = 1_000_000;

fn csum(h: &[u8]) -> u16 {
    let mut s = 0u32;
    for w in h.chunks(2) {
        s += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// IP identification numbers: every built packet differs from every other
/// (as a real sender's do), except the copies made on purpose.
static IP_ID: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(1);

pub(crate) fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, payload: &[u8]) -> Vec<u8> {
    let id = IP_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed).to_be_bytes();
    let mut h = vec![0x45, 0, 0, 0, id[0], id[1], 0x40, 0, 64, proto, 0, 0];
    h[2..4].copy_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

pub(crate) fn fix_csum(ip: &mut [u8]) {
    ip[10..12].copy_from_slice(&[0, 0]);
    let hl = (4 * (ip[0] & 0x0f) as usize).min(ip.len());
    let c = csum(&ip[..hl]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
}

pub(crate) fn udp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sp.to_be_bytes());
    u.extend_from_slice(&dp.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

pub(crate) fn tcp(sp: u16, dp: u16, seq: u32, ack: u32, flags: u8, win: u16, payload: &[u8]) -> Vec<u8> {
    tcp_with_options(sp, dp, seq, ack, flags, win, &[], payload)
}

/// A TCP segment with `opts` (whole 32-bit words) after the fixed header.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tcp_with_options(
    sp: u16,
    dp: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    win: u16,
    opts: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    assert!(opts.len().is_multiple_of(4) && opts.len() <= 40, "options of {} bytes", opts.len());
    let mut t = Vec::new();
    t.extend_from_slice(&sp.to_be_bytes());
    t.extend_from_slice(&dp.to_be_bytes());
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[((20 + opts.len()) as u8 / 4) << 4, flags]);
    t.extend_from_slice(&win.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 0]);
    t.extend_from_slice(opts);
    t.extend_from_slice(payload);
    t
}

/// An Ethernet frame: MACs, then `l2` (type fields, tags, labels), then `rest`, padded to 60 bytes.
pub(crate) fn ether(l2: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST_MAC);
    f.extend_from_slice(&SRC_MAC);
    f.extend_from_slice(l2);
    f.extend_from_slice(rest);
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

pub(crate) fn eth_ip(ip: &[u8]) -> Vec<u8> {
    ether(&[0x08, 0x00], ip)
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const SYNACK: u8 = 0x12;
const PSHACK: u8 = 0x18;

/// What the built capture holds, by construction.
struct Built {
    frames: Vec<Frame>,
}

impl Built {
    fn at(&mut self, t: u64, data: Vec<u8>) {
        self.frames.push(Frame { ts_ns: T0 + t, origlen: data.len() as u32, data });
    }
}

fn rtp_packet(seq: u16) -> Vec<u8> {
    let mut p = vec![0x80, 0x00];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&(1000 + 160 * u32::from(seq - 100)).to_be_bytes());
    p.extend_from_slice(&0x1122_3344u32.to_be_bytes());
    p.extend_from_slice(&[0xd5; 160]);
    p
}

/// RTP arrivals: 20 ms apart plus a jitter of 0-4 ms by sequence number.
fn rtp_arrival(seq: u16) -> u64 {
    700 * MS + u64::from(seq - 100) * 20 * MS + u64::from(seq * 7 % 5) * MS
}
const RTP_LOST: [u16; 3] = [110, 120, 121];

pub(crate) fn build() -> Vec<Frame> {
    let mut b = Built { frames: Vec::new() };
    let (c, s) = ([10, 1, 0, 1], [10, 1, 0, 2]);
    let to_s = |seq: u32, ack: u32, fl: u8, win: u16, len: usize| {
        eth_ip(&ipv4(c, s, 6, &tcp(40000, 80, seq, ack, fl, win, &vec![0x61; len])))
    };
    let to_c = |seq: u32, ack: u32, fl: u8, win: u16| eth_ip(&ipv4(s, c, 6, &tcp(80, 40000, seq, ack, fl, win, &[])));
    // Handshake: RTT 20 ms.
    b.at(0, to_s(1000, 0, SYN, 64240, 0));
    b.at(10 * MS, to_c(5000, 1001, SYNACK, 65535));
    b.at(20 * MS, to_s(1001, 5001, ACK, 64240, 0));
    let seg = |i: u32| 1001 + 100 * i;
    for (t, i) in [(30, 0), (31, 1), (32, 2), (33, 4), (34, 3)] {
        // Segment 3 comes 1 ms after segment 4: out of order.
        b.at(t * MS, to_s(seg(i), 5001, PSHACK, 64240, 100));
    }
    b.at(40 * MS, to_c(5001, seg(5), ACK, 1000));
    for (t, i) in [(41, 5), (42, 7), (43, 8)] {
        b.at(t * MS, to_s(seg(i), 5001, PSHACK, 64240, 100));
    }
    // One ACK and three duplicates of it, then the fast retransmission.
    for t in 44..48 {
        b.at(t * MS, to_c(5001, seg(6), ACK, 1000));
    }
    b.at(50 * MS, to_s(seg(6), 5001, PSHACK, 64240, 100));
    b.at(52 * MS, to_c(5001, seg(9), ACK, 1000));
    // A retransmission after a timeout, then a spurious one.
    b.at(60 * MS, to_s(seg(9), 5001, PSHACK, 64240, 100));
    b.at(300 * MS, to_s(seg(9), 5001, PSHACK, 64240, 100));
    b.at(310 * MS, to_c(5001, seg(10), ACK, 1000));
    b.at(500 * MS, to_s(seg(9), 5001, PSHACK, 64240, 100));
    // Two new segments, acknowledged, and the first sent again 1.5 ms later:
    // within the handshake RTT of the highest, but data already acknowledged,
    // so spurious (tshark tests that first), not out of order.
    b.at(510 * MS, to_s(seg(10), 5001, PSHACK, 64240, 100));
    b.at(511 * MS, to_s(seg(11), 5001, PSHACK, 64240, 100));
    b.at(512 * MS, to_c(5001, seg(12), ACK, 1000));
    b.at(512 * MS + 500_000, to_s(seg(10), 5001, PSHACK, 64240, 100));

    // Duplicates: 4 within 5 us; one copy 5 ms later (outside the 1 ms window).
    for i in 0..10u64 {
        let f = eth_ip(&ipv4([10, 3, 0, 1], [10, 3, 0, 2], 17, &udp(5555, 9999, format!("dup-{i}").as_bytes())));
        b.at(600 * MS + i * 10 * MS, f.clone());
        if i < 4 {
            b.at(600 * MS + i * 10 * MS + 5_000, f.clone());
        }
        if i == 9 {
            b.at(600 * MS + i * 10 * MS + 5 * MS, f);
        }
    }

    // RTP: 50 sequence numbers, 3 lost.
    for seq in 100..150u16 {
        if !RTP_LOST.contains(&seq) {
            b.at(
                rtp_arrival(seq),
                eth_ip(&ipv4([10, 4, 0, 1], [10, 4, 0, 2], 17, &udp(30000, 30002, &rtp_packet(seq)))),
            );
        }
    }

    // Traffic mix: 3 frames in VLAN 100, 2 under MPLS label 1000.
    let u = || ipv4([10, 5, 0, 1], [10, 5, 0, 2], 17, &udp(7000, 7001, b"mix"));
    for i in 0..3 {
        b.at(1800 * MS + i * MS, ether(&[0x81, 0x00, 0x00, 0x64, 0x08, 0x00], &u()));
    }
    for i in 0..2 {
        b.at(1810 * MS + i * MS, ether(&[0x88, 0x47, 0x00, 0x3e, 0x81, 0x40], &u()));
    }

    // Malformed: one frame per kind (at 2 s, 1 ms apart).
    let m = |t: u64, b: &mut Built, f: Vec<u8>| b.at(2000 * MS + t * MS, f);
    let good = ipv4([10, 9, 0, 1], [10, 9, 0, 2], 17, &udp(1, 2, b"x"));
    let mut l2 = vec![0x81, 0x00, 0x00, 0x0a, 0x88, 0xa8, 0x00, 0x14, 0x08, 0x00];
    m(0, &mut b, ether(&l2, &good)); // vlan_tpid_as_ethertype
                                     // (not IP inside: tshark walks any number of tags and would count it)
    l2 = [0x81, 0x00, 0x00, 0x01].repeat(9);
    l2.extend_from_slice(&[0x88, 0xb5]);
    m(1, &mut b, ether(&l2, b"deep")); // vlan_too_many_tags
    let mut f = [DST_MAC, SRC_MAC].concat();
    f.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a, 0x81, 0x00, 0x00]);
    m(2, &mut b, f); // vlan_truncated_tag (and runt)
    let mut labels: Vec<u8> = vec![0x88, 0x47];
    for _ in 0..12 {
        labels.extend_from_slice(&[0x00, 0x7d, 0x00, 0x40]);
    }
    m(3, &mut b, ether(&labels, &[])); // mpls_no_bottom_of_stack (62 bytes)
    let mut l = labels.clone();
    l.extend_from_slice(&[0x00, 0x7d]);
    m(4, &mut b, ether(&l, &[])); // mpls_truncated
    m(5, &mut b, ether(&[0x88, 0x47, 0x00, 0x00, 0x31, 0x40], &good)); // mpls_reserved_label (3, bottom)
    m(6, &mut b, vec![0x02; 10]); // truncated_l2 (and runt)
    let mut ip = good.clone();
    ip[0] = 0x4f;
    m(7, &mut b, eth_ip(&ip)); // truncated_l3
    let mut ip = ipv4([10, 9, 0, 1], [10, 9, 0, 2], 17, &[0, 1, 0, 2]);
    fix_csum(&mut ip);
    m(8, &mut b, eth_ip(&ip)); // truncated_l4
    let mut ip = good.clone();
    ip[0] = 0x44;
    m(9, &mut b, eth_ip(&ip)); // ipv4_header_length
    let mut ip = good.clone();
    ip[2..4].copy_from_slice(&10u16.to_be_bytes());
    fix_csum(&mut ip);
    m(10, &mut b, eth_ip(&ip)); // ipv4_total_length_short
    let mut ip = good.clone();
    ip[2..4].copy_from_slice(&1000u16.to_be_bytes());
    fix_csum(&mut ip);
    m(11, &mut b, eth_ip(&ip)); // ipv4_total_length_beyond_frame
    let mut ip = good.clone();
    ip[10] ^= 0xff;
    m(12, &mut b, eth_ip(&ip)); // ipv4_checksum
    let mut ip = good.clone();
    ip[24..26].copy_from_slice(&200u16.to_be_bytes());
    m(13, &mut b, eth_ip(&ip)); // udp_length
    let mut t = tcp(1, 2, 1, 1, ACK, 100, &[0; 8]);
    t[12] = 0x40;
    m(14, &mut b, eth_ip(&ipv4([10, 9, 0, 1], [10, 9, 0, 2], 6, &t))); // tcp_data_offset
    m(15, &mut b, eth_ip(&ipv4([10, 9, 0, 1], [10, 9, 0, 2], 17, &udp(1, 2, &[0x55; 1600])))); // over_mtu
    let mut arp = [[0xff; 6], SRC_MAC].concat();
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&SRC_MAC);
    arp.extend_from_slice(&[10, 9, 0, 1, 0, 0, 0, 0, 0, 0, 10, 9, 0, 2]);
    m(16, &mut b, arp); // runt (42 bytes)
    let mut ip = good.clone();
    ip[0] = 0x65;
    m(17, &mut b, eth_ip(&ip)); // ip_version
    b.frames.sort_by_key(|f| f.ts_ns);
    b.frames
}

/// The kinds of malformed frames built, and how many of each.
const MALFORMED: &[(&str, u64)] = &[
    ("vlan_tpid_as_ethertype", 1),
    ("vlan_too_many_tags", 1),
    ("vlan_truncated_tag", 1),
    ("mpls_no_bottom_of_stack", 1),
    ("mpls_truncated", 1),
    ("mpls_reserved_label", 1),
    ("truncated_l2", 1),
    ("truncated_l3", 1),
    ("truncated_l4", 1),
    ("ip_version", 1),
    ("ipv4_header_length", 1),
    ("ipv4_total_length_short", 1),
    ("ipv4_total_length_beyond_frame", 1),
    ("ipv4_checksum", 1),
    ("udp_length", 1),
    ("tcp_data_offset", 1),
    ("runt", 3),
    ("over_mtu", 1),
];

/// `analyze --json PATH EXTRA...` (options, then a filter expression if any).
pub(crate) fn analyze_json(path: &Path, extra: &[&str]) -> Value {
    let out = run_ok(wirevault().arg("analyze").arg("--json").arg(path).args(extra));
    serde_json::from_slice(&out.stdout).expect("analyze --json prints JSON")
}

pub(crate) fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// tshark's frames with a display filter.
fn tshark_count(file: &Path, filter: &str, opts: &[&str]) -> u64 {
    let out = run_ok(Command::new("tshark").args(["-n", "-r"]).arg(file).args(opts).args(["-Y", filter]));
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

/// The RFC 3550 jitter of the built stream, computed here from the construction (ms).
fn expected_jitter() -> (f64, f64) {
    let (mut j, mut max, mut sum, mut k) = (0.0f64, 0.0f64, 0.0f64, 0u32);
    let mut prev: Option<(f64, f64)> = None;
    for seq in (100..150u16).filter(|s| !RTP_LOST.contains(s)) {
        let arrival = rtp_arrival(seq) as f64 / 1e6;
        let nominal = f64::from(160 * u32::from(seq - 100)) / 8.0;
        if let Some((pa, pn)) = prev {
            let d = (arrival - pa) - (nominal - pn);
            j += (d.abs() - j) / 16.0;
            max = max.max(j);
        }
        sum += j;
        k += 1;
        prev = Some((arrival, nominal));
    }
    // tshark's mean: over the packets after the first.
    (max, sum / f64::from(k - 1))
}

wvtest!(built_capture_counts_are_exact, |test| {
    let dir = TempDir::new("analyze-built");
    let file = dir.join("built.pcap");
    let frames = build();
    write_pcap(&file, 1, 65535, true, &frames);
    let r = analyze_json(&file, &[]);
    assert_eq!(n(&r["frames"]), frames.len() as u64);
    // Duplicates: 4 within the 1 ms window, not the copy 5 ms later.
    assert_eq!(n(&r["duplicates"]["packets"]), 4, "{}", r["duplicates"]);
    let wide = analyze_json(&file, &["--dup-window", "10ms"]);
    assert_eq!(n(&wide["duplicates"]["packets"]), 5);
    // Malformed: every kind, exactly.
    let kinds: Vec<(String, u64)> = r["malformed"]["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k["kind"].as_str().unwrap().to_string(), n(&k["packets"])))
        .collect();
    let mut want: Vec<(String, u64)> = MALFORMED.iter().map(|(k, c)| (k.to_string(), *c)).collect();
    want.sort();
    let mut got = kinds.clone();
    got.sort();
    assert_eq!(got, want, "malformed kinds");
    // TCP: 4 retransmissions (1 fast, 2 spurious), 1 out of order, 3 duplicate ACKs, RTT 20 ms.
    let t = &r["tcp"];
    assert_eq!(
        (n(&t["retransmissions"]), n(&t["fast_retransmissions"]), n(&t["spurious_retransmissions"])),
        (4, 1, 2),
        "{test}"
    );
    assert_eq!(n(&t["out_of_order"]), 1);
    assert_eq!(n(&t["duplicate_acks"]), 3);
    assert_eq!(n(&t["lost_segments"]), 2);
    assert_eq!(n(&t["handshake_rtt"]["count"]), 1);
    assert_eq!(n(&t["handshake_rtt"]["max_ns"]), 20 * MS);
    // RTP: 47 packets, 3 lost, jitter as RFC 3550 computes it from the construction.
    let streams = r["rtp"]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 1, "{streams:?}");
    let s = &streams[0];
    assert_eq!((n(&s["packets"]), s["lost"].as_i64().unwrap(), n(&s["ssrc"])), (47, 3, 0x1122_3344));
    let (max_j, mean_j) = expected_jitter();
    assert!((s["max_jitter_ms"].as_f64().unwrap() - max_j).abs() < 1e-9, "{s} vs {max_j}");
    assert!((s["mean_jitter_ms"].as_f64().unwrap() - mean_j).abs() < 1e-9, "{s} vs {mean_j}");
    // Mix.
    let count_of = |list: &Value, key: u64| {
        list.as_array().unwrap().iter().find(|e| n(&e["key"]) == key).map_or(0, |e| n(&e["packets"]))
    };
    assert_eq!(count_of(&r["mix"]["vlans"], 100), 3);
    assert_eq!(count_of(&r["mix"]["mpls_labels"], 1000), 2);
    let sizes: u64 = r["mix"]["sizes"].as_array().unwrap().iter().map(|b| n(&b["packets"])).sum();
    assert_eq!(sizes, frames.len() as u64);

    if !test.has_tools("tshark part", &["tshark"]) {
        return;
    }
    // tshark's expert info on the same packets.
    for (filter, key) in [
        ("tcp.analysis.retransmission", "retransmissions"),
        ("tcp.analysis.fast_retransmission", "fast_retransmissions"),
        ("tcp.analysis.spurious_retransmission", "spurious_retransmissions"),
        ("tcp.analysis.out_of_order", "out_of_order"),
        ("tcp.analysis.duplicate_ack", "duplicate_acks"),
        ("tcp.analysis.lost_segment", "lost_segments"),
    ] {
        assert_eq!(tshark_count(&file, filter, &[]), n(&t[key]), "{filter}");
    }
    // tshark's RTP streams (heuristic RTP on UDP).
    let out = run_ok(
        Command::new("tshark").args(["-n", "-q", "-o", "rtp.heuristic_rtp:TRUE", "-z", "rtp,streams", "-r"]).arg(&file),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text.lines().find(|l| l.contains("0x11223344")).unwrap_or_else(|| panic!("no stream in {text}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert!(cols.contains(&"47"), "packets: {row}");
    assert!(cols.contains(&"3"), "lost: {row}");
    // Its jitter columns end the row: min, mean, max (ms, 3 decimals).
    let ms: Vec<f64> =
        cols.iter().filter(|c| c.contains('.') && !c.contains('(')).filter_map(|c| c.parse().ok()).collect();
    let s = &r["rtp"]["streams"][0];
    for (i, key) in [(ms.len() - 2, "mean_jitter_ms"), (ms.len() - 1, "max_jitter_ms")] {
        assert!((s[key].as_f64().unwrap() - ms[i]).abs() <= 0.0005, "{key}: {} vs tshark's {row}", s[key]);
    }
    compare_with_tshark(&file, &r);
});

/// `--max-flows 2` on the built capture: the first two flows (the TCP
/// connection, the duplicated UDP flow) are tracked, every frame of a later
/// flow is counted as untracked in each table (the RTP stream's too), and
/// tracked plus untracked equal the uncapped run's totals (which the test
/// above holds to tshark's).
#[test]
fn full_flow_table_counts_later_flows_as_untracked() {
    let dir = TempDir::new("analyze-cap");
    let file = dir.join("built.pcap");
    write_pcap(&file, 1, 65535, true, &build());
    let all = analyze_json(&file, &[]);
    let cap = analyze_json(&file, &["--max-flows", "2"]);
    let packets =
        |t: &Value, key: &str| -> u64 { t["rows"].as_array().unwrap().iter().map(|r| n(&r[key]["packets"])).sum() };
    let total = |t: &Value| packets(t, "a_to_b") + packets(t, "b_to_a");
    for (name, t, count) in [
        ("ipv4", &cap["conversations"]["ipv4"], 2),
        ("udp", &cap["conversations"]["udp"], 1),
        ("tcp", &cap["tcp"]["conversations"], 1),
    ] {
        assert_eq!(n(&t["count"]), count, "{name}: {t}");
        let whole = match name {
            "tcp" => &all["tcp"]["conversations"],
            _ => &all["conversations"][name],
        };
        assert_eq!(n(&whole["untracked"]["packets"]), 0, "{name}");
        // (The one TCP connection is tracked; the frame with a bad data offset is no segment.)
        assert_eq!(n(&t["untracked"]["packets"]) > 0, name != "tcp", "{name}: {t}");
        assert_eq!(total(t) + n(&t["untracked"]["packets"]), total(whole), "{name}");
    }
    let (e, whole) = (&cap["conversations"]["endpoints"], &all["conversations"]["endpoints"]);
    assert_eq!(n(&e["count"]), 4);
    assert_eq!(packets(e, "tx") + n(&e["untracked"]["packets"]), packets(whole, "tx"));
    assert_eq!(cap["rtp"]["streams"].as_array().unwrap().len(), 0);
    assert_eq!(n(&cap["rtp"]["untracked_packets"]), n(&all["rtp"]["streams"][0]["packets"]));
    // The TCP connection was tracked from its first segment: the same analysis.
    for k in ["segments", "retransmissions", "out_of_order", "duplicate_acks"] {
        assert_eq!(cap["tcp"][k], all["tcp"][k], "{k}");
    }
    // Statistics without a flow table do not change (the mix caps MPLS labels at --max-flows).
    for k in ["frames", "duplicates", "malformed", "throughput"] {
        assert_eq!(cap[k], all[k], "{k}");
    }
}

/// tshark's `-z io,stat` (at the report's step, whole seconds), `-z conv,tcp|udp|ip` and
/// `-z endpoints,ip` against our report.
pub(crate) fn compare_with_tshark(file: &Path, r: &Value) {
    compare_tshark_stats(&tshark_stats(file, r, None), r);
}

/// tshark's statistics of `file` (at `r`'s throughput step), its output with commas
/// removed; with `probe`, tshark also prints the packets that display filter matches,
/// above the statistics. IPv6 payload length 0 is the rest of the frame
/// (`ipv6.tso_support`, as for IPv4 by default; see DESIGN).
fn tshark_stats(file: &Path, r: &Value, probe: Option<&str>) -> String {
    let step_ns = n(&r["throughput"]["step_ns"]);
    assert_eq!(step_ns % 1_000_000_000, 0, "compare_with_tshark takes steps of whole seconds");
    let io_stat = format!("io,stat,{}", step_ns / 1_000_000_000);
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-o", "ipv6.tso_support:TRUE"]);
    match probe {
        Some(filter) => cmd.args(["-Y", filter]),
        None => cmd.arg("-q"),
    };
    cmd.args(["-z", &io_stat, "-z", "conv,tcp", "-z", "conv,udp", "-z", "conv,ip", "-z", "endpoints,ip", "-r"]);
    let out = run_ok(cmd.arg(file));
    String::from_utf8_lossy(&out.stdout).replace(',', "")
}

/// Our report against tshark's statistics (see [`tshark_stats`]).
fn compare_tshark_stats(text: &str, r: &Value) {
    // io,stat rows: "| 0 <> 1 | frames | bytes |".
    let io: Vec<(u64, u64)> = text
        .lines()
        .filter(|l| l.contains("<>") && l.starts_with('|'))
        .map(|l| {
            let c: Vec<&str> = l.split('|').map(str::trim).collect();
            (c[2].parse().unwrap(), c[3].parse().unwrap())
        })
        .collect();
    let mine: Vec<(u64, u64)> =
        r["throughput"]["intervals"].as_array().unwrap().iter().map(|i| (n(&i["packets"]), n(&i["bytes"]))).collect();
    // A capture whose frames all share one time: tshark shrinks the interval to its duration,
    // 0, and prints no row. A last frame a whole number of steps after the first: tshark
    // ends its table at the duration and leaves that frame's interval out (see DESIGN).
    let (first, last, step) = (n(&r["first_ns"]), n(&r["last_ns"]), n(&r["throughput"]["step_ns"]));
    let mine = if last > first && (last - first) % step == 0 && mine.len() == io.len() + 1 {
        &mine[..io.len()]
    } else {
        &mine[..]
    };
    if !(io.is_empty() && text.contains("| Duration: 0.000 secs")) {
        assert_eq!(io, mine, "io,stat");
    }
    for (title, rows) in [
        ("TCP Conversations", &r["tcp"]["conversations"]["rows"]),
        ("UDP Conversations", &r["conversations"]["udp"]["rows"]),
        ("IPv4 Conversations", &r["conversations"]["ipv4"]["rows"]),
    ] {
        let want = conv_section(text, title);
        let mut got: Vec<(String, [u64; 4])> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let end = |a: &str, p: &str| match c.get(p) {
                    Some(p) => format!("{}:{p}", c[a].as_str().unwrap()),
                    None => c[a].as_str().unwrap().to_string(),
                };
                let k = format!("{} {}", end("a", "port_a"), end("b", "port_b"));
                (
                    k,
                    [
                        n(&c["b_to_a"]["packets"]),
                        n(&c["b_to_a"]["bytes"]),
                        n(&c["a_to_b"]["packets"]),
                        n(&c["a_to_b"]["bytes"]),
                    ],
                )
            })
            .collect();
        got.sort();
        assert_eq!(got.len(), want.len(), "{title}: {got:?} vs {want:?}");
        for ((k, g), (wk, w)) in got.iter().zip(&want) {
            assert_eq!(k, wk, "{title}");
            for i in 0..4 {
                // tshark prints "10 kB" from 10,000 bytes on (integer division by 1000 per
                // SI prefix): a byte count compares as printed, a frame count exactly.
                let (count, power) = w[i];
                assert_eq!(g[i] / power, count, "{title} {k} column {i}: {g:?} vs tshark's {w:?}");
            }
        }
    }
    let mut want_ep: Vec<String> = section(text, "IPv4 Endpoints")
        .iter()
        .filter_map(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            (c.len() == 7 && c[1].parse::<u64>().is_ok())
                .then(|| format!("{} {} {} {} {}", c[0], c[3], c[4], c[5], c[6]))
        })
        .collect();
    let mut got_ep: Vec<String> = r["conversations"]["endpoints"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| !e["address"].as_str().unwrap().contains(':'))
        .map(|e| {
            format!(
                "{} {} {} {} {}",
                e["address"].as_str().unwrap(),
                e["tx"]["packets"],
                e["tx"]["bytes"],
                e["rx"]["packets"],
                e["rx"]["bytes"]
            )
        })
        .collect();
    want_ep.sort();
    got_ep.sort();
    assert_eq!(got_ep, want_ep, "endpoints,ip");
}

fn section<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    text.split(&format!("{title}\n"))
        .nth(1)
        .map_or(Vec::new(), |s| s.split("=====").next().unwrap_or("").lines().collect())
}

/// ("A B", [frames <-, bytes <-, frames ->, bytes ->]) of each row of a tshark
/// conversation table, sorted; each as (number printed, what it counts in: 1, or
/// 1000 for kB, 1000000 for MB, ...).
fn conv_section(text: &str, title: &str) -> Vec<(String, [(u64, u64); 4])> {
    let mut v: Vec<(String, [(u64, u64); 4])> = section(text, title)
        .iter()
        .filter(|l| l.contains("<->"))
        .map(|l| {
            let c: Vec<&str> = l.split_whitespace().filter(|w| *w != "<->").collect();
            let num = |i: usize| c[i].parse::<u64>().unwrap_or_else(|_| panic!("{title}: not a number in {l}"));
            let bytes = |i: usize| {
                let power = match c[i + 1] {
                    "bytes" => 1,
                    "kB" => 1_000,
                    "MB" => 1_000_000,
                    "GB" => 1_000_000_000,
                    u => panic!("{title}: unit {u} in {l}"),
                };
                (num(i), power)
            };
            (format!("{} {}", c[0], c[1]), [(num(2), 1), bytes(3), (num(5), 1), bytes(6)])
        })
        .collect();
    v.sort();
    v
}

/// The frames tshark marks with each of `filters`, in one run.
pub(crate) fn tshark_frames(file: &Path, filters: &[&str]) -> Vec<Vec<u64>> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r"]).arg(file).args(["-Y", &filters.join(" or "), "-T", "fields", "-e", "frame.number"]);
    for f in filters {
        cmd.args(["-e", f]);
    }
    let out = run_ok(cmd.args(["-E", "occurrence=f"]));
    let mut v = vec![Vec::new(); filters.len()];
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let c: Vec<&str> = line.split('\t').collect();
        let no: u64 = c[0].parse().unwrap();
        for (i, x) in c[1..].iter().enumerate() {
            if !x.is_empty() {
                v[i].push(no);
            }
        }
    }
    v
}

/// TCP analysis on tcpdump's corpus: the frames marked as retransmission,
/// out of order and duplicate ACK are exactly tshark's, file by file.
/// Selection: the files whose link types the dissector walks (Ethernet,
/// Linux SLL, raw IP) and that hold TCP segments it analyses. Excluded:
/// bgp-as-path-oobr.pcap, whose second segment overlaps the first by one
/// byte and which tshark 4.0 does not mark out of order, for a reason its
/// published rules do not show (its third segment, which overlaps by 37
/// bytes, it marks, as we do).
wvtest!(corpus_tcp_analysis_equals_tsharks_expert_info, needs = ["tshark", corpus], |t| {
    let files = t.corpus_files();
    let filters = ["tcp.analysis.retransmission", "tcp.analysis.out_of_order", "tcp.analysis.duplicate_ack"];
    let keys = ["first_retransmissions", "first_out_of_order", "first_duplicate_acks"];
    let (mut compared, mut marked) = (0, 0);
    let mut ours = Vec::new();
    for f in files {
        if f.file_name().is_some_and(|n| n == "bgp-as-path-oobr.pcap") {
            continue;
        }
        // One throughput interval: at the default 1 s, captures spanning weeks (kday*.pcap) gave
        // 340 MB of JSON each, which took this test 10 s a file to parse.
        let out = wirevault()
            .args(["analyze", "--json", "--examples", "1000000", "--step", "100000000s"])
            .arg(&f)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_no_panic(&stderr, &f.display().to_string());
        let Ok(r) = serde_json::from_slice::<Value>(&out.stdout) else {
            continue; // not a capture our reader takes (the reader's own tests cover those)
        };
        if n(&r["unsupported_linktype"]) > 0 || n(&r["tcp"]["segments"]) == 0 {
            continue;
        }
        ours.push((f, r));
    }
    let theirs = on_two_threads(&ours, |(f, _)| tshark_frames(f, &filters));
    assert_eq!(theirs.len(), ours.len(), "tshark ran on every file");
    for ((f, r), want) in ours.iter().zip(&theirs) {
        for (i, k) in keys.iter().enumerate() {
            let got: Vec<u64> = r["tcp"][k].as_array().unwrap().iter().map(n).collect();
            assert_eq!(got, want[i], "{} {}", f.display(), filters[i]);
            marked += got.len();
        }
        compared += 1;
    }
    eprintln!("corpus: {compared} files with TCP compared, {marked} marked frames agree");
    assert!(compared >= 50, "only {compared} corpus files with TCP");
});

/// The frames marked as retransmission, out of order and duplicate ACK in `r` (all of
/// them: analyze run with `--examples` high enough) are exactly those tshark marks in `file`.
pub(crate) fn assert_tcp_marks_equal_tsharks(file: &Path, r: &Value) {
    let filters = ["tcp.analysis.retransmission", "tcp.analysis.out_of_order", "tcp.analysis.duplicate_ack"];
    let want = tshark_frames(file, &filters);
    for (i, k) in ["first_retransmissions", "first_out_of_order", "first_duplicate_acks"].iter().enumerate() {
        let got: Vec<u64> = r["tcp"][k].as_array().unwrap().iter().map(n).collect();
        assert_eq!(got, want[i], "{}", filters[i]);
    }
}

/// Runs a python3 program in a namespace, in the background.
pub(crate) fn py(ns: &str, code: &str) -> std::process::Child {
    VethPair::exec(ns, "python3").args(["-c", code]).spawn().expect("python3 starts")
}

/// Real traffic between two namespaces (TCP with every tenth data packet
/// dropped by nftables at the receiver after the capture saw it, when nft is installed; UDP RTP
/// with a gap of 5 sequence numbers and sender-side jitter; ICMP echo),
/// recorded by `wirevault record`: analyze's statistics on the store equal
/// tshark's on the same packets (written out by `query`). The kernel here has
/// no netem; loss comes from nftables instead (`numgen inc`, deterministic).
wvtest!(live_traffic_statistics_equal_tsharks, needs = [root, "tshark", "python3", "ping", "ip"], |test| {
    let _heavy = heavy_lock();
    let tmp = TempDir::new("analyze-live");
    let pair = VethPair::new();
    let (a, b) = ("10.77.0.1", "10.77.0.2");
    let (mac_a, mac_b) = ("02:00:00:00:77:01", "02:00:00:00:77:02");
    host(&pair.ns_a, pair.if_a, (a, mac_a), (b, mac_b));
    host(&pair.ns_b, pair.if_b, (b, mac_b), (a, mac_a));
    let lossy = have("nft")
        && VethPair::exec(&pair.ns_b, "nft")
            .args(["-f", "-"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(
                    b"table ip loss {\n chain in {\n  type filter hook input priority 0;\n  tcp dport 5001 numgen inc mod 10 == 5 drop\n }\n}\n",
                )?;
                c.wait()
            })
            .is_ok_and(|s| s.success());
    eprintln!("{test}: TCP loss by nftables: {lossy}");
    let store = tmp.join("store");
    let mut rec = Recorder::start(Some(&pair.ns_b), &store, tmp.path(), &["-i", pair.if_b, "--buffer", "64M", "-q"]);
    rec.wait_ready();
    let server = py(
        &pair.ns_b,
        "import socket\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('10.77.0.2', 5001)); s.listen(1)\nc,_=s.accept()\nn=0\nwhile True:\n    d=c.recv(65536)\n    if not d: break\n    n+=len(d)\nc.sendall(str(n).encode()); c.close()",
    );
    let sink = py(&pair.ns_b, "import socket,time\nu=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('10.77.0.2', 40000)); time.sleep(30)");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let client = py(
        &pair.ns_a,
        "import socket\nc=socket.create_connection(('10.77.0.2', 5001))\nc.sendall(b'x'*3000000); c.shutdown(socket.SHUT_WR)\nprint(c.recv(100))",
    );
    // The sender prints when it sent each packet (the clock read just before and
    // just after the send call): the jitter it really made (a loaded machine delays a
    // busy-waiting sender) is the expectation.
    let rtp = VethPair::exec(&pair.ns_a, "python3")
        .args([
            "-c",
            "import socket,struct,time,random\nrandom.seed(7)\nu=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('10.77.0.1', 40002))\nt0=time.time()\nfor i in range(200):\n    if 50<=i<55: continue\n    while time.time() < t0+0.02*i+random.random()*0.004: pass\n    a=time.time_ns()\n    u.sendto(struct.pack('!BBHII',0x80,0,1000+i,160*i,0xabcdef01)+b'\\xd5'*160, ('10.77.0.2', 40000))\n    print(i, a, time.time_ns(), flush=True)",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 starts");
    let ping = VethPair::exec(&pair.ns_a, "ping").args(["-c", "10", "-i", "0.05", "-q", b]).output().unwrap();
    assert!(ping.status.success(), "ping");
    let sent = rtp.wait_with_output().unwrap();
    assert!(sent.status.success(), "rtp");
    for (name, mut c) in [("client", client), ("server", server)] {
        assert!(c.wait().unwrap().success(), "{name}");
    }
    // RFC 3550 jitter of the send times (the middle of each send call) against the RTP
    // clock (8 kHz), in ms; and the longest send call: a sender held up inside one (or
    // between the send and its clock read) does not know when that packet left.
    let (mut expect_jitter, mut longest_send): (f64, f64) = (0.0, 0.0);
    let (mut j, mut prev) = (0.0f64, None::<(f64, f64)>);
    for line in String::from_utf8_lossy(&sent.stdout).lines() {
        let mut w = line.split_whitespace().map(|x| x.parse::<f64>().unwrap());
        let (i, before, after) = (w.next().unwrap(), w.next().unwrap() / 1e6, w.next().unwrap() / 1e6);
        let t = (before + after) / 2.0;
        longest_send = longest_send.max(after - before);
        let r = i * 160.0 / 8.0;
        if let Some((pt, pr)) = prev {
            j += (((t - pt) - (r - pr)).abs() - j) / 16.0;
            expect_jitter = expect_jitter.max(j);
        }
        prev = Some((t, r));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    rec.terminate().expect(0, "recorder stopped by SIGTERM");
    let mut sink = sink;
    let _ = sink.kill();
    let _ = sink.wait();

    let r = analyze_json(&store, &["--examples", "1000000"]);
    let all = tmp.join("all.pcap");
    run_ok(wirevault().arg("query").arg(&store).arg("-w").arg(&all));
    assert!(n(&r["frames"]) > 200, "{}", r["frames"]);
    assert_tcp_marks_equal_tsharks(&all, &r);
    if lossy {
        assert!(n(&r["tcp"]["retransmissions"]) > 0, "every tenth segment dropped and no retransmission: {}", r["tcp"]);
    }
    assert_eq!(n(&r["tcp"]["handshake_rtt"]["count"]), 1);
    // RTP: 195 packets, the 5 skipped sequence numbers lost.
    let s =
        r["rtp"]["streams"].as_array().unwrap().iter().find(|s| n(&s["ssrc"]) == 0xabcd_ef01).expect("the RTP stream");
    assert_eq!((n(&s["packets"]), s["lost"].as_i64().unwrap()), (195, 5), "{s}");
    let jitter = s["max_jitter_ms"].as_f64().unwrap();
    assert!(jitter > 0.0, "max jitter {jitter} ms: {s}");
    if longest_send < 1.0 {
        assert!(
            (jitter - expect_jitter).abs() < 1.0,
            "max jitter {jitter} ms, the sender's own {expect_jitter:.3} ms (within 1 ms): {s}"
        );
    } else {
        // The sender's times are not a reference then; tshark's figure (below) still is.
        eprintln!("{test}: a send call took {longest_send:.3} ms: the sender's own jitter ({expect_jitter:.3} ms) is not compared");
    }
    let (cols, tshark_jitter) = tshark_rtp_stream(&all, 0xabcd_ef01);
    assert!(cols.contains(&"195".to_string()) && cols.contains(&"5".to_string()), "tshark: {cols:?}");
    assert!((jitter - tshark_jitter).abs() < 0.0015, "max jitter {jitter} ms, tshark {tshark_jitter} ms");
    compare_with_tshark(&all, &r);
});

/// The columns of `tshark -z rtp,streams`'s row for `ssrc`, and its max jitter (ms).
pub(crate) fn tshark_rtp_stream(file: &Path, ssrc: u32) -> (Vec<String>, f64) {
    let out = run_ok(
        Command::new("tshark").args(["-n", "-q", "-o", "rtp.heuristic_rtp:TRUE", "-z", "rtp,streams", "-r"]).arg(file),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let id = format!("0x{ssrc:08x}");
    let row = text.lines().find(|l| l.to_lowercase().contains(&id)).unwrap_or_else(|| panic!("no {id} in {text}"));
    let cols: Vec<String> = row.split_whitespace().map(String::from).collect();
    // Max jitter: the sixth number after the lost percentage; tshark prints 3 decimals.
    let pct = cols.iter().position(|c| c.starts_with('(')).expect("lost percentage");
    let jitter = cols[pct + 6].parse().unwrap();
    (cols, jitter)
}

/// `--against`: the built capture against a copy of itself seen 5 ms later,
/// with 10 frames lost between the points: every other frame matches with a
/// delay of exactly 5 ms. `--plot` writes the three charts as SVG.
#[test]
fn delay_against_a_second_point_and_plots() {
    let dir = TempDir::new("analyze-delay");
    let (a, b) = (dir.join("a.pcap"), dir.join("b.pcap"));
    let frames = build();
    write_pcap(&a, 1, 65535, true, &frames);
    // Point B: 5 ms later, without 10 frames.
    let later: Vec<Frame> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 10 != 3)
        .map(|(_, f)| Frame { ts_ns: f.ts_ns + 5 * MS, ..f.clone() })
        .collect();
    let lost = (frames.len() - later.len()) as u64;
    write_pcap(&b, 1, 65535, true, &later);
    let plots = dir.join("charts");
    let r = analyze_json(&a, &["--against", b.to_str().unwrap(), "--plot", plots.to_str().unwrap()]);
    let d = &r["delay"];
    assert!(n(&r["duplicates"]["packets"]) > 0, "the capture holds identical copies");
    // Identical copies pair in order (the k-th here with the k-th there):
    // only the lost frames stay unmatched.
    assert_eq!(n(&d["matched"]) + n(&d["unmatched"]), frames.len() as u64, "{d}");
    assert_eq!(n(&d["unmatched"]), lost, "{d}");
    for k in ["min_ns", "p50_ns", "p99_ns", "max_ns"] {
        assert_eq!(d[k].as_i64().unwrap(), (5 * MS) as i64, "{k}: {d}");
    }
    for f in ["throughput.svg", "sizes.svg", "jitter.svg"] {
        let text = std::fs::read_to_string(plots.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(text.contains("<svg") && text.trim_end().ends_with("</svg>"), "{f} is not an SVG document");
    }
    // The jitter chart has the RTP stream and the plain UDP streams long enough for a jitter,
    // each kind in its own colours, named in the legend.
    let jitter = std::fs::read_to_string(plots.join("jitter.svg")).unwrap();
    let plain = r["udp_streams"]["streams"].as_array().unwrap().iter().filter(|s| s["mean_jitter_ms"].is_f64()).count();
    assert!(plain > 0, "no plain UDP stream with a jitter: {}", r["udp_streams"]);
    for label in ["RTP mean", "RTP max", "UDP mean", "UDP max"] {
        assert!(jitter.contains(label), "jitter.svg has no \"{label}\"");
    }
}

/// `--step 1ns --max-intervals 10` on 43 µs of frames: frame times count in whole
/// microseconds (as tshark's io,stat counts them, which refuses a step under 1 µs), so the
/// step is raised to 1 µs and doubled from there to a readable 8 us (before: 1 ns doubled
/// 13 times, 8.192 us, every row at "0.000 s"); the rows' times show the step's digits, and
/// their counts are tshark's `-z io,stat,0.000008`.
#[test]
fn a_step_under_a_microsecond_is_raised_to_one_and_shown_readably() {
    let dir = TempDir::new("analyze-tiny-step");
    let f = dir.join("tiny.pcap");
    let frames: Vec<Frame> = (0..100u64)
        .map(|i| {
            let data = eth_ip(&ipv4([10, 7, 0, 1], [10, 7, 0, 2], 17, &udp(4000, 4001, &[0; 18])));
            Frame { ts_ns: T0 + i * 431, origlen: data.len() as u32, data }
        })
        .collect();
    write_pcap(&f, 1, 65535, true, &frames);
    let fs = f.to_str().unwrap();
    let o = run_wirevault(&["analyze", fs, "--step", "1ns", "--max-intervals", "10"]);
    o.expect(0, "analyze --step 1ns");
    let said =
        o.stderr.lines().find(|l| l.contains("throughput is given per")).unwrap_or_else(|| panic!("{}", o.stderr));
    assert!(said.contains("per 8 us instead of --step 1ns") && said.contains("at least 1 us"), "{said}");
    let rows: Vec<&str> = o.stdout.lines().filter(|l| l.trim_end().ends_with("pkt/s") && l.contains(" s ")).collect();
    assert!(rows.len() >= 5, "{}", o.stdout);
    assert!(rows[1].trim_start().starts_with("0.000008 s"), "{}", rows[1]);
    let r = analyze_json(&f, &["--step", "1ns", "--max-intervals", "10"]);
    let t = &r["throughput"];
    assert_eq!((n(&t["requested_step_ns"]), n(&t["step_ns"])), (1, 8_000));
    if have("tshark") {
        let out = run_ok(Command::new("tshark").args(["-n", "-q", "-z", "io,stat,0.000008", "-r"]).arg(&f));
        let text = String::from_utf8_lossy(&out.stdout);
        let theirs: Vec<u64> = text
            .lines()
            .filter(|l| l.contains("<>"))
            .filter_map(|l| l.split('|').nth(2).and_then(|c| c.trim().parse().ok()))
            .collect();
        let ours: Vec<u64> = t["intervals"].as_array().unwrap().iter().map(|i| n(&i["packets"])).collect();
        assert_eq!(ours[..theirs.len()], theirs[..], "{text}");
    }
}

/// The texts of an SVG's `<text>` elements.
fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    svg.split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split_once('>')?.1.split_once("</text>")?.0.trim().to_owned()))
        .collect()
}

/// `--plot`: jitter.svg's x axis names each stream (an RTP stream by its SSRC, a plain UDP
/// stream by its destination) and leaves out one-packet streams, which have no jitter
/// (before: bars numbered 0, 5, 10 and a zero bar per one-packet stream); sizes.svg counts
/// frames in whole numbers (before: 0.0, 200.0, ...).
#[test]
fn plots_name_their_streams_and_count_in_whole_numbers() {
    let dir = TempDir::new("analyze-plot-names");
    let file = dir.join("streams.pcap");
    let rtp = |seq: u16, ssrc: u32| {
        let mut p = vec![0x80, 0x00];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&(160 * u32::from(seq)).to_be_bytes());
        p.extend_from_slice(&ssrc.to_be_bytes());
        p.extend_from_slice(&[0xd5; 160]);
        p
    };
    let mut frames = Vec::new();
    for i in 0..50u16 {
        let t = u64::from(i) * 20 * MS + u64::from(i % 3) * MS;
        let data = eth_ip(&ipv4([10, 6, 0, 1], [10, 6, 0, 2], 17, &udp(30000, 30002, &rtp(i, 0x00c0_ffee))));
        frames.push(Frame { ts_ns: T0 + t, origlen: data.len() as u32, data });
        let data = eth_ip(&ipv4([10, 6, 0, 3], [10, 6, 0, 4], 17, &udp(5555, 6666, &[7; 40])));
        frames.push(Frame { ts_ns: T0 + t + 5 * MS + u64::from(i % 4) * MS, origlen: data.len() as u32, data });
    }
    // A stream of one packet.
    let data = eth_ip(&ipv4([10, 6, 0, 5], [10, 6, 0, 6], 17, &udp(31000, 31002, &rtp(1, 0x0bad_0001))));
    frames.push(Frame { ts_ns: T0 + 7 * MS, origlen: data.len() as u32, data });
    frames.sort_by_key(|f| f.ts_ns);
    write_pcap(&file, 1, 65535, true, &frames);
    let plots = dir.join("charts");
    let r = analyze_json(&file, &["--plot", plots.to_str().unwrap()]);
    assert_eq!(r["rtp"]["streams"].as_array().unwrap().len(), 2, "{}", r["rtp"]);
    let jitter = svg_texts(&plots.join("jitter.svg"));
    assert!(jitter.iter().any(|t| t.contains("0x00c0ffee")), "no name for the RTP stream: {jitter:?}");
    assert!(jitter.iter().any(|t| t.contains("10.6.0.4:6666")), "no name for the UDP stream: {jitter:?}");
    assert!(!jitter.iter().any(|t| t.contains("0bad0001")), "a one-packet stream is drawn: {jitter:?}");
    let sizes = svg_texts(&plots.join("sizes.svg"));
    let numbers: Vec<&String> = sizes.iter().filter(|t| t.parse::<f64>().is_ok()).collect();
    assert!(numbers.len() >= 3, "{sizes:?}");
    assert!(numbers.iter().all(|t| t.parse::<u64>().is_ok()), "frame counts that are not whole: {numbers:?}");
}

/// The table gives "n/a" only for what was not measured and a number only for what was:
/// a one-packet RTP stream of a payload type with a clock rate printed 0.000 for its delta
/// and jitter where one of a dynamic type printed n/a (the same state: no second packet);
/// a one-way delay with nothing matched printed 0.000 ms. A steady stream's measured 0.000
/// jitter stays a number.
#[test]
fn the_table_says_n_a_for_what_was_not_measured_and_numbers_for_what_was() {
    let dir = TempDir::new("analyze-n-a");
    let (a, b) = (dir.join("a.pcap"), dir.join("b.pcap"));
    let rtp = |pt: u8, seq: u16, ssrc: u32| {
        let mut p = vec![0x80, pt];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&(160 * u32::from(seq)).to_be_bytes());
        p.extend_from_slice(&ssrc.to_be_bytes());
        p.extend_from_slice(&[0xd5; 160]);
        p
    };
    let frame = |t: u64, port: u16, payload: Vec<u8>| {
        let data = eth_ip(&ipv4([10, 8, 0, 1], [10, 8, 0, 2], 17, &udp(40000, port, &payload)));
        Frame { ts_ns: T0 + t, origlen: data.len() as u32, data }
    };
    let mut frames = vec![frame(0, 30000, rtp(0, 1, 0x0000_0a01)), frame(MS, 30002, rtp(96, 1, 0x0000_0a02))];
    // A steady G.711 stream, 20 ms apart: a measured jitter of 0.
    frames.extend((0..10u16).map(|i| frame(2 * MS + u64::from(i) * 20 * MS, 30004, rtp(0, i, 0x0000_0a03))));
    write_pcap(&a, 1, 65535, true, &frames);
    write_pcap(&b, 1, 65535, true, &[frame(0, 9, vec![1; 30])]);
    let o = run_wirevault(&["analyze", a.to_str().unwrap(), "--against", b.to_str().unwrap()]);
    o.expect(0, "analyze");
    let row =
        |ssrc: &str| o.stdout.lines().find(|l| l.contains(ssrc)).unwrap_or_else(|| panic!("{ssrc}: {}", o.stdout));
    for one in ["0x00000a01", "0x00000a02"] {
        let r = row(one);
        assert!(r.contains("delta min/mean/max n/a") && r.contains("jitter min/mean/max n/a"), "{r}");
        assert!(!r.contains("0.000"), "{r}");
    }
    let steady = row("0x00000a03");
    assert!(steady.contains("delta min/mean/max 20.000/20.000/20.000 ms"), "{steady}");
    assert!(steady.contains("jitter min/mean/max 0.000/0.000/0.000 ms"), "{steady}");
    let delay = o.stdout.lines().find(|l| l.starts_with("One-way delay")).unwrap_or_else(|| panic!("{}", o.stdout));
    assert!(delay.contains("0 matched") && !delay.contains("0.000"), "{delay}");
}

/// Frames over the MTU that are TCP or UDP segments (a 20,000-byte TCP segment, as a host
/// with TSO/GSO hands its capture, and a 9,000-byte UDP datagram) carry a hint that the
/// capturing host's offloads made them and that `wirevault tune` turns those off; an ICMP
/// frame over the MTU is counted but not blamed on offloads.
#[test]
fn over_mtu_super_frames_carry_a_hint_about_offloads() {
    let dir = TempDir::new("analyze-gso");
    let f = dir.join("gso.pcap");
    let tcp_big = eth_ip(&ipv4([10, 3, 0, 1], [10, 3, 0, 2], 6, &tcp(40000, 80, 1, 1, 0x18, 512, &[0x41; 20_000])));
    let udp_big = eth_ip(&ipv4([10, 3, 0, 1], [10, 3, 0, 2], 17, &udp(40000, 9000, &[0x42; 9000])));
    let mut icmp = vec![8, 0, 0, 0, 0, 1, 0, 1];
    icmp.extend_from_slice(&[0x43; 3000]);
    let icmp_big = eth_ip(&ipv4([10, 3, 0, 1], [10, 3, 0, 2], 1, &icmp));
    let frames: Vec<Frame> = [tcp_big, udp_big, icmp_big]
        .into_iter()
        .enumerate()
        .map(|(i, data)| Frame { ts_ns: T0 + i as u64 * MS, origlen: data.len() as u32, data })
        .collect();
    write_pcap(&f, 1, 65535, true, &frames);
    let r = analyze_json(&f, &[]);
    let k = r["malformed"]["kinds"].as_array().unwrap().iter().find(|k| k["kind"] == "over_mtu").expect("over_mtu");
    assert_eq!(n(&k["packets"]), 3, "{k}");
    let hint = k["hint"].as_str().unwrap_or_else(|| panic!("no hint: {k}"));
    assert!(hint.starts_with("2 of them are TCP or UDP"), "{hint}");
    assert!(hint.contains("offload") && hint.contains("wirevault tune"), "{hint}");
    let details: Vec<&str> = k["first"].as_array().unwrap().iter().map(|e| e["detail"].as_str().unwrap()).collect();
    assert!(details[0].contains("TCP") && details[0].contains("larger than any Ethernet frame"), "{details:?}");
    assert!(details[1].contains("UDP") && !details[1].contains("larger than any"), "{details:?}");
    assert!(!details[2].contains("offload"), "{details:?}");
    let o = run_wirevault(&["analyze", f.to_str().unwrap()]);
    assert!(o.expect(0, "analyze").stdout.contains(&format!("hint: {hint}")), "{}", o.stdout);
}

/// A capture spanning more steps than `--max-intervals` (100,000 by
/// default): the step doubles until it fits, which standard error and the
/// table say, and the intervals are exactly those of a run given the wider
/// step; output stays bounded (at 1 ms this capture is 3.6 billion rows).
#[test]
fn throughput_of_a_long_capture_doubles_its_step_to_fit() {
    let dir = TempDir::new("analyze-widen");
    let f = dir.join("span.pcap");
    let frame = |ts_ns: u64| Frame { ts_ns, origlen: 60, data: vec![0x02; 60] };
    // Four frames over 1,000 hours.
    let ts = [1_000_000_000, 1_000_500_000, 1_800_000_000_000_000, 3_600_000_000_000_000];
    write_pcap(&f, 1, 65535, true, &ts.map(frame));
    let r = analyze_json(&f, &["--step", "1ms"]);
    let t = &r["throughput"];
    // 1 ms doubled 16 times: 65.536 s, 54,932 intervals (15 times: 109,864).
    assert_eq!((n(&t["requested_step_ns"]), n(&t["step_ns"])), (1_000_000, 65_536_000_000));
    let rows = t["intervals"].as_array().unwrap();
    assert_eq!(rows.len(), 54_932);
    assert_eq!(rows.iter().map(|i| n(&i["packets"])).sum::<u64>(), 4);
    assert_eq!((n(&rows[0]["packets"]), n(&t["beyond"]["packets"])), (2, 0));
    let direct = analyze_json(&f, &["--step", "65536ms"]);
    assert_eq!(n(&direct["throughput"]["step_ns"]), 65_536_000_000);
    assert!(t["intervals"] == direct["throughput"]["intervals"], "the widened intervals differ from --step 65536ms's");
    let fs = f.to_str().unwrap();
    let o = run_wirevault(&["analyze", fs, "--step", "1ms"]);
    o.expect(0, "analyze");
    assert!(
        o.stdout.contains("Throughput per 65.536 s (--step 1 ms doubled to fit the capture into 100000 intervals"),
        "{}",
        o.stdout
    );
    assert!(o.stderr.contains("throughput is given per 65.536 s instead of --step 1ms"), "{}", o.stderr);
    // A smaller cap, and one of 1: a single interval.
    // 1 ms doubled 29 times: 7 intervals (28 times: 14).
    let r = analyze_json(&f, &["--step", "1ms", "--max-intervals", "10"]);
    assert_eq!(n(&r["throughput"]["step_ns"]), 1_000_000 << 29);
    assert_eq!(r["throughput"]["intervals"].as_array().unwrap().len(), 7);
    let r = analyze_json(&f, &["--max-intervals", "1"]);
    assert_eq!(n(&r["throughput"]["intervals"][0]["packets"]), 4);
    for bad in ["0", "16777217"] {
        let o = run_wirevault(&["analyze", fs, "--max-intervals", bad]);
        o.expect(2, &format!("analyze --max-intervals {bad}"));
        assert!(o.stderr.contains("--max-intervals must be between 1 and 16777216"), "{}", o.stderr);
    }
    // Within the cap: the step asked for, and nothing said.
    let o = run_wirevault(&["analyze", fs, "--step", "1h"]);
    o.expect(0, "analyze --step 1h");
    assert!(o.stdout.contains("Throughput per 3600 s: 1000 intervals"), "{}", o.stdout);
    assert!(!o.stderr.contains("throughput is given per"), "{}", o.stderr);
}

/// A damaged file: the report covers what can be read, with a warning;
/// `--strict` then exits 1, as `query --strict` does.
#[test]
fn a_damaged_file_warns_and_strict_exits_1() {
    let dir = TempDir::new("analyze-strict");
    let f = dir.join("cut.pcap");
    let frames: Vec<Frame> =
        (0..10).map(|i| Frame { ts_ns: 1_000_000_000 + i, origlen: 60, data: vec![i as u8; 60] }).collect();
    write_pcap(&f, 1, 65535, true, &frames);
    let len = std::fs::metadata(&f).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&f).unwrap().set_len(len - 30).unwrap();
    let fs = f.to_str().unwrap();
    let o = run_wirevault(&["analyze", fs]);
    o.expect(0, "analyze");
    assert!(o.stdout.contains("Frames: 9 "), "{}", o.stdout);
    assert!(o.stderr.contains("cut.pcap"), "a warning names the file: {}", o.stderr);
    let o = run_wirevault(&["analyze", fs, "--strict"]);
    o.expect(1, "analyze --strict");
    assert!(o.stdout.contains("Frames: 9 ") && o.stderr.contains("--strict"), "{}\n{}", o.stdout, o.stderr);
}

/// Frames out of time order (merged captures, a frame before the first):
/// io,stat counts a frame earlier than one before it in the latest frame's
/// interval, as tshark does (it counted each in its own interval, and
/// those before the first in the first).
#[test]
fn throughput_of_frames_out_of_time_order_equals_tshark() {
    let dir = TempDir::new("analyze-order");
    let file = dir.join("order.pcap");
    const S: u64 = 1_000_000_000;
    let t0 = 1_700_000_000 * S;
    // Seconds (tenths) after t0: back within the capture, and before its
    // first frame. (Not a last frame exactly on an interval's start: tshark
    // closes its last row at the capture's duration and counts it there.)
    let tenths: [i64; 12] = [0, 5, 25, 12, -20, 31, 8, 40, 41, 15, 55, 59];
    let frames: Vec<Frame> = test_frames(tenths.len() as u32, t0)
        .into_iter()
        .zip(tenths)
        .map(|(f, t)| Frame { ts_ns: t0.wrapping_add_signed(t * (S as i64) / 10), ..f })
        .collect();
    write_pcap(&file, 1, 65535, true, &frames);
    compare_with_tshark(&file, &analyze_json(&file, &[]));
}

/// tshark's six delta and jitter columns of `-z rtp,streams` (min, mean,
/// max, ms with 3 decimals) on a G.711 stream with what its RTP analysis
/// leaves out of them: a comfort-noise packet and the one after it, a
/// talk spurt after a silence (the marker bit), a timestamp that steps
/// back; and a stream of a dynamic payload type (no jitter).
wvtest!(rtp_delta_and_jitter_columns_equal_tsharks, needs = ["tshark"], |t| {
    let dir = TempDir::new("analyze-rtp");
    let file = dir.join("rtp.pcap");
    let version = run_ok(Command::new("tshark").arg("--version"));
    let tshark_is_4_0 = String::from_utf8_lossy(&version.stdout).contains("TShark (Wireshark) 4.0.");
    let packet = |pt: u8, marker: bool, seq: u16, ts: u32, ssrc: u32, port: u16| {
        let mut p = vec![0x80, pt | if marker { 0x80 } else { 0 }];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&ts.to_be_bytes());
        p.extend_from_slice(&ssrc.to_be_bytes());
        p.extend_from_slice(&[0xd5; 160]);
        eth_ip(&ipv4([10, 5, 0, 1], [10, 5, 0, 2], 17, &udp(40000, port, &p)))
    };
    let mut frames = Vec::new();
    let (mut t, mut ts, mut seq) = (0u64, 5000u32, 100u16);
    let mut add = |pt: u8, marker: bool, t: u64, ts: u32| {
        let data = packet(pt, marker, seq, ts, 0x5566_7788, 40002);
        frames.push(Frame { ts_ns: T0 + t, origlen: data.len() as u32, data });
        seq += 1;
    };
    for i in 0..30u64 {
        add(0, false, t + (i * 7 % 5) * 700_000, ts);
        (t, ts) = (t + 20 * MS, ts + 160);
    }
    add(13, false, t, ts); // comfort noise, then 700 ms of silence
    (t, ts) = (t + 700 * MS, ts + 5600);
    add(0, true, t, ts); // the talk spurt's first packet
    (t, ts) = (t + 20 * MS, ts + 160);
    for i in 0..20u64 {
        add(0, false, t + (i * 3 % 4) * 900_000, ts);
        (t, ts) = (t + 20 * MS, ts + 160);
    }
    // A timestamp 100 ms back: tshark 4.0 (Debian 12's, which analyze
    // follows) counts it, later versions leave it out (DESIGN.md).
    if tshark_is_4_0 {
        add(0, false, t, ts - 800);
        (t, ts) = (t + 20 * MS, ts + 160);
    }
    // A DTMF key (RFC 4733 events, payload type 101, no clock rate) on
    // the same SSRC: three packets of one RTP timestamp, then the voice
    // goes on 60 ms of samples later. tshark 4.0 measures the next voice
    // packet's jitter from the last voice packet's RTP timestamp (later
    // versions from the event's: DESIGN.md).
    if tshark_is_4_0 {
        for k in 0..3u64 {
            add(101, k == 0, t + k * 500_000, ts);
            t += 20 * MS;
        }
        ts += 480;
    }
    for _ in 0..5 {
        add(0, false, t, ts);
        (t, ts) = (t + 20 * MS, ts + 160);
    }
    // A second stream, of a dynamic payload type, 30 ms apart with one gap.
    for i in 0..10u16 {
        let data = packet(111, false, 7 + i, 90 * u32::from(i), 0x0102_0304, 50000);
        let at = 3 * MS + u64::from(i) * 30 * MS + if i >= 5 { 45 * MS } else { 0 };
        frames.push(Frame { ts_ns: T0 + at, origlen: data.len() as u32, data });
    }
    frames.sort_by_key(|f| f.ts_ns);
    write_pcap(&file, 1, 65535, true, &frames);
    let r = analyze_json(&file, &[]);
    let out = run_ok(
        Command::new("tshark").args(["-n", "-q", "-o", "rtp.heuristic_rtp:TRUE", "-z", "rtp,streams", "-r"]).arg(&file),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for ssrc in [0x5566_7788u64, 0x0102_0304] {
        let row = text
            .lines()
            .find(|l| l.contains(&format!("0x{ssrc:08x}")))
            .unwrap_or_else(|| panic!("no stream 0x{ssrc:08x} in {text}"));
        let s = r["rtp"]["streams"].as_array().unwrap().iter().find(|s| n(&s["ssrc"]) == ssrc).expect("our stream");
        // After the lost percentage: min, mean, max delta; min, mean, max jitter.
        let cols: Vec<&str> = row.split_whitespace().collect();
        let pct = cols.iter().position(|c| c.starts_with('(')).expect("lost percentage");
        let theirs: Vec<f64> = cols[pct + 1..pct + 7].iter().map(|c| c.parse().unwrap()).collect();
        let keys =
            ["min_delta_ms", "mean_delta_ms", "max_delta_ms", "min_jitter_ms", "mean_jitter_ms", "max_jitter_ms"];
        for (k, want) in keys.iter().zip(&theirs) {
            if s[k].is_null() {
                // No jitter without a fixed clock rate; tshark's columns
                // then hold its initial values.
                assert!(k.contains("jitter") && ssrc == 0x0102_0304 && [-1.0, 0.0].contains(want), "{k}: {row}");
                continue;
            }
            let got = s[k].as_f64().unwrap();
            assert!((got - want).abs() <= 0.0005, "0x{ssrc:08x} {k}: {got} against tshark's {want}\n{row}\n{s}");
        }
        assert_eq!(n(&s["packets"]).to_string(), cols[pct - 2], "packets: {row}");
    }
    // The silence is not the largest delta, as tshark's.
    let s = &r["rtp"]["streams"][0];
    assert!(s["max_delta_ms"].as_f64().unwrap() < 25.0, "{s}");
});

/// A nanosecond capture with frames just before an interval's end: tshark
/// rounds the time since the first frame to whole µs before bucketing (a
/// frame 400 ns before the end counts in the next interval, one 600 ns
/// before in its own); analyze's rows equal tshark's.
wvtest!(throughput_of_nanosecond_frames_near_an_interval_end_equals_tshark, |t| {
    let dir = TempDir::new("analyze-ns");
    let file = dir.join("ns.pcap");
    const S: u64 = 1_000_000_000;
    let t0 = 1_700_000_000 * S + 123;
    let after: [u64; 6] = [0, S - 600, S - 400, 2 * S - 501, 2 * S - 499, 3 * S + S / 2];
    let frames: Vec<Frame> =
        test_frames(after.len() as u32, t0).into_iter().zip(after).map(|(f, t)| Frame { ts_ns: t0 + t, ..f }).collect();
    write_pcap(&file, 1, 65535, true, &frames);
    let r = analyze_json(&file, &[]);
    let rows: Vec<u64> = r["throughput"]["intervals"].as_array().unwrap().iter().map(|i| n(&i["packets"])).collect();
    assert_eq!(rows, [2, 2, 1, 1], "{}", r["throughput"]);
    if need_tools(t.name, &["tshark"]) {
        compare_with_tshark(&file, &r);
    }
});

/// An IPv6 frame whose extension-header chain the snapshot length cuts is
/// no IPv6 conversation or endpoint, as in tshark (its IPv6 tap runs after
/// the extension headers); the same frame captured whole is one.
wvtest!(ipv6_with_a_cut_extension_chain_is_no_conversation, |t| {
    let dir = TempDir::new("analyze-v6ext");
    let file = dir.join("v6.pcap");
    let v6 = |src: u8, dst: u8, hop_by_hop: bool| {
        let mut payload = udp(1000, 2000, &[0x78; 40]);
        let mut next = 17u8;
        if hop_by_hop {
            // Hop-by-hop options: next header UDP, 3 x 8 bytes, PadN filling them.
            let mut h = vec![17, 2, 1, 20];
            h.extend_from_slice(&[0; 20]);
            h.extend_from_slice(&payload);
            payload = h;
            next = 0;
        }
        let mut ip = vec![0x60, 0, 0, 0];
        ip.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[next, 64]);
        for a in [src, dst] {
            ip.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a]);
        }
        ip.extend_from_slice(&payload);
        ether(&[0x86, 0xdd], &ip)
    };
    let whole = v6(1, 2, true);
    let mut cut = whole.clone();
    cut.truncate(14 + 40 + 10); // inside the hop-by-hop header
    let plain = v6(3, 4, false);
    let frames = vec![
        Frame { ts_ns: T0, origlen: whole.len() as u32, data: cut },
        Frame { ts_ns: T0 + MS, origlen: plain.len() as u32, data: plain },
        Frame { ts_ns: T0 + 2 * MS, origlen: whole.len() as u32, data: whole },
    ];
    write_pcap(&file, 1, 65535, true, &frames);
    let r = analyze_json(&file, &[]);
    let rows = r["conversations"]["ipv6"]["rows"].as_array().unwrap();
    let packets = |a: &str| rows.iter().find(|c| c["a"] == a).map(|c| n(&c["a_to_b"]["packets"]));
    assert_eq!((packets("fe80::1"), packets("fe80::3")), (Some(1), Some(1)), "{rows:?}");
    if need_tools(t.name, &["tshark"]) {
        let out = run_ok(Command::new("tshark").args(["-n", "-q", "-z", "conv,ipv6", "-r"]).arg(&file));
        let text = String::from_utf8_lossy(&out.stdout);
        let row = text.lines().find(|l| l.starts_with("fe80::1 ")).unwrap_or_else(|| panic!("{text}"));
        // "fe80::1 <-> fe80::2  0 0 bytes  1 126 bytes  1 126 bytes ...": one frame in all.
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[9], "1", "tshark counts one frame: {row}");
    }
});

/// Frames analyze does not read as tshark does: frames where tshark sees more than one IP
/// header other than through a tunnel analyze enters ([`wv_wire::tunnel`]: IP in IP, GRE,
/// ERSPAN, PIM register, VXLAN and VXLAN-GPE, Geneve, MPLS, NSH) or an ICMP error's quote
/// (which neither counts as a conversation): sFlow samples, OpenFlow's packet-in, ...
/// (IP fragments are reassembled as tshark does: `reasm`).
const NOT_ENTERED: &str = "((count(ip.src) >= 2 or count(ipv6.src) >= 2 or (ip and ipv6)) \
     and not (erspan or vxlan or geneve or mpls or nsh or pim.type == 1 \
     or gre.proto == 0x0800 or gre.proto == 0x86dd or gre.proto == 0x6558 or gre.proto == 0x883e \
     or gre.proto == 0x8909 \
     or ip.proto == 4 or ip.proto == 41 or ipv6.nxt == 4 or ipv6.nxt == 41 or icmp or icmpv6))";

/// Corpus files whose conversations tshark counts differently for a reason named here.
const CONV_DIFFERENT: &[(&str, &str)] = &[
    ("bgp_vpn_rt-oobr.pcap", "fuzzed frame times from 1970 to 2106, out of order: io,stat's intervals differ"),
    ("pim_header_asan-2.pcap", "fuzzed frame times from 1970 to 2049, out of order: io,stat's intervals differ"),
    ("arista_ether.pcap", "Arista's vendor EtherType header is not walked"),
    ("LINKTYPE_IPV4_invalid.pcap", "an IPv6 packet under the IPv4 link type: tshark reads the version nibble"),
    ("ipv6-routing-header.pcap", "tshark's UDP tap takes a routing header's final destination"),
    ("ipv6-srh-insert-cksum.pcap", "tshark's UDP tap takes a routing header's final destination"),
    ("timestamp_invalid_micro.pcap", "microsecond fields of a million or more, which tshark reads differently"),
    (
        "rsvp-rsvp_obj_print-oobr.pcap",
        "a record whose original length (0) is below its captured length (47): analyze counts the 47 bytes, tshark 0",
    ),
];

/// `f` over every item on two threads, the results in the items' order. For tshark's
/// start-up (~0.4 s a run, most of the corpus tests' time): a live test on the other test
/// thread mostly waits.
fn on_two_threads<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut all: Vec<(usize, R)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(item) = items.get(i) else { break done };
                        done.push((i, f(item)));
                    }
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().expect("a worker thread")).collect()
    });
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(_, r)| r).collect()
}

/// tcpdump's corpus: io,stat, the TCP, UDP and IPv4 conversations and the IPv4
/// endpoints equal tshark's, file by file, on every file analyze reads whose
/// frames hold no header analyze does not enter (see [`NOT_ENTERED`]; tunnels are entered, fragments reassembled) and that
/// [`CONV_DIFFERENT`] does not name.
wvtest!(corpus_conversations_and_endpoints_equal_tsharks, needs = ["tshark", corpus], |t| {
    let files = t.corpus_files();
    let mut ours = Vec::new();
    for f in files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if CONV_DIFFERENT.iter().any(|(n, _)| *n == name) {
            continue;
        }
        // At most 1,000 throughput rows: captures spanning weeks get their step doubled.
        let out = wirevault().args(["analyze", "--json", "--max-intervals", "1000"]).arg(&f).output().unwrap();
        assert_no_panic(&String::from_utf8_lossy(&out.stderr), &f.display().to_string());
        let Ok(r) = serde_json::from_slice::<Value>(&out.stdout) else {
            continue; // not a capture our reader takes (the reader's own tests cover those)
        };
        if n(&r["unsupported_linktype"]) == 0 && n(&r["frames"]) > 0 {
            ours.push((f, r));
        }
    }
    // Each file: None when it holds headers not entered (a packet line came first), else
    // what differs from tshark (nothing: None inside).
    let outcomes = on_two_threads(&ours, |(f, r)| {
        let text = tshark_stats(f, r, Some(NOT_ENTERED));
        if !text.lines().find(|l| !l.trim().is_empty()).is_some_and(|l| l.starts_with("===")) {
            return None;
        }
        let differs = std::panic::catch_unwind(|| compare_tshark_stats(&text, r)).err().map(|e| {
            let why = e.downcast_ref::<String>().cloned().unwrap_or_default();
            format!("{}: {}", f.display(), why.chars().take(400).collect::<String>())
        });
        Some(differs)
    });
    let not_entered = outcomes.iter().filter(|o| o.is_none()).count();
    let compared = outcomes.len() - not_entered;
    let failed: Vec<String> = outcomes.into_iter().flatten().flatten().collect();
    eprintln!("corpus: {compared} files compared, {not_entered} hold headers analyze does not enter");
    assert!(failed.is_empty(), "{} files differ from tshark:\n{}", failed.len(), failed.join("\n"));
    assert!(compared >= 518, "only {compared} corpus files compared");
});

/// Random UDP payloads on port 9999 (a quarter of them begin as RTP version
/// 2 does), a third cut short by the snapshot length: the RTP streams
/// analyze finds are tshark's (`-o rtp.heuristic_rtp:TRUE -z rtp,streams`),
/// SSRC by SSRC. tshark leaves out what it decodes as RTCP (a marker bit
/// and payload type 64-95: packet types 192-223), payload types 72-76, and
/// packets whose CSRC list, extension or padding count do not fit the UDP
/// payload, or whose header (or, with padding, any byte) the capture cut
/// (before the fix: 92 streams against tshark's 54 on one seed).
wvtest!(rtp_streams_of_random_udp_payloads_are_tsharks, needs = ["tshark"], |t| {
    let dir = TempDir::new("analyze-rtp-random");
    let file = dir.join("random.pcap");
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let frames: Vec<Frame> = (0..3000u64)
        .map(|i| {
            let len = 1 + (next() % 200) as usize;
            let payload: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let data = eth_ip(&ipv4([10, 9, 0, 1], [10, 9, 0, 2], 17, &udp(40000, 9999, &payload)));
            let keep = if next() % 3 == 0 { 42 + (next() as usize % (len + 1)) } else { data.len() };
            Frame { ts_ns: T0 + i * MS, origlen: data.len() as u32, data: data[..keep.min(data.len())].to_vec() }
        })
        .collect();
    write_pcap(&file, 1, 65535, true, &frames);
    let r = analyze_json(&file, &[]);
    let ours: std::collections::BTreeMap<String, u64> = r["rtp"]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (format!("0x{:08x}", n(&s["ssrc"])), n(&s["packets"])))
        .collect();
    let out = run_ok(
        Command::new("tshark").args(["-n", "-q", "-o", "rtp.heuristic_rtp:TRUE", "-z", "rtp,streams", "-r"]).arg(&file),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let theirs: std::collections::BTreeMap<String, u64> = text
        .lines()
        .filter_map(|row| {
            let cols: Vec<&str> = row.split_whitespace().collect();
            let ssrc = cols.iter().find(|c| c.starts_with("0x"))?;
            let pct = cols.iter().position(|c| c.starts_with('('))?;
            Some((ssrc.to_lowercase(), cols[pct - 2].parse().ok()?))
        })
        .collect();
    assert!(theirs.len() > 50, "tshark found {} streams: {text}", theirs.len());
    assert_eq!(ours.len(), theirs.len(), "streams: ours {ours:?}\ntshark's {theirs:?}");
    assert_eq!(ours, theirs);
});
