//! `flows --packets`: the packets of the matched flows, written as `query` writes them. Over
//! one store recorded from flows_api's built capture, equal to tcpdump over that capture with
//! the flows' keys (frame for frame, time order, the tagged twin apart); over the capture
//! split by flow into three stores (one served, with a token), the flows of every node each
//! once with its node, the packets equal to `query` over the same sources, a node down named
//! and exit 1 (0 with --allow-partial); bad input refused in one sentence.

use crate::fleet::{fleet_file, token_file, TOKEN};
use crate::flows_api::{built, store_with_flows, FLOWS};
use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Timestamp and bytes of every frame of a capture file.
fn frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
    read_capture(path).1.into_iter().map(|r| (r.ts_ns, r.data)).collect()
}

/// Asserts that two answers hold the same frames, saying where they differ first (the
/// frames themselves are too long to print).
fn same(got: &[(u64, Vec<u8>)], want: &[(u64, Vec<u8>)], what: &str) {
    let at = got.iter().zip(want).position(|(a, b)| a != b);
    assert!(
        at.is_none() && got.len() == want.len(),
        "{what}: {} frames vs {}, first differing at {at:?}",
        got.len(),
        want.len()
    );
}

/// The frames tcpdump selects from `pcap` with `filter`, with their times.
fn tcpdump(pcap: &Path, filter: &str, out: &Path) -> Vec<(u64, Vec<u8>)> {
    run_ok(Command::new("tcpdump").arg("-r").arg(pcap).arg("-w").arg(out).arg(filter));
    frames(out)
}

/// `flows ARGS --json` as records.
fn flows_json(args: &[&str]) -> Vec<Value> {
    serde_json::from_slice(&run_ok(wirevault().arg("flows").args(args).arg("--json")).stdout).unwrap()
}

wvtest!(flows_packets_equal_tcpdump_over_the_capture, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("flows-packets");
    let (store, pcap) = store_with_flows(&tmp);

    // One flow: exactly tcpdump's frames for its key, and as many as its record counts.
    let out = tmp.join("one.pcap");
    run_ok(wirevault().arg("flows").arg(&store).args(["--packets", "-w", s(&out), "udp and host 10.1.0.2"]));
    let got = frames(&out);
    let want = tcpdump(&pcap, "udp and host 10.1.0.2 and port 40001 and port 53", &tmp.join("t1.pcap"));
    assert!(!want.is_empty());
    same(&got, &want, &format!("{}: one flow's packets vs tcpdump -r", t.name));
    let rec = &flows_json(&[s(&store), "udp and host 10.1.0.2"])[0];
    assert_eq!(
        got.len() as u64,
        rec["to_server"]["packets"].as_u64().unwrap() + rec["to_client"]["packets"].as_u64().unwrap()
    );

    // Three flows (the tagged twin of flow 5 among them): the union, in time order. tcpdump's
    // `host` matches untagged frames only, so the tagged twin is its own term (last: `vlan`
    // moves the offsets of what follows it).
    let out = tmp.join("three.pcap");
    let expr = "host 10.1.0.5 or host 10.1.0.6";
    assert_eq!(flows_json(&[s(&store), expr]).len(), 3, "flows 4, 5 and 5 tagged");
    run_ok(wirevault().arg("flows").arg(&store).args(["--packets", "-w", s(&out), expr]));
    let want = tcpdump(&pcap, &format!("{expr} or (vlan 7 and host 10.1.0.6)"), &tmp.join("t3.pcap"));
    assert!(want.windows(2).all(|w| w[0].0 <= w[1].0));
    same(&frames(&out), &want, "three flows' packets vs tcpdump -r");
    // Only the tagged one; -w alone writes packets, as tcpdump's -w does.
    run_ok(wirevault().arg("flows").arg(&store).args(["-w", s(&out), "vlan 7"]));
    same(&frames(&out), &tcpdump(&pcap, "vlan 7", &tmp.join("t4.pcap")), "the tagged flow alone");

    // Every flow, to standard output: the whole capture.
    let o = run_ok(wirevault().arg("flows").arg(&store).args(["--packets", "-w", "-"]));
    let all = tmp.join("all.pcap");
    std::fs::write(&all, &o.stdout).unwrap();
    same(&frames(&all), &frames(&pcap), "every flow's packets are the capture's");

    // Two tagged flows and their untagged twins (flow 6 copied with VLAN 9): libpcap's `vlan`
    // moves the offsets of what follows it, so one query cannot name both tagged keys. (1 us
    // later: tcpdump -w writes microseconds.)
    let mut twins = Vec::new();
    for f in built() {
        let copy = flow_of(&f.data) == 6 && f.data[12..14] != [0x81, 0x00];
        let tagged = copy.then(|| {
            let mut data = f.data.clone();
            data.splice(12..12, [0x81, 0x00, 0x00, 0x09]);
            Frame { ts_ns: f.ts_ns + 1_000, origlen: data.len() as u32, data }
        });
        twins.push(f);
        twins.extend(tagged);
    }
    let pcap2 = tmp.join("twins.pcap");
    write_pcap(&pcap2, 1, 65535, true, &twins);
    let store2 = tmp.join("twins");
    run_ok(wirevault().args(["record", "-q", "--flows", "-r", s(&pcap2), "-o", s(&store2)]));
    let expr = "host 10.1.0.6 or host 10.1.0.7";
    assert_eq!(flows_json(&[s(&store2), expr]).len(), 4, "flows 5 and 6, each tagged too");
    run_ok(wirevault().arg("flows").arg(&store2).args(["--packets", "-w", s(&out), expr]));
    let want = tcpdump(&pcap2, &format!("{expr} or (vlan and ({expr}))"), &tmp.join("t5.pcap"));
    same(&frames(&out), &want, "two tagged keys and two untagged ones");

    // Bad input: one sentence, exit 2.
    let o = run_wirevault(&["flows", s(&store), "--packets", "udp"]);
    o.expect(2, "--packets without -w");
    assert!(o.stderr.contains("give -w FILE") && o.stderr.trim().lines().count() == 1, "{}", o.stderr);
    let o = run_wirevault(&["flows", s(&store), "--json", "-w", s(&out), "udp"]);
    o.expect(2, "--json with -w");
    assert!(o.stderr.contains("--json") && o.stderr.contains("-w"), "{}", o.stderr);
    let inside = store.join("stream-000").join("x.pcap");
    let o = run_wirevault(&["flows", s(&store), "--packets", "-w", s(&inside), "udp"]);
    o.expect(2, "-w inside the store");
    assert!(!inside.exists() && o.stderr.contains("store"), "{}", o.stderr);
    let o = run_wirevault(&["flows", s(&store), "--packets", "-w", s(&out), "tcp[13] & 2 != 0"]);
    o.expect(2, "a flow expression with tcp[13]");
    assert!(o.stderr.contains("\"tcp[13]\""), "{}", o.stderr);
});

