//! IPFIX export of flow records (docs/ipfix.md): known flows between two network namespaces,
//! recorded with `--flows-to ipfix=udp://127.0.0.1:4739` to a real `nfcapd` (nfdump 1.7)
//! in the recorder's namespace; `nfdump -R` shows the same flows (addresses, ports, protocol,
//! packets and IP bytes per direction, first and last time to the ms) as the recorder's own
//! Parquet records, whose packets and frame bytes agree with `tshark -z conv`; tshark decodes
//! the IPFIX datagrams (captured by tcpdump on loopback) without a malformed field. And bad
//! input: a collector nobody runs, a malformed `--flows-to`.

use crate::util::*;
use serde_json::Value;
use std::process::{Child, Command, Stdio};

const A: (&str, &str) = ("10.78.0.1", "02:00:00:00:78:01");
const B: (&str, &str) = ("10.78.0.2", "02:00:00:00:78:02");

/// The server in B: a TCP echo on 7001 and a UDP echo on 7002 (answers twice the bytes).
const SERVER: &str = r#"
import socket, threading
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("10.78.0.2", 7001)); t.listen(8)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("10.78.0.2", 7002))
def udp():
    while True:
        d, a = u.recvfrom(2048); u.sendto(d * 2, a)
threading.Thread(target=udp, daemon=True).start()
print("ready", flush=True)
while True:
    c, _ = t.accept()
    while True:
        d = c.recv(4096)
        if not d: break
        c.sendall(d)
    c.close()
"#;

/// The client in A: two TCP connections with a clean close, three UDP exchanges.
const CLIENT: &str = r#"
import socket, time
for sizes in ((100, 700), (1200, 50, 300)):
    s = socket.create_connection(("10.78.0.2", 7001))
    for n in sizes:
        s.sendall(b"x" * n); got = 0
        while got < n: got += len(s.recv(4096))
    s.shutdown(socket.SHUT_WR); s.recv(10); s.close(); time.sleep(0.2)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.settimeout(5)
for n in (10, 300, 1000):
    u.sendto(b"q" * n, ("10.78.0.2", 7002)); u.recvfrom(4096)
time.sleep(0.3)
"#;

/// A tshark conversation: endpoint A, endpoint B, frames and bytes A to B, B to A.
type Conv = (String, String, (u64, u64), (u64, u64));

/// tshark's conversations of `kind`.
fn tshark_conv(pcap: &std::path::Path, kind: &str) -> Vec<Conv> {
    let out = run_ok(Command::new("tshark").arg("-r").arg(pcap).args(["-q", "-z", &format!("conv,{kind}")]));
    let text = String::from_utf8_lossy(&out.stdout);
    let mut convs = Vec::new();
    for line in text.lines().filter(|l| l.contains("<->")) {
        let w: Vec<&str> = line.split_whitespace().collect();
        assert!(w.len() == 14 && w[5] == "bytes" && w[8] == "bytes", "a line of tshark's conversations: {line}");
        let n = |i: usize| w[i].parse::<u64>().unwrap();
        convs.push((w[0].to_string(), w[2].to_string(), (n(6), n(7)), (n(3), n(4))));
    }
    convs
}

/// Ends a helper process (nfcapd, tcpdump) as its own tools expect: SIGTERM, then waits.
fn stop(mut c: Child) {
    // SAFETY: the pid is our own child, not yet reaped.
    unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
    let _ = c.wait();
}

/// One flow as both sides must show it: key, packets and IP bytes per direction, times in ms.
type Shown = (String, u64, String, u64, u64, (u64, u64), (u64, u64), String, String);

fn from_wirevault(r: &Value) -> Shown {
    let (proto, dport) = (r["protocol"].as_u64().unwrap(), r["server_port"].as_u64().unwrap());
    // nfdump shows ICMP's type and code as the destination port (type * 256 + code).
    let dport =
        if proto == 1 { r["icmp_type"].as_u64().unwrap() * 256 + r["icmp_code"].as_u64().unwrap() } else { dport };
    let d = |k: &str| (r[k]["packets"].as_u64().unwrap(), r[k]["ip_bytes"].as_u64().unwrap());
    let ms = |k: &str| r[k].as_str().unwrap()[..23].to_string();
    (
        r["client"].as_str().unwrap().into(),
        r["client_port"].as_u64().unwrap(),
        r["server"].as_str().unwrap().into(),
        dport,
        proto,
        d("to_server"),
        d("to_client"),
        ms("first"),
        ms("last"),
    )
}

fn from_nfdump(r: &Value) -> Shown {
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"));
    // ICMP: nfdump shows the type and code instead of the ports.
    let (sport, dport) =
        if n("proto") == 1 { (0, n("icmp_type") * 256 + n("icmp_code")) } else { (n("src_port"), n("dst_port")) };
    (
        r["src4_addr"].as_str().unwrap().into(),
        sport,
        r["dst4_addr"].as_str().unwrap().into(),
        dport,
        n("proto"),
        (n("in_packets"), n("in_bytes")),
        (n("out_packets"), n("out_bytes")),
        r["first"].as_str().unwrap().into(),
        r["last"].as_str().unwrap().into(),
    )
}

