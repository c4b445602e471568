//! The HTTP API against its oracles: a store recorded live in a network
//! namespace is queried over HTTP with a set of time ranges and filters;
//! every pcap equals `wirevault query -w` for the same arguments byte for
//! byte, and the packets `tcpdump -r` selects from the store's files; every
//! count equals `wirevault query --count`. The same while `record --listen`
//! is writing (the closed files and the published prefix of the open one, as
//! the CLI) and at rest under `wirevault
//! serve`. `/metrics` passes `promtool check metrics`, and the counters of
//! `/metrics`, `/api/v1/status` and `stats.json` agree and add up. A
//! hundred clients at once all get an answer, and capture drops nothing.

use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const TOOLS: &[&str] = &["ip", "tcpreplay", "tcpdump", "curl", "promtool"];
const N: u32 = 3000;

/// One selection: name, from, to, filter, limit.
type Case = (String, Option<u64>, Option<u64>, String, Option<u64>);

/// The selections every check runs.
fn cases(ts: &[u64]) -> Vec<Case> {
    let t = |i: usize| ts[i.min(ts.len() - 1)];
    vec![
        ("everything".into(), None, None, String::new(), None),
        ("udp".into(), None, None, "udp".into(), None),
        ("vlan".into(), None, None, "vlan".into(), None),
        ("dns port".into(), None, None, "port 53".into(), None),
        ("big frames".into(), None, None, "greater 4000".into(), None),
        // Edges on stored packets: the one at `from` is in, the one at `to` out.
        ("range".into(), Some(t(300)), Some(t(900)), String::new(), None),
        ("range udp".into(), Some(t(100)), Some(t(2000)), "udp or vlan".into(), None),
        ("limit".into(), Some(t(50)), None, "not udp".into(), Some(25)),
    ]
}

fn cli_args(store: &Path, from: Option<u64>, to: Option<u64>, limit: Option<u64>) -> Vec<String> {
    let mut v = vec![store.display().to_string()];
    if let Some(f) = from {
        v.extend(["--from".into(), time_arg(f)]);
    }
    if let Some(t) = to {
        v.extend(["--to".into(), time_arg(t)]);
    }
    if let Some(l) = limit {
        v.extend(["--limit".into(), l.to_string()]);
    }
    v
}

fn params(from: Option<u64>, to: Option<u64>, filter: &str, limit: Option<u64>) -> Vec<(&'static str, String)> {
    let mut p = vec![];
    if let Some(f) = from {
        p.push(("from", time_arg(f)));
    }
    if let Some(t) = to {
        p.push(("to", time_arg(t)));
    }
    if !filter.is_empty() {
        p.push(("filter", filter.to_string()));
    }
    if let Some(l) = limit {
        p.push(("limit", l.to_string()));
    }
    p
}

/// The stored capture files of the store: the catalogued ones in catalog order, then copies
/// of the prefix of each file being written that the recorder published (in `tmp`).
fn stored_files(store: &Path, tmp: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = catalog(store).iter().map(|e| store.join(e["file"].as_str().unwrap())).collect();
    v.extend(published_prefixes(store, tmp, "oracle"));
    v
}

/// What tcpdump selects with `filter` from the stored files, in time order, cut to the range and limit.
fn tcpdump_oracle(
    store: &Path,
    tmp: &Path,
    from: Option<u64>,
    to: Option<u64>,
    filter: &str,
    limit: Option<u64>,
) -> Vec<Rec> {
    let words: Vec<&str> = filter.split_whitespace().collect();
    let mut all: Vec<Rec> = stored_files(store, tmp).iter().flat_map(|f| tcpdump_frames(f, &words, tmp).1).collect();
    all.sort_by_key(|r| r.ts_ns);
    let mut v: Vec<Rec> =
        all.into_iter().filter(|r| from.is_none_or(|f| r.ts_ns >= f) && to.is_none_or(|t| r.ts_ns < t)).collect();
    if let Some(l) = limit {
        v.truncate(l as usize);
    }
    v
}

