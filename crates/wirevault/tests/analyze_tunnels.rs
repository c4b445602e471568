//! `wirevault analyze` reads what lies past the first IP header as tshark
//! does: tunnels (a built capture of a TCP connection mirrored over ERSPAN,
//! UDP in VXLAN, in IP in IP and in GRE with IPv6 inside, and a frame to
//! VXLAN's port from a lower well-known port, not entered) and IP fragments
//! (reassembled: TCP and UDP count at the frame that completes a datagram).
//! Every count is exact, and the conversations, endpoints, io,stat and TCP
//! marks equal tshark's.

use crate::analyze::{analyze_json, assert_tcp_marks_equal_tsharks, compare_with_tshark, eth_ip, ether, fix_csum};
use crate::analyze::{ipv4, n, tcp, udp};
use crate::analyze::{MS, T0};
use crate::util::*;
use serde_json::Value;

const SENSOR: [u8; 4] = [192, 0, 2, 1];
const COLLECTOR: [u8; 4] = [192, 0, 2, 2];
const CLIENT: [u8; 4] = [10, 0, 0, 1];
const SERVER: [u8; 4] = [10, 0, 0, 2];

/// TCP segments' window (their checksums are not filled: tshark does not check them).
const WIN: u16 = 1000;

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

/// An IPv6 packet from 2001:db8::1 to 2001:db8::2, its next header `next`.
fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut ip = vec![0x60, 0, 0, 0];
    ip.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    ip.extend_from_slice(&[next, 64]);
    for a in [1u8, 2] {
        ip.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a]);
    }
    ip.extend_from_slice(payload);
    ip
}

wvtest!(tunnels_are_entered_as_tshark_enters_them, |t| {
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
        inner(true, tcp(c, s, 1000, 0, 0x02, WIN, &[])),
        inner(false, tcp(s, c, 5000, 1001, 0x12, WIN, &[])),
        inner(true, tcp(c, s, 1001, 5001, 0x10, WIN, &[])),
        inner(true, tcp(c, s, 1001, 5001, 0x18, WIN, &[b'a'; 100])),
        inner(true, tcp(c, s, 1101, 5001, 0x18, WIN, &[b'b'; 100])),
        inner(true, tcp(c, s, 1101, 5001, 0x18, WIN, &[b'b'; 100])),
        inner(false, tcp(s, c, 5001, 1201, 0x10, WIN, &[])),
    ];
    for (i, f) in conn.iter().enumerate() {
        at(i as u64 * 10, erspan(i as u32, f));
    }
    // Five UDP datagrams in VXLAN, from an ephemeral port.
    for i in 0..5u8 {
        let f = eth_ip(&ipv4(CLIENT, [10, 0, 0, 3], 17, &udp(5000, 6000, &[i; 40])));
        at(100 + u64::from(i), vxlan(50_000 + u16::from(i), &f));
    }
    // A mirrored frame whose IPv4 checksum is wrong, in VXLAN: a malformed frame.
    let mut bad = eth_ip(&ipv4(CLIENT, [10, 0, 0, 3], 17, &udp(5000, 6000, &[9; 40])));
    bad[24] ^= 0xff;
    at(150, vxlan(50_005, &bad));
    // Three in IP in IP, two in GRE with a key carrying IPv6.
    for i in 0..3u8 {
        at(
            200 + u64::from(i),
            eth_ip(&ipv4(SENSOR, COLLECTOR, 4, &ipv4(SERVER, CLIENT, 17, &udp(7000, 7001, &[i; 20])))),
        );
    }
    for i in 0..2u8 {
        let mut g = vec![0x20, 0x00, 0x86, 0xdd, 0, 0, 0, 9];
        g.extend_from_slice(&ipv6(17, &udp(9000, 9001, &[i; 30])));
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
    assert_eq!(n(&r["frames"]), 20);
    assert_eq!(n(&r["tunnelled"]), 19, "all but the frame from port 53");
    // The mix: the frames' own headers, and apart the innermost packet of each tunnelled one.
    let count = |mix: &Value, table: &str, key: u64| {
        mix[table].as_array().unwrap().iter().find(|e| n(&e["key"]) == key).map(|e| n(&e["packets"]))
    };
    let (outer, inner) = (&r["mix"], &r["mix"]["inner"]);
    assert_eq!(count(outer, "ethertypes", 0x0800), Some(20));
    assert_eq!(count(outer, "ip_protocols", 47), Some(7 + 1 + 2), "ERSPAN and GRE");
    assert_eq!(count(inner, "ethertypes", 0x0800), Some(7 + 6 + 3), "ERSPAN's, VXLAN's, IP in IP's: {inner}");
    assert_eq!(count(inner, "ethertypes", 0x86dd), Some(2), "GRE's");
    assert_eq!(count(inner, "ethertypes", 0), Some(1), "the cut ERSPAN frame: no EtherType captured");
    assert_eq!(count(inner, "ip_protocols", 6), Some(7), "{inner}");
    assert_eq!(count(inner, "ip_protocols", 17), Some(6 + 3 + 2), "{inner}");
    assert_eq!(inner["ip_protocols"].as_array().unwrap().len(), 2, "{inner}");
    let kinds = r["malformed"]["kinds"].as_array().unwrap();
    let bad: Vec<_> = kinds.iter().filter(|k| k["kind"] != "runt").collect();
    assert_eq!(bad.len(), 1, "{kinds:?}");
    assert_eq!((bad[0]["kind"].as_str(), n(&bad[0]["packets"])), (Some("ipv4_checksum"), 1));
    let example = &bad[0]["first"][0];
    assert_eq!(n(&example["frame"]), 13);
    assert_eq!(example["detail"], "at offset 64 (inside a tunnel)", "{example}");
    assert_eq!(example["flow"], "10.0.0.1:5000 > 10.0.0.3:6000 udp", "the mirrored frame's flow");
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
    assert_eq!(pair("192.0.2.1", "192.0.2.2"), Some(20), "every frame's outer header");
    assert_eq!(pair("10.0.0.1", "10.0.0.2"), Some(7 + 3), "the mirrored connection and IP in IP");
    assert_eq!(pair("10.0.0.1", "10.0.0.3"), Some(6), "VXLAN's inner datagrams");
    assert_eq!(conv["ipv6"]["rows"].as_array().unwrap().len(), 1);
    assert_eq!(n(&conv["udp"]["count"]), 6 + 1 + 1 + 1 + 1, "VXLAN's 6 outer and its inner, DNS, IP in IP, GRE");
    if need_tools(t.name, &["tshark"]) {
        compare_with_tshark(&file, &r);
        assert_tcp_marks_equal_tsharks(&file, &r);
    }
});

