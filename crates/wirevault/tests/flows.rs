//! Flow records of a live recording (docs/flows.md): known flows between two network
//! namespaces (TCP with a clean close and with a reset, UDP request/response, ICMP echo),
//! recorded with `--flows` and otherwise default options, agree with `tshark -q -z conv,tcp` / `-z conv,udp` on the
//! same packets (packets and bytes per direction, first time and duration), read from the
//! Parquet files by pyarrow; and `wirevault flows` shows the same.
//!
//! Every transfer stays below 10,000 bytes a direction: tshark 4.0 prints larger byte counts
//! rounded (`12 kB`), smaller ones exact.

use crate::util::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};

pub(crate) const A: (&str, &str) = ("10.77.0.1", "02:00:00:00:77:01");
pub(crate) const B: (&str, &str) = ("10.77.0.2", "02:00:00:00:77:02");

/// The server in B: a TCP echo on 7001 (closes after the client does) and a UDP echo on 7002.
pub(crate) const SERVER: &str = r#"
import socket, threading, sys
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("10.77.0.2", 7001)); t.listen(8)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("10.77.0.2", 7002))
def udp():
    while True:
        d, a = u.recvfrom(2048); u.sendto(d * 2, a)
threading.Thread(target=udp, daemon=True).start()
print("ready", flush=True)
while True:
    c, _ = t.accept()
    try:
        while True:
            d = c.recv(4096)
            if not d: break
            c.sendall(d)
    except OSError:
        pass
    c.close()
"#;

/// The client in A: a clean TCP close, a TCP reset (SO_LINGER 0), three UDP exchanges.
pub(crate) const CLIENT: &str = r#"
import socket, struct, time
def tcp(reset):
    s = socket.create_connection(("10.77.0.2", 7001))
    for n in (100, 700, 1200):
        s.sendall(b"x" * n); got = 0
        while got < n: got += len(s.recv(4096))
    if reset:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    else:
        s.shutdown(socket.SHUT_WR); s.recv(10)
    s.close()
tcp(False); time.sleep(0.2); tcp(True); time.sleep(0.2)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5)
for n in (10, 300, 1000):
    u.sendto(b"q" * n, ("10.77.0.2", 7002)); u.recvfrom(4096)
time.sleep(0.3)
"#;

/// Known flows between the pair's namespaces: `server` (a Python program that prints `ready`
/// once it listens, as [`SERVER`]) in B, `client` (as [`CLIENT`]) and two pings to `b` from A;
/// returns once they are over and the last frames had time to be captured.
pub(crate) fn known_flows(pair: &VethPair, server: &str, client: &str, b: &str) {
    let mut server = VethPair::exec(&pair.ns_b, "python3")
        .args(["-c", server])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::BufReader::new(server.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready");
    }
    run_ok(VethPair::exec(&pair.ns_a, "python3").args(["-c", client]));
    run_ok(VethPair::exec(&pair.ns_a, "ping").args(["-c", "2", "-i", "0.2", "-s", "56", b]));
    let _ = server.kill();
    let _ = server.wait();
    std::thread::sleep(std::time::Duration::from_millis(300));
}

/// One conversation of tshark's `-z conv,...`: endpoints as `addr:port`, then frames and bytes
/// from A to B and from B to A, relative start (s) and duration (s).
#[derive(Debug)]
pub(crate) struct Conv {
    pub(crate) a: String,
    pub(crate) b: String,
    pub(crate) a_to_b: (u64, u64),
    pub(crate) b_to_a: (u64, u64),
    pub(crate) start: f64,
    pub(crate) duration: f64,
}

/// tshark 4.0's conversation lines: `A <-> B  F_ba N bytes  F_ab N bytes  F N bytes  start  dur`.
pub(crate) fn tshark_conv(pcap: &std::path::Path, kind: &str) -> Vec<Conv> {
    let out = run_ok(Command::new("tshark").arg("-r").arg(pcap).args(["-q", "-z", &format!("conv,{kind}")]));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut convs = Vec::new();
    for line in text.lines().filter(|l| l.contains("<->")) {
        let w: Vec<&str> = line.split_whitespace().collect();
        // A <-> B f1 n1 unit f2 n2 unit f n unit start duration
        assert_eq!(w.len(), 14, "a line of tshark's conversations: {line}");
        for u in [5, 8, 11] {
            assert_eq!(w[u], "bytes", "tshark rounded a byte count (keep the test's transfers small): {line}");
        }
        let n = |i: usize| w[i].parse::<u64>().unwrap();
        convs.push(Conv {
            a: w[0].into(),
            b: w[2].into(),
            b_to_a: (n(3), n(4)),
            a_to_b: (n(6), n(7)),
            start: w[12].parse().unwrap(),
            duration: w[13].parse().unwrap(),
        });
    }
    convs
}

