//! An export is never silently short, and `--send-timeout` is about a
//! client that takes nothing, not about one that reads slowly. A reader
//! that pauses past the timeout (curl stopped by SIGSTOP, a raw socket
//! that stops reading) gets a failed transfer: the connection is reset
//! without the chunked body's terminating chunk, curl exits non-zero, and
//! the request is logged and counted as 408. Readers that keep reading
//! slowly (2 KB/s, 27 KB/s) for longer than the timeout get every byte: the
//! pcap `wirevault query -w` writes, which tcpdump reads whole.

use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `count` 1000-byte frames, 1016 bytes each in pcap: tens of MB are more
/// than the export's channel, hyper's buffer and the sockets' buffers hold,
/// so the server waits on a client that reads slowly or not at all.
fn big_store(tmp: &TempDir, count: u64) -> PathBuf {
    let store = tmp.join("store");
    record_synthetic(&store, &format!("size=1000,count={count}"));
    store
}

/// A raw-socket HTTP/1.1 client: asks for PATH, reads FIRST bytes, then for
/// PHASE seconds at RATE bytes/s (0: reads nothing), then as fast as it can
/// to the end. RCVBUF: -1 leaves the socket's receive buffer as the kernel
/// sizes it; 0 makes it the smallest during the phase (its TCP then
/// acknowledges data as the reader takes it, as over a slow link). Writes the de-chunked body to OUT
/// and prints {status, final (the terminating chunk came), bytes, during
/// (read in the phase), error (what the socket raised)}.
const READER: &str = r#"
import json, socket, sys, time
port, path, rate, phase, rcvbuf, first, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
s = socket.socket()
if rcvbuf >= 0:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
s.connect(("127.0.0.1", int(port)))
s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n" % (path, port)).encode())
raw, error, during = bytearray(), None, 0
try:
    while len(raw) < first:
        got = s.recv(first - len(raw))
        if not got:
            break
        raw += got
    start = time.time()
    while time.time() - start < phase:
        allowed = int(rate * (time.time() - start)) - during
        if allowed > 0:
            got = s.recv(allowed)
            if not got:
                break
            raw += got
            during += len(got)
        time.sleep(0.02)
    if rcvbuf >= 0:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    while True:
        got = s.recv(1 << 20)
        if not got:
            break
        raw += got
except OSError as e:
    error = type(e).__name__
head, _, body = bytes(raw).partition(b"\r\n\r\n")
data, final, i = bytearray(), False, 0
try:
    while True:
        j = body.find(b"\r\n", i)
        if j < 0:
            break
        n = int(body[i:j].split(b";")[0], 16)
        if n == 0:
            final = body[j + 2:j + 4] == b"\r\n"
            break
        if j + 2 + n + 2 > len(body):
            break
        data += body[j + 2:j + 2 + n]
        i = j + 2 + n + 2
except ValueError:
    pass
open(out, "wb").write(data)
status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/") else 0
print(json.dumps({"status": status, "final": final, "bytes": len(data), "during": during, "error": error}))
"#;

/// Starts [`READER`] against `addr` (its stdout piped).
fn reader(addr: &str, rate: u32, phase_s: f64, rcvbuf: i32, first: usize, out: &Path) -> Child {
    let port = addr.rsplit(':').next().unwrap();
    Command::new("python3")
        .args(["-c", READER, port, "/api/v1/query", &rate.to_string(), &phase_s.to_string()])
        .args([rcvbuf.to_string(), first.to_string()])
        .arg(out)
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3")
}

