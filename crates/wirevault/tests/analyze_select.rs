//! `wirevault analyze` beyond the built capture's counts: a store with a
//! time range and a filter analyses exactly what `query` selects;
//! `--dup-frames` bounds the duplicate window by count as `editcap -D`
//! does; the malformed kinds the built capture does not hold (a deep MPLS
//! stack, IPv6 lengths, a long extension chain) are counted.

use crate::analyze::{analyze_json, build, eth_ip, ether, n, udp, MS, T0};
use crate::util::*;
use std::process::Command;

/// The built capture recorded into a store: analyze with `--from`, `--to`
/// and a filter reports exactly what it reports of `query`'s output for
/// the same selection (every figure: the JSON reports are equal), and the
/// selection is a strict part of the store.
#[test]
fn analyze_of_a_store_selects_what_query_selects() {
    let tmp = TempDir::new("analyze-select");
    let src = tmp.join("built.pcap");
    write_pcap(&src, 1, 65535, true, &build());
    let store = tmp.join("store");
    run_wirevault(&["record", "-q", "--buffer", "64M", "-o", store.to_str().unwrap(), "--read", src.to_str().unwrap()])
        .expect(0, "record --read");
    let s = store.to_str().unwrap();
    let whole = analyze_json(&store, &[]);
    let (from, to) = (time_arg(T0 + 35 * MS), time_arg(T0 + 1500 * MS));
    for expr in [&[][..], &["tcp", "or", "udp", "port", "9999"][..], &["not", "udp", "port", "30002"][..]] {
        let sel = tmp.join("sel.pcap");
        run_ok(wirevault().args(["query", s, "--from", &from, "--to", &to, "-w"]).arg(&sel).args(expr));
        let via_query = analyze_json(&sel, &[]);
        let direct = analyze_json(&store, &[&["--from", &from, "--to", &to][..], expr].concat());
        let frames = n(&direct["frames"]);
        assert!(frames > 0 && frames < n(&whole["frames"]), "{expr:?}: {frames} of {}", whole["frames"]);
        assert!(direct == via_query, "{expr:?}: analyze of the store differs from analyze of query's output");
    }
}

/// Frames each followed by a copy 1 to 12 frames later, all within 1 ms:
/// with `--dup-window 1s`, `--dup-frames N` counts the copies at most N
/// frames after their original, what `editcap -D N+1` removes.
wvtest!(dup_frames_bounds_the_window_by_count_as_editcap_does, needs = ["editcap"], |t| {
    let tmp = TempDir::new("analyze-dup-frames");
    let distinct =
        |i: u32| eth_ip(&crate::analyze::ipv4([10, 6, 0, 1], [10, 6, 0, 2], 17, &udp(1, 2, &i.to_be_bytes())));
    // Frame i, and at position i + d (d = 1..12 in turn) a copy of it.
    let mut seq: Vec<Vec<u8>> = Vec::new();
    let mut copies: Vec<(usize, Vec<u8>)> = Vec::new();
    for i in 0..300u32 {
        let f = distinct(i);
        if i % 3 == 0 {
            copies.push((seq.len() + 1 + (i as usize / 3) % 12, f.clone()));
        }
        seq.push(f);
        while let Some(k) = copies.iter().position(|(at, _)| *at <= seq.len()) {
            seq.push(copies.remove(k).1);
        }
    }
    seq.extend(copies.into_iter().map(|(_, f)| f));
    let frames: Vec<Frame> = seq
        .into_iter()
        .enumerate()
        .map(|(i, data)| Frame { ts_ns: T0 + i as u64 * 1_000, origlen: data.len() as u32, data })
        .collect();
    let f = tmp.join("copies.pcap");
    write_pcap(&f, 1, 65535, true, &frames);
    let mut seen = Vec::new();
    for dup_frames in [1u64, 2, 3, 5, 8, 1024] {
        let r = analyze_json(&f, &["--dup-window", "1s", "--dup-frames", &dup_frames.to_string()]);
        let ours = n(&r["duplicates"]["packets"]);
        let out = run_ok(
            Command::new("editcap").args(["-D", &(dup_frames + 1).to_string()]).arg(&f).arg(tmp.join("out.pcap")),
        );
        let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        // "... packets seen, 25 packets skipped with duplicate window of 4 packets."
        let skipped: u64 = text
            .split(" packets skipped")
            .next()
            .and_then(|s| s.split_whitespace().last())
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("editcap said: {text}"));
        assert_eq!(ours, skipped, "--dup-frames {dup_frames}: editcap -D {}", dup_frames + 1);
        seen.push(ours);
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "each wider window finds more: {seen:?}");
    // (Copies come up to 13 frames after their original: others are inserted between.)
    assert_eq!(*seen.last().unwrap(), 100, "every copy within 1024 frames");
});

