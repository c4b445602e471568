//! Live capture end to end: frames sent with tcpreplay from one network
//! namespace over a veth pair are recorded by `wirevault record -i` in the
//! other, then compared with what was sent, byte for byte and in order.
//!
//! The link carries nothing but the test's frames (no addresses, IPv6 and
//! ARP off), so counters can be asserted exactly. Needs root, tcpreplay,
//! tcpdump and capinfos; skips without them (fails in CI).
//!
//! Also `--ring-size` (its bounds, and the live rings it sizes) and an
//! interface deleted under a recording, which is called gone.

use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

pub(crate) const TOOLS: &[&str] = &["ip", "tcpreplay", "tcpdump", "capinfos"];
/// Frames in the standard sequence: sizes 60..9018, ~7 MB.
pub(crate) const N: u32 = 2000;

/// Sends `file` from `ns` out of `dev` with tcpreplay (`rate` as tcpreplay
/// options) and asserts that every frame left.
pub(crate) fn replay(ns: &str, dev: &str, file: &Path, rate: &[&str], count: u32) {
    let out = run_ok(VethPair::exec(ns, "tcpreplay").args(["-i", dev]).args(rate).arg(file));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("Successful packets:        {count}")) && text.contains("Failed packets:            0"),
        "tcpreplay did not send all {count} frames:\n{text}"
    );
}

/// One live scenario: a fresh veth pair, the standard frame sequence as a
/// pcap for tcpreplay, and a temp dir holding the store and the logs.
pub(crate) struct Live {
    pub(crate) tmp: TempDir,
    pub(crate) pair: VethPair,
    pub(crate) sent: Vec<Frame>,
    pub(crate) pcap: PathBuf,
}

impl Live {
    pub(crate) fn new(name: &str, n: u32) -> Live {
        Live::with_queues(name, n, 1)
    }

    /// The same on a veth pair with `queues` receive and transmit queues.
    pub(crate) fn with_queues(name: &str, n: u32, queues: u32) -> Live {
        let tmp = TempDir::new(name);
        let pair = VethPair::with_queues(queues);
        let sent = test_frames(n, 1_700_000_000_000_000_000);
        let pcap = tmp.join("sent.pcap");
        write_pcap(&pcap, 1, 65535, false, &sent);
        Live { tmp, pair, sent, pcap }
    }

    pub(crate) fn store(&self) -> PathBuf {
        self.tmp.join("store")
    }

    pub(crate) fn start(&self, args: &[&str]) -> Recorder {
        let mut all = vec!["-i", self.pair.if_b, "--buffer", "64M", "-q"];
        all.extend_from_slice(args);
        let mut r = Recorder::start(Some(&self.pair.ns_b), &self.store(), self.tmp.path(), &all);
        r.wait_ready();
        r
    }

    /// Sends the whole sequence, waits until the recorder has it, stops it
    /// with SIGTERM; returns (outcome, window start, window end).
    pub(crate) fn send_and_stop(&self, mut r: Recorder, rate: &[&str], expect: u64) -> (Outcome, u64, u64) {
        let t0 = now_ns();
        replay(&self.pair.ns_a, self.pair.if_a, &self.pcap, rate, self.sent.len() as u32);
        let t1 = now_ns();
        r.wait_received(expect);
        let o = r.terminate();
        o.expect(0, "recorder stopped by SIGTERM");
        (o, t0, t1)
    }
}

/// Received timestamps are the capture clock: inside the window in which
/// the frames were sent, and never going backwards.
pub(crate) fn assert_ts_in_window(recs: &[Rec], t0: u64, t1: u64) {
    let mut prev = 0;
    for (i, r) in recs.iter().enumerate() {
        assert!(
            (t0..=t1).contains(&r.ts_ns),
            "frame {i}: timestamp {} outside the sending window {t0}..={t1}",
            r.ts_ns
        );
        assert!(r.ts_ns >= prev, "frame {i}: timestamp goes backwards ({} < {prev})", r.ts_ns);
        prev = r.ts_ns;
    }
}

pub(crate) fn paths(files: &[StoredFile]) -> Vec<PathBuf> {
    files.iter().map(|f| f.path.clone()).collect()
}