/// The client address's last byte less one: the flow's number in [`built`].
fn flow_of(frame: &[u8]) -> usize {
    let ip = if frame[12..14] == [0x81, 0x00] { 18 } else { 14 };
    let (src, dst) = (&frame[ip + 12..ip + 16], &frame[ip + 16..ip + 20]);
    let client = if src[..2] == [10, 1] { src } else { dst };
    client[3] as usize - 1
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

wvtest!(flows_packets_over_several_stores_equal_query, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("flows-packets-fleet");
    // Flow k in store k % 3.
    let mut parts: Vec<Vec<Frame>> = vec![Vec::new(), Vec::new(), Vec::new()];
    // One build for the parts and the whole (its IP ids differ from one build to the next).
    let frames_built = built();
    for f in &frames_built {
        parts[flow_of(&f.data) % 3].push(f.clone());
    }
    let stores: Vec<PathBuf> = (0..3)
        .map(|i| {
            let pcap = tmp.join(format!("part{i}.pcap"));
            write_pcap(&pcap, 1, 65535, true, &parts[i]);
            let store = tmp.join(format!("s{i}"));
            run_ok(wirevault().args(["record", "-q", "--flows", "-r", s(&pcap), "-o", s(&store)]));
            store
        })
        .collect();
    let whole = tmp.join("whole.pcap");
    write_pcap(&whole, 1, 65535, true, &frames_built);
    let tokens = token_file(tmp.path(), TOKEN);
    let served = Served::start(&stores[2], tmp.path(), &["--token-file", s(&tokens)]);
    let url = format!("http://{}", served.addr);
    let srcs: Vec<String> = vec![
        format!("--store={}", s(&stores[0])),
        format!("--store={}", s(&stores[1])),
        format!("--store={url}"),
        format!("--token-file={}", s(&tokens)),
    ];
    let srcs: Vec<&str> = srcs.iter().map(String::as_str).collect();

    // Every flow once, from its node, in start order.
    let all = flows_json(&srcs);
    assert_eq!(all.len(), FLOWS as usize + 1, "{}: every flow once, the tagged one apart", t.name);
    let names = ["s0", "s1", served.addr.as_str()];
    for r in &all {
        let k = r["client"].as_str().unwrap().rsplit('.').next().unwrap().parse::<usize>().unwrap() - 1;
        assert_eq!(r["node"], names[k % 3], "flow {k}'s node: {r}");
    }
    let starts: Vec<u64> = all.iter().map(|r| r["first_ns"].as_u64().unwrap()).collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "sorted by start over the nodes");

    // The same through a fleet file: its node names.
    let fleet = fleet_file(
        tmp.path(),
        "fleet.toml",
        "",
        &[
            ("a", s(&stores[0]).to_string(), None),
            ("b", s(&stores[1]).to_string(), None),
            ("c", url.clone(), Some(&tokens)),
        ],
    );
    let by_file = flows_json(&["--fleet", s(&fleet)]);
    assert_eq!(by_file.len(), all.len());
    for (f, r) in by_file.iter().zip(&all) {
        let mut r = r.clone();
        let i = names.iter().position(|n| r["node"] == *n).unwrap();
        r["node"] = ["a", "b", "c"][i].into();
        assert_eq!(*f, r, "a fleet file's flows are the --store ones, named after its nodes");
    }

    // The packets of flows on all three nodes: `query` over the same sources with the same
    // keys and range, and tcpdump over the unsplit capture.
    let expr = "host 10.1.0.2 or host 10.1.0.3 or host 10.1.0.4";
    let recs = flows_json(&[&srcs[..], &[expr]].concat());
    assert_eq!(recs.len(), 3);
    let first = recs.iter().map(|r| r["first_ns"].as_u64().unwrap()).min().unwrap();
    let last = recs.iter().map(|r| r["last_ns"].as_u64().unwrap()).max().unwrap();
    let out = tmp.join("flows.pcap");
    run_ok(wirevault().arg("flows").args(&srcs).args(["--packets", "-w", s(&out), expr]));
    let q = tmp.join("query.pcap");
    let (from, to) = (format!("{}.{:09}", first / 1_000_000_000, first % 1_000_000_000), {
        let t = last + 1;
        format!("{}.{:09}", t / 1_000_000_000, t % 1_000_000_000)
    });
    run_ok(wirevault().arg("query").args(&srcs).args(["--from", &from, "--to", &to, "-w", s(&q), expr]));
    let got = frames(&out);
    assert!(!got.is_empty());
    same(&got, &frames(&q), "flows --packets vs query over the same sources");
    same(&got, &tcpdump(&whole, expr, &tmp.join("t.pcap")), "vs tcpdump over the unsplit capture");
    // pcapng: the same frames.
    let ng = tmp.join("flows.pcapng");
    run_ok(wirevault().arg("flows").args(&srcs).args(["--packets", "--format", "pcapng", "-w", s(&ng), expr]));
    same(&frames(&ng), &got, "pcapng holds the same frames");
    run_ok(wirevault().args(["flows", "--fleet", s(&fleet), "--packets", "-w", s(&out), expr]));
    same(&frames(&out), &got, "--fleet FILE --packets");

    // A node down: named once, exit 1; 0 with --allow-partial, with the others' flows.
    let dead = format!("http://127.0.0.1:{}", dead_port());
    let dead_src = format!("--store={dead}");
    let down = [&srcs[..], &[dead_src.as_str()]].concat();
    let o = run_wirevault(&[&["flows"][..], &down, &["--json"]].concat());
    o.expect(1, "a node down");
    let named = dead.trim_start_matches("http://");
    assert_eq!(o.stderr.matches(&format!("node {named} ")).count(), 1, "named once: {}", o.stderr);
    let o = run_wirevault(&[&["flows"][..], &down, &["--json", "--allow-partial"]].concat());
    o.expect(0, "a node down, --allow-partial");
    assert_eq!(serde_json::from_str::<Vec<Value>>(&o.stdout).unwrap(), all, "the others' flows, all of them");
    let o = run_wirevault(&["flows", &dead_src, "--allow-partial"]);
    o.expect(1, "no node answering, even with --allow-partial");
    let o = run_wirevault(&[&["flows"][..], &down, &["--packets", "-w", s(&out), expr]].concat());
    o.expect(1, "--packets with a node down");
    assert_eq!(o.stderr.matches(&format!("node {named} ")).count(), 1, "named once: {}", o.stderr);
    run_ok(wirevault().arg("flows").args(&down).args(["--allow-partial", "--packets", "-w", s(&out), expr]));
    same(&frames(&out), &got, "the answer of the nodes that hold the flows");
});
