//! `wirevault query` against hostile and odd input (issue 12): outputs that
//! would overwrite the store, damaged files, raw-IP stores, filters libpcap
//! refuses for files, impossible times, FIFOs, `-w -`, terminals, permission
//! problems, huge filters, and what a `.part` file means. Every answer is
//! checked against `tcpdump -r` over the same files.

use crate::util::{
    have, run_wirevault, tcpdump_frames, test_frames, wirevault, write_pcap, wvtest, Frame, Kind, Rec, TempDir,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const T0: u64 = 1_763_806_500_000_000_000;

/// Records of a pcap byte stream.
fn recs(bytes: &[u8]) -> Vec<Rec> {
    let mut r = wv_wire::reader::Reader::new(bytes).expect("query output is a capture");
    let mut v = Vec::new();
    while let Some(p) = r.next_packet().expect("query output is valid") {
        v.push(Rec {
            ts_ns: p.ts_ns,
            caplen: p.caplen,
            origlen: p.origlen,
            linktype: p.linktype,
            snaplen: p.snaplen,
            data: p.data.to_vec(),
        });
    }
    v
}

/// (ts, caplen, origlen, bytes) sorted by time: what two answers must share.
fn key(v: &[Rec]) -> Vec<(u64, u32, u32, Vec<u8>)> {
    let mut k: Vec<_> = v.iter().map(|r| (r.ts_ns, r.caplen, r.origlen, r.data.clone())).collect();
    k.sort();
    k
}

/// What tcpdump selects from every file with `filter`, in one list.
fn tcpdump_all(files: &[PathBuf], filter: &[&str], tmp: &Path) -> Vec<Rec> {
    files.iter().flat_map(|f| tcpdump_frames(f, filter, tmp).1).collect()
}

/// A store of `files` ((relative path, link type, frames)), indexed by `wirevault index`.
fn store_of(tag: &str, files: &[(&str, u32, Vec<Frame>)]) -> (TempDir, Vec<PathBuf>) {
    let dir = TempDir::new(tag);
    let mut paths = Vec::new();
    for (rel, lt, frames) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        write_pcap(&p, *lt, 65535, true, frames);
        paths.push(p);
    }
    run_wirevault(&["index", dir.to_str().unwrap()]).expect(0, "index");
    (dir, paths)
}

/// Ethernet test frames 0..n, split in three files of two streams.
fn three_files(tag: &str, n: u32) -> (TempDir, Vec<PathBuf>, Vec<Frame>) {
    let all = test_frames(n, T0);
    let k = n as usize / 3;
    let (st, paths) = store_of(
        tag,
        &[
            ("stream-000/a.pcap", 1, all[..k].to_vec()),
            ("stream-001/b.pcap", 1, all[k..2 * k].to_vec()),
            ("stream-000/c.pcap", 1, all[2 * k..].to_vec()),
        ],
    );
    (st, paths, all)
}

// ---------------------------------------------------------------------------
// 4: an output inside the store

