//! Queries of a store while it records (DESIGN.md, "Store layout": live
//! files). Frames sent over a veth pair are queryable 2 s after they were
//! sent, while their file is still open: `query --count`, `--from`, `-w`,
//! `analyze` and the API's `/api/v1/count` of `record --listen` select from
//! the open file exactly what `tcpdump -r` selects from the prefix of it the
//! recorder published (copied and read by tcpdump), for several filters. And
//! while the writer appends and rotates (`--file-size 1M --file-time 1s`),
//! queries running one after the other never return a partial record or a
//! packet twice (tcpdump reads every answer whole; the frames are unique),
//! and each holds every frame stored 2 s before it started. On the copy path
//! (AF_PACKET), the zero-copy path and AF_XDP. Needs root, tcpreplay,
//! tcpdump and curl; skips without them (fails in CI).

use crate::record_live::{replay, Live, TOOLS};
use crate::util::*;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What the recorder promises: a packet stored longer ago than this is queryable.
const QUERYABLE_AFTER: Duration = Duration::from_secs(2);

/// The filters every check runs (tcpdump decides each).
const FILTERS: &[&str] = &["", "udp", "vlan", "port 53", "greater 1000", "not udp and not vlan"];

/// What tcpdump selects with `filter` from `files`, in time order.
fn by_tcpdump(files: &[PathBuf], filter: &str, tmp: &Path) -> Vec<Rec> {
    let f: Vec<&str> = if filter.is_empty() { vec![] } else { vec![filter] };
    let mut v: Vec<Rec> = files.iter().flat_map(|p| tcpdump_frames(p, &f, tmp).1).collect();
    v.sort_by_key(|r| r.ts_ns);
    v
}

/// `wirevault query STORE --count ARGS...`: the count, and standard error.
fn count(store: &Path, args: &[&str]) -> (u64, String) {
    let mut a = vec!["query", store.to_str().unwrap(), "--count"];
    a.extend_from_slice(args);
    let o = run_wirevault(&a);
    o.expect(0, &format!("{a:?}"));
    let n = o.stdout.trim().parse().unwrap_or_else(|_| panic!("{a:?}: not a count: {}", o.stdout));
    (n, o.stderr)
}

/// Sends `frames` from the pair's first end, every one of them.
fn send(l: &Live, frames: &[Frame], tag: &str, rate: &[&str]) {
    let pcap = l.tmp.join(format!("send-{tag}.pcap"));
    write_pcap(&pcap, 1, 65535, false, frames);
    replay(&l.pair.ns_a, l.pair.if_a, &pcap, rate, frames.len() as u32);
}

/// Sleeps until `QUERYABLE_AFTER` has passed since `since`.
fn wait_queryable(since: Instant) {
    std::thread::sleep((since + QUERYABLE_AFTER).saturating_duration_since(Instant::now()));
}