/// IPv6 header (no extension) from 2001:db8::1 to ::2 with `plen` and `nh`.
fn ipv6(plen: u16, nh: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&plen.to_be_bytes());
    h.extend_from_slice(&[nh, 64]);
    for last in [1u8, 2] {
        h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        h.extend_from_slice(&[0; 11]);
        h.push(last);
    }
    h.extend_from_slice(payload);
    h
}

/// One frame of each malformed kind the built capture leaves out, and a good
/// IPv6 frame: each counted once under its kind, the good one under none.
#[test]
fn deep_mpls_and_ipv6_length_and_chain_errors_are_counted() {
    let tmp = TempDir::new("analyze-malformed-more");
    let v6 = |ip: Vec<u8>| ether(&[0x86, 0xdd], &ip);
    let u = udp(1000, 2000, b"payload!");
    // 17 MPLS labels, none at the bottom of the stack: more than the 16 walked.
    let mut deep = vec![0x88, 0x47];
    for _ in 0..17 {
        deep.extend_from_slice(&[0x00, 0x7d, 0x00, 0x40]);
    }
    // A Hop-by-Hop header with only padding (PadN) and next header UDP.
    let hop = [17u8, 0, 1, 4, 0, 0, 0, 0];
    // Nine Destination Options headers: more than the 8 walked.
    let mut chain = Vec::new();
    for i in 0..9 {
        chain.extend_from_slice(&[if i < 8 { 60 } else { 17 }, 0, 1, 4, 0, 0, 0, 0]);
    }
    chain.extend_from_slice(&u);
    let frames = [
        ("mpls_too_many_labels", ether(&deep, &[0x45; 20])),
        ("ipv6_payload_beyond_frame", v6(ipv6(200, 17, &u))),
        ("ipv6_jumbo_missing", v6(ipv6(0, 0, &[&hop[..], &u[..]].concat()))),
        ("ipv6_too_many_ext_headers", v6(ipv6(chain.len() as u16, 60, &chain))),
        ("", v6(ipv6(u.len() as u16, 17, &u))),
    ];
    let built: Vec<Frame> = frames
        .iter()
        .enumerate()
        .map(|(i, (_, d))| Frame { ts_ns: T0 + i as u64 * MS, origlen: d.len() as u32, data: d.clone() })
        .collect();
    let f = tmp.join("malformed.pcap");
    write_pcap(&f, 1, 65535, true, &built);
    let r = analyze_json(&f, &["--examples", "10"]);
    let mut got: Vec<(String, u64, Vec<u64>)> = r["malformed"]["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            let frames = k["first"].as_array().unwrap().iter().map(|e| n(&e["frame"])).collect();
            (k["kind"].as_str().unwrap().to_string(), n(&k["packets"]), frames)
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, u64, Vec<u64>)> = frames
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| !k.is_empty())
        .map(|(i, (k, _))| (k.to_string(), 1, vec![i as u64 + 1]))
        .collect();
    want.sort();
    assert_eq!(got, want, "malformed kinds (kind, packets, example frames): {}", r["malformed"]);
    // The table names each kind in words.
    let o = run_wirevault(&["analyze", f.to_str().unwrap()]);
    o.expect(0, "analyze");
    for words in ["more MPLS labels than allowed", "IPv6 payload length beyond the end of the frame"] {
        assert!(o.stdout.contains(words), "no {words:?} in:\n{}", o.stdout);
    }
}
