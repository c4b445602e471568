//! Flow records in ClickHouse (docs/clickhouse.md), against a real Debian clickhouse-server
//! 18.16 that each test starts itself (its own config in a temporary directory, loopback
//! only, its own ports): known flows between two network namespaces reach the table as the
//! Parquet files hold them and as `tshark -z conv` counts them; a ClickHouse stopped during
//! a recording and started again, then a recorder killed with -9 (and a crash between an
//! acknowledged insert and its note) and restarted: every record arrives, none twice; and
//! bad input (nobody listening, a server that never answers, wrong credentials, a table of
//! other types, malformed flags): one sentence each, recording unharmed, records kept.

use crate::flows::{parquet_records, pyarrow_ready, tshark_conv, A, B, CLIENT, SERVER};
use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A clickhouse-server of the test's own: data, logs and config beneath `dir`, listening on
/// 127.0.0.1 only (in the namespace `ns` if given), with the users `default` (no password)
/// and `wv` (password `s3cret`).
struct ClickHouse {
    dir: PathBuf,
    ns: Option<String>,
    http: u16,
    child: Option<Child>,
}

/// A port nobody listens on now (the kernel's pick of a free one).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl ClickHouse {
    fn start(dir: &Path, ns: Option<&str>) -> ClickHouse {
        std::fs::create_dir_all(dir).unwrap();
        let (http, tcp) = (free_port(), free_port());
        let d = dir.display();
        std::fs::write(
            dir.join("config.xml"),
            format!(
                r#"<?xml version="1.0"?>
<yandex>
    <logger><level>warning</level><log>{d}/server.log</log><errorlog>{d}/server.err.log</errorlog></logger>
    <http_port>{http}</http_port>
    <tcp_port>{tcp}</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <path>{d}/data/</path>
    <tmp_path>{d}/tmp/</tmp_path>
    <user_files_path>{d}/user_files/</user_files_path>
    <format_schema_path>{d}/format_schemas/</format_schema_path>
    <users_config>{d}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <mark_cache_size>268435456</mark_cache_size>
</yandex>
"#
            ),
        )
        .unwrap();
        let user = |name: &str, pw: &str| {
            format!("<{name}><password>{pw}</password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></{name}>")
        };
        std::fs::write(
            dir.join("users.xml"),
            format!(
                "<?xml version=\"1.0\"?>\n<yandex><profiles><default></default></profiles><users>{}{}</users><quotas><default></default></quotas></yandex>\n",
                user("default", ""),
                user("wv", "s3cret")
            ),
        )
        .unwrap();
        let mut c = ClickHouse { dir: dir.to_path_buf(), ns: ns.map(str::to_string), http, child: None };
        c.run();
        c
    }

    fn command(&self, program: &str) -> Command {
        match &self.ns {
            Some(ns) => VethPair::exec(ns, program),
            None => Command::new(program),
        }
    }

    /// Starts the server (again) and waits until it answers.
    fn run(&mut self) {
        let child = self
            .command("clickhouse-server")
            .arg(format!("--config-file={}", self.dir.join("config.xml").display()))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.join("stderr")).unwrap())
            .spawn()
            .expect("start clickhouse-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.try_query("SELECT 1").as_deref() != Ok("1\n") {
            assert!(
                Instant::now() < deadline,
                "clickhouse-server did not answer within 30 s: {}",
                std::fs::read_to_string(self.dir.join("server.err.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Stops it (SIGTERM) and waits until it has ended.
    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: the pid is our own child (`ip netns exec` execs the server), not yet reaped.
            unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
            let _ = c.wait();
        }
    }

    fn url(&self, db: &str) -> String {
        format!("http://127.0.0.1:{}/{db}", self.http)
    }

    fn try_query(&self, sql: &str) -> Result<String, String> {
        let out = self
            .command("curl")
            .args(["-sS", "--data-binary", "@-"])
            .arg(format!("http://127.0.0.1:{}/?output_format_json_quote_64bit_integers=0", self.http))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().unwrap().write_all(sql.as_bytes())?;
                c.wait_with_output()
            })
            .map_err(|e| e.to_string())?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && !text.starts_with("Code: ") {
            Ok(text)
        } else {
            Err(format!("{text}{}", String::from_utf8_lossy(&out.stderr)))
        }
    }

    fn query(&self, sql: &str) -> String {
        self.try_query(sql).unwrap_or_else(|e| panic!("ClickHouse refused {sql}: {e}"))
    }

    /// The table's records as JSON objects with the Parquet files' column names (addresses as
    /// text, IPv4 without its ::ffff: prefix, as `parquet_records` gives them).
    fn records(&self, table: &str) -> Vec<Value> {
        let text = self.query(&format!(
            "SELECT {COLUMNS}, IPv6NumToString(client) AS client_text, IPv6NumToString(server) AS server_text FROM {table} FORMAT JSONEachRow"
        ));
        text.lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                let o = v.as_object_mut().unwrap();
                for k in ["client", "server"] {
                    let a = o.remove(&format!("{k}_text")).unwrap();
                    let a = a.as_str().unwrap();
                    o.insert(k.into(), Value::from(a.strip_prefix("::ffff:").unwrap_or(a)));
                }
                v
            })
            .collect()
    }

    /// Waits until `sql` answers `want`.
    fn wait_for(&self, sql: &str, want: &str) {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            let got = self.try_query(sql);
            if got.as_deref().map(str::trim) == Ok(want) {
                return;
            }
            assert!(Instant::now() < deadline, "{sql}: {got:?}, not {want}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for ClickHouse {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The table's columns a record has (all but `batch`, `batch_date` and the addresses, which
/// `records` gives as text).
const COLUMNS: &str =
    "vlans, ip_version, protocol, client_port, server_port, icmp_type, icmp_code, first_ns, last_ns, \
     to_server_packets, to_server_bytes, to_server_ip_bytes, to_server_tcp_flags, \
     to_client_packets, to_client_bytes, to_client_ip_bytes, to_client_tcp_flags, end_reason, node, stream, files";

/// Whether clickhouse-server is installed (CI must have it: scripts/install-deps.sh).
fn clickhouse_ready(test: &str) -> bool {
    let ok = have("clickhouse-server") && have("curl");
    if !ok {
        assert!(!in_ci(), "{test}: CI needs clickhouse-server and curl (scripts/install-deps.sh installs them)");
        eprintln!("SKIP {test}: no clickhouse-server or curl (run scripts/install-deps.sh)");
    }
    ok
}

/// Records sorted the same way, for comparing.
fn sorted(mut v: Vec<Value>) -> Vec<Value> {
    v.sort_by_key(|r| (r["first_ns"].as_u64(), r["client_port"].as_u64(), r["stream"].as_u64(), r.to_string()));
    v
}

/// `USER:PASSWORD` in a file of `dir`, for --clickhouse-auth.
fn auth_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn clickhouse_flows_agree_with_parquet_and_tshark() {
    let test = "clickhouse_flows_agree_with_parquet_and_tshark";
    if !(need_root(test)
        && need_tools(test, &["ip", "tshark", "python3", "ping"])
        && pyarrow_ready(test)
        && clickhouse_ready(test))
    {
        return;
    }
    let tmp = TempDir::new("flows-clickhouse");
    let pair = VethPair::new();
    host(&pair.ns_a, pair.if_a, A, B);
    host(&pair.ns_b, pair.if_b, B, A);
    let ch = ClickHouse::start(&tmp.join("clickhouse"), Some(&pair.ns_b));
    let auth = auth_file(tmp.path(), "auth", "wv:s3cret\n");
    let store = tmp.join("store");
    let sink = format!("clickhouse={}", ch.url("wvtest"));
    let mut rec = Recorder::start(
        Some(&pair.ns_b),
        &store,
        tmp.path(),
        &["-i", pair.if_b, "--buffer", "64M", "-q", "--flows-to", &sink, "--clickhouse-auth", auth.to_str().unwrap()],
    );
    rec.wait_ready();
    crate::flows::known_flows(&pair, SERVER, CLIENT, B.0);
    let out = rec.terminate();
    out.expect(0, "recorder stopped by SIGTERM");
    assert!(!out.stderr.contains("ClickHouse"), "no ClickHouse trouble: {}", out.stderr);

    // The table was made from flows.sql, and holds each record of the flow files once.
    let st = stats(&store);
    let parquet = parquet_records(&store);
    assert_eq!(parquet.len(), 4, "2 TCP, 1 UDP, 1 ICMP: {parquet:?}");
    assert_eq!(st["clickhouse_records_sent"].as_u64(), Some(4), "{st}");
    assert_eq!((st["clickhouse_batches_pending"].as_u64(), st["clickhouse_failures"].as_u64()), (Some(0), Some(0)));
    let types = ch.query(
        "SELECT name, type FROM system.columns WHERE database = 'wvtest' AND table = 'flows' AND name IN ('client', 'first_ns') ORDER BY name FORMAT TabSeparated",
    );
    assert_eq!(types, "client\tFixedString(16)\nfirst_ns\tUInt64\n");
    assert_eq!(
        ch.query(
            "SELECT count(), uniqExact(batch, first_ns, client_port, protocol) FROM wvtest.flows FORMAT TabSeparated"
        ),
        "4\t4\n"
    );
    // 10.77.0.1 as ClickHouse stores it: IPv4-mapped in 16 bytes.
    let hexes = ch.query("SELECT DISTINCT hex(client) FROM wvtest.flows ORDER BY 1 FORMAT TabSeparated");
    assert_eq!(hexes, "00000000000000000000FFFF0A4D0001\n", "the client is A (10.77.0.1)");
    let rows = ch.records("wvtest.flows");
    assert_eq!(sorted(rows.clone()), sorted(parquet.clone()), "ClickHouse's rows are the Parquet records");

    // The rows count as tshark's conversations do (packets and frame bytes per direction,
    // first time and duration).
    let pcap = &check_store(&store)[0].path;
    let first_ns = rows.iter().map(|r| r["first_ns"].as_u64().unwrap()).min().unwrap();
    for (kind, proto) in [("tcp", 6), ("udp", 17)] {
        let convs = tshark_conv(pcap, kind);
        assert_eq!(convs.len(), if kind == "tcp" { 2 } else { 1 }, "{kind}: {convs:?}");
        for c in &convs {
            let ep = |r: &Value, side: &str| format!("{}:{}", r[side].as_str().unwrap(), r[format!("{side}_port")]);
            let r = rows
                .iter()
                .find(|r| r["protocol"] == proto && ep(r, "client") == c.a && ep(r, "server") == c.b)
                .unwrap_or_else(|| panic!("no row of {c:?} (client first) in {rows:?}"));
            let dir =
                |d: &str| (r[format!("{d}_packets")].as_u64().unwrap(), r[format!("{d}_bytes")].as_u64().unwrap());
            assert_eq!((dir("to_server"), dir("to_client")), (c.a_to_b, c.b_to_a), "{kind} {c:?}: {r}");
            let (f, l) = (r["first_ns"].as_u64().unwrap(), r["last_ns"].as_u64().unwrap());
            assert!(((f - first_ns) as f64 / 1e9 - c.start).abs() < 1e-6, "{kind} start {c:?}: {r}");
            assert!(((l - f) as f64 / 1e9 - c.duration).abs() < 1e-4, "{kind} duration {c:?}: {r}");
        }
    }

    // `flows --clickhouse` answers from the table what `flows STORE` answers from the files.
    let flows_json = |args: &[&str]| -> Vec<Value> {
        let out = run_ok(VethPair::exec(&pair.ns_b, bin()).arg("flows").args(args).arg("--json"));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let from_files = flows_json(&[store.to_str().unwrap(), "udp", "or", "icmp"]);
    let from_table = flows_json(&[
        "--clickhouse",
        &ch.url("wvtest"),
        "--clickhouse-auth",
        auth.to_str().unwrap(),
        "udp",
        "or",
        "icmp",
    ]);
    assert_eq!(from_files.len(), 2);
    assert_eq!(sorted(from_table), sorted(from_files));
    // One host's flows through the hosts table (two rows a record, the view's), and as the
    // files answer.
    assert_eq!(ch.query("SELECT count() FROM wvtest.flows_hosts FORMAT TabSeparated"), "8\n");
    for expr in [&["host", "10.77.0.2"][..], &["host", "10.77.0.2", "and", "udp"], &["host", "10.9.9.9"]] {
        let from_files = flows_json(&[&[store.to_str().unwrap()][..], expr].concat());
        let ch_url = ch.url("wvtest");
        let from_table =
            flows_json(&[&["--clickhouse", &ch_url, "--clickhouse-auth", auth.to_str().unwrap()][..], expr].concat());
        assert_eq!(sorted(from_table), sorted(from_files), "flows {expr:?}");
    }

    // Found in ClickHouse, their packets fetched from the store: what tcpdump reads from the
    // stored capture for the same flows.
    let out = store.parent().unwrap().join("from-table.pcap");
    let (url, auth) = (ch.url("wvtest"), auth.to_str().unwrap());
    let st = store.to_str().unwrap();
    let args = ["--clickhouse", &url, "--clickhouse-auth", auth, "--store", st, "-w", out.to_str().unwrap(), "udp"];
    run_ok(VethPair::exec(&pair.ns_b, bin()).arg("flows").args(args));
    let (_, want) = tcpdump_frames(pcap, &["udp"], store.parent().unwrap());
    let got = read_capture(&out).1;
    let want: Vec<Frame> = want.iter().map(Rec::frame).collect();
    assert!(!want.is_empty());
    assert_same_frames(&want, &got, true, "flows --clickhouse --store -w: the UDP flow's packets");
}

/// Synthetic traffic with records every second (the active timeout) and files every ~0.6 s.
const BUSY: &[&str] = &["--file-size", "1M", "--flow-active-timeout", "1s", "-q", "--no-tune-warnings"];

#[test]
fn clickhouse_down_restart_and_kill_9_lose_and_double_nothing() {
    let test = "clickhouse_down_restart_and_kill_9_lose_and_double_nothing";
    if !(need_root(test) && pyarrow_ready(test) && clickhouse_ready(test)) {
        return;
    }
    let tmp = TempDir::new("flows-clickhouse-down");
    let mut ch = ClickHouse::start(&tmp.join("clickhouse"), None);
    let store = tmp.join("store");
    let sink = format!("clickhouse={}", ch.url("wvdown"));
    let mut args = vec!["--synthetic", "size=64,rate=20k,flows=50,duration=10m", "--flows-to", &sink];
    args.extend_from_slice(BUSY);
    let mut rec = Recorder::start(None, &store, tmp.path(), &args);
    rec.wait_counter("clickhouse_records_sent", 1);

    // ClickHouse goes away: the records wait in the store, recording goes on unslowed.
    ch.stop();
    let before = stats(&store);
    let deadline = Instant::now() + Duration::from_secs(20);
    while stats(&store)["clickhouse_failures"].as_u64().unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "no failed try counted: {}", stats(&store));
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(3));
    let during = stats(&store);
    assert!(during["clickhouse_batches_pending"].as_u64().unwrap() > 0, "files wait: {during}");
    assert!(during["clickhouse_records_pending"].as_u64().unwrap() > 0, "records wait: {during}");
    let got = during["received"].as_u64().unwrap() - before["received"].as_u64().unwrap();
    // At least 2 s of 20k packets/s between the two readings (stats.json is written once a second).
    assert!(got > 30_000, "recording went on at its rate while ClickHouse was down: {got} packets in > 3 s");

    // Back: what waited is sent; then a kill -9 in the middle of sending.
    ch.run();
    rec.wait_counter("clickhouse_records_sent", during["clickhouse_records_sent"].as_u64().unwrap() + 1);
    let deadline = Instant::now() + Duration::from_secs(40);
    while stats(&store)["clickhouse_batches_pending"].as_u64() != Some(0) {
        assert!(Instant::now() < deadline, "the waiting files were not sent: {}", stats(&store));
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: the pid is our own child, not yet reaped.
    unsafe { libc::kill(rec.pid() as libc::pid_t, libc::SIGKILL) };
    drop(rec);
    let log = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".err"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect::<String>();
    let said: Vec<&str> = log.lines().filter(|l| l.contains("ClickHouse at")).collect();
    assert!(said.iter().any(|l| l.contains("does not answer") && l.contains("recording goes on")), "{log}");
    assert!(said.iter().any(|l| l.contains("takes flow records again")), "{log}");

    // A crash between an insert ClickHouse acknowledged and its line in the cursor: the
    // cursor loses its last three lines, as if the recorder had died before writing them.
    let cursor = store.join("flows/clickhouse.cursor");
    let text = std::fs::read_to_string(&cursor).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 4 && lines[0].starts_with("spool "), "{text}");
    std::fs::write(&cursor, lines[..lines.len() - 3].iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();

    // The hosts table made anew by the restarted recorder (as beside a table of an older
    // wirevault): the rows already in the flows table are copied into it.
    ch.query("DROP TABLE wvdown.flows_hosts_mv");
    ch.query("DROP TABLE wvdown.flows_hosts");
    // Restarted on the same store: the rest goes, each record once.
    let mut args = vec!["--synthetic", "size=64,rate=20k,flows=50,duration=2s", "--flows-to", &sink];
    args.extend_from_slice(BUSY);
    Recorder::start(None, &store, tmp.path(), &args).wait(Duration::from_secs(60)).expect(0, "the second recording");
    let parquet = parquet_records(&store);
    assert!(parquet.len() > 200, "records every second of 50 flows: {}", parquet.len());
    let n = parquet.len();
    assert_eq!(
        ch.query(&format!(
            "SELECT count(), uniqExact(batch, {COLUMNS}, client, server) FROM wvdown.flows FORMAT TabSeparated"
        )),
        format!("{n}\t{n}\n"),
        "every record once"
    );
    assert_eq!(sorted(ch.records("wvdown.flows")), sorted(parquet));
    // Every record's client and server in the hosts table, those from before its copy too.
    assert_eq!(
        ch.query(
            "SELECT count() FROM wvdown.flows WHERE (client, first_ns) NOT IN (SELECT host, first_ns FROM wvdown.flows_hosts) \
             OR (server, first_ns) NOT IN (SELECT host, first_ns FROM wvdown.flows_hosts) FORMAT TabSeparated"
        ),
        "0\n",
        "the hosts table holds every record's addresses"
    );
    let st = stats(&store);
    assert_eq!(st["clickhouse_batches_pending"].as_u64(), Some(0), "{st}");
}

/// Records a second of synthetic traffic to `sink` (with `extra` flags) into a new store;
/// returns its stats and the recorder's stderr.
fn record_to(tmp: &Path, name: &str, sink: &str, extra: &[&str]) -> (Value, String) {
    let store = tmp.join(name);
    let start = Instant::now();
    let mut cmd = wirevault();
    cmd.args(["record", "-q", "--no-tune-warnings", "--synthetic", "size=64,rate=20k,flows=20,duration=1s"])
        .args(["--flow-active-timeout", "1s", "-o"])
        .arg(&store)
        .args(["--flows-to", sink])
        .args(extra);
    let out = run_ok(&mut cmd);
    // The inserter's last pass has at most 10 s after the recording.
    assert!(start.elapsed() < Duration::from_secs(20), "{name}: the recording took {:?}", start.elapsed());
    let st = stats(&store);
    assert_eq!(st["written"], st["received"], "{name}: recording unharmed: {st}");
    assert!(st["flows_written"].as_u64().unwrap() > 0, "{name}: {st}");
    check_store(&store);
    (st, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The recorder's sentences about ClickHouse.
fn said(err: &str) -> Vec<String> {
    err.lines().filter(|l| l.contains("ClickHouse")).map(str::to_string).collect()
}

#[test]
fn clickhouse_bad_targets_are_one_sentence() {
    let test = "clickhouse_bad_targets_are_one_sentence";
    if !(need_root(test) && clickhouse_ready(test)) {
        return;
    }
    let tmp = TempDir::new("flows-clickhouse-bad");

    // Nobody listens: one sentence, the records wait in the store.
    let port = free_port();
    let (st, err) = record_to(tmp.path(), "nobody", &format!("clickhouse=http://127.0.0.1:{port}/wv"), &[]);
    let s = said(&err);
    assert_eq!(s.len(), 1, "one sentence: {err}");
    assert!(
        s[0].contains(&format!("ClickHouse at http://127.0.0.1:{port}/wv/flows")) && s[0].contains("does not answer"),
        "{err}"
    );
    assert!(s[0].contains("recording goes on"), "{err}");
    assert_eq!(st["clickhouse_records_pending"], st["flows_written"], "every record kept: {st}");

    // A server that takes the connection and never answers: the recording is not held up.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let (st, _) = record_to(tmp.path(), "silent", &format!("clickhouse=http://127.0.0.1:{port}/wv"), &[]);
    assert_eq!(st["clickhouse_records_sent"], 0, "{st}");
    drop(silent);

    let ch = ClickHouse::start(&tmp.join("clickhouse"), None);
    // Wrong credentials: ClickHouse's own words in one sentence.
    let auth = auth_file(tmp.path(), "wrong", "wv:wrong\n");
    let (st, err) = record_to(
        tmp.path(),
        "password",
        &format!("clickhouse={}", ch.url("wv")),
        &["--clickhouse-auth", auth.to_str().unwrap()],
    );
    let s = said(&err);
    assert_eq!(s.len(), 1, "one sentence: {err}");
    assert!(s[0].contains("Wrong password for user wv") && s[0].contains("recording goes on"), "{err}");
    assert!(st["clickhouse_records_pending"].as_u64().unwrap() > 0, "{st}");

    // A table of other types: named in one sentence; once it is right, the kept records go.
    ch.query("CREATE DATABASE wvbad");
    let sql = include_str!("../../../packaging/clickhouse/flows.sql");
    assert!(sql.contains("client FixedString(16)"));
    ch.query(
        &sql.replacen("CREATE TABLE IF NOT EXISTS wirevault.flows", "CREATE TABLE wvbad.flows", 1)
            .replace("client FixedString(16)", "client String"),
    );
    let sink = format!("clickhouse={}", ch.url("wvbad"));
    let (st, err) = record_to(tmp.path(), "types", &sink, &[]);
    let s = said(&err);
    assert_eq!(s.len(), 1, "one sentence: {err}");
    assert!(s[0].contains("has column client as String, not FixedString(16)"), "{err}");
    assert!(s[0].contains("packaging/clickhouse/flows.sql") && s[0].contains("recording goes on"), "{err}");
    let kept = st["clickhouse_records_pending"].as_u64().unwrap();
    assert_eq!(Some(kept), st["flows_written"].as_u64(), "{st}");
    ch.query("DROP TABLE wvbad.flows");
    let store = tmp.join("types");
    let out = run_ok(
        wirevault()
            .args(["record", "-q", "--no-tune-warnings", "--synthetic", "size=64,count=10", "-o"])
            .arg(&store)
            .args(["--flows-to", &sink]),
    );
    assert!(said(&String::from_utf8_lossy(&out.stderr)).is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    let all = stats(&store)["flows_written"].as_u64().unwrap() + kept;
    ch.wait_for("SELECT count() FROM wvbad.flows", &all.to_string());
    let n = parquet_count(&store);
    assert_eq!(n, all, "the table has every record of the store's flow files");

    // Malformed flags: refused before anything is recorded, in one sentence.
    let missing = tmp.join("no-such-auth");
    for (i, bad) in [
        vec!["--flows-to", "clickhouse=https://127.0.0.1:8443/wv"],
        vec!["--flows-to", "clickhouse=http://127.0.0.1:8123/w;v"],
        vec!["--flows-to", "clickhouse=127.0.0.1"],
        vec!["--flows-to", "clickhouse=http://127.0.0.1:8123/wv", "--clickhouse-auth", missing.to_str().unwrap()],
        vec!["--clickhouse-auth", auth.to_str().unwrap()],
    ]
    .into_iter()
    .enumerate()
    {
        let store = tmp.join(format!("bad-{i}"));
        let out = wirevault()
            .args(["record", "-q", "--synthetic", "size=64,count=10", "-o"])
            .arg(&store)
            .args(&bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{bad:?}: one sentence: {err}");
        assert!(!err.contains("panicked"), "{bad:?}: {err}");
        assert!(!store.join("stats.json").exists(), "{bad:?}: nothing recorded");
    }
}

/// How many records the store's flow files hold (pyarrow reads their footers).
fn parquet_count(store: &Path) -> u64 {
    let script = r#"
import sys, glob, pyarrow.parquet as pq
print(sum(pq.ParquetFile(f).metadata.num_rows for f in glob.glob(sys.argv[1] + "/flows/**/*.parquet", recursive=True)))
"#;
    let out = run_ok(Command::new("python3").args(["-c", script]).arg(store));
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}