/// Every case over HTTP against the CLI and tcpdump.
fn check_cases(http: &Http, store: &Path, tmp: &Path, ts: &[u64], when: &str) {
    for (name, from, to, filter, limit) in cases(ts) {
        let what = format!("{when}, {name}");
        let p = params(from, to, &filter, limit);
        let pr: Vec<(&str, &str)> = p.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let reply = http.get("/api/v1/query", &pr);
        assert_eq!(reply.status, 200, "{what}: {}", reply.text());
        let out = tmp.join("cli.pcap");
        let mut args = vec!["query".to_string()];
        args.extend(cli_args(store, from, to, limit));
        args.extend(["-w".into(), out.display().to_string()]);
        args.extend(filter.split_whitespace().map(str::to_string));
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        run_wirevault(&a).expect(0, &what);
        let cli = std::fs::read(&out).unwrap();
        assert!(
            reply.body == cli,
            "{what}: HTTP pcap ({} bytes) differs from `wirevault query -w` ({} bytes)",
            reply.body.len(),
            cli.len()
        );
        let got_path = tmp.join("http.pcap");
        std::fs::write(&got_path, &reply.body).unwrap();
        let (_, got) = read_capture(&got_path);
        let want = tcpdump_oracle(store, tmp, from, to, &filter, limit);
        assert!(!want.is_empty(), "{what}: the case selects nothing (the test is not testing)");
        assert_eq!(got.len(), want.len(), "{what}: packets against tcpdump");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.ts_ns == w.ts_ns && g.data == w.data && g.origlen == w.origlen,
                "{what}: packet {i} differs from tcpdump's"
            );
        }
        if let Some(f) = from {
            if filter.is_empty() {
                assert_eq!(got.first().map(|r| r.ts_ns), Some(f), "{what}: the packet at `from` is in");
            }
        }
        if let Some(t) = to {
            assert!(got.iter().all(|r| r.ts_ns < t), "{what}: the packet at `to` is out");
        }
        if limit.is_some_and(|l| (got.len() as u64) == l) {
            assert_eq!(
                reply.header("x-wirevault-truncated"),
                Some(format!("limit={}", limit.unwrap()).as_str()),
                "{what}"
            );
        }
        // count: the same number, as JSON.
        let c = http.get("/api/v1/count", &pr);
        assert_eq!(c.status, 200, "{what}");
        assert_eq!(c.json()["matched"].as_u64(), Some(got.len() as u64), "{what}: count");
        let mut cargs = vec!["query".to_string(), "--count".into()];
        cargs.extend(cli_args(store, from, to, limit));
        cargs.extend(filter.split_whitespace().map(str::to_string));
        let a: Vec<&str> = cargs.iter().map(String::as_str).collect();
        let o = run_wirevault(&a);
        o.expect(0, &what);
        assert_eq!(o.stdout.trim().parse::<u64>().ok(), Some(got.len() as u64), "{what}: CLI count");
    }
}

/// The sum over every sample of metric `name` whose labels contain `label` (e.g. `cause="kernel"`).
fn metric_sum(text: &str, name: &str, label: &str) -> u64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| l.contains(label))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap() as u64)
        .sum()
}

/// stats.json, status and /metrics tell the same counters, which balance.
fn check_agreement(http: &Http, store: &Path) {
    let s = stats(store);
    let status = http.get("/api/v1/status", &[]).json();
    // The report's totals are its top level, as in stats.json.
    let total = &status["recording"];
    let metrics = http.get("/metrics", &[]).text();
    for key in ["received", "written", "filtered", "deduplicated", "cut"] {
        assert_eq!(total[key], s[key], "status and stats.json: {key}");
        assert_eq!(
            metric_sum(&metrics, &format!("wirevault_packets_{key}_total"), ""),
            s[key].as_u64().unwrap(),
            "metrics and stats.json: {key}"
        );
    }
    let mut dropped = 0;
    for (cause, n) in s["dropped"].as_object().unwrap() {
        let label = format!("cause=\"{cause}\"");
        assert_eq!(
            metric_sum(&metrics, "wirevault_packets_dropped_total", &label),
            n.as_u64().unwrap(),
            "metrics: drops {cause}"
        );
        let st = total["dropped"].as_object().unwrap();
        assert_eq!(st[cause], *n, "status: drops {cause}");
        dropped += n.as_u64().unwrap();
    }
    let g = |k: &str| s[k].as_u64().unwrap();
    // While recording, the open file's last block is still in the arena.
    let pending = total["pending"].as_u64().unwrap();
    assert_eq!(metric_sum(&metrics, "wirevault_packets_pending", ""), pending, "metrics: pending");
    assert_eq!(
        g("received"),
        g("written") + pending + g("filtered") + g("deduplicated") + g("cut") + dropped,
        "the counters add up: {s}"
    );
    assert_eq!(metric_sum(&metrics, "wirevault_written_bytes_total", ""), g("file_bytes"), "bytes written");
}

