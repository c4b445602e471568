//! `wirevault plan` through the real binary: the Ethernet check numbers of
//! issue 14 for every link speed and header format (hand-computed), the
//! JSON fields, `--from` a capture file compared with tshark's frame
//! lengths and `--from` a store recorded with the synthetic source, the
//! disk-bench arithmetic, and bad input (one sentence, exit 2).

use crate::util::*;
use serde_json::Value;
use std::collections::BTreeMap;

fn plan_json(args: &[&str]) -> Vec<Value> {
    let mut a = vec!["plan", "--json"];
    a.extend_from_slice(args);
    let o = run_wirevault(&a);
    o.expect(0, &format!("plan {args:?}"));
    serde_json::from_str::<Value>(&o.stdout)
        .unwrap_or_else(|e| panic!("plan {args:?}: not JSON ({e}): {}", o.stdout))
        .as_array()
        .expect("a JSON array")
        .clone()
}

fn num(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("no number {k} in {v}"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn plan_check_numbers_of_the_issue() {
    // 64-byte frames with FCS at 10 Gb/s: 10^10 / 8 / 84 = 14,880,952 pps.
    let r = &plan_json(&["--size", "64", "--size-includes-fcs"])[0];
    assert_eq!(num(r, "pps").round(), 14_880_952.0);
    assert_eq!(r["size"], 64);
    assert_eq!(r["size_includes_fcs"], true);
    assert_eq!(num(r, "frame_bytes"), 60.0);
    assert_eq!(num(r, "wire_bytes"), 84.0);
    // 1514 without FCS: 812,744 pps; pcap storage 812,744 x 1530 x 8 = 9.948 Gb/s.
    let r = &plan_json(&["--size", "1514", "--link", "10gbps"])[0];
    assert_eq!(num(r, "pps").round(), 812_744.0);
    assert_eq!((num(&r["storage_bps"], "pcap") / 1e6).round(), 9_948.0);
    assert!(close(num(r, "wire_bps"), 10e9));
}

#[test]
fn plan_every_link_speed_and_format_by_hand() {
    // pps = link / 8 / (size + 24); pcap/pcap-ns: +16, pcapng: 32 + pad4, RAW: +12.
    for (link, bps) in [("1g", 1e9), ("10Gb/s", 10e9), ("25gbps", 25e9), ("40GbE", 40e9), ("100g", 100e9)] {
        let rows = plan_json(&["--link", link, "--size", "60,61,1514", "--no-index"]);
        assert_eq!(rows.len(), 3);
        for (r, (size, pcapng)) in rows.iter().zip([(60.0, 92.0), (61.0, 96.0), (1514.0, 1548.0)]) {
            let pps = bps / 8.0 / (size + 24.0);
            assert!(close(num(r, "pps"), pps), "{link} {size}: {}", r["pps"]);
            assert!(close(num(r, "link_bps"), bps));
            assert!(close(num(r, "frame_bps"), pps * size * 8.0));
            let st = &r["storage_bps"];
            assert!(close(num(st, "pcap"), pps * (size + 16.0) * 8.0), "{link} {size} pcap");
            assert!(close(num(st, "pcap_ns"), pps * (size + 16.0) * 8.0), "{link} {size} pcap_ns");
            assert!(close(num(st, "pcapng"), pps * pcapng * 8.0), "{link} {size} pcapng");
            assert!(close(num(st, "raw"), pps * (size + 12.0) * 8.0), "{link} {size} raw");
            // --no-index: the store is the pcap records alone.
            assert!(close(num(r, "store_bytes_per_s"), pps * (size + 16.0)));
            assert!(close(num(r, "bytes_per_day"), pps * (size + 16.0) * 86400.0));
        }
    }
}

#[test]
fn plan_default_table_and_mixes() {
    let o = run_wirevault(&["plan"]);
    o.expect(0, "plan");
    for want in ["14,880,952", "812,744", "9.948", "without FCS"] {
        assert!(o.stdout.contains(want), "plan's table lacks {want}:\n{}", o.stdout);
    }
    let rows = plan_json(&["--mix", "imix", "--mix", "64:7,594:4,1518:1", "--size-includes-fcs"]);
    assert_eq!(rows.len(), 2);
    // The same mix both ways: IMIX is 60/590/1514 without FCS = 64/594/1518 with.
    // pps = 10^10 / 8 / ((7*84 + 4*614 + 1538) / 12)
    for r in &rows {
        assert!(close(num(r, "pps"), 10e9 / 8.0 / (4582.0 / 12.0)), "{r}");
    }
    // A snapshot length cuts the records, not the wire.
    let r = &plan_json(&["--size", "1514", "--snaplen", "128", "--format", "pcapng", "--no-index"])[0];
    assert_eq!(num(r, "pps").round(), 812_744.0);
    assert!(close(num(r, "store_bytes_per_s"), 10e9 / 8.0 / 1538.0 * 160.0));
}

#[test]
fn plan_disk_and_bench() {
    let dir = TempDir::new("plan-bench");
    let bench = dir.join("bench.json");
    // 1 GB/s volumes with a 2-second dip to 0.5 GB/s; worst 10 s window 0.8 GB/s.
    let mut series = vec![1.0e9; 20];
    series[5] = 0.5e9;
    series[6] = 0.5e9;
    let body = serde_json::json!({"version": 1, "mean_bytes_per_s": 1.0e9, "ci99_bytes_per_s": [0.95e9, 1.05e9],
        "worst_10s_bytes_per_s": 0.8e9, "per_second_bytes": series, "dir": "/data", "mode": "direct"});
    std::fs::write(&bench, body.to_string()).unwrap();
    // 1514 B, pcap without index: 812,743.8 x 1530 = 1.2435 GB/s -> 2 volumes at the mean,
    // 2 at the worst 10 s (1.2435 / 0.8 = 1.55); each volume takes 0.62 GB/s, so the dip
    // (0.5 GB/s for 2 s) leaves 2 x 0.12 GB per volume, 2 volumes: 0.487 GB.
    let r = &plan_json(&["--size", "1514", "--no-index", "--disk", "8TB", "--bench", bench.to_str().unwrap()])[0];
    let rate = 10e9 / 8.0 / 1538.0 * 1530.0;
    assert!(close(num(r, "disk_lasts_s"), 8e12 / rate));
    let b = &r["bench"];
    assert_eq!(b["volumes_at_throughput"], 2);
    assert_eq!(b["volumes_at_worst_10s"], 2);
    assert_eq!(b["sustained"], true);
    let per = rate / 2.0;
    assert!((num(b, "buffer_bytes") - 2.0 * 2.0 * (per - 0.5e9)).abs() < 1.0, "{b}");
    assert!(num(b, "record_buffer_bytes") >= num(b, "buffer_bytes") * 1.5);
    // The table says the same.
    let o = run_wirevault(&["plan", "--size", "1514", "--disk", "8T", "--bench", bench.to_str().unwrap()]);
    o.expect(0, "plan --bench table");
    assert!(o.stdout.contains("disk lasts") && o.stdout.contains("2/2"), "{}", o.stdout);
    // The files' mean rate is above what the run wrote over its time (they
    // share it): volumes are counted from the latter, as disk-bench judges a
    // rate sustained. 1.2435 GB/s against 1.30 (files' mean) and 1.20 (run).
    let body = serde_json::json!({"version": 1, "overall_bytes_per_s": 1.2e9, "mean_bytes_per_s": 1.3e9,
        "ci99_bytes_per_s": [1.25e9, 1.35e9], "worst_10s_bytes_per_s": 1.1e9, "per_second_bytes": vec![1.2e9; 20],
        "dir": "/data", "mode": "direct"});
    std::fs::write(&bench, body.to_string()).unwrap();
    let r = &plan_json(&["--size", "1514", "--no-index", "--bench", bench.to_str().unwrap()])[0];
    assert_eq!(r["bench"]["volumes_at_throughput"], 2, "{r}");
    assert_eq!(r["bench"]["sustained"], true, "{r}");
    // A real disk-bench run shorter than 10 s has no worst 10-second window
    // (null): plan takes it and says that figure is unknown.
    let vol = dir.join("vol");
    std::fs::create_dir_all(&vol).unwrap();
    let db = run_wirevault(&["disk-bench", vol.to_str().unwrap(), "--files", "2", "--file-size", "16M", "--json"]);
    db.expect(0, "disk-bench --json");
    let short = dir.join("short.json");
    std::fs::write(&short, &db.stdout).unwrap();
    let r = &plan_json(&["--size", "1514", "--bench", short.to_str().unwrap()])[0];
    assert!(r["bench"]["worst_10s_bytes_per_s"].is_null() && r["bench"]["volumes_at_worst_10s"].is_null(), "{r}");
    let o = run_wirevault(&["plan", "--size", "1514", "--bench", short.to_str().unwrap()]);
    o.expect(0, "plan --bench of a short run");
    assert!(o.stdout.contains("worst 10 s unknown"), "{}", o.stdout);
    // Another version is refused with a sentence.
    std::fs::write(&bench, body.to_string().replace("\"version\":1", "\"version\":2")).unwrap();
    let o = run_wirevault(&["plan", "--bench", bench.to_str().unwrap()]);
    o.expect(2, "plan --bench of version 2");
    assert!(o.stderr.contains("version 2") && o.stderr.lines().count() == 1, "{}", o.stderr);
}

#[test]
fn plan_bad_input_is_one_sentence() {
    let dir = TempDir::new("plan-bad");
    let not_json = dir.join("x.json");
    std::fs::write(&not_json, "hello").unwrap();
    let empty = dir.join("empty.pcap");
    write_pcap(&empty, 1, 65535, true, &[]);
    for args in [
        vec!["plan", "--link", "fast"],
        vec!["plan", "--link", "10GB/s"],
        vec!["plan", "--link", "0"],
        vec!["plan", "--size", "13"],
        vec!["plan", "--size", "17", "--size-includes-fcs"],
        vec!["plan", "--size", "70000"],
        vec!["plan", "--size", "abc"],
        vec!["plan", "--size", ","],
        vec!["plan", "--mix", "64"],
        vec!["plan", "--mix", "64:0"],
        vec!["plan", "--disk", "lots"],
        vec!["plan", "--snaplen", "0"],
        vec!["plan", "--bench", not_json.to_str().unwrap()],
        vec!["plan", "--bench", "/nonexistent/bench.json"],
        vec!["plan", "--from", "/nonexistent/capture.pcap"],
        vec!["plan", "--from", not_json.to_str().unwrap()],
        vec!["plan", "--from", empty.to_str().unwrap()],
        vec!["plan", "--from", empty.to_str().unwrap(), "--from-time", "yesterday-ish"],
    ] {
        let o = run_wirevault(&args);
        // A file that is not there or not a capture: the host's matter, exit 1 (issue 44).
        let host =
            args.iter().any(|a| a.starts_with("/nonexistent")) || (args[1] == "--from" && args[2].ends_with(".json"));
        o.expect(if host { 1 } else { 2 }, &format!("{args:?}"));
        assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// Frame lengths as tshark counts them.
fn tshark_lengths(file: &std::path::Path) -> BTreeMap<u64, u64> {
    let o = std::process::Command::new("tshark")
        .args(["-n", "-r"])
        .arg(file)
        .args(["-T", "fields", "-e", "frame.len"])
        .output()
        .expect("run tshark");
    assert!(o.status.success(), "tshark: {}", String::from_utf8_lossy(&o.stderr));
    let mut m = BTreeMap::new();
    for l in String::from_utf8_lossy(&o.stdout).lines().filter(|l| !l.is_empty()) {
        *m.entry(l.trim().parse::<u64>().unwrap()).or_default() += 1;
    }
    m
}

/// The `from` row's distribution: original length -> packets (from its classes).
fn classes(r: &Value) -> BTreeMap<u64, u64> {
    let mut m = BTreeMap::new();
    for c in r["classes"].as_array().unwrap() {
        *m.entry(c["frame"].as_u64().unwrap()).or_default() += c["weight"].as_f64().unwrap() as u64;
    }
    m
}

wvtest!(plan_from_a_capture_file_matches_tshark, needs = ["tshark"], |t| {
    let dir = TempDir::new("plan-from-file");
    let file = dir.join("known.pcap");
    // Known sizes: 300 frames of 60..9000 bytes, some cut by a 1000-byte snap length.
    let mut frames = test_frames(300, 1_700_000_000_000_000_000);
    for f in frames.iter_mut().filter(|f| f.data.len() > 1000) {
        f.data.truncate(1000);
    }
    write_pcap(&file, 1, 1000, true, &frames);
    let r = &plan_json(&["--from", file.to_str().unwrap()])[0];
    let want = tshark_lengths(&file);
    assert_eq!(classes(r), want, "plan's distribution against tshark's frame.len");
    assert_eq!(r["from"]["packets"], 300);
    // Storage uses the captured lengths, the wire the original ones (hand-computed here).
    let n = frames.len() as f64;
    let wire: f64 = frames.iter().map(|f| (f.origlen.max(60) + 24) as f64).sum::<f64>() / n;
    let rec: f64 = frames.iter().map(|f| (f.data.len() + 16) as f64).sum::<f64>() / n;
    let pps = 10e9 / 8.0 / wire;
    assert!(close(num(r, "pps"), pps));
    assert!(close(num(&r["storage_bps"], "pcap"), pps * rec * 8.0));
    // A time range: the first 100 frames (1 ms apart).
    let r = &plan_json(&["--from", file.to_str().unwrap(), "--to-time", "1700000000.1"])[0];
    assert_eq!(r["from"]["packets"], 100);
});

wvtest!(plan_from_a_synthetic_store, needs = ["tshark"], |t| {
    let dir = TempDir::new("plan-from-store");
    let store = dir.join("store");
    run_wirevault(&["record", "--synthetic", "size=imix,count=1200", "-o", store.to_str().unwrap(), "-q"])
        .expect(0, "record --synthetic imix");
    let r = &plan_json(&["--from", store.to_str().unwrap()])[0];
    assert_eq!(classes(r), BTreeMap::from([(60, 700), (590, 400), (1514, 100)]));
    // The same as tshark counts in the stored files.
    let mut want: BTreeMap<u64, u64> = BTreeMap::new();
    for e in catalog(&store) {
        for (len, n) in tshark_lengths(&store.join(e["file"].as_str().unwrap())) {
            *want.entry(len).or_default() += n;
        }
    }
    assert_eq!(classes(r), want);
    // Its own indexes were measured.
    let measured = r["from"]["index_bytes_per_packet_measured"].as_f64().expect("the store's indexes measured");
    assert!(measured > 0.0 && close(num(r, "index_bytes_per_packet"), measured));
});

/// `--link 10` (a number without a unit: 10 bit/s, planned as a 0.000 Gb/s link before) is
/// refused as `disk-bench --rate 10` is, with the units a rate takes; a link speed's own
/// forms (10g, 10gbps, 40GbE) still work.
#[test]
fn plan_link_rate_without_a_unit_is_refused() {
    for bare in ["10", "1000000000", "2.5"] {
        let o = run_wirevault(&["plan", "--link", bare]);
        o.expect(2, &format!("--link {bare}"));
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
        assert!(o.stderr.contains("no unit") && o.stderr.contains("bits per second"), "{}", o.stderr);
        assert!(o.stderr.contains("10gbps") && o.stderr.contains("bytes"), "{}", o.stderr);
        assert!(o.stdout.is_empty());
    }
    let o = run_wirevault(&["disk-bench", "/nonexistent-wv", "--rate", "10"]);
    o.expect(2, "disk-bench --rate 10");
    assert!(o.stderr.contains("bits per second"), "{}", o.stderr);
    for ok in ["10g", "10gbps", "40GbE", "100Mbit/s"] {
        plan_json(&["--link", ok, "--size", "64"]);
    }
}

/// The table's first line says what a size counts and what is added on the wire, and with
/// `--size-includes-fcs` that the FCS is counted once (in the size, not added again) and
/// not stored.
#[test]
fn plan_table_header_says_what_the_fcs_adds() {
    let header = |args: &[&str]| {
        let o = run_wirevault(&[&["plan", "--size", "1514"], args].concat());
        o.expect(0, &format!("{args:?}"));
        o.stdout.lines().next().unwrap_or_default().to_owned()
    };
    let without = header(&[]);
    assert!(without.contains("without FCS") && without.contains("+ 4 FCS + 8 preamble/SFD + 12 gap"), "{without}");
    let with = header(&["--size-includes-fcs"]);
    assert!(with.contains("FCS counted once"), "{with}");
    assert!(!with.contains("+ 4 FCS"), "the FCS added twice: {with}");
    assert!(with.contains("+ 8 preamble/SFD + 12 gap") && with.contains("stored without"), "{with}");
}
