//! The flow files as another reader sees them: pyarrow (from PyPI, as DuckDB and pandas read
//! Parquet through it or alike) reads the columns with the types docs/flows.md gives them.

use std::process::Command;
use wv_flows::record::{Direction, EndReason, FlowRecord, IpAddr16};

/// pyarrow can be imported, or the test skips (fails under CI: install-deps.sh installs it).
fn have_pyarrow() -> bool {
    let ok = Command::new("python3").args(["-c", "import pyarrow"]).status().is_ok_and(|s| s.success());
    if !ok {
        assert!(!wv_testkit::in_ci(), "CI needs pyarrow (scripts/install-deps.sh installs it)");
        eprintln!("SKIP pyarrow_reads_the_columns: no pyarrow (run scripts/install-deps.sh)");
    }
    ok
}

#[test]
fn pyarrow_reads_the_columns() {
    if !have_pyarrow() {
        return;
    }
    let dir = wv_testkit::TempDir::new("flows-pyarrow");
    let rec = FlowRecord {
        vlans: vec![100],
        client: IpAddr16::v4([192, 0, 2, 1]),
        server: IpAddr16::v4([192, 0, 2, 2]),
        protocol: 17,
        client_port: 5353,
        server_port: 53,
        first_ns: 1_764_633_600_123_456_789,
        last_ns: 1_764_633_601_000_000_000,
        to_server: Direction { packets: 2, frame_bytes: 200, ip_bytes: 172, tcp_flags: 0 },
        to_client: Direction { packets: 1, frame_bytes: 90, ip_bytes: 76, tcp_flags: 0 },
        end: EndReason::Idle,
        node: "lab-1".into(),
        stream: 0,
        files: vec!["stream-000/x.pcap".into()],
        ..FlowRecord::default()
    };
    let d = wv_sys::fs::Dir::open(dir.path()).unwrap();
    let rel = wv_flows::parquet::write_in(&d, "stream-000/x.pcap", &[rec]).unwrap();
    assert_eq!(rel, "flows/stream-000/x.pcap.parquet");
    let script = r#"
import sys, json, ipaddress, pyarrow.parquet as pq
t = pq.read_table(sys.argv[1])
# Nanosecond timestamps become Python objects only through pandas: read them as integers.
r = t.drop_columns(["first_time", "last_time"]).to_pylist()[0]
print(json.dumps({
  "types": {f.name: str(f.type) for f in t.schema},
  "client": str(ipaddress.IPv6Address(r["client"]).ipv4_mapped),
  "vlans": r["vlans"], "ports": [r["client_port"], r["server_port"]],
  "first_ns": r["first_ns"], "first_time": t.column("first_time").cast("int64")[0].as_py(),
  "bytes": [r["to_server_bytes"], r["to_client_bytes"]], "end": r["end_reason"], "files": r["files"],
}))
"#;
    let out = Command::new("python3").args(["-c", script]).arg(dir.join(&rel)).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &v["types"];
    assert_eq!(t["client"], "fixed_size_binary[16]");
    assert_eq!(t["ip_version"], "uint8");
    assert_eq!(t["first_ns"], "uint64");
    assert_eq!(t["first_time"], "timestamp[ns, tz=UTC]");
    assert_eq!(t["client_port"], "uint16");
    assert_eq!(t["vlans"], "list<item: uint16>");
    assert_eq!(v["client"], "192.0.2.1");
    assert_eq!(v["vlans"], serde_json::json!([100]));
    assert_eq!(v["ports"], serde_json::json!([5353, 53]));
    assert_eq!(v["first_ns"], 1_764_633_600_123_456_789u64);
    assert_eq!(v["first_time"], 1_764_633_600_123_456_789u64);
    assert_eq!(v["bytes"], serde_json::json!([200, 90]));
    assert_eq!(v["end"], "idle");
    assert_eq!(v["files"], serde_json::json!(["stream-000/x.pcap"]));
}