#[test]
fn output_that_is_or_is_inside_the_store_is_refused() {
    let (store, paths, _) = three_files("w-into-store", 60);
    let s = store.to_str().unwrap();
    let before: Vec<Vec<u8>> = paths.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let outside = TempDir::new("w-into-store-out");
    // Another name for the store directory, and for a stored file.
    std::os::unix::fs::symlink(store.path(), outside.join("alias")).unwrap();
    std::fs::hard_link(&paths[0], outside.join("hard.pcap")).unwrap();
    std::fs::hard_link(store.join("catalog.jsonl"), outside.join("hard-catalog")).unwrap();
    let targets = [
        paths[0].clone(),
        store.join("stream-000/new.pcap"),
        store.join("catalog.jsonl"),
        store.join("stream-001/../stream-000/a.pcap"),
        outside.join("alias/stream-001/b.pcap"),
        outside.join("alias/x.pcap"),
        outside.join("hard.pcap"),
        outside.join("hard-catalog"),
    ];
    for t in &targets {
        let o = run_wirevault(&["query", s, "-w", t.to_str().unwrap(), "udp"]);
        o.expect(2, &format!("-w {}", t.display()));
        assert!(o.stderr.contains("inside the store") || o.stderr.contains("stored file"), "{}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    }
    assert!(!store.join("stream-000/new.pcap").exists());
    assert!(!store.join("x.pcap").exists());
    let catalog = std::fs::read(store.join("catalog.jsonl")).unwrap();
    assert!(!catalog.is_empty());
    // A single capture file queried into itself.
    let single = outside.join("single.pcap");
    std::fs::copy(&paths[1], &single).unwrap();
    let before_single = std::fs::read(&single).unwrap();
    let o = run_wirevault(&["query", single.to_str().unwrap(), "-w", single.to_str().unwrap()]);
    o.expect(2, "query FILE -w FILE");
    assert_eq!(std::fs::read(&single).unwrap(), before_single);
    for (p, b) in paths.iter().zip(&before) {
        assert_eq!(&std::fs::read(p).unwrap(), b, "{} changed", p.display());
    }
    // Next to the store is fine.
    let ok = outside.join("ok.pcap");
    run_wirevault(&["query", s, "-w", ok.to_str().unwrap(), "udp"]).expect(0, "-w outside");
    assert!(!recs(&std::fs::read(&ok).unwrap()).is_empty());
}

// ---------------------------------------------------------------------------
// 7: damaged files

wvtest!(damaged_files_are_skipped_with_a_warning_in_every_mode, needs = ["tcpdump"], |t| {
    let n = 150;
    let (store, paths, all) = three_files("damaged", n);
    let s = store.to_str().unwrap();
    let k = n as usize / 3;
    // b.pcap is gone; c.pcap loses the second half of its 20th record.
    std::fs::remove_file(&paths[1]).unwrap();
    let c = &all[2 * k..];
    let cut: usize = 24 + c[..19].iter().map(|f| 16 + f.data.len()).sum::<usize>() + 16 + c[19].data.len() / 2;
    let f = std::fs::OpenOptions::new().write(true).open(&paths[2]).unwrap();
    f.set_len(cut as u64).unwrap();
    // The expected answer: tcpdump over what is intact.
    let intact = TempDir::new("damaged-intact");
    let c_prefix = intact.join("c-prefix.pcap");
    write_pcap(&c_prefix, 1, 65535, true, &c[..19]);
    let files = [paths[0].clone(), c_prefix];
    for filter in [vec![], vec!["udp"], vec!["udp", "port", "53"]] {
        let want = key(&tcpdump_all(&files, &filter, intact.path()));
        assert!(!want.is_empty());
        let args = |extra: &[&str]| {
            let mut a = vec!["query", s];
            a.extend_from_slice(extra);
            a.extend(filter.iter().copied());
            a.iter().map(|x| x.to_string()).collect::<Vec<String>>()
        };
        let check_warn = |err: &str, what: &str| {
            assert!(err.contains("b.pcap"), "{what}: warning names the missing file: {err}");
            assert!(err.contains("c.pcap"), "{what}: warning names the truncated file: {err}");
        };
        // stdout
        let o = wirevault().args(args(&[])).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "stdout {filter:?}: {err}");
        assert_eq!(key(&recs(&o.stdout)), want, "stdout {filter:?}");
        check_warn(&err, "stdout");
        // -w
        let out = intact.join("out.pcap");
        let o = wirevault().args(args(&["-w", out.to_str().unwrap()])).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "-w {filter:?}: {err}");
        assert_eq!(key(&recs(&std::fs::read(&out).unwrap())), want, "-w {filter:?}");
        check_warn(&err, "-w");
        // --count
        let o = wirevault().args(args(&["--count"])).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "--count {filter:?}: {err}");
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), want.len().to_string(), "--count {filter:?}");
        check_warn(&err, "--count");
        // --strict: the same answer, exit 1.
        let o = wirevault().args(args(&["--strict", "-w", out.to_str().unwrap()])).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "--strict {filter:?}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(key(&recs(&std::fs::read(&out).unwrap())), want, "--strict {filter:?}");
    }
    // A file cut exactly at a record boundary is shorter than catalogued: said too.
    let a = &all[..k];
    let cut: usize = 24 + a[..10].iter().map(|f| 16 + f.data.len()).sum::<usize>();
    std::fs::OpenOptions::new().write(true).open(&paths[0]).unwrap().set_len(cut as u64).unwrap();
    let o = run_wirevault(&["query", s, "--count", "--strict"]);
    o.expect(1, "--strict, file cut at a record boundary");
    assert!(o.stderr.contains("a.pcap"), "{}", o.stderr);
    assert_eq!(o.stdout.trim(), (10 + 19).to_string());
});

// ---------------------------------------------------------------------------
// 11: raw-IP link types