/// An IPv4 fragment: `part` at byte `offset` of datagram `id`, more to come or not.
fn v4_fragment(src: [u8; 4], dst: [u8; 4], proto: u8, id: u16, offset: usize, more: bool, part: &[u8]) -> Vec<u8> {
    let mut ip = ipv4(src, dst, proto, part);
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    let flags = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
    ip[6..8].copy_from_slice(&flags.to_be_bytes());
    fix_csum(&mut ip);
    eth_ip(&ip)
}

/// `datagram` (an IP payload) cut into IPv4 fragments of `size` bytes.
fn v4_fragments(src: [u8; 4], dst: [u8; 4], proto: u8, id: u16, datagram: &[u8], size: usize) -> Vec<Vec<u8>> {
    datagram
        .chunks(size)
        .enumerate()
        .map(|(i, part)| v4_fragment(src, dst, proto, id, i * size, (i + 1) * size < datagram.len(), part))
        .collect()
}

/// `datagram` (a UDP datagram) cut into IPv6 fragments of `size` bytes.
fn v6_fragments(id: u32, datagram: &[u8], size: usize) -> Vec<Vec<u8>> {
    datagram
        .chunks(size)
        .enumerate()
        .map(|(i, part)| {
            let more = (i + 1) * size < datagram.len();
            // The fragment header: next header UDP, offset and M flag, identification.
            let mut fh = vec![17, 0];
            fh.extend_from_slice(&(((i * size / 8) as u16) << 3 | u16::from(more)).to_be_bytes());
            fh.extend_from_slice(&id.to_be_bytes());
            fh.extend_from_slice(part);
            ether(&[0x86, 0xdd], &ipv6(44, &fh))
        })
        .collect()
}