/// Waits until the recorder's counters stop moving (the traffic is over):
/// two stats.json a second and a half apart equal, every frame received.
/// (Frames in the open file's last block are not `written` yet.)
fn settle(store: &Path, expect: u64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let a = stats(store);
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let b = stats(store);
        let same = ["received", "written", "file_bytes", "files"].iter().all(|k| a[k] == b[k]);
        if same && b["received"].as_u64() == Some(expect) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the counters never settled at {expect} received: {b}");
    }
}

wvtest!(api_answers_equal_the_cli_and_tcpdump_while_recording_and_at_rest, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("serve-api");
    let pair = VethPair::new();
    run_ok(Command::new("ip").args(["-n", &pair.ns_b, "link", "set", "lo", "up"]));
    let sent = test_frames(N, 1_700_000_000_000_000_000);
    let pcap = tmp.join("sent.pcap");
    write_pcap(&pcap, 1, 65535, false, &sent);
    let store = tmp.join("store");
    let mut r = Recorder::start(
        Some(&pair.ns_b),
        &store,
        tmp.path(),
        &["-i", pair.if_b, "--buffer", "64M", "-q", "--file-size", "1M", "--listen", "127.0.0.1:8080"],
    );
    r.wait_ready();
    let out = run_ok(VethPair::exec(&pair.ns_a, "tcpreplay").args(["-i", pair.if_a, "--pps", "20000"]).arg(&pcap));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&format!("Successful packets:        {N}")));
    r.wait_received(N as u64);
    settle(&store, N as u64);
    let http = Http { base: "http://127.0.0.1:8080".into(), netns: Some(pair.ns_b.clone()), opts: vec![] };

    // While recording: the closed files and what is on disk of the open one, as the CLI.
    let status = http.get("/api/v1/status", &[]).json();
    assert_eq!(status["recording"]["state"], "capturing", "{status}");
    let files = stored_files(&store, tmp.path());
    assert!(catalog(&store).len() >= 3, "rotation made several closed files: {files:?}");
    let mut ts: Vec<u64> = files.iter().flat_map(|f| read_capture(f).1).map(|r| r.ts_ns).collect();
    ts.sort();
    // Settled over a second and a half after the last frame: every frame is on disk and said so.
    assert_eq!(ts.len(), N as usize, "frames in the stored files and the open file's published prefix");
    check_cases(&http, &store, tmp.path(), &ts, "while recording");
    let m = http.get("/metrics", &[]);
    assert_eq!(m.status, 200);
    promtool_ok(&m.body, "while recording");
    check_agreement(&http, &store);
    let f = http.get("/api/v1/files", &[]).json();
    assert_eq!(f["files"].as_array().unwrap().len(), files.len(), "files lists the catalog and the open file");

    // A hundred clients at once: each an answer (200, or 503 with a
    // sentence when its turn did not come), the recorder unharmed.
    let handles: Vec<_> = (0..100)
        .map(|i| {
            let h = http.clone();
            std::thread::spawn(move || {
                let filter = if i % 2 == 0 { "udp" } else { "vlan" };
                h.get("/api/v1/count", &[("filter", filter)])
            })
        })
        .collect();
    let mut ok = 0;
    for h in handles {
        let reply = h.join().unwrap();
        assert!(reply.status == 200 || reply.status == 503, "status {}: {}", reply.status, reply.text());
        ok += usize::from(reply.status == 200);
    }
    assert!(ok > 0, "no client of a hundred was served");
    let o = r.terminate();
    o.expect(0, "recorder stopped by SIGTERM");
    let s = stats(&store);
    assert_eq!(s["written"].as_u64(), Some(N as u64), "every frame stored: {s}");
    assert!(s["dropped"].as_object().unwrap().values().all(|v| v == 0), "no drops: {s}");
    assert!(o.stderr.contains("api: 127.0.0.1"), "requests are logged:\n{}", o.stderr);

    // At rest: every file, the last one too.
    let served = Served::start(&store, tmp.path(), &[]);
    let http = Http::new(&format!("http://{}", served.addr));
    let mut ts: Vec<u64> =
        stored_files(&store, tmp.path()).iter().flat_map(|f| read_capture(f).1).map(|r| r.ts_ns).collect();
    ts.sort();
    assert_eq!(ts.len(), N as usize);
    check_cases(&http, &store, tmp.path(), &ts, "at rest");
    let m = http.get("/metrics", &[]);
    promtool_ok(&m.body, "at rest");
    let status = http.get("/api/v1/status", &[]).json();
    assert_eq!(status["recording"], Value::Null);
    assert_eq!(status["last_recording"]["written"].as_u64(), Some(N as u64), "{status}");
    assert_eq!(status["last_recording"]["balanced"], true, "{status}");
    assert_eq!(status["horizon"]["oldest_ns"].as_u64(), Some(ts[0]), "{status}");

    // An answer that is empty because of the range says so.
    let after = time_arg(ts[ts.len() - 1] + 1_000_000_000);
    let reply = http.get("/api/v1/query", &[("from", &after)]);
    assert_eq!(reply.status, 200);
    assert!(reply.header("x-wirevault-empty").is_some_and(|v| v.contains("newest")), "{:?}", reply.headers);
    let c = http.get("/api/v1/count", &[("from", &after)]).json();
    assert!(c["outside"].as_str().is_some_and(|v| v.contains("newest")), "{c}");
    // The histogram adds up to the store.
    let h = http.get("/api/v1/histogram", &[]).json();
    let sum: u64 = h["buckets"].as_array().unwrap().iter().map(|b| b[0].as_u64().unwrap()).sum();
    assert_eq!(sum, N as u64, "histogram: {h}");
    let h = http.get("/api/v1/histogram", &[("filter", "udp"), ("step", "10ms")]).json();
    let sum: u64 = h["buckets"].as_array().unwrap().iter().map(|b| b[0].as_u64().unwrap()).sum();
    let udp = http.get("/api/v1/count", &[("filter", "udp")]).json()["matched"].as_u64().unwrap();
    assert_eq!(sum, udp, "histogram with a filter: {h}");
    // One bucket whose end lies past u64 nanoseconds (it wrapped to before its start: 0 packets).
    let h = http.get("/api/v1/histogram", &[("filter", "udp"), ("step", "213503d")]).json();
    assert_eq!(h["buckets"][0][0].as_u64(), Some(udp), "histogram of one long bucket: {h}");
    drop(pair);
});