/// IPv4 frames of the test sequence without their Ethernet header (LINKTYPE_RAW).
fn raw_ip_frames(n: u32, start: u64) -> Vec<Frame> {
    test_frames(n, start)
        .into_iter()
        .enumerate()
        .filter(|(i, _)| matches!(crate::util::kind_of(*i as u32), Kind::Dns | Kind::Udp | Kind::TcpDns))
        .map(|(_, f)| Frame { ts_ns: f.ts_ns, origlen: f.origlen - 14, data: f.data[14..].to_vec() })
        .collect()
}

wvtest!(raw_ip_stores_are_filtered_like_tcpdump, needs = ["tcpdump"], |t| {
    let raw = raw_ip_frames(200, T0);
    let eth = test_frames(200, T0 + 3_600_000_000_000);
    let (store, paths) =
        store_of("raw-ip", &[("stream-000/raw.pcap", 101, raw.clone()), ("stream-001/eth.pcap", 1, eth.clone())]);
    let s = store.to_str().unwrap();
    let tmp = TempDir::new("raw-ip-tmp");
    for filter in ["udp", "udp port 53", "tcp", "host 10.0.0.1 and not tcp", "ip[9] = 17", "greater 1000"] {
        // Raw file alone, by time.
        let want = tcpdump_frames(&paths[0], &[filter], tmp.path()).1;
        let o = wirevault()
            .args(["query", s, "--to", &format!("{}", (T0 + 3_000_000_000_000) / 1_000_000_000), filter])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{filter}: {}", String::from_utf8_lossy(&o.stderr));
        let got = recs(&o.stdout);
        assert!(got.iter().all(|r| r.linktype == 101), "{filter}: output keeps LINKTYPE_RAW");
        assert_eq!(key(&got), key(&want), "{filter}: raw file");
        // Both link types in one count: each file filtered with its own.
        let want = tcpdump_all(&paths, &[filter], tmp.path()).len();
        let o = run_wirevault(&["query", s, "--count", filter]);
        o.expect(0, filter);
        assert_eq!(o.stdout.trim(), want.to_string(), "{filter}: mixed store");
    }
    // record --read of a raw-IP file applies the filter (it counted everything as filtered).
    let rec_store = tmp.join("rec");
    let o = run_wirevault(&[
        "record",
        "-o",
        rec_store.to_str().unwrap(),
        "--read",
        paths[0].to_str().unwrap(),
        "-q",
        "udp port 53",
    ]);
    o.expect(0, "record --read raw");
    let want = tcpdump_frames(&paths[0], &["udp port 53"], tmp.path()).1;
    let o = run_wirevault(&["query", rec_store.to_str().unwrap()]);
    o.expect(0, "query the recorded raw store");
    let got = wirevault().args(["query", rec_store.to_str().unwrap()]).output().unwrap();
    assert_eq!(key(&recs(&got.stdout)), key(&want), "record --read raw.pcap 'udp port 53'");
});

// ---------------------------------------------------------------------------
// 12: filters libpcap refuses for savefiles

wvtest!(inbound_and_outbound_are_refused_as_tcpdump_refuses_them, needs = ["tcpdump"], |t| {
    let (store, paths, _) = three_files("inbound", 30);
    let s = store.to_str().unwrap();
    for expr in ["inbound", "outbound", "udp and inbound", "ifindex 1"] {
        let td = Command::new("tcpdump").arg("-r").arg(&paths[0]).arg(expr).output().unwrap();
        assert!(!td.status.success());
        let td_err = String::from_utf8_lossy(&td.stderr);
        let td_msg = td_err.lines().find_map(|l| l.strip_prefix("tcpdump: ")).unwrap().to_string();
        let o = run_wirevault(&["query", s, "--count", expr]);
        o.expect(2, expr);
        assert!(o.stderr.contains(&td_msg), "{expr}: tcpdump says {td_msg:?}, wirevault {:?}", o.stderr);
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
    }
});

// ---------------------------------------------------------------------------
// 13: times

