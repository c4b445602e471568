//! An export whose stored files change under it (retention deletes one, or
//! something shortens one) after its headers went out: the body is aborted
//! (curl sees an incomplete transfer), never a short pcap ending as a whole
//! one; the server goes on serving. A file the catalog names but that was
//! already missing is said in a header before the first byte instead.

use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The last capture file of the store in time (the one an export reaches last).
fn last_file(store: &Path) -> PathBuf {
    let c = catalog(store);
    let e = c.iter().max_by_key(|e| e["first_ns"].as_u64().unwrap()).unwrap();
    store.join(e["file"].as_str().unwrap())
}

/// Starts a slow download of the whole store into `out` (headers into
/// `out.h`) and waits until its first bytes have arrived.
fn slow_export(addr: &str, out: &Path) -> std::process::Child {
    let _ = std::fs::remove_file(out);
    let child = Command::new("curl")
        .args(["-s", "--limit-rate", "10M", "-D"])
        .arg(out.with_extension("h"))
        .arg("-o")
        .arg(out)
        .arg(format!("http://{addr}/api/v1/query"))
        .stdout(Stdio::null())
        .spawn()
        .expect("curl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::metadata(out).map_or(0, |m| m.len()) == 0 {
        assert!(Instant::now() < deadline, "no bytes of the export arrived");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

wvtest!(a_file_changed_during_an_export_aborts_its_body, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-export");
    let store = tmp.join("store");
    // About 60 MB in 4 MB files: the export is far from the last file (it
    // can be at most the body channel and the socket buffers ahead of the
    // slow client) when that file changes.
    run_wirevault(&[
        "record",
        "--synthetic",
        "size=1000,count=60000",
        "--file-size",
        "4M",
        "-o",
        store.to_str().unwrap(),
        "-q",
    ])
    .expect(0, "record");
    let full = tmp.join("full.pcap");
    run_wirevault(&["query", store.to_str().unwrap(), "-w", full.to_str().unwrap()]).expect(0, "query");
    let full_len = std::fs::metadata(&full).unwrap().len();
    let served = Served::start(&store, tmp.path(), &[]);
    let http = Http::new(&format!("http://{}", served.addr));

    // 1. The last file shortened to half while the export runs.
    let out = tmp.join("a.pcap");
    let mut curl = slow_export(&served.addr, &out);
    let last = last_file(&store);
    let len = std::fs::metadata(&last).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&last).unwrap().set_len(len / 2).unwrap();
    let st = curl.wait().unwrap();
    assert!(!st.success(), "curl must see an incomplete transfer, got {st}");
    let got = std::fs::metadata(&out).unwrap().len();
    assert!(got < full_len, "{got} of {full_len} bytes");
    assert!(std::fs::read_to_string(out.with_extension("h")).unwrap().starts_with("HTTP/1.1 200"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !served.log().contains("failed: the answer is incomplete: stored files changed while it was read") {
        assert!(Instant::now() < deadline, "no log line of the failed export:\n{}", served.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_no_panic(&served.log(), "serve");
    assert_eq!(http.get("/api/v1/status", &[]).status, 200, "the server goes on");

    // 2. The same file removed (as retention does) while another export runs.
    let out = tmp.join("b.pcap");
    let mut curl = slow_export(&served.addr, &out);
    std::fs::remove_file(&last).unwrap();
    let st = curl.wait().unwrap();
    assert!(!st.success(), "curl must see an incomplete transfer, got {st}");
    assert!(std::fs::metadata(&out).unwrap().len() < full_len);

    // 3. Missing before the request: said in a header, and the body is whole
    //    (every packet of the other files, as the CLI writes them).
    let r = http.get("/api/v1/query", &[]);
    assert_eq!(r.status, 200);
    let name = last.file_name().unwrap().to_str().unwrap();
    assert!(
        r.headers.iter().any(|(k, v)| k == "x-wirevault-warning" && v.contains(name) && v.contains("missing")),
        "{:?}",
        r.headers
    );
    let cli = tmp.join("cli.pcap");
    let o = run_wirevault(&["query", store.to_str().unwrap(), "-w", cli.to_str().unwrap()]);
    assert!(o.stderr.contains("missing"), "{}", o.stderr);
    assert_eq!(r.body, std::fs::read(&cli).unwrap(), "HTTP equals the CLI without the missing file");
    assert!((r.body.len() as u64) < full_len);
});

/// The nice values of the threads of `pid` named `name`.
fn thread_nice(pid: u32, name: &str) -> Vec<i64> {
    let mut v = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis; nice is the 19th field of the line.
        if let Some(rest) = stat.rsplit_once(')').map(|x| x.1) {
            v.extend(rest.split_whitespace().nth(16).and_then(|n| n.parse::<i64>().ok()));
        }
    }
    v
}

wvtest!(query_threads_run_at_the_given_nice, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-nice");
    let store = tmp.join("store");
    run_wirevault(&["record", "--synthetic", "size=1000,count=40000", "-o", store.to_str().unwrap(), "-q"])
        .expect(0, "record");
    for (args, want) in [(&[][..], 10), (&["--query-nice", "15"][..], 15)] {
        let served = Served::start(&store, tmp.path(), args);
        let out = tmp.join("slow.pcap");
        let mut curl = slow_export(&served.addr, &out);
        let deadline = Instant::now() + Duration::from_secs(30);
        let seen = loop {
            let n = thread_nice(served.child.id(), "wv-api-query");
            if !n.is_empty() {
                break n;
            }
            assert!(Instant::now() < deadline, "no query thread while an export runs");
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(seen, vec![want], "{args:?}");
        let _ = curl.kill();
        let _ = curl.wait();
    }
    let o = run_wirevault(&["serve", store.to_str().unwrap(), "--query-nice", "20"]);
    assert_eq!(o.code, Some(2), "{}", o.stderr);
    assert_no_panic(&o.stderr, "serve --query-nice 20");
});

/// Over TLS (rustls encrypts each recycled 1 MiB buffer) a whole-store
/// export, many buffers long, equals the CLI's bytes.
wvtest!(an_export_over_tls_equals_the_cli, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-export-tls");
    let store = tmp.join("store");
    run_wirevault(&["record", "--synthetic", "size=imix,count=60000,flows=50", "-o", store.to_str().unwrap(), "-q"])
        .expect(0, "record");
    let key = rcgen::KeyPair::generate().unwrap();
    let cert =
        rcgen::CertificateParams::new(vec!["recorder.example.test".to_string()]).unwrap().self_signed(&key).unwrap();
    let (cert_pem, key_pem) = (tmp.join("cert.pem"), tmp.join("key.pem"));
    std::fs::write(&cert_pem, cert.pem()).unwrap();
    std::fs::write(&key_pem, key.serialize_pem()).unwrap();
    // Loopback, TLS without tokens: the certificate's name is allowed (no DNS rebinding).
    let served = Served::start(
        &store,
        tmp.path(),
        &[
            "--tls-cert",
            cert_pem.to_str().unwrap(),
            "--tls-key",
            key_pem.to_str().unwrap(),
            "--allowed-host",
            "recorder.example.test",
        ],
    );
    let port = served.addr.rsplit(':').next().unwrap().to_string();
    let resolve = format!("recorder.example.test:{port}:127.0.0.1");
    let https = Http::new(&format!("https://recorder.example.test:{port}")).with(&[
        "--cacert",
        cert_pem.to_str().unwrap(),
        "--resolve",
        &resolve,
    ]);
    let cli = tmp.join("cli.pcap");
    run_wirevault(&["query", store.to_str().unwrap(), "-w", cli.to_str().unwrap()]).expect(0, "query");
    let want = std::fs::read(&cli).unwrap();
    assert!(want.len() > 8 << 20, "several buffers: {}", want.len());
    for filter in ["", "udp port 1030 or udp port 1031"] {
        let r = https.get("/api/v1/query", &[("filter", filter)]);
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let cli = tmp.join("cli-f.pcap");
        let mut args = vec!["query", store.to_str().unwrap(), "-w", cli.to_str().unwrap()];
        if !filter.is_empty() {
            args.push(filter);
        }
        run_wirevault(&args).expect(0, "query");
        assert_eq!(r.body, std::fs::read(&cli).unwrap(), "TLS answer equals the CLI ({filter:?})");
    }
});

/// A stored file damaged in its middle (a record header overwritten, the
/// length unchanged) before any request: the first export finds it only
/// while reading and is cut; the file stays as it is, so the next export
/// says so in a header and runs to its end, equal to what the CLI writes
/// (with its warning). `repair` names the file and exits 1, every time.
wvtest!(a_file_damaged_for_good_is_announced_after_the_first_export, needs = ["curl"], |t| {
    let tmp = TempDir::new("serve-damaged");
    let store = tmp.join("store");
    let s = store.to_str().unwrap();
    run_wirevault(&["record", "--synthetic", "size=1000,count=20000", "--file-size", "4M", "-o", s, "-q"])
        .expect(0, "record");
    let c = catalog(&store);
    let first = c.iter().min_by_key(|e| e["first_ns"].as_u64().unwrap()).unwrap();
    let file = store.join(first["file"].as_str().unwrap());
    let packets = first["packets"].as_u64().unwrap();
    // Record 1000's header (24-byte file header, 16 + 1000 bytes a record).
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.seek(SeekFrom::Start(24 + 1000 * 1016)).unwrap();
        f.write_all(&[0xff; 16]).unwrap();
    }
    for round in 0..2 {
        let o = run_wirevault(&["repair", s]);
        o.expect(1, &format!("repair, round {round}"));
        let want = format!("damaged: 1000 of its {packets} catalogued packets can be read");
        assert!(o.stderr.contains(&want), "round {round}: {}", o.stderr);
    }
    let cli = tmp.join("cli.pcap");
    let o = run_wirevault(&["query", s, "-w", cli.to_str().unwrap()]);
    o.expect(0, "query");
    assert!(o.stderr.contains("the rest of this file is skipped"), "{}", o.stderr);
    let served = Served::start(&store, tmp.path(), &[]);
    let out = tmp.join("first.pcap");
    let st = Command::new("curl")
        .args(["-s", "-o"])
        .arg(&out)
        .arg(format!("http://{}/api/v1/query", served.addr))
        .status()
        .unwrap();
    assert!(!st.success(), "the first export must be cut, got {st}");
    let r = Http::new(&format!("http://{}", served.addr)).get("/api/v1/query", &[]);
    assert_eq!(r.status, 200);
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(
        r.headers.iter().any(|(k, v)| k == "x-wirevault-warning" && v.contains(name) && v.contains("damaged")),
        "{:?}",
        r.headers
    );
    assert_eq!(r.body, std::fs::read(&cli).unwrap(), "HTTP equals the CLI");
    assert_no_panic(&served.log(), "serve");
});

/// A client that stops reading an export holds its query slot only until
/// `--send-timeout` passes without progress: then the export is given up,
/// the slot freed, and the log says why.
wvtest!(a_client_that_stops_reading_is_given_up, needs = ["curl"], |t| {
    use std::io::Write;
    let tmp = TempDir::new("serve-stalled");
    let store = tmp.join("store");
    // About 60 MB: far more than the body channel and the socket buffers hold.
    run_wirevault(&[
        "record",
        "--synthetic",
        "size=1000,count=60000",
        "--file-size",
        "4M",
        "-o",
        store.to_str().unwrap(),
        "-q",
    ])
    .expect(0, "record");
    let served = Served::start(&store, tmp.path(), &["--max-queries", "1", "--send-timeout", "2"]);
    let http = Http::new(&format!("http://{}", served.addr));
    // Asks for everything, then reads nothing.
    let mut stalled = std::net::TcpStream::connect(&served.addr).unwrap();
    stalled.write_all(b"GET /api/v1/query HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let r = http.get("/api/v1/count", &[]);
    assert_eq!(r.status, 200, "the slot must come free: {}\n{}", r.text(), served.log());
    assert!(started.elapsed() < Duration::from_secs(20), "waited {:?}", started.elapsed());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !served.log().contains("the client took no data for 2 s") {
        assert!(Instant::now() < deadline, "the give-up is not logged:\n{}", served.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(stalled);
    assert_no_panic(&served.log(), "serve");
});

/// A client that leaves while the first pass of a limited export runs
/// (before any header) stops it, and the request is logged and counted
/// (499) like any other.
wvtest!(a_client_that_leaves_before_the_headers_stops_the_query_and_is_logged, needs = ["curl"], |t| {
    use std::io::Write;
    let tmp = TempDir::new("serve-leave-early");
    let store = tmp.join("store");
    // Many small packets in many files: a full scan takes a while, and the
    // query layer looks at its cancel flag before each file.
    run_wirevault(&[
        "record",
        "--synthetic",
        "size=64,count=4000000",
        "--file-size",
        "4M",
        "-o",
        store.to_str().unwrap(),
        "-q",
    ])
    .expect(0, "record");
    let served = Served::start(&store, tmp.path(), &["--max-queries", "1"]);
    let http = Http::new(&format!("http://{}", served.addr));
    let ask = |path: &str| {
        let mut c = std::net::TcpStream::connect(&served.addr).unwrap();
        c.write_all(format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).unwrap();
        c
    };
    // A filter the index cannot narrow and no packet matches.
    let q = "/api/v1/query?limit=10&filter=ether%5B40%3A4%5D%20%3D%200x12345678";
    let c = ask(q);
    // Leave once the query runs (it holds the one query slot), not after a fixed sleep: on a
    // fast day the scan read half the files in the 200 ms this test used to wait.
    let deadline = Instant::now() + Duration::from_secs(30);
    while http.get("/api/v1/status", &[]).json()["limits"]["queries_running"] != 1 {
        assert!(Instant::now() < deadline, "the query never started:\n{}", served.log());
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(c);
    let deadline = Instant::now() + Duration::from_secs(120);
    let ended = |log: &str| log.lines().any(|l| l.contains("api: query ") && l.contains("client went away"));
    while !ended(&served.log()) {
        assert!(Instant::now() < deadline, "the query did not end:\n{}", served.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    // How far the scan got, not how long it ran on: the query thread runs
    // at a lowered priority, and on a busy machine it and the clock say
    // little about each other. A cancel not seen would read every file.
    let log = served.log();
    let line = log.lines().find(|l| ended(l)).unwrap_or_default();
    eprintln!("{line}");
    let (opened, files) = opened_of(line).unwrap_or_else(|| panic!("the query did not stop early: {line}"));
    assert!(files >= 40 && opened * 2 < files, "the scan went on after the client left: {line}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !served.log().contains(&format!("\"GET {q}\" 499")) {
        assert!(Instant::now() < deadline, "the request is not logged:\n{}", served.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    let m = http.get("/metrics", &[]).text();
    assert!(m.contains("wirevault_http_requests_total{code=\"499\"} 1"), "{m}");
    assert_no_panic(&served.log(), "serve");
});

/// "... after opening N of its M files" in a log line: (N, M).
fn opened_of(line: &str) -> Option<(u64, u64)> {
    let rest = &line[line.find("after opening ")? + "after opening ".len()..];
    let mut words = rest.split(' ');
    let opened = words.next()?.parse().ok()?;
    let files = words.nth(2)?.parse().ok()?;
    Some((opened, files))
}