/// What a [`reader`] printed once it ended.
fn report(child: Child) -> Value {
    let o = child.wait_with_output().unwrap();
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("reader output ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

/// Waits until `served`'s log has `n` lines containing `what`.
fn wait_log(served: &Served, what: &str, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while served.log().lines().filter(|l| l.contains(what)).count() < n {
        assert!(Instant::now() < deadline, "expected {n} log lines with {what:?}:\n{}", served.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

wvtest!(a_paused_reader_gets_a_failed_transfer, needs = ["curl", "python3", "promtool"], |t| {
    let tmp = TempDir::new("serve-paused");
    // More than a grown receive buffer (6 MB) and send buffer (4 MB) hold besides.
    let store = big_store(&tmp, 60_000);
    let served = Served::start(&store, tmp.path(), &["--send-timeout", "2"]);
    let out = tmp.join("curl.pcap");
    let head = tmp.join("curl.h");
    let mut curl = Background(
        Command::new("curl")
            .args(["-s", "--limit-rate", "4M", "-D"])
            .arg(&head)
            .arg("-o")
            .arg(&out)
            .arg(format!("http://{}/api/v1/query", served.addr))
            .spawn()
            .expect("curl"),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::metadata(&out).map_or(0, |m| m.len()) == 0 {
        assert!(Instant::now() < deadline, "no bytes of the export arrived");
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid = curl.0.id() as libc::pid_t;
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    let raw = reader(&served.addr, 0, 4.0, -1, 65536, &tmp.join("raw.pcap"));
    // Both pause past --send-timeout (2 s), then read on.
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    let st = curl.0.wait().unwrap();
    assert!(!st.success(), "curl must see a failed transfer, got {st}");
    assert!(std::fs::read_to_string(&head).unwrap().starts_with("HTTP/1.1 200"));
    let full = 24 + 60_000 * 1016;
    assert!(std::fs::metadata(&out).unwrap().len() < full, "curl got everything");
    let r = report(raw);
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["final"], false, "the body ended as if whole: {r}");
    assert!(r["bytes"].as_u64().unwrap() < full, "{r}");

    // Logged, truthfully, and counted under a code of their own.
    wait_log(&served, "408 given up after", 2);
    wait_log(&served, "given up: the client took no data for 2 s (--send-timeout)", 2);
    let http = Http::new(&format!("http://{}", served.addr));
    let m = http.get("/metrics", &[]);
    promtool_ok(&m.body, "after two given-up exports");
    assert!(m.text().contains("wirevault_http_requests_total{code=\"408\"} 2"), "{}", m.text());
    // Their query slots are free.
    assert_eq!(http.get("/api/v1/status", &[]).json()["limits"]["queries_running"], 0);
    assert_no_panic(&served.log(), "serve");
});

wvtest!(steady_slow_readers_get_every_byte, needs = ["curl", "python3", "tcpdump"], |t| {
    let tmp = TempDir::new("serve-slow");
    let store = big_store(&tmp, 20_000);
    let served = Served::start(&store, tmp.path(), &["--send-timeout", "3"]);
    // For more than twice the timeout, at 2 KB/s and 27 KB/s, with the
    // smallest receive buffer: their TCP acknowledges what they read as they
    // read it, as behind a link of that speed. (With a buffer the kernel has
    // grown, it opens its window a sixteenth of the buffer at a time: the
    // server cannot tell such a reader from one that stopped until then;
    // DESIGN.md, "Serve", has the figures.)
    let phase = 7.0;
    let (a_out, b_out) = (tmp.join("a.pcap"), tmp.join("b.pcap"));
    let a = reader(&served.addr, 2000, phase, 0, 0, &a_out);
    let b = reader(&served.addr, 27_000, phase, 0, 0, &b_out);
    let cli = tmp.join("cli.pcap");
    run_wirevault(&["query", store.to_str().unwrap(), "-w", cli.to_str().unwrap()]).expect(0, "query");
    let want = std::fs::read(&cli).unwrap();
    for (r, out, rate) in [(report(a), &a_out, 2000.0), (report(b), &b_out, 27_000.0)] {
        assert_eq!(
            (r["status"].as_u64(), r["final"].as_bool(), &r["error"]),
            (Some(200), Some(true), &Value::Null),
            "{rate} B/s: {r}\n{}",
            served.log()
        );
        // It did read slowly that long (not all at once).
        let during = r["during"].as_f64().unwrap();
        assert!(during <= rate * (phase + 1.0) && during >= rate * phase * 0.5, "{rate} B/s: {r}");
        let got = std::fs::read(out).unwrap();
        assert!(got == want, "{rate} B/s: {} bytes, the CLI's {}", got.len(), want.len());
        let (_, recs) = tcpdump_frames(out, &[], tmp.path());
        assert_eq!(recs.len(), 20_000, "tcpdump reads the {rate} B/s export whole");
    }
    wait_log(&served, &format!("\"GET /api/v1/query\" 200 {} bytes", want.len()), 2);
    assert!(!served.log().contains("given up"), "{}", served.log());
    assert_no_panic(&served.log(), "serve");
});
