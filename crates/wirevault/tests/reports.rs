//! Every report the binary writes reads back into the struct of the library
//! that owns its schema, version included: disk-bench's JSON, plan's rows,
//! analyze's report, a recording's stats.json and the API's status answer.
//! A field renamed on one side only fails here, not in a reader's `unwrap_or`.

use crate::util::*;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;

/// `text` as a `T`, and `T` written again is the same JSON: no field was
/// left out of the struct or added by the writer alone.
fn read_back<T: DeserializeOwned + Serialize>(text: &str, what: &str) -> T {
    let parsed: T = serde_json::from_str(text).unwrap_or_else(|e| panic!("{what} does not read back ({e}): {text}"));
    let again = serde_json::to_value(&parsed).unwrap();
    let written: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(again, written, "{what}: the struct does not hold every field written");
    parsed
}

/// `wirevault disk-bench --json` into the result a store keeps and `record` reads.
fn disk_bench(dir: &Path) -> (String, wv_diskbench::report::Report) {
    std::fs::create_dir_all(dir).unwrap();
    let o = run_wirevault(&[
        "disk-bench",
        dir.to_str().unwrap(),
        "--files",
        "2",
        "--file-size",
        "8M",
        "--rate",
        "1mbps",
        "--json",
    ]);
    o.expect(0, "disk-bench --json");
    let r: wv_diskbench::report::Report = read_back(o.stdout.trim(), "disk-bench --json");
    (o.stdout, r)
}

#[test]
fn disk_bench_json_reads_back() {
    let tmp = TempDir::new("reports-disk-bench");
    let (text, r) = disk_bench(&tmp.join("vol"));
    assert_eq!(r.version, wv_diskbench::report::VERSION);
    assert_eq!(wv_diskbench::report::Report::parse(text.as_bytes()).as_ref(), Ok(&r));
    assert_eq!((r.files, r.file_size, r.per_file_bytes_per_s.len()), (2, 8 << 20, 2));
    let rate = r.rate.as_ref().expect("--rate was given");
    assert_eq!(rate.given.as_deref(), Some("1mbps"));
    // Another version is refused as such, before its fields are looked at.
    let v2 = text.replacen("\"version\":1", "\"version\":2", 1);
    assert_eq!(wv_diskbench::report::Report::parse(v2.as_bytes()), Err(wv_diskbench::report::ParseError::Version(2)));
}

#[test]
fn plan_rows_read_back() {
    let tmp = TempDir::new("reports-plan");
    let (bench, _) = disk_bench(&tmp.join("vol"));
    let bench_file = tmp.join("bench.json");
    std::fs::write(&bench_file, bench).unwrap();
    let capture = tmp.join("in.pcap");
    write_pcap(&capture, 1, 65535, true, &test_frames(200, 1_700_000_000_000_000_000));
    let o = run_wirevault(&[
        "plan",
        "--json",
        "--size",
        "64,1514",
        "--mix",
        "imix",
        "--from",
        capture.to_str().unwrap(),
        "--disk",
        "8T",
        "--bench",
        bench_file.to_str().unwrap(),
    ]);
    o.expect(0, "plan --json");
    let rows: Vec<wv_plan::report::Row> = read_back(&o.stdout, "plan --json");
    assert_eq!(rows.len(), 4, "{}", o.stdout);
    assert!(rows.iter().all(|r| r.version == wv_plan::report::VERSION && r.bench.is_some() && r.disk_bytes.is_some()));
    assert_eq!(rows.iter().map(|r| r.size).collect::<Vec<_>>(), [Some(64), Some(1514), None, None]);
    assert_eq!(rows[2].mix.as_deref(), Some("imix"));
    let from = rows[3].from.as_ref().expect("the --from row says where it comes from");
    assert_eq!(from.packets, 200);
}

#[test]
fn analyze_report_reads_back() {
    let tmp = TempDir::new("reports-analyze");
    let capture = tmp.join("in.pcap");
    write_pcap(&capture, 1, 65535, true, &test_frames(300, 1_700_000_000_000_000_000));
    let o = run_wirevault(&["analyze", "--json", capture.to_str().unwrap()]);
    o.expect(0, "analyze --json");
    let r: wv_analyze::Report = read_back(&o.stdout, "analyze --json");
    assert_eq!(r.version, wv_analyze::REPORT_VERSION);
    assert_eq!(r.frames, 300);
}

#[test]
fn stats_json_and_status_read_back() {
    let tmp = TempDir::new("reports-stats");
    let store = tmp.join("store");
    record_synthetic(&store, "size=200,count=1000");
    let text = std::fs::read_to_string(store.join("stats.json")).unwrap();
    let st: wv_record::RecordingStats = read_back(text.trim_end(), "stats.json");
    assert_eq!(st.version, wv_record::stats::VERSION);
    assert_eq!(wv_record::RecordingStats::parse(text.trim_end()).as_ref(), Ok(&st));
    assert_eq!(st.total.written, 1000);
    if !need_tools("stats_json_and_status_read_back (status)", &["curl"]) {
        return;
    }
    let served = Served::start(&store, tmp.path(), &[]);
    let reply = Http::new(&format!("http://{}", served.addr)).get("/api/v1/status", &[]);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let status: wv_serve::Status = read_back(&reply.text(), "/api/v1/status");
    assert_eq!(status.version, env!("CARGO_PKG_VERSION"));
    assert_eq!(status.last_recording.as_ref(), Some(&st), "status tells the stats.json the recording left");
}