wvtest!(live_frames_are_stored_byte_for_byte_with_exact_counters, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let l = Live::new("live-exact", N);
    let r = l.start(&[]);
    // VLAN and QinQ frames included: the kernel strips the outer tag, the
    // recorder must put it back exactly as it was on the wire.
    exact_run(&l, r, "live capture");
});

/// Sends the standard sequence to the started recorder `r`, stops it, and checks that every
/// frame is stored byte for byte, in order, stamped within the sending window, with exact
/// counters, in pcap files the peers read. Returns the recorder's outcome.
pub(crate) fn exact_run(l: &Live, r: Recorder, what: &str) -> Outcome {
    let (o, t0, t1) = l.send_and_stop(r, &["--topspeed"], N as u64);
    assert!(o.stderr.contains(&format!("{N} packets received")), "summary: {}", o.stderr);

    let c = final_counters(&l.store());
    assert_eq!(
        (c.received, c.written, c.filtered, c.drops()),
        (N as u64, N as u64, 0, 0),
        "received, written, filtered, dropped"
    );
    let files = check_store(&l.store());
    let got = stream_records(&files, 0);
    assert_same_frames(&l.sent, &got, false, what);
    assert_ts_in_window(&got, t0, t1);
    for f in &files {
        assert_eq!(f.entry["linktype"], 1);
        assert_eq!(f.entry["format"], "pcap");
    }
    assert_peers_read(&paths(&files), usize::MAX);
    o
}

wvtest!(live_snaplen_cuts_frames_and_keeps_their_length, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let l = Live::new("live-snaplen", 500);
    snaplen_run(&l, 100, &[]);
});

/// Records the 500-frame sequence with `-s SNAP` and `args`: every frame cut to SNAP bytes with
/// its original length kept, exact counters, files the peers read.
pub(crate) fn snaplen_run(l: &Live, snap: usize, args: &[&str]) {
    let s = snap.to_string();
    let r = l.start(&[&["-s", s.as_str()], args].concat());
    l.send_and_stop(r, &["--topspeed"], 500);
    let c = final_counters(&l.store());
    assert_eq!((c.received, c.written, c.drops()), (500, 500, 0));
    let files = check_store(&l.store());
    let want: Vec<Frame> = l
        .sent
        .iter()
        .map(|f| Frame { ts_ns: f.ts_ns, origlen: f.origlen, data: f.data[..f.data.len().min(snap)].to_vec() })
        .collect();
    for f in &files {
        assert_eq!(f.entry["snaplen"], snap);
    }
    assert_same_frames(&want, &stream_records(&files, 0), false, &format!("-s {snap}"));
    assert_peers_read(&paths(&files), usize::MAX);
}

wvtest!(live_rotation_by_size_loses_and_duplicates_nothing, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    size_rotation_run("live-rot-size", &[]);
});

/// Sends the standard sequence at top speed to a recorder with `--file-size 1M` and `args`:
/// every file within the limit, enough of them, no frame lost or duplicated across them.
pub(crate) fn size_rotation_run(name: &str, args: &[&str]) {
    let l = Live::new(name, N);
    let limit: u64 = 1 << 20;
    let r = l.start(&[&["--file-size", "1M"], args].concat());
    let (_, t0, t1) = l.send_and_stop(r, &["--topspeed"], N as u64);

    let c = final_counters(&l.store());
    assert_eq!((c.written, c.drops()), (N as u64, 0));
    let files = check_store(&l.store());
    let total: u64 = files.iter().map(|f| f.entry["bytes"].as_u64().unwrap()).sum();
    assert!(files.len() as u64 >= total / limit, "{} files for {total} bytes with --file-size 1M", files.len());
    for f in &files {
        let b = f.entry["bytes"].as_u64().unwrap();
        assert!(b <= limit, "{}: {b} bytes, over --file-size 1M", f.path.display());
    }
    let got = stream_records(&files, 0);
    assert_same_frames(&l.sent, &got, false, "frames across size rotation");
    assert_ts_in_window(&got, t0, t1);
    assert_peers_read(&paths(&files), usize::MAX);
}