/// The flow files' records as pyarrow reads them, addresses as text.
pub(crate) fn parquet_records(store: &std::path::Path) -> Vec<Value> {
    let script = r#"
import sys, json, glob, ipaddress, pyarrow.parquet as pq
out = []
for f in sorted(glob.glob(sys.argv[1] + "/flows/**/*.parquet", recursive=True)):
    t = pq.read_table(f).drop_columns(["first_time", "last_time"])
    for r in t.to_pylist():
        for k in ("client", "server"):
            a = ipaddress.IPv6Address(r[k]); r[k] = str(a.ipv4_mapped or a)
        out.append(r)
print(json.dumps(out))
"#;
    let out = run_ok(Command::new("python3").args(["-c", script]).arg(store));
    serde_json::from_slice(&out.stdout).expect("pyarrow's JSON")
}

pub(crate) fn pyarrow_ready(test: &str) -> bool {
    let ok = Command::new("python3").args(["-c", "import pyarrow"]).status().is_ok_and(|s| s.success());
    if !ok {
        assert!(!in_ci(), "{test}: CI needs pyarrow (scripts/install-deps.sh installs it)");
        eprintln!("SKIP {test}: no pyarrow (run scripts/install-deps.sh)");
    }
    ok
}

#[test]
fn live_flows_agree_with_tshark_conversations() {
    live_flows("live_flows_agree_with_tshark_conversations", &[]);
}

/// The zero-copy path (pcapng files of the kernel's blocks) keeps the same records.
#[test]
fn zero_copy_flows_agree_with_tshark_conversations() {
    live_flows("zero_copy_flows_agree_with_tshark_conversations", &["--zero-copy", "--format", "pcapng"]);
}