#[test]
fn ipfix_flows_agree_with_nfdump_and_tshark() {
    let test = "ipfix_flows_agree_with_nfdump_and_tshark";
    if !(need_root(test) && need_tools(test, &["ip", "tshark", "tcpdump", "python3", "ping", "nfcapd", "nfdump"])) {
        return;
    }
    let tmp = TempDir::new("flows-ipfix");
    let pair = VethPair::new();
    host(&pair.ns_a, pair.if_a, A, B);
    host(&pair.ns_b, pair.if_b, B, A);
    let nfdir = tmp.join("nfcapd");
    std::fs::create_dir_all(&nfdir).unwrap();
    let nfcapd = VethPair::exec(&pair.ns_b, "nfcapd")
        .args(["-b", "127.0.0.1", "-p", "4739", "-t", "3600", "-w"])
        .arg(&nfdir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start nfcapd");
    let ipfix_pcap = tmp.join("ipfix.pcap");
    let tcpdump = VethPair::exec(&pair.ns_b, "tcpdump")
        .args(["-i", "lo", "-U", "-w"])
        .arg(&ipfix_pcap)
        .args(["udp", "port", "4739"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start tcpdump");
    std::thread::sleep(std::time::Duration::from_secs(1));
    let store = tmp.join("store");
    let mut rec = Recorder::start(
        Some(&pair.ns_b),
        &store,
        tmp.path(),
        &["-i", pair.if_b, "--buffer", "64M", "-q", "--flows-to", "ipfix=udp://127.0.0.1:4739"],
    );
    rec.wait_ready();
    crate::flows::known_flows(&pair, SERVER, CLIENT, B.0);
    let out = rec.terminate();
    out.expect(0, "recorder stopped by SIGTERM");
    assert!(!out.stderr.contains("IPFIX"), "no IPFIX trouble: {}", out.stderr);
    std::thread::sleep(std::time::Duration::from_millis(500));
    stop(tcpdump);
    stop(nfcapd);

    let st = stats(&store);
    assert_eq!(st["ipfix_records_dropped"], 0, "{st}");
    let out = run_ok(wirevault().arg("flows").arg(&store).arg("--json"));
    let recs: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(recs.len(), 4, "2 TCP, 1 UDP, 1 ICMP: {recs:?}");
    assert_eq!(st["flows_written"].as_u64(), Some(4));

    // nfdump reads what nfcapd stored: the same flows.
    let out = run_ok(Command::new("nfdump").env("TZ", "UTC").arg("-R").arg(&nfdir).args(["-o", "json"]));
    let nf: Vec<Value> = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("nfdump's JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    let mut a: Vec<Shown> = recs.iter().map(from_wirevault).collect();
    let mut b: Vec<Shown> = nf.iter().map(from_nfdump).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "wirevault's records and nfdump's");

    // The records' packets and frame bytes are tshark's conversations.
    let pcap = &check_store(&store)[0].path;
    for (kind, proto) in [("tcp", 6), ("udp", 17)] {
        let convs = tshark_conv(pcap, kind);
        assert_eq!(convs.len(), if kind == "tcp" { 2 } else { 1 }, "{convs:?}");
        for (ea, eb, a_to_b, b_to_a) in &convs {
            let ep = |r: &Value, s: &str| format!("{}:{}", r[s].as_str().unwrap(), r[format!("{s}_port")]);
            let r = recs
                .iter()
                .find(|r| r["protocol"] == proto && ep(r, "client") == *ea && ep(r, "server") == *eb)
                .unwrap_or_else(|| panic!("no record of {ea} <-> {eb} (client first) in {recs:?}"));
            let d = |k: &str| (r[k]["packets"].as_u64().unwrap(), r[k]["bytes"].as_u64().unwrap());
            assert_eq!((d("to_server"), d("to_client")), (*a_to_b, *b_to_a), "{kind} {ea} <-> {eb}");
        }
    }

    // tshark decodes every IPFIX datagram, with no malformed field or expert error.
    let out = run_ok(Command::new("tshark").arg("-r").arg(&ipfix_pcap).args(["-d", "udp.port==4739,cflow", "-V"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Version: 10"), "IPFIX datagrams captured: {text}");
    let out = run_ok(Command::new("tshark").arg("-r").arg(&ipfix_pcap).args([
        "-d",
        "udp.port==4739,cflow",
        "-T",
        "fields",
        "-e",
        "cflow.template_id",
        "-e",
        "cflow.flowset_id",
    ]));
    let fields = String::from_utf8_lossy(&out.stdout);
    assert!(fields.contains("256"), "the IPv4 template and its data sets: {fields}\n{text}");
    for bad in ["Malformed", "Expert Info (Error", "Expert Info (Warning"] {
        assert!(!text.contains(bad), "tshark found {bad:?}:\n{text}");
    }
}

#[test]
fn ipfix_bad_collectors_are_one_sentence() {
    let test = "ipfix_bad_collectors_are_one_sentence";
    if !need_root(test) {
        return;
    }
    let tmp = TempDir::new("flows-ipfix-bad");
    // Nobody listens on 127.0.0.1:1: one sentence, and the recording is whole.
    let store = tmp.join("store");
    let out = run_ok(
        wirevault()
            .args(["record", "-q", "--synthetic", "size=64,duration=1s,rate=20k", "-o"])
            .arg(&store)
            .args(["--flows-to", "ipfix=udp://127.0.0.1:1"]),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let said: Vec<&str> =
        err.lines().filter(|l| l.contains("IPFIX collector udp://127.0.0.1:1 is not reachable")).collect();
    assert_eq!(said.len(), 1, "one sentence about the collector: {err}");
    assert!(said[0].contains("recording goes on"), "{err}");
    let st = stats(&store);
    assert_eq!(st["written"], st["received"], "{st}");
    assert!(st["flows_written"].as_u64().unwrap() > 0, "the flow files are written still: {st}");
    check_store(&store);

    // Nor on TCP: one sentence, the recording goes on.
    let store = tmp.join("store-tcp");
    let out = run_ok(
        wirevault()
            .args(["record", "-q", "--synthetic", "size=64,duration=1s,rate=20k", "-o"])
            .arg(&store)
            .args(["--flows-to", "ipfix=tcp://127.0.0.1:1"]),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    let said = err.lines().filter(|l| l.contains("IPFIX collector tcp://127.0.0.1:1 is not reachable")).count();
    assert_eq!(said, 1, "one sentence about the collector: {err}");
    let st = stats(&store);
    assert_eq!(st["written"], st["received"], "{st}");

    // A malformed value: refused before anything is recorded, in one sentence.
    for bad in ["ipfix=udp://127.0.0.1", "ipfix=http://127.0.0.1:4739", "netflow=udp://127.0.0.1:4739", "ipfix"] {
        let store = tmp.join(format!("bad-{}", bad.len()));
        let out = wirevault()
            .args(["record", "-q", "--synthetic", "size=64,count=10", "-o"])
            .arg(&store)
            .args(["--flows-to", bad])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{bad}: one sentence: {err}");
        assert!(err.contains("--flows-to") && !err.contains("panicked"), "{bad}: {err}");
        assert!(!store.join("stats.json").exists(), "{bad}: nothing recorded");
    }
}

/// A TCP collector: takes one connection on 127.0.0.1:PORT (printed), splits the stream into
/// IPFIX messages by their length and prints, as JSON, the templates' ids and how many data
/// records each template's sets held, and whether each message's sequence number counted
/// the records before it.
const TCP_COLLECTOR: &str = r#"
import socket, struct, json
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True)
c, _ = s.accept(); buf = b""
while True:
    d = c.recv(65536)
    if not d: break
    buf += d
templates, records, seq_ok, at, seen = [], {}, True, 0, 0
size = {256: 87, 257: 111}
while at < len(buf):
    ver, length, _, seq, _ = struct.unpack(">HHIII", buf[at:at + 16])
    assert ver == 10 and length >= 16
    seq_ok &= seq == seen
    p = at + 16
    while p < at + length:
        sid, slen = struct.unpack(">HH", buf[p:p + 4])
        if sid == 2:
            q = p + 4
            while q < p + slen:
                tid, n = struct.unpack(">HH", buf[q:q + 4]); templates.append(tid); q += 4
                for _ in range(n):
                    (ie, _l) = struct.unpack(">HH", buf[q:q + 4]); q += 8 if ie & 0x8000 else 4
        else:
            n = (slen - 4) // size[sid]; records[sid] = records.get(sid, 0) + n; seen += n
        p += slen
    at += length
print(json.dumps({"templates": templates, "records": records, "seq_ok": seq_ok}), flush=True)
"#;

#[test]
fn ipfix_over_tcp_sends_templates_once_and_every_record() {
    let test = "ipfix_over_tcp_sends_templates_once_and_every_record";
    if !need_tools(test, &["python3"]) {
        return;
    }
    let tmp = TempDir::new("flows-ipfix-tcp");
    let mut col = Command::new("python3")
        .args(["-c", TCP_COLLECTOR])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the collector");
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(col.stdout.take().unwrap()).lines();
    let port = lines.next().unwrap().unwrap();
    let store = tmp.join("store");
    let out = run_ok(
        wirevault()
            .args(["record", "-q", "--synthetic", "size=64,count=50k", "-o"])
            .arg(&store)
            .args(["--flows-to", &format!("ipfix=tcp://127.0.0.1:{port}")]),
    );
    assert!(!String::from_utf8_lossy(&out.stderr).contains("IPFIX"), "{}", String::from_utf8_lossy(&out.stderr));
    let got: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let _ = col.wait();
    let st = stats(&store);
    assert_eq!(got["templates"], serde_json::json!([256, 257]), "the templates once: {got}");
    assert_eq!(got["records"]["256"].as_u64(), st["flows_written"].as_u64(), "every record: {got} {st}");
    assert_eq!(got["seq_ok"], true, "{got}");
}