/// Sends 1000 frames at 800/s (1.25 s) to a recorder with `--file-time
/// WINDOW` and `args`; returns the checked store's files, after asserting that no file
/// spans a window boundary and that no frame is lost or duplicated across
/// the boundaries.
pub(crate) fn time_rotation_run(name: &str, file_time: &str, window: u64, args: &[&str]) -> Vec<StoredFile> {
    let l = Live::new(name, 1000);
    let r = l.start(&[&["--file-time", file_time], args].concat());
    let (_, t0, t1) = l.send_and_stop(r, &["--pps", "800"], 1000);
    let c = final_counters(&l.store());
    assert_eq!((c.written, c.drops()), (1000, 0));
    let files = check_store(&l.store());
    let min = (1_000_000_000 / window) as usize;
    assert!(files.len() >= min, "only {} files for 1.25 s with --file-time {file_time}", files.len());
    for f in &files {
        let (a, b) = (f.entry["first_ns"].as_u64().unwrap(), f.entry["last_ns"].as_u64().unwrap());
        assert_eq!(a / window, b / window, "{}: packets from {a} to {b} span a {file_time} boundary", f.path.display());
    }
    let got = stream_records(&files, 0);
    assert_same_frames(&l.sent, &got, false, "frames across time rotation");
    assert_ts_in_window(&got, t0, t1);
    assert_peers_read(&paths(&files), usize::MAX);
    files
}

wvtest!(live_rotation_by_time_closes_files_at_clock_aligned_boundaries, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    time_rotation_run("live-rot-time", "200ms", 200_000_000, &[]);
});

/// Regression: with `--file-time`, the worker closed a window's file as soon
/// as the wall clock passed the boundary, but TPACKET_V3 hands over a block
/// up to its retire timeout (then 10 ms, now 40) later, so frames stamped just before the
/// boundary opened a second, tiny file for the same window. The clock now
/// closes a file only a grace period (250 ms) after its boundary.
wvtest!(time_rotation_never_opens_a_second_file_for_a_closed_window, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let window = 20_000_000;
    for run in 0..4 {
        let files = time_rotation_run("live-rot-time-once", "20ms", window, &[]);
        let mut prev = None;
        for f in &files {
            let w = f.entry["first_ns"].as_u64().unwrap() / window;
            assert_ne!(Some(w), prev, "run {run}: two files for one 20 ms window ({})", f.path.display());
            prev = Some(w);
        }
    }
});

wvtest!(live_filter_stores_only_matching_frames_and_counts_the_rest, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let l = Live::new("live-filter", N);
    let want: Vec<Frame> =
        l.sent.iter().enumerate().filter(|(i, _)| kind_of(*i as u32) == Kind::Dns).map(|(_, f)| f.clone()).collect();
    // libpcap agrees on which frames match.
    let (_, by_tcpdump) = tcpdump_frames(&l.pcap, &["udp port 53"], l.tmp.path());
    assert_same_frames(&want, &by_tcpdump, true, "tcpdump's selection of udp port 53");

    filtered_run(&l, &["udp", "port", "53"], &want, want.len() as u64, "udp port 53");
});

/// Records the standard sequence with `args` (a filter among them) that `want` are the
/// matching frames of; waits for `expect` received, then checks the counters (received N,
/// written the matches, the rest filtered, nothing dropped), the stored frames and the files.
pub(crate) fn filtered_run(l: &Live, args: &[&str], want: &[Frame], expect: u64, what: &str) {
    let r = l.start(args);
    l.send_and_stop(r, &["--topspeed"], expect);
    let c = final_counters(&l.store());
    assert_eq!(
        (c.received, c.written, c.filtered, c.drops()),
        (N as u64, want.len() as u64, (N as usize - want.len()) as u64, 0),
        "received, written, filtered, dropped with filter {what}"
    );
    let files = check_store(&l.store());
    assert_same_frames(want, &stream_records(&files, 0), false, &format!("capture filtered by {what}"));
    assert_peers_read(&paths(&files), usize::MAX);
}

wvtest!(live_sigterm_during_heavy_traffic_leaves_only_valid_files, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    sigterm_under_load("live-sigterm", &["--file-size", "4M"]);
});

