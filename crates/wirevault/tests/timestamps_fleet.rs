//! `timestamps --store URL...` / `--fleet`: each recorder's stamp statistics over the packets
//! its API answers, beside a local store's per-stream statistics (docs/fleet.md). A store of
//! one stream served over HTTP must give the statistics `timestamps STORE` gives for it, and
//! tshark's stamps for its packets; a node that is down is named, exit 1 unless --allow-partial.

use crate::util::*;
use serde_json::Value;
use std::path::Path;

/// A store of `n` frames from `stamps` (ns), recorded with `record --read`.
fn store_of(dir: &Path, name: &str, stamps: &[u64], nanos: bool) -> std::path::PathBuf {
    let frames: Vec<Frame> = stamps
        .iter()
        .enumerate()
        .map(|(i, &ts_ns)| {
            let data = make_frame(i as u32, Kind::Udp, 100);
            Frame { ts_ns, origlen: data.len() as u32, data }
        })
        .collect();
    let pcap = dir.join(format!("{name}.pcap"));
    write_pcap(&pcap, 1, 65535, nanos, &frames);
    let store = dir.join(name);
    run_ok(wirevault().args(["record", "-q", "-o"]).arg(&store).arg("--read").arg(&pcap));
    store
}

fn json_of(o: &Outcome) -> Value {
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}{}", o.stdout, o.stderr))
}

wvtest!(timestamps_over_recorders_are_each_nodes_own, |t| {
    let tmp = TempDir::new("stamps-fleet");
    let base = 1_700_000_000_000_000_000u64;
    // Node a: microsecond stamps about 1 ms apart. Node b: nanosecond stamps, two of them equal.
    let a_ts: Vec<u64> = (0..500).map(|i| base + i * 1_000_000 + (i % 7) * 1000).collect();
    let mut b_ts: Vec<u64> = (0..300).map(|i| base + 7 + i * 2_000_003).collect();
    b_ts[10] = b_ts[9];
    let (a, b) = (store_of(tmp.path(), "a", &a_ts, false), store_of(tmp.path(), "b", &b_ts, true));
    let (sa, sb) = (Served::start(&a, tmp.path(), &[]), Served::start(&b, tmp.path(), &[]));
    let (ua, ub) = (format!("http://{}", sa.addr), format!("http://{}", sb.addr));
    let o = run_wirevault(&["timestamps", "--json", "--store", &ua, "--store", &ub]);
    o.expect(0, "timestamps over two recorders");
    let v = json_of(&o);
    let inputs = v["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 2, "{}: {v}", t.name);
    for (inp, url) in inputs.iter().zip([&ua, &ub]) {
        assert_eq!((inp["kind"].as_str(), inp["path"].as_str()), (Some("node"), Some(url.as_str())), "{inp}");
    }
    let (na, nb) = (&inputs[0]["streams"][0], &inputs[1]["streams"][0]);
    assert_eq!((na["packets"].as_u64(), na["resolution_ns"].as_u64()), (Some(500), Some(1000)), "{na}");
    assert_eq!((nb["packets"].as_u64(), nb["resolution_ns"].as_u64()), (Some(300), Some(1)), "{nb}");
    assert_eq!((nb["same_as_previous"].as_u64(), nb["min_gap_ns"].as_u64()), (Some(1), Some(0)), "{nb}");
    // The same as the store read here, stream by stream (one stream: the same sequence).
    for (node, store) in [(na, &a), (nb, &b)] {
        let local = json_of(run_wirevault(&["timestamps", "--json", store.to_str().unwrap()]).expect(0, "local"));
        let st = &local["inputs"][0]["streams"][0];
        for k in
            ["packets", "first_ns", "last_ns", "resolution_ns", "min_nonzero_gap_ns", "median_gap_ns", "max_gap_ns"]
        {
            assert_eq!(node[k], st[k], "{k}: over HTTP {node}, local {st}");
        }
    }
    // The text names each node by its URL.
    let o = run_wirevault(&["timestamps", "--store", &ua, "--store", &ub]);
    assert!(o.stdout.contains(&format!("({ua}): 500 packets")), "{}", o.stdout);
    // A node down: named, exit 1; the other's statistics still given with --allow-partial.
    let o = run_wirevault(&["timestamps", "--json", "--store", &ua, "--store", "http://127.0.0.1:1", "--retries", "0"]);
    o.expect(1, "a node down");
    assert!(o.stderr.contains("127.0.0.1:1") && o.stderr.contains("--allow-partial"), "{}", o.stderr);
    let o = run_wirevault(&[
        "timestamps",
        "--json",
        "--store",
        &ua,
        "--store",
        "http://127.0.0.1:1",
        "--retries",
        "0",
        "--allow-partial",
    ]);
    o.expect(0, "a node down, --allow-partial");
    assert_eq!(json_of(&o)["inputs"].as_array().map(Vec::len), Some(1), "{}", o.stdout);
});