wvtest!(fragments_are_reassembled_as_tshark_reassembles_them, |test| {
    let dir = TempDir::new("analyze-fragments");
    let file = dir.join("fragments.pcap");
    let host = |n: u8| [10, 0, 0, n];
    let mut frames: Vec<Frame> = Vec::new();
    let mut push = |data: Vec<u8>, origlen: Option<usize>| {
        let t = T0 + frames.len() as u64 * MS;
        frames.push(Frame { ts_ns: t, origlen: origlen.unwrap_or(data.len()) as u32, data });
    };
    // A UDP datagram in three fragments, in order: one UDP packet, at the third.
    for f in v4_fragments(host(1), host(2), 17, 100, &udp(1111, 2222, &[b'x'; 3000]), 1200) {
        push(f, None);
    }
    // Its first and last fragment only: never a UDP packet.
    let two = v4_fragments(host(3), host(4), 17, 200, &udp(3333, 4444, &[b'y'; 3000]), 1200);
    push(two[0].clone(), None);
    push(two[2].clone(), None);
    // Three fragments, last first: complete at the first fragment, sent last.
    for f in v4_fragments(host(5), host(6), 17, 300, &udp(5555, 6666, &[b'z'; 2000]), 1000).into_iter().rev() {
        push(f, None);
    }
    // A TCP segment in three fragments: one TCP packet of 2,000 bytes.
    let seg = tcp(7777, 80, 1, 1, 0x18, WIN, &[b'w'; 2000]);
    for f in v4_fragments(host(7), host(8), 6, 400, &seg, 1000) {
        push(f, None);
    }
    // A TCP first fragment the capture cut (96 of 1,034 bytes): tshark cannot add it to a
    // datagram, so it reads its TCP header as it is.
    let cut = v4_fragments(host(9), host(10), 6, 500, &seg, 1000).swap_remove(0);
    push(cut[..96].to_vec(), Some(cut.len()));
    // An IPv6 UDP datagram in two fragments.
    for f in v6_fragments(0xabcd, &udp(9000, 9001, &[b'v'; 1500]), 1024) {
        push(f, None);
    }
    // A datagram in three fragments, each in its own VXLAN frame: reassembled inside.
    let inner = v4_fragments(host(11), host(12), 17, 600, &udp(1234, 5678, &[b'i'; 2000]), 1000);
    for (i, f) in inner.iter().enumerate() {
        push(vxlan(50_100 + i as u16, f), None);
    }
    // Not a fragment: the same UDP flow as the first datagram.
    push(eth_ip(&ipv4(host(1), host(2), 17, &udp(1111, 2222, &[b'q'; 10]))), None);
    write_pcap(&file, 1, 65535, true, &frames);

    let r = analyze_json(&file, &["--examples", "100"]);
    assert_eq!(n(&r["frames"]), 18);
    assert_eq!(n(&r["reassembled"]), 5, "three IPv4 datagrams, one IPv6 and one inside VXLAN");
    let conv = &r["conversations"];
    let rows = |t: &str| -> Vec<(String, u64, u64)> {
        let v = if t == "tcp" { &r["tcp"]["conversations"]["rows"] } else { &conv[t]["rows"] };
        v.as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let p = n(&c["a_to_b"]["packets"]) + n(&c["b_to_a"]["packets"]);
                let b = n(&c["a_to_b"]["bytes"]) + n(&c["b_to_a"]["bytes"]);
                (format!("{}:{}", c["a"].as_str().unwrap(), c["port_a"]), p, b)
            })
            .collect()
    };
    let udp_rows = rows("udp");
    let last_of = |frame_len: usize| frame_len as u64;
    assert!(udp_rows.contains(&("10.0.0.1:1111".into(), 2, last_of(14 + 20 + 608) + 60)), "{udp_rows:?}");
    assert!(udp_rows.contains(&("10.0.0.5:5555".into(), 1, last_of(14 + 20 + 1000))), "{udp_rows:?}");
    assert!(!udp_rows.iter().any(|r| r.0.starts_with("10.0.0.3:")), "never completed: {udp_rows:?}");
    assert!(udp_rows.contains(&("10.0.0.11:1234".into(), 1, last_of(14 + 20 + 8 + 8 + 60))), "{udp_rows:?}");
    assert_eq!(udp_rows.len(), 3 + 1 + 3, "{udp_rows:?}");
    assert_eq!(n(&r["tcp"]["segments"]), 2, "the reassembled segment and the cut first fragment");
    if need_tools(test.name, &["tshark"]) {
        compare_with_tshark(&file, &r);
        assert_tcp_marks_equal_tsharks(&file, &r);
    }
});

/// A Network Service Header (MD type 2, no context headers) before `payload`
/// of next protocol `next` (1 IPv4, 2 IPv6, 3 Ethernet, 4 NSH, 5 MPLS).
fn nsh(next: u8, payload: &[u8]) -> Vec<u8> {
    [&[0x0f, 0xc2, 0x02, next, 0, 0, 7, 255][..], payload].concat()
}

/// `payload` in VXLAN-GPE (VNI 42) of next protocol `next`, from UDP port `sport`.
fn vxlan_gpe(sport: u16, next: u8, payload: &[u8]) -> Vec<u8> {
    let gpe = [&[0x0c, 0, 0, next, 0, 0, 42, 0][..], payload].concat();
    eth_ip(&ipv4(SENSOR, COLLECTOR, 17, &udp(sport, 4790, &gpe)))
}