/// Loops the standard sequence at top speed into a recorder started with `args` until it has
/// received three sequences, stops it with SIGTERM, and checks that it exits 0 with a summary,
/// balanced counters (drops allowed, counted by cause), rotated valid files, and only sent
/// frames, intact and in sending order.
pub(crate) fn sigterm_under_load(name: &str, args: &[&str]) {
    let l = Live::new(name, N);
    let mut r = l.start(args);
    // Loop the sequence at top speed until the recorder is stopped.
    let _sender = Background(
        VethPair::exec(&l.pair.ns_a, "tcpreplay")
            .args(["-q", "--topspeed", "--loop", "0", "-i", l.pair.if_a])
            .arg(&l.pcap)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tcpreplay"),
    );
    r.wait_received(3 * N as u64);
    let o = r.terminate();
    o.expect(0, "SIGTERM under load");
    assert!(o.stderr.contains("packets received"), "no summary: {}", o.stderr);

    let c = final_counters(&l.store());
    assert!(c.written >= N as u64, "only {} written", c.written);
    let files = check_store(&l.store());
    assert!(files.len() >= 2, "expected rotation at 4M");
    let got = stream_records(&files, 0);
    assert_eq!(got.len() as u64, c.written, "written counter vs frames on disk");
    // Drops are allowed under load (and counted); whatever was stored must
    // be a sent frame, intact, in sending order (cyclically: the sequence
    // starts over at most once per loop of tcpreplay).
    let mut prev: Option<usize> = None;
    let mut wraps = 0;
    let mut prev_ts = 0;
    for (i, g) in got.iter().enumerate() {
        assert!(g.ts_ns >= prev_ts, "frame {i}: timestamp goes backwards");
        prev_ts = g.ts_ns;
        let seq = seq_of(g).unwrap_or_else(|| panic!("stored frame {i} is not a sent frame"));
        assert_eq!(g.data, l.sent[seq].data, "stored frame {i} (sent #{seq}) differs");
        if prev.is_some_and(|p| seq <= p) {
            wraps += 1;
        }
        prev = Some(seq);
    }
    let loops = c.received.div_ceil(N as u64);
    assert!(
        wraps < loops,
        "frames out of order: the sequence starts over {wraps} times in {} frames ({loops} loops received)",
        c.written
    );
    assert_peers_read(&paths(&files), 3);
}

/// Two capture workers (fanout by flow hash): every frame lands in exactly
/// one stream, intact, and each stream keeps sending order.
wvtest!(live_two_workers_store_every_frame_exactly_once, needs = [root, TOOLS], |t| {
    let _g = heavy_lock();
    let l = Live::new("live-workers", N);
    two_workers_run(&l, &["--workers", "2"]);
});

/// Records the standard sequence with `args` (two workers among them) and checks that every
/// frame lands in exactly one of the two streams, intact, each stream in sending order.
pub(crate) fn two_workers_run(l: &Live, args: &[&str]) -> Vec<StoredFile> {
    let r = l.start(args);
    l.send_and_stop(r, &["--topspeed"], N as u64);
    let c = final_counters(&l.store());
    assert_eq!((c.received, c.written, c.drops()), (N as u64, N as u64, 0));
    let files = check_store(&l.store());
    let mut seen = vec![None; N as usize];
    for stream in 0..2u64 {
        let mut prev = None;
        for (i, g) in stream_records(&files, stream).iter().enumerate() {
            let seq = seq_of(g).unwrap_or_else(|| panic!("stream {stream} frame {i} is not a sent frame"));
            assert_eq!(g.data, l.sent[seq].data, "stream {stream} frame {i} (sent #{seq}) differs");
            assert!(prev < Some(seq), "stream {stream}: frame #{seq} after #{prev:?}");
            prev = Some(seq);
            assert_eq!(seen[seq], None, "frame #{seq} stored twice");
            seen[seq] = Some(stream);
        }
    }
    let missing: Vec<usize> = (0..N as usize).filter(|&i| seen[i].is_none()).collect();
    assert!(missing.is_empty(), "frames never stored: {missing:?}");
    for f in &files {
        let s = f.entry["stream"].as_u64().unwrap();
        assert!(s < 2, "stream {s} with 2 workers");
    }
    assert_peers_read(&paths(&files), usize::MAX);
    files
}