/// The known flows recorded with `record --flows` and `extra`, checked against tshark,
/// `wirevault flows`, `--rebuild` and `repair`.
fn live_flows(test: &str, extra: &[&str]) {
    if !(need_root(test) && need_tools(test, &["ip", "tshark", "python3", "ping"]) && pyarrow_ready(test)) {
        return;
    }
    let tmp = TempDir::new("flows-live");
    let pair = VethPair::new();
    host(&pair.ns_a, pair.if_a, A, B);
    host(&pair.ns_b, pair.if_b, B, A);
    let store = tmp.join("store");
    let mut args = vec!["-i", pair.if_b, "--buffer", "64M", "-q", "--flows"];
    args.extend_from_slice(extra);
    let mut rec = Recorder::start(Some(&pair.ns_b), &store, tmp.path(), &args);
    rec.wait_ready();
    known_flows(&pair, SERVER, CLIENT, B.0);
    rec.terminate().expect(0, "recorder stopped by SIGTERM");

    let st = stats(&store);
    let recs = parquet_records(&store);
    assert_eq!(st["flows_written"].as_u64(), Some(recs.len() as u64), "stats.json counts the records: {st}");
    assert_eq!(st["flow_records_evicted"], 0);
    let pcaps: Vec<_> = check_store(&store).into_iter().map(|f| f.path).collect();
    assert_eq!(pcaps.len(), 1, "one pcap file");
    let first_ns = recs.iter().map(|r| r["first_ns"].as_u64().unwrap()).min().unwrap();

    // Each tshark conversation is one record, counted alike.
    let mut matched = 0;
    for (kind, proto) in [("tcp", 6), ("udp", 17)] {
        let convs = tshark_conv(&pcaps[0], kind);
        assert_eq!(convs.len(), if kind == "tcp" { 2 } else { 1 }, "{kind}: {convs:?}");
        for c in &convs {
            let ep = |r: &Value, side: &str| format!("{}:{}", r[side].as_str().unwrap(), r[format!("{side}_port")]);
            let r = recs
                .iter()
                .find(|r| {
                    r["protocol"] == proto
                        && ((ep(r, "client") == c.a && ep(r, "server") == c.b)
                            || (ep(r, "client") == c.b && ep(r, "server") == c.a))
                })
                .unwrap_or_else(|| panic!("no record of {c:?} in {recs:?}"));
            let dir =
                |d: &str| (r[format!("{d}_packets")].as_u64().unwrap(), r[format!("{d}_bytes")].as_u64().unwrap());
            let (c2s, s2c) = if ep(r, "client") == c.a { (c.a_to_b, c.b_to_a) } else { (c.b_to_a, c.a_to_b) };
            assert_eq!((dir("to_server"), dir("to_client")), (c2s, s2c), "{kind} {c:?}: {r}");
            let (f, l) = (r["first_ns"].as_u64().unwrap(), r["last_ns"].as_u64().unwrap());
            assert!(((f - first_ns) as f64 / 1e9 - c.start).abs() < 1e-6, "{kind} start {c:?}: {r}");
            assert!(((l - f) as f64 / 1e9 - c.duration).abs() < 1e-4, "{kind} duration {c:?}: {r}");
            assert_eq!(ep(r, "client"), format!("{}:{}", A.0, r["client_port"]), "the client sent first: {r}");
            matched += 1;
        }
    }
    // The two TCP connections: one closed, one reset.
    let mut ends: Vec<&str> =
        recs.iter().filter(|r| r["protocol"] == 6).map(|r| r["end_reason"].as_str().unwrap()).collect();
    ends.sort();
    assert_eq!(ends, ["fin", "rst"]);
    // The ping: two 98-byte frames each way.
    let icmp: Vec<_> = recs.iter().filter(|r| r["protocol"] == 1).collect();
    assert_eq!(icmp.len(), 1, "{recs:?}");
    let i = icmp[0];
    assert_eq!(
        (i["icmp_type"].as_u64(), i["to_server_packets"].as_u64(), i["to_client_packets"].as_u64()),
        (Some(8), Some(2), Some(2))
    );
    assert_eq!((i["to_server_bytes"].as_u64(), i["to_server_ip_bytes"].as_u64()), (Some(196), Some(168)));
    assert_eq!(recs.len(), matched + 1, "nothing else on the link: {recs:?}");

    // `wirevault flows` reads the same records.
    let out = run_ok(wirevault().arg("flows").arg(&store).arg("--json"));
    let shown: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown.len(), recs.len());
    let key = |r: &Value, pk: &str, bk: &str| {
        (r["first_ns"].as_u64(), r["client_port"].as_u64(), r[pk].as_u64(), r[bk].as_u64())
    };
    let mut a: Vec<_> = recs.iter().map(|r| key(r, "to_server_packets", "to_client_bytes")).collect();
    let mut b: Vec<_> = shown
        .iter()
        .map(|r| {
            (
                r["first_ns"].as_u64(),
                r["client_port"].as_u64(),
                r["to_server"]["packets"].as_u64(),
                r["to_client"]["bytes"].as_u64(),
            )
        })
        .collect();
    a.sort();
    b.sort();
    assert_eq!(a, b);
    let out = run_ok(wirevault().arg("flows").arg(&store).args(["--json", "udp", "and", "host", A.0]));
    let udp: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(udp.len(), 1);
    assert_eq!(udp[0]["server_port"], 7002);
    // A word a flow key cannot answer: exit 2, naming it.
    let out = wirevault().arg("flows").arg(&store).arg("tcp[13] & 2 != 0").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"tcp[13]\""));

    // --rebuild makes the same records from the packets (through the query layer).
    std::fs::remove_dir_all(store.join("flows")).unwrap();
    run_ok(wirevault().arg("flows").arg(&store).arg("--rebuild").stdout(Stdio::null()));
    let again = parquet_records(&store);
    let strip = |v: &[Value]| {
        let mut m: Vec<BTreeMap<String, Value>> = v
            .iter()
            .map(|r| {
                r.as_object()
                    .unwrap()
                    .iter()
                    .filter(|(k, _)| *k != "node")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .collect();
        m.sort_by_key(|r| (r["first_ns"].as_u64(), r["client_port"].as_u64()));
        m
    };
    assert_eq!(strip(&again), strip(&recs));

    // repair makes the flow file of a file that has none (as after a crash).
    std::fs::remove_dir_all(store.join("flows/stream-000")).unwrap();
    run_ok(wirevault().arg("repair").arg(&store));
    assert_eq!(strip(&parquet_records(&store)), strip(&recs));
}