#[test]
fn impossible_dates_and_absurd_times_are_refused() {
    let (store, _, _) = three_files("dates", 30);
    let s = store.to_str().unwrap();
    for t in [
        "2025-02-30",
        "2025-02-29T00:00:00Z",
        "2024-04-31T12:00:00Z",
        "2023-06-31",
        "99999999999999999999",
        "18446744073.709551616",
        "3000-01-01T00:00:00Z",
        "-5",
        "-1.5",
        "1000000 weeks ago",
    ] {
        let from = format!("--from={t}");
        let o = run_wirevault(&["query", s, "--count", &from]);
        o.expect(2, t);
        assert_eq!(o.stderr.lines().count(), 1, "{t}: {}", o.stderr);
        assert!(!o.stderr.replace(t, "").contains("1844674"), "{t}: no wrapped number: {}", o.stderr);
    }
    let o = run_wirevault(&["query", s, "--count", "--from=2025-02-30"]);
    assert!(o.stderr.contains("February") || o.stderr.contains("day"), "{}", o.stderr);
    // Real dates still work: 2024 is a leap year.
    run_wirevault(&["query", s, "--count", "--from=2024-02-29T00:00:00Z"]).expect(0, "2024-02-29");
}

// ---------------------------------------------------------------------------
// 15: FIFOs, devices, directories