/// The sequence number a test frame carries after its headers.
fn seq_of(r: &Rec) -> Option<usize> {
    let d = &r.data;
    let off = match u16::from_be_bytes([d[12], d[13]]) {
        0x0800 => 14 + 20 + if d[23] == 6 { 20 } else { 8 },
        0x8100 if d[16..18] == [0x86, 0xdd] => 18 + 40 + 8,
        0x8100 => 18,
        0x88a8 => 22,
        0x88b5 => 14,
        0x86dd => 14 + 40 + 8,
        _ => return None,
    };
    let s = u32::from_be_bytes(d.get(off..off + 4)?.try_into().ok()?) as usize;
    (s < N as usize).then_some(s)
}

wvtest!(live_bad_filter_exits_2_with_libpcaps_message, needs = [root, TOOLS], |t| {
    let tmp = TempDir::new("live-bad-filter");
    let pair = VethPair::new();
    let expr = "udp port nonsense";
    let o = Outcome::from_output(
        VethPair::exec(&pair.ns_b, bin())
            .args(["record", "-i", pair.if_b, "--buffer", "64M", "-o"])
            .arg(tmp.join("store"))
            .arg(expr)
            .output()
            .unwrap(),
    );
    o.expect(2, "bad live filter");
    let msg = libpcap_filter_error(expr);
    assert!(o.stderr.contains(&msg), "stderr lacks libpcap's \"{msg}\": {}", o.stderr);
    assert!(!tmp.join("store").exists(), "a store was created for a bad filter");
});

#[test]
fn unknown_interface_exits_1_naming_it() {
    let tmp = TempDir::new("no-such-if");
    let o = Outcome::from_output(
        Command::new(bin())
            .args(["record", "-i", "wvnosuch0", "--buffer", "64M", "-o"])
            .arg(tmp.join("store"))
            .output()
            .unwrap(),
    );
    o.expect(1, "unknown interface");
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one sentence expected: {}", o.stderr);
    assert!(lines[0].contains("wvnosuch0"), "message does not name the interface: {}", o.stderr);
    assert!(!tmp.join("store").exists(), "a store was created for a missing interface");
}

#[test]
fn ring_size_is_an_option_with_bounds() {
    for (v, what) in [("1P", "absurd"), ("1K", "too small"), ("abc", "not a size")] {
        let s = TempDir::new("hr-ring");
        let o = run_wirevault(&["record", "-i", "lo", "-o", s.join("s").to_str().unwrap(), "--ring-size", v]);
        o.expect(2, &format!("--ring-size {v} ({what})"));
        assert!(o.stderr.contains("--ring-size"), "{}", o.stderr);
        assert!(!o.stderr.contains("unexpected argument"), "{}", o.stderr);
        assert!(!s.join("s").exists());
    }
}

wvtest!(ring_size_sizes_live_rings, needs = [root, "ip", "tcpreplay"], |t| {
    let tmp = TempDir::new("hr-ring-live");
    let pair = VethPair::new();
    let store = tmp.join("store");
    let mut r = Recorder::start(
        Some(&pair.ns_b),
        &store,
        tmp.path(),
        &["-i", pair.if_b, "--buffer", "64M", "-q", "--workers", "4", "--ring-size", "64M"],
    );
    r.wait_ready();
    r.terminate().expect(0, "recorder with --ring-size");
});

wvtest!(deleted_interface_is_called_gone, needs = [root, "ip"], |t| {
    let tmp = TempDir::new("hr-gone");
    let pair = VethPair::new();
    let store = tmp.join("store");
    let mut r = Recorder::start(Some(&pair.ns_b), &store, tmp.path(), &["-i", pair.if_b, "--buffer", "64M", "-q"]);
    r.wait_ready();
    run_ok(Command::new("ip").args(["-n", &pair.ns_b, "link", "del", pair.if_b]));
    let o = r.wait(Duration::from_secs(20));
    assert_no_panic(&o.stderr, "deleted interface");
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("no longer exists"), "{}", o.stderr);
    assert!(!o.stderr.contains("bring it up"), "{}", o.stderr);
});
