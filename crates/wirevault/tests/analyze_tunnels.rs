//! `wirevault analyze` enters tunnels as tshark does: a built capture of a TCP
//! connection mirrored over ERSPAN, UDP in VXLAN, in IP in IP and in GRE
//! (IPv6 inside), and a frame to VXLAN's port from a lower well-known port
//! (not entered). Every count is exact, and the conversations, endpoints,
//! io,stat and TCP marks equal tshark's.

use crate::analyze::{analyze_json, assert_tcp_marks_equal_tsharks, compare_with_tshark, eth_ip, ipv4, n, udp};
use crate::analyze::{MS, T0};
use crate::util::*;

const SENSOR: [u8; 4] = [192, 0, 2, 1];
const COLLECTOR: [u8; 4] = [192, 0, 2, 2];
const CLIENT: [u8; 4] = [10, 0, 0, 1];
const SERVER: [u8; 4] = [10, 0, 0, 2];

/// A TCP segment (data offset 5, window 1000, checksum not filled: tshark does not check it).
fn tcp(sp: u16, dp: u16, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut t = Vec::new();
    for v in [sp, dp] {
        t.extend_from_slice(&v.to_be_bytes());
    }
    t.extend_from_slice(&seq.to_be_bytes());
    t.extend_from_slice(&ack.to_be_bytes());
    t.extend_from_slice(&[0x50, flags, 0x03, 0xe8, 0, 0, 0, 0]);
    t.extend_from_slice(payload);
    t
}

/// `frame` mirrored over ERSPAN type II (GRE with a sequence number `seq`).
fn erspan(seq: u32, frame: &[u8]) -> Vec<u8> {
    let mut g = vec![0x10, 0x00, 0x88, 0xbe];
    g.extend_from_slice(&seq.to_be_bytes());
    // Version 1, VLAN 0, COS 0, En 0, T 0, session 7; index 0.
    g.extend_from_slice(&[0x10, 0x00, 0x00, 0x07, 0, 0, 0, 0]);
    g.extend_from_slice(frame);
    eth_ip(&ipv4(SENSOR, COLLECTOR, 47, &g))
}

/// `frame` in VXLAN (VNI 42) from UDP port `sport`.
fn vxlan(sport: u16, frame: &[u8]) -> Vec<u8> {
    let mut v = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
    v.extend_from_slice(frame);
    eth_ip(&ipv4(SENSOR, COLLECTOR, 17, &udp(sport, 4789, &v)))
}

/// An IPv6 UDP packet.
fn ipv6_udp(src: u8, dst: u8, sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    let u = udp(sp, dp, payload);
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(u.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[17, 64]);
    for a in [src, dst] {
        ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a]);
    }
    ip.extend_from_slice(&u);
    ip
}

#[test]
fn tunnels_are_entered_as_tshark_enters_them() {
    let dir = TempDir::new("analyze-tunnels");
    let file = dir.join("tunnels.pcap");
    let mut frames = Vec::new();
    let mut at = |t: u64, data: Vec<u8>| frames.push(Frame { ts_ns: T0 + t * MS, origlen: data.len() as u32, data });
    // A TCP connection mirrored over ERSPAN: handshake, two segments, the
    // second retransmitted, acknowledged.
    let (c, s) = (40_000, 80);
    let inner = |from_client: bool, seg: Vec<u8>| {
        let (a, b) = if from_client { (CLIENT, SERVER) } else { (SERVER, CLIENT) };
        eth_ip(&ipv4(a, b, 6, &seg))
    };
    let conn = [
        inner(true, tcp(c, s, 1000, 0, 0x02, &[])),
        inner(false, tcp(s, c, 5000, 1001, 0x12, &[])),
        inner(true, tcp(c, s, 1001, 5001, 0x10, &[])),
        inner(true, tcp(c, s, 1001, 5001, 0x18, &[b'a'; 100])),
        inner(true, tcp(c, s, 1101, 5001, 0x18, &[b'b'; 100])),
        inner(true, tcp(c, s, 1101, 5001, 0x18, &[b'b'; 100])),
        inner(false, tcp(s, c, 5001, 1201, 0x10, &[])),
    ];
    for (i, f) in conn.iter().enumerate() {
        at(i as u64 * 10, erspan(i as u32, f));
    }
    // Five UDP datagrams in VXLAN, from an ephemeral port.
    for i in 0..5u8 {
        let f = eth_ip(&ipv4(CLIENT, [10, 0, 0, 3], 17, &udp(5000, 6000, &[i; 40])));
        at(100 + u64::from(i), vxlan(50_000 + u16::from(i), &f));
    }
    // Three in IP in IP, two in GRE with a key carrying IPv6.
    for i in 0..3u8 {
        at(
            200 + u64::from(i),
            eth_ip(&ipv4(SENSOR, COLLECTOR, 4, &ipv4(SERVER, CLIENT, 17, &udp(7000, 7001, &[i; 20])))),
        );
    }
    for i in 0..2u8 {
        let mut g = vec![0x20, 0x00, 0x86, 0xdd, 0, 0, 0, 9];
        g.extend_from_slice(&ipv6_udp(1, 2, 9000, 9001, &[i; 30]));
        at(300 + u64::from(i), eth_ip(&ipv4(SENSOR, COLLECTOR, 47, &g)));
    }
    // To VXLAN's port from DNS's: tshark reads DNS, analyze enters nothing.
    at(400, vxlan(53, &eth_ip(&ipv4(CLIENT, SERVER, 17, &udp(1, 2, &[0; 8])))));
    // An ERSPAN frame the capture cut inside its payload's Ethernet header:
    // entered, but only the outer flow counts.
    let whole = erspan(99, &conn[0]);
    let data = whole[..whole.len() - conn[0].len() + 6].to_vec();
    frames.push(Frame { ts_ns: T0 + 500 * MS, origlen: whole.len() as u32, data });
    write_pcap(&file, 1, 65535, true, &frames);

    let r = analyze_json(&file, &["--examples", "100"]);
    assert_eq!(n(&r["frames"]), 19);
    assert_eq!(n(&r["tunnelled"]), 18, "all but the frame from port 53");
    assert_eq!(n(&r["tcp"]["segments"]), 7);
    assert_eq!(n(&r["tcp"]["retransmissions"]), 1);
    assert_eq!(n(&r["tcp"]["handshake_rtt"]["count"]), 1);
    let conv = &r["conversations"];
    let ipv4_rows = conv["ipv4"]["rows"].as_array().unwrap();
    let pair = |a: &str, b: &str| {
        ipv4_rows
            .iter()
            .find(|c| (c["a"] == a && c["b"] == b) || (c["a"] == b && c["b"] == a))
            .map(|c| n(&c["a_to_b"]["packets"]) + n(&c["b_to_a"]["packets"]))
    };
    assert_eq!(pair("192.0.2.1", "192.0.2.2"), Some(19), "every frame's outer header");
    assert_eq!(pair("10.0.0.1", "10.0.0.2"), Some(7 + 3), "the mirrored connection and IP in IP");
    assert_eq!(pair("10.0.0.1", "10.0.0.3"), Some(5), "VXLAN's inner datagrams");
    assert_eq!(conv["ipv6"]["rows"].as_array().unwrap().len(), 1);
    assert_eq!(n(&conv["udp"]["count"]), 5 + 1 + 1 + 1 + 1, "VXLAN's 5 outer and its inner, DNS, IP in IP, GRE");
    if need_tools("tunnels_are_entered_as_tshark_enters_them", &["tshark"]) {
        compare_with_tshark(&file, &r);
        assert_tcp_marks_equal_tsharks(&file, &r);
    }
}