wvtest!(service_chains_and_named_payloads_are_entered_as_tshark_enters_them, |t| {
    let dir = TempDir::new("analyze-nsh");
    let file = dir.join("nsh.pcap");
    let mut frames = Vec::new();
    let mut at = |t: u64, data: Vec<u8>| frames.push(Frame { ts_ns: T0 + t * MS, origlen: data.len() as u32, data });
    // A TCP connection through a service chain: NSH in VXLAN-GPE, one segment retransmitted.
    let (c, s) = (40_001, 443);
    let seg = |from_client: bool, t: Vec<u8>| {
        let (a, b) = if from_client { (CLIENT, SERVER) } else { (SERVER, CLIENT) };
        nsh(1, &ipv4(a, b, 6, &t))
    };
    let conn = [
        seg(true, tcp(c, s, 1000, 0, 0x02, WIN, &[])),
        seg(false, tcp(s, c, 5000, 1001, 0x12, WIN, &[])),
        seg(true, tcp(c, s, 1001, 5001, 0x18, WIN, &[b'a'; 100])),
        seg(true, tcp(c, s, 1001, 5001, 0x18, WIN, &[b'a'; 100])),
        seg(false, tcp(s, c, 5001, 1101, 0x10, WIN, &[])),
    ];
    for (i, p) in conn.iter().enumerate() {
        at(i as u64 * 10, vxlan_gpe(50_000, 4, p));
    }
    let dgram = |n: u8| ipv4(CLIENT, [10, 0, 0, 3], 17, &udp(5000, 6000, &[n; 30]));
    // VXLAN-GPE carrying IPv4, IPv6, Ethernet and MPLS.
    at(100, vxlan_gpe(50_001, 1, &dgram(1)));
    at(101, vxlan_gpe(50_001, 2, &ipv6(17, &udp(9000, 9001, &[2; 30]))));
    at(102, vxlan_gpe(50_001, 3, &eth_ip(&dgram(3))));
    at(103, vxlan_gpe(50_001, 5, &[&[0, 0x64, 0x11, 64][..], &dgram(4)].concat()));
    // NSH over Ethernet, and in GRE.
    at(200, ether(&[0x89, 0x4f], &nsh(1, &dgram(5))));
    at(201, eth_ip(&ipv4(SENSOR, COLLECTOR, 47, &[&[0, 0, 0x89, 0x4f][..], &nsh(1, &dgram(6))].concat())));
    // Geneve carrying MPLS; Cisco's metadata in GRE carrying Ethernet.
    let mpls = [&[0, 0x64, 0x11, 64][..], &dgram(7)].concat();
    at(
        300,
        eth_ip(&ipv4(
            SENSOR,
            COLLECTOR,
            17,
            &udp(40_000, 6081, &[&[0, 0, 0x88, 0x47, 0, 0, 1, 0][..], &mpls].concat()),
        )),
    );
    let cmd = [&[0, 0, 0x89, 0x09, 0x65, 0x58, 1, 1, 0, 1, 0, 0][..], &eth_ip(&dgram(8))].concat();
    at(301, eth_ip(&ipv4(SENSOR, COLLECTOR, 47, &cmd)));
    // Not entered: an unknown next protocol, and from DNS's port (tshark reads DNS).
    at(400, vxlan_gpe(50_002, 9, &dgram(9)));
    at(401, vxlan_gpe(53, 1, &dgram(10)));
    write_pcap(&file, 1, 65535, true, &frames);

    let r = analyze_json(&file, &["--examples", "100"]);
    assert_eq!(n(&r["frames"]), 15);
    assert_eq!(n(&r["tunnelled"]), 13, "all but the unknown next protocol and the frame from port 53");
    assert_eq!(n(&r["malformed"]["packets"]), 0, "{}", r["malformed"]);
    assert_eq!(n(&r["tcp"]["segments"]), 5);
    assert_eq!(n(&r["tcp"]["retransmissions"]), 1);
    let ipv4_rows = r["conversations"]["ipv4"]["rows"].as_array().unwrap();
    let pair = |a: &str, b: &str| {
        ipv4_rows
            .iter()
            .find(|c| (c["a"] == a && c["b"] == b) || (c["a"] == b && c["b"] == a))
            .map(|c| n(&c["a_to_b"]["packets"]) + n(&c["b_to_a"]["packets"]))
    };
    assert_eq!(pair("10.0.0.1", "10.0.0.2"), Some(5), "the chained connection");
    assert_eq!(pair("10.0.0.1", "10.0.0.3"), Some(7), "the IPv4 datagrams 1 and 3 to 8");
    assert_eq!(r["conversations"]["ipv6"]["rows"].as_array().unwrap().len(), 1);
    if need_tools(t.name, &["tshark"]) {
        compare_with_tshark(&file, &r);
        assert_tcp_marks_equal_tsharks(&file, &r);
    }
});