/// Two bursts into a recorder with one open file (default `--file-size`, no `--file-time`),
/// each checked 2 s after it was sent: every answer equals tcpdump over the published prefix,
/// which holds every frame sent.
fn open_file_run(name: &str, args: &[&str]) {
    let l = Live::new(name, 600);
    run_ok(Command::new("ip").args(["-n", &l.pair.ns_b, "link", "set", "lo", "up"]));
    let r = l.start(&[args, &["--listen", "127.0.0.1:8080"]].concat());
    let http = Http { base: "http://127.0.0.1:8080".into(), netns: Some(l.pair.ns_b.clone()), opts: vec![] };
    let store = l.store();
    let s = store.to_str().unwrap();
    let (a, b) = l.sent.split_at(300);
    let mut between = 0;
    for (round, burst, sent) in [(1, a, 300), (2, b, 600)] {
        let t = Instant::now();
        if round == 2 {
            between = now_ns();
        }
        send(&l, burst, &round.to_string(), &["--topspeed"]);
        wait_queryable(t);
        let what = format!("{name}, burst {round}");
        assert!(catalog(&store).is_empty(), "{what}: a file was closed; the test wants the open one");
        let prefix = published_prefixes(&store, l.tmp.path(), &round.to_string());
        assert_eq!(prefix.len(), 1, "{what}: one open file with packets: {:?}", live_entries(&store));
        for f in FILTERS {
            let want = by_tcpdump(&prefix, f, l.tmp.path());
            let (got, err) = count(&store, &[f]);
            assert_eq!(got, want.len() as u64, "{what}: --count '{f}' against tcpdump over the published prefix");
            assert!(!err.contains("not included"), "{what}: '{f}': {err}");
            let api = http.get("/api/v1/count", &[("filter", f)]).json();
            assert_eq!(api["matched"], want.len(), "{what}: /api/v1/count '{f}': {api}");
            assert_eq!(api["open_files_excluded"], 0, "{what}: {api}");
        }
        // Everything sent is there, 2 s after it was sent, byte for byte.
        let all = by_tcpdump(&prefix, "", l.tmp.path());
        assert_same_frames(&l.sent[..sent], &all, false, &what);
        let out = l.tmp.join(format!("query-{round}.pcap"));
        let got = query_frames(&store, &out, &["vlan or port 53"]);
        let want = by_tcpdump(&prefix, "vlan or port 53", l.tmp.path());
        assert_eq!(got, want, "{what}: query -w against tcpdump");
        assert_eq!(count(&store, &["--from", "1m ago"]).0, sent as u64, "{what}: --from '1m ago'");
        let api = http.get("/api/v1/count", &[("from", "1m ago")]).json();
        assert_eq!(api["matched"], sent, "{what}: /api/v1/count from=1m ago: {api}");
        if round == 2 {
            // From between the bursts: the second one exactly.
            let from = time_arg(between);
            let want = all.iter().filter(|r| r.ts_ns >= between).count();
            assert_eq!(want, b.len(), "{what}: the second burst's stamps are after {from}");
            assert_eq!(count(&store, &["--from", &from]).0, want as u64, "{what}: --from {from}");
            // analyze reads through the query layer too.
            let o = run_wirevault(&["analyze", s, "--json"]);
            o.expect(0, "analyze of a live store");
            let j: Value =
                serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("analyze --json ({e}): {}", o.stdout));
            assert_eq!(j["frames"], sent, "{what}: analyze's frames: {}", o.stdout);
            let status = http.get("/api/v1/status", &[]).json();
            assert_eq!(status["disk"]["packets"], sent, "{what}: /api/v1/status counts the open file: {status}");
            let files = http.get("/api/v1/files", &[]).json();
            assert_eq!(files["files"][0]["live"], true, "{what}: /api/v1/files: {files}");
        }
    }
    r.terminate().expect(0, "recorder stopped by SIGTERM");
    assert!(!store.join("live-000.json").exists(), "the live file outlived its recorder");
    assert_eq!(count(&store, &[]).0, 600, "{name}: at rest");
}