wvtest!(a_fifo_or_device_given_to_query_is_refused_at_once, needs = ["mkfifo"], |t| {
    let tmp = TempDir::new("fifo");
    let fifo = tmp.join("f.pcap");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    std::fs::create_dir_all(tmp.join("store/stream-000")).unwrap();
    std::fs::create_dir_all(tmp.join("store/catalog.jsonl")).unwrap();
    for target in [fifo.clone(), PathBuf::from("/dev/null"), tmp.join("store")] {
        let mut child = wirevault()
            .args(["query", target.to_str().unwrap(), "--count"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("query {} still blocks after 10 s", target.display());
        }
        let o = crate::util::Outcome::from_output(child.wait_with_output().unwrap());
        o.expect(1, &target.display().to_string()); // not a capture or store: exit 1 (issue 44)
        assert_eq!(o.stderr.lines().count(), 1, "{}", o.stderr);
        assert!(o.stderr.contains("not a regular file") || o.stderr.contains("neither a store"), "{}", o.stderr);
    }
});

/// Runs wirevault with `args`, killed (and the test failed) after 10 s.
fn run_within_10s(args: &[&str]) -> crate::util::Outcome {
    let mut child =
        wirevault().args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    if child.try_wait().unwrap().is_none() {
        child.kill().unwrap();
        let _ = child.wait();
        panic!("wirevault {args:?} still blocks after 10 s");
    }
    crate::util::Outcome::from_output(child.wait_with_output().unwrap())
}

wvtest!(a_fifo_planted_in_a_store_is_skipped_not_waited_for, needs = ["mkfifo"], |t| {
    let (store, paths, all) = three_files("fifo-in-store", 60);
    std::fs::remove_file(&paths[1]).unwrap();
    assert!(Command::new("mkfifo").arg(&paths[1]).status().unwrap().success());
    let s = store.to_str().unwrap();
    let o = run_within_10s(&["query", s, "--count"]);
    o.expect(0, "query of a store with a FIFO in place of a capture");
    assert!(o.stderr.contains("b.pcap"), "{}", o.stderr);
    assert_eq!(o.stdout.trim(), (all.len() - 20).to_string());
    run_within_10s(&["query", s, "--count", "--strict"]).expect(1, "--strict");
});

// ---------------------------------------------------------------------------
// 17: `-w -` and terminals

wvtest!(dash_w_dash_is_stdout_and_a_terminal_is_refused, needs = ["tcpdump", "script"], |t| {
    let (store, paths, _) = three_files("dash-w", 60);
    let s = store.to_str().unwrap();
    let cwd = TempDir::new("dash-w-cwd");
    let o = wirevault().current_dir(cwd.path()).args(["query", s, "-w", "-", "udp"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!cwd.join("-").exists(), "-w - created a file named '-'");
    let tmp = TempDir::new("dash-w-tmp");
    assert_eq!(key(&recs(&o.stdout)), key(&tcpdump_all(&paths, &["udp"], tmp.path())));
    // On a terminal (script gives the command a pty): refused, nothing binary written.
    for extra in [vec![], vec!["-w", "-"]] {
        let cmd = format!("{} query {s} {} udp", crate::util::bin(), extra.join(" "));
        let o = Command::new("script").args(["-qec", &cmd, "/dev/null"]).stdin(Stdio::null()).output().unwrap();
        let all = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(2), "{cmd}: {all}");
        assert!(all.contains("terminal"), "{all}");
        assert!(!o.stdout.windows(4).any(|w| w == [0x4d, 0x3c, 0xb2, 0xa1]), "pcap written to the terminal");
    }
});

// ---------------------------------------------------------------------------
// 18: messages

#[test]
fn count_with_w_is_refused() {
    let (store, _, _) = three_files("count-w", 30);
    let out = store.join("../count-w-out.pcap");
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count", "-w", out.to_str().unwrap()]);
    o.expect(2, "--count -w");
    assert!(o.stderr.contains("--count") && o.stderr.contains("-w"), "{}", o.stderr);
    assert!(!out.exists());
}

#[test]
fn permission_denied_says_so() {
    if !crate::util::is_root() || !have("setpriv") {
        eprintln!("skipped: needs root and setpriv");
        return;
    }
    let (store, _, _) = three_files("perm", 30);
    let base = store.path().parent().unwrap().join(format!("wv-perm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let locked = base.join("store");
    assert!(Command::new("cp").arg("-a").arg(store.path()).arg(&locked).status().unwrap().success());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(crate::util::bin())
        .args(["query", locked.to_str().unwrap(), "--count"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&base);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("permission denied"), "{err}");
    assert!(!err.contains("neither a store"), "{err}");
}

// ---------------------------------------------------------------------------
// 19: huge filters

#[test]
fn a_huge_filter_is_refused_quickly() {
    let (store, _, _) = three_files("huge", 30);
    let expr: Vec<String> = (0..1000).map(|i| format!("host 10.0.{}.{}", i / 250, i % 250)).collect();
    let expr = expr.join(" or ");
    let start = Instant::now();
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count", &expr]);
    o.expect(2, "1000 or terms");
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    assert!(o.stderr.contains("too large") || o.stderr.contains("too complex"), "{}", o.stderr);
    assert!(o.stderr.lines().count() == 1 && o.stderr.len() < 600, "one short sentence: {}", o.stderr);
    // record's filters too.
    let tmp = TempDir::new("huge-rec");
    let start = Instant::now();
    let o = run_wirevault(&["record", "-o", tmp.join("s").to_str().unwrap(), "--synthetic", "count=10", "-q", &expr]);
    o.expect(2, "record with 1000 or terms");
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
    // Ctrl-C still ends a query while libpcap optimises the largest accepted filter
    // (a guard: it did before too, no signal handler is installed that early).
    let big: Vec<String> = (0..399).map(|i| format!("host 10.0.{}.{}", i / 250, i % 250)).collect();
    let mut child = wirevault()
        .args(["query", store.to_str().unwrap(), "--count", &big.join(" or ")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = child.try_wait().unwrap();
    if st.is_none() {
        let _ = child.kill();
    }
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.and_then(|s| s.signal()), Some(2), "SIGINT during the filter's compile: {st:?}");
    // A moderate list is fine and exact.
    let small: Vec<String> = (0..50).map(|i| format!("port {}", 5353 + i)).collect();
    run_wirevault(&["query", store.to_str().unwrap(), "--count", &small.join(" or ")]).expect(0, "50 terms");
}

// ---------------------------------------------------------------------------
// 2: `.part` files with and without a recorder

#[test]
fn part_files_without_a_recorder_suggest_repair() {
    let (store, _, _) = three_files("part-crash", 30);
    std::fs::write(store.join("stream-000/z.pcap.part"), b"partial").unwrap();
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count"]);
    o.expect(0, "query with a crash leftover");
    assert!(o.stderr.contains("wirevault repair"), "{}", o.stderr);
    assert!(!o.stderr.contains("being recorded"), "{}", o.stderr);
    // With the writer lock held, it is being recorded.
    let _lock = wv_store::lock::StoreLock::exclusive(store.path(), "record").unwrap();
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count"]);
    o.expect(0, "query while recording");
    assert!(o.stderr.contains("being recorded"), "{}", o.stderr);
}

/// A pcapng of Ethernet frames at the given microsecond times.
fn pcapng_at(path: &Path, times_us: &[u64]) {
    let packets: Vec<(u32, u64)> = times_us.iter().map(|&t| (0, t)).collect();
    pcapng_of(path, &[1], &packets);
}

/// A pcapng with one interface per link type given, and 60-byte packets
/// (interface, microsecond time).
fn pcapng_of(path: &Path, linktypes: &[u16], packets: &[(u32, u64)]) {
    let mut b = Vec::new();
    let block = |b: &mut Vec<u8>, ty: u32, body: &[u8]| {
        let len = 12 + body.len() as u32;
        b.extend_from_slice(&ty.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(body);
        b.extend_from_slice(&len.to_le_bytes());
    };
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    block(&mut b, 0x0a0d_0d0a, &shb);
    for lt in linktypes {
        let mut idb = Vec::new();
        idb.extend_from_slice(&lt.to_le_bytes());
        idb.extend_from_slice(&0u16.to_le_bytes());
        idb.extend_from_slice(&65535u32.to_le_bytes());
        block(&mut b, 1, &idb);
    }
    for (i, &(iface, t)) in packets.iter().enumerate() {
        let frame: Vec<u8> = (0..60u8).map(|k| k ^ i as u8).collect();
        let mut epb = Vec::new();
        epb.extend_from_slice(&iface.to_le_bytes());
        epb.extend_from_slice(&((t >> 32) as u32).to_le_bytes());
        epb.extend_from_slice(&(t as u32).to_le_bytes());
        epb.extend_from_slice(&60u32.to_le_bytes());
        epb.extend_from_slice(&60u32.to_le_bytes());
        epb.extend_from_slice(&frame);
        block(&mut b, 6, &epb);
    }
    std::fs::write(path, b).unwrap();
}

/// A capture file of two link types cannot be one pcap: the query fails
/// with one sentence after its first packets, and `-w FILE` is not left
/// holding them as if they were the answer.
#[test]
fn a_query_that_fails_midway_leaves_no_partial_output() {
    let tmp = TempDir::new("mixed-linktypes");
    let f = tmp.join("mixed.pcapng");
    pcapng_of(&f, &[1, 113], &[(0, 1_700_000_000_000_000), (1, 1_700_000_001_000_000)]);
    let out = tmp.join("out.pcap");
    let o = run_wirevault(&["query", f.to_str().unwrap(), "-w", out.to_str().unwrap()]);
    o.expect(1, "mixed link types");
    assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains("different link types") && o.stderr.contains("removed"), "{}", o.stderr);
    assert!(!out.exists(), "the partial output was left");
}

/// Times a u64 of nanoseconds cannot hold (past 2554) are kept as its
/// largest value, and an open range lets them in: every packet is counted,
/// from a file and from a store. Written as pcap, times past 2106 keep
/// their seconds modulo 2^32, as tcpdump writes them, and a warning says so.
wvtest!(packets_dated_past_2106_and_2554_are_counted_and_said, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("far-future");
    let f = tmp.join("future.pcapng");
    // 2023, year 3000, year 2200, 2023.
    pcapng_at(&f, &[1_700_000_000_000_000, 32_503_680_000_000_000, 7_258_118_400_000_000, 1_700_000_001_000_000]);
    let fs = f.to_str().unwrap();
    let o = run_wirevault(&["query", fs, "--count", "--strict"]);
    o.expect(0, "count");
    assert_eq!(o.stdout.trim(), "4");
    let out = tmp.join("out.pcap");
    let o = run_wirevault(&["query", fs, "-w", out.to_str().unwrap()]);
    o.expect(0, "query -w");
    assert!(o.stderr.contains("2 packet(s) dated after 2106-02-07"), "{}", o.stderr);
    let (_, recs) = tcpdump_frames(&out, &[], &tmp);
    assert_eq!(recs.len(), 4, "tcpdump reads every packet written");
    let a = run_wirevault(&["analyze", fs]);
    a.expect(0, "analyze");
    assert!(a.stdout.contains("Frames: 4 "), "{}", a.stdout);
    let store = tmp.join("store");
    run_wirevault(&["record", "-r", fs, "-o", store.to_str().unwrap(), "--format", "pcapng", "-q"]).expect(0, "record");
    let o = run_wirevault(&["query", store.to_str().unwrap(), "--count", "--strict"]);
    o.expect(0, "count of the store");
    assert_eq!(o.stdout.trim(), "4");
});

/// A path that does not exist: one sentence and the same exit code from every reader
/// (query and analyze printed the bare OS error; then all gave 2; now 1, the `exit`
/// module's code for what the command line names but the host lacks: issue 44).
#[test]
fn a_missing_path_is_one_sentence_and_exit_1() {
    let tmp = TempDir::new("missing");
    let m = tmp.join("no-such.pcap");
    let ms = m.to_str().unwrap();
    for args in [vec!["query", ms, "--count"], vec!["analyze", ms], vec!["timestamps", ms]] {
        let o = run_wirevault(&args);
        o.expect(1, &format!("{args:?}"));
        assert_eq!(o.stderr.trim().lines().count(), 1, "{args:?}: {}", o.stderr);
        assert!(o.stderr.contains("does not exist"), "{args:?}: {}", o.stderr);
    }
}