wvtest!(max_bytes_cuts_an_export_at_a_packet_and_says_so, needs = ["curl", "tcpdump"], |t| {
    let tmp = TempDir::new("serve-max-bytes");
    let store = tmp.join("store");
    run_wirevault(&[
        "record",
        "--synthetic",
        "size=imix,count=20000,flows=20",
        "-o",
        store.to_str().unwrap(),
        "-q",
        "--no-tune-warnings",
    ])
    .expect(0, "record");
    let served = Served::start(&store, tmp.path(), &["--max-bytes", "100K"]);
    let http = Http::new(&format!("http://{}", served.addr));
    let reply = http.get("/api/v1/query", &[("filter", "udp")]);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-wirevault-truncated"), Some("max-bytes=102400"), "{:?}", reply.headers);
    assert!(reply.body.len() <= 102_400, "{} bytes", reply.body.len());
    let n: u64 = reply.header("x-wirevault-packets").unwrap().parse().unwrap();
    let out = tmp.join("cli.pcap");
    run_wirevault(&["query", store.to_str().unwrap(), "--limit", &n.to_string(), "-w", out.to_str().unwrap(), "udp"])
        .expect(0, "cli");
    assert!(std::fs::read(&out).unwrap() == reply.body, "the cut export is the CLI's first {n} packets");
    let got = tmp.join("http.pcap");
    std::fs::write(&got, &reply.body).unwrap();
    assert_eq!(tcpdump_frames(&got, &[], tmp.path()).1.len() as u64, n, "tcpdump reads it whole");
});
