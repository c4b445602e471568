//! Capture at once: `record` goes live within half a second of its launch on a small ring
//! and says so in one line; the full rings take over without losing or repeating a frame
//! (`wv_capture::handover`). Checked against tcpdump on the same interface; a
//! capture that starts under traffic drops nothing at start-up.

use crate::util::*;
use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The EtherType of the test's frames (IEEE local experimental), after which each carries
/// its sequence number.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];

/// A sender already running before the recorder starts: 20,000 frames a second for at most
/// `secs` seconds, each with its own sequence number, from a raw socket in `ns`.
fn sender(ns: &str, dev: &str, secs: u32) -> Background {
    let script = format!(
        r#"
import socket, struct, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("{dev}", 0))
i, end = 0, time.time() + {secs}
while time.time() < end:
    t = time.time()
    for _ in range(20):
        s.send(b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x88\xb5" + struct.pack(">Q", i) + b"w" * 80)
        i += 1
    time.sleep(max(0.0, 0.001 - (time.time() - t)))
"#
    );
    let child = VethPair::exec(ns, "python3")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("start the sender");
    Background(child)
}

/// The test frames of a capture: (sequence number, time) each.
fn numbered(recs: &[Rec]) -> Vec<(u64, u64)> {
    recs.iter()
        .filter(|r| r.data.len() >= 22 && r.data[12..14] == ETHERTYPE)
        .map(|r| (u64::from_be_bytes(r.data[14..22].try_into().unwrap()), r.ts_ns))
        .collect()
}

/// When the recorder's "capturing on" line first showed on its standard error (read every
/// 5 ms: at most that late, so the frames checked after it are never too many).
fn capturing_line(err: &Path, deadline: Instant) -> (u64, String) {
    loop {
        let text = std::fs::read_to_string(err).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.starts_with("wirevault: capturing on ")) {
            return (now_ns(), line.to_string());
        }
        assert!(Instant::now() < deadline, "no 'capturing on' line:\n{text}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

wvtest!(capture_starts_at_once_and_stores_every_frame_after_its_line, needs = [root, "tcpdump", "python3"], |t| {
    let _g = heavy_lock();
    for (path, args) in [("copy", &[][..]), ("zero-copy", &["--format", "pcapng", "--zero-copy"][..])] {
        let tmp = TempDir::new("record-start");
        let pair = VethPair::new();
        let _send = sender(&pair.ns_a, pair.if_a, 30);
        let beside = tmp.join("beside.pcap");
        let mut td = pair.tcpdump_beside(&beside, 262144);
        let store = tmp.join("store");
        let err = tmp.join("record.err");
        let launched = now_ns();
        let mut record = VethPair::exec(&pair.ns_b, bin())
            .args(["record", "-i", pair.if_b, "-o"])
            .arg(&store)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("start record");
        let (line_ns, line) = capturing_line(&err, Instant::now() + Duration::from_secs(10));
        let want = format!("wirevault: capturing on {}: 1 worker(s), store {}", pair.if_b, store.display());
        assert_eq!(line, want, "{path}");
        // Until the full rings took over (stats.json), and a second of them.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !std::fs::read_to_string(store.join("stats.json")).is_ok_and(|s| s.contains(r#""rings":"full""#)) {
            assert!(Instant::now() < deadline, "{path}: the full rings never took over");
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: our own children, not yet reaped.
        unsafe { libc::kill(record.id() as libc::pid_t, libc::SIGINT) };
        let st = record.wait().expect("record ends");
        assert!(st.success(), "{path}: {st}\n{}", std::fs::read_to_string(&err).unwrap_or_default());
        // SAFETY: as above.
        unsafe { libc::kill(td.id() as libc::pid_t, libc::SIGINT) };
        td.wait().expect("tcpdump ends");

        let c = final_counters(&store);
        assert_eq!(c.drops(), 0, "{path}: drops");
        let stored: Vec<(u64, u64)> = check_store(&store).iter().flat_map(|f| numbered(&f.records)).collect::<Vec<_>>();
        let first = stored.iter().map(|&(_, ts)| ts).min().expect("frames stored");
        let after = first.saturating_sub(launched) as f64 / 1e9;
        assert!(after <= 0.5, "{path}: the first frame was stored {after:.3} s after launch");
        let mut seen: HashMap<u64, u32> = HashMap::new();
        for &(seq, _) in &stored {
            *seen.entry(seq).or_default() += 1;
        }
        let twice = seen.values().filter(|&&n| n > 1).count();
        assert_eq!(twice, 0, "{path}: frames stored twice");
        // tcpdump's frames stamped after the line (and before the stop) are all stored.
        let theirs = numbered(&read_capture(&beside).1);
        let last = stored.iter().map(|&(_, ts)| ts).max().unwrap();
        let missed: Vec<u64> = theirs
            .iter()
            .filter(|&&(s, ts)| ts >= line_ns && ts <= last && !seen.contains_key(&s))
            .map(|&(s, _)| s)
            .collect();
        let checked = theirs.iter().filter(|&&(_, ts)| ts >= line_ns && ts <= last).count();
        assert!(checked > 20_000, "{path}: only {checked} frames after the line to check");
        assert!(
            missed.is_empty(),
            "{path}: {} of {checked} frames after the line not stored: {:?}",
            missed.len(),
            &missed[..missed.len().min(5)]
        );
        eprintln!("{t}: {path}: first frame {after:.3} s after launch; {checked} frames after the line, all stored");
    }
});

wvtest!(live_capture_drops_nothing_at_start_up, needs = [root, "ip", "tcpreplay"], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("hr-startup");
    let pair = VethPair::new();
    // 10 s of traffic at 200 pps (stopped with the test), so that a start-up
    // slowed down by a loaded machine still sees traffic from its first
    // moment on; the check is the kernel's drop count, not the total.
    let sent = test_frames(2000, 1_700_000_000_000_000_000);
    let pcap = tmp.join("sent.pcap");
    write_pcap(&pcap, 1, 65535, false, &sent);
    // Traffic first; the recorder starts while it flows.
    let _sender = Background(
        VethPair::exec(&pair.ns_a, "tcpreplay")
            .args(["-i", pair.if_a, "--pps=200"])
            .arg(&pcap)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tcpreplay"),
    );
    std::thread::sleep(Duration::from_millis(100));
    let store = tmp.join("store");
    let mut r = Recorder::start(Some(&pair.ns_b), &store, tmp.path(), &["-i", pair.if_b, "--buffer", "1G", "-q"]);
    r.wait_ready();
    std::thread::sleep(Duration::from_secs(2));
    r.terminate().expect(0, "recorder stopped by SIGTERM");
    let c = final_counters(&store);
    assert!(c.received > 100, "received {}", c.received);
    assert_eq!(c.kernel, 0, "kernel drops at start-up (received {})", c.received);
});