/// Unique frames sent at a steady rate into a recorder that rotates often, queried again and
/// again meanwhile: each answer reads whole in tcpdump, holds no frame twice and none the
/// store does not end with, and holds every frame stored 2 s before the query started.
fn rotation_run(name: &str, args: &[&str]) {
    let n = 9000;
    let l = Live::new(name, 1);
    let frames = test_frames(n, 1_700_000_000_000_000_000);
    let mut r = l.start(&[args, &["--file-size", "1M", "--file-time", "1s"]].concat());
    let store = l.store();
    let sender = {
        let (ns, dev) = (l.pair.ns_a.clone(), l.pair.if_a);
        let pcap = l.tmp.join("steady.pcap");
        write_pcap(&pcap, 1, 65535, false, &frames);
        std::thread::spawn(move || replay(&ns, dev, &pcap, &["--pps", "3000"], n))
    };
    let mut answers: Vec<(u64, Vec<Rec>)> = Vec::new();
    let mut k = 0;
    while !sender.is_finished() {
        k += 1;
        let started = now_ns();
        let out = l.tmp.join(format!("q-{k}.pcap"));
        let a = ["query", store.to_str().unwrap(), "-w", out.to_str().unwrap()];
        run_wirevault(&a).expect(0, &format!("{name}: query {k} while rotating"));
        // tcpdump reads it to its end without a complaint (a partial record would be one).
        let td = run_ok(Command::new("tcpdump").arg("-r").arg(&out).arg("-w").arg("/dev/null"));
        let err = String::from_utf8_lossy(&td.stderr);
        assert!(!err.contains("truncated") && !err.contains("bogus"), "{name}: query {k}: tcpdump: {err}");
        let recs = read_capture(&out).1;
        let mut seen = HashSet::new();
        for r in &recs {
            assert!(seen.insert(&r.data), "{name}: query {k} returned a frame twice ({} bytes)", r.data.len());
        }
        answers.push((started, recs));
        std::thread::sleep(Duration::from_millis(100));
    }
    sender.join().unwrap();
    r.wait_received(n as u64);
    r.terminate().expect(0, "recorder stopped by SIGTERM");
    let stored = stream_records(&check_store(&store), 0);
    assert_same_frames(&frames, &stored, false, &format!("{name}: stored while queried"));
    let files = catalog(&store).len();
    assert!(files >= 8, "{name}: {files} files: the test wants rotation while it queries");
    assert!(answers.len() >= 10, "{name}: only {} queries ran while sending", answers.len());
    let all: HashSet<(u64, &[u8])> = stored.iter().map(|r| (r.ts_ns, &r.data[..])).collect();
    for (k, (started, recs)) in answers.iter().enumerate() {
        for r in recs {
            assert!(all.contains(&(r.ts_ns, &r.data[..])), "{name}: query {} returned a frame not stored", k + 1);
        }
        let due = started.saturating_sub(QUERYABLE_AFTER.as_nanos() as u64);
        let have: HashSet<&[u8]> = recs.iter().map(|r| &r.data[..]).collect();
        let missed: Vec<u64> =
            stored.iter().filter(|r| r.ts_ns < due && !have.contains(&r.data[..])).map(|r| r.ts_ns).collect();
        if let (Some(first), Some(last)) = (missed.first(), missed.last()) {
            let newest = recs.iter().map(|r| r.ts_ns).max().unwrap_or(0);
            panic!(
                "{name}: query {} missed {} frames stored over 2 s before it, stored {:.3} to {:.3} s before it \
                 (its newest frame: {:.3} s before it; {} frames in the answer)",
                k + 1,
                missed.len(),
                started.saturating_sub(*first) as f64 / 1e9,
                started.saturating_sub(*last) as f64 / 1e9,
                started.saturating_sub(newest) as f64 / 1e9,
                recs.len()
            );
        }
    }
}

wvtest!(live_store_answers_queries_from_its_open_file, needs = [root, TOOLS, "curl"], |t| {
    let _g = heavy_lock();
    open_file_run("live-query-copy", &[]);
    rotation_run("live-query-copy-rot", &[]);
});

wvtest!(zero_copy_store_answers_queries_from_its_open_file, needs = [root, TOOLS, "curl"], |t| {
    let _g = heavy_lock();
    let zc = ["--format", "pcapng", "--zero-copy"];
    open_file_run("live-query-zc", &zc);
    rotation_run("live-query-zc-rot", &zc);
});

wvtest!(xdp_store_answers_queries_from_its_open_file, needs = [root, TOOLS, "curl"], |t| {
    let _g = heavy_lock();
    open_file_run("live-query-xdp", &["--source", "xdp"]);
    rotation_run("live-query-xdp-rot", &["--source", "xdp"]);
});
