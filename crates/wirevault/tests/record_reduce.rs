//! `record --dedup` and `record --flow-cutoff`: what is deliberately not
//! stored, counted as `deduplicated` and `cut`, with every counter adding up.
//! From files (exact, no root) the stored frames are compared with the
//! expected ones and read back by tcpdump; live (root, veth in namespaces)
//! frames sent twice by tcpreplay are stored once, and a real TCP transfer
//! is cut where the rule applied to tcpdump's own capture of it says.

use crate::util::*;
use std::collections::HashMap;
use std::process::Command;

/// An Ethernet/IPv4/TCP (proto 6) or UDP (17) frame from `a` to `b` of
/// `len` bytes with TCP flags `flags`, its payload tagged with `tag`.
fn l4_frame(proto: u8, a: ([u8; 4], u16), b: ([u8; 4], u16), flags: u8, len: usize, tag: u32) -> Vec<u8> {
    let l4 = if proto == 6 { 20 } else { 8 };
    let len = len.max(14 + 20 + l4 + 4);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&DST_MAC);
    f[6..12].copy_from_slice(&SRC_MAC);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&a.0);
    f[30..34].copy_from_slice(&b.0);
    f[34..36].copy_from_slice(&a.1.to_be_bytes());
    f[36..38].copy_from_slice(&b.1.to_be_bytes());
    if proto == 6 {
        f[46] = 0x50;
        f[47] = flags;
    } else {
        f[38..40].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    }
    let at = 14 + 20 + l4;
    f[at..at + 4].copy_from_slice(&tag.to_be_bytes());
    f
}

const SYN: u8 = 0x02;
const ACK: u8 = 0x10;
const FIN: u8 = 0x01;
const RST: u8 = 0x04;

fn record_file(tmp: &TempDir, frames: &[Frame], opts: &[&str]) -> (Outcome, Vec<Rec>) {
    let src = tmp.join("in.pcap");
    write_pcap(&src, 1, 65535, true, frames);
    let store = tmp.join("store");
    let mut args =
        vec!["record", "-q", "--buffer", "64M", "-o", store.to_str().unwrap(), "--read", src.to_str().unwrap()];
    args.extend_from_slice(opts);
    let o = run_wirevault(&args);
    let files = check_store(&store);
    (o, stream_records(&files, 0))
}

/// Asserts that tcpdump reads `n` packets from the store's files.
fn tcpdump_reads(tmp: &TempDir, n: usize) {
    let files = check_store(&tmp.join("store"));
    let mut total = 0;
    for f in &files {
        total += tcpdump_frames(&f.path, &[], tmp.path()).1.len();
    }
    assert_eq!(total, n, "packets tcpdump reads from the store");
}

wvtest!(dedup_from_a_file_drops_copies_within_the_window_exactly, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("dedup-file");
    let base = test_frames(600, 1_700_000_000_000_000_000);
    // Every third frame is copied 10 us later (inside a 1 ms window: not
    // stored); every seventh also 5.5 ms later (outside: stored).
    let mut all = Vec::new();
    let mut want = Vec::new();
    let mut dups = 0;
    for (i, f) in base.iter().enumerate() {
        all.push(f.clone());
        want.push(f.clone());
        if i % 3 == 0 {
            all.push(Frame { ts_ns: f.ts_ns + 10_000, ..f.clone() });
            dups += 1;
        }
        if i % 7 == 0 {
            let late = Frame { ts_ns: f.ts_ns + 5_500_000, ..f.clone() };
            all.push(late.clone());
            want.push(late);
        }
    }
    // A copy with another original length is another frame.
    let mut other_len = base[1].clone();
    other_len.ts_ns += 20_000;
    other_len.origlen += 1;
    all.push(other_len.clone());
    want.push(other_len);
    all.sort_by_key(|f| f.ts_ns);
    want.sort_by_key(|f| f.ts_ns);
    let (o, got) = record_file(&tmp, &all, &["--dedup", "1ms"]);
    o.expect(0, "record --dedup");
    assert!(o.stderr.contains(&format!(", {dups} deduplicated,")), "summary: {}", o.stderr);
    let c = final_counters(&tmp.join("store"));
    assert_eq!((c.received, c.written, c.deduplicated, c.cut), (all.len() as u64, want.len() as u64, dups, 0));
    assert_same_frames(&want, &got, true, "stored after --dedup");
    tcpdump_reads(&tmp, want.len());
    // The query layer and the index on what was kept: all of it; then a time range and
    // a filter, against tcpdump's reading of the expected frames with the same filter.
    let store = tmp.join("store");
    let queried = query_frames(&store, &tmp.join("query.pcap"), &[]);
    assert_same_frames(&want, &queried, true, "query over the deduplicated store");
    let (from, to) = (want[want.len() / 4].ts_ns, want[3 * want.len() / 4].ts_ns);
    let part: Vec<Frame> = want.iter().filter(|f| f.ts_ns >= from && f.ts_ns < to).cloned().collect();
    let part_file = tmp.join("part.pcap");
    write_pcap(&part_file, 1, 65535, true, &part);
    let (_, oracle) = tcpdump_frames(&part_file, &["udp"], tmp.path());
    assert!(!oracle.is_empty() && oracle.len() < part.len(), "the filter selects some frames of the range");
    let (f, t) = (time_arg(from), time_arg(to));
    let sel = query_frames(&store, &tmp.join("query-udp.pcap"), &["--from", &f, "--to", &t, "udp"]);
    let oracle: Vec<Frame> = oracle.iter().map(Rec::frame).collect();
    assert_same_frames(&oracle, &sel, true, "query --from --to udp over the deduplicated store");

    // Without --dedup every copy is stored.
    let tmp2 = TempDir::new("dedup-off");
    let (o, got) = record_file(&tmp2, &all, &[]);
    o.expect(0, "record");
    assert_eq!(got.len(), all.len());
    assert_eq!(final_counters(&tmp2.join("store")).deduplicated, 0);
});

/// The cutoff rule, written out independently of the recorder's table:
/// per connection (both directions), a frame is kept when the connection's
/// original bytes before it are fewer than `limit`; a SYN without ACK starts
/// a connection again. Frames without ports are always kept.
fn expected_cut(frames: &[Frame], limit: u64) -> Vec<bool> {
    let mut seen: HashMap<(u8, Vec<u8>, Vec<u8>), u64> = HashMap::new();
    frames
        .iter()
        .map(|f| {
            let d = &f.data;
            if d.len() < 38 || d[12..14] != [0x08, 0x00] || !matches!(d[23], 6 | 17) {
                return true;
            }
            // (address, port) of each end; the connection is the pair in order.
            let a = [&d[26..30], &d[34..36]].concat();
            let b = [&d[30..34], &d[36..38]].concat();
            let key = if a <= b { (d[23], a, b) } else { (d[23], b, a) };
            let bytes = seen.entry(key).or_insert(0);
            if d[23] == 6 && d.len() > 47 && d[47] & (SYN | ACK) == SYN {
                *bytes = 0;
            }
            let keep = *bytes < limit;
            *bytes += u64::from(f.origlen);
            keep
        })
        .collect()
}

wvtest!(flow_cutoff_from_a_file_keeps_the_first_bytes_of_each_connection, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("cutoff-file");
    let (c1, s1) = (([10, 0, 0, 1], 40001), ([10, 0, 0, 2], 80));
    let (c2, s2) = (([10, 0, 0, 3], 40002), ([10, 0, 0, 2], 443));
    let u1 = (([10, 0, 0, 4], 5000), ([10, 0, 0, 5], 53));
    let mut frames = Vec::new();
    let mut t = 1_700_000_000_000_000_000u64;
    let mut push = |data: Vec<u8>| {
        t += 1_000;
        frames.push(Frame { ts_ns: t, origlen: data.len() as u32, data });
    };
    let mut tag = 0;
    let mut next = || {
        tag += 1;
        tag
    };
    // Two TCP connections interleaved, both directions, 20 data segments each
    // of 700 bytes, then FIN/ACK; the first connection opens again on the
    // same ports (a new SYN: counted from zero); a UDP flow; ICMP-like
    // frames (no ports) never cut; an RST'd connection's stragglers still cut.
    for (c, s) in [(c1, s1), (c2, s2)] {
        push(l4_frame(6, c, s, SYN, 60, next()));
        push(l4_frame(6, s, c, SYN | ACK, 60, next()));
        push(l4_frame(6, c, s, ACK, 60, next()));
    }
    for i in 0..20 {
        for (c, s) in [(c1, s1), (c2, s2)] {
            let (a, b) = if i % 3 == 0 { (s, c) } else { (c, s) };
            push(l4_frame(6, a, b, ACK, 700, next()));
        }
        push(l4_frame(17, u1.0, u1.1, 0, 300, next()));
        let mut icmp = l4_frame(17, u1.0, u1.1, 0, 100, next());
        icmp[23] = 1;
        push(icmp);
    }
    for (c, s) in [(c1, s1), (c2, s2)] {
        push(l4_frame(6, c, s, FIN | ACK, 60, next()));
        push(l4_frame(6, s, c, FIN | ACK, 60, next()));
        push(l4_frame(6, c, s, ACK, 60, next()));
    }
    push(l4_frame(6, c1, s1, SYN, 60, next()));
    push(l4_frame(6, s1, c1, SYN | ACK, 60, next()));
    for _ in 0..10 {
        push(l4_frame(6, c1, s1, ACK, 500, next()));
    }
    push(l4_frame(6, c1, s1, RST, 60, next()));
    push(l4_frame(6, c1, s1, ACK, 60, next()));
    let limit = 3000;
    let keep = expected_cut(&frames, limit);
    let want: Vec<Frame> = frames.iter().zip(&keep).filter(|(_, k)| **k).map(|(f, _)| f.clone()).collect();
    let cut = frames.len() - want.len();
    assert!(cut > 40 && want.len() > 40, "the scenario cuts some and keeps some: {cut} cut");
    let (o, got) = record_file(&tmp, &frames, &["--flow-cutoff", &limit.to_string()]);
    o.expect(0, "record --flow-cutoff");
    assert!(o.stderr.contains(&format!(", {cut} cut,")), "summary: {}", o.stderr);
    let c = final_counters(&tmp.join("store"));
    assert_eq!((c.received, c.written, c.cut, c.deduplicated), (frames.len() as u64, want.len() as u64, cut as u64, 0));
    assert_same_frames(&want, &got, true, "stored after --flow-cutoff");
    tcpdump_reads(&tmp, want.len());
    let s = stats(&tmp.join("store"));
    assert_eq!(s["flows_evicted"], 0, "{s}");

    // A table of one bucket (4 connections) cannot hold them all: nothing
    // is cut that the rule keeps (it fails open) and the evictions are counted.
    let tmp2 = TempDir::new("cutoff-small");
    let mut many = Vec::new();
    for p in 0..12u16 {
        for k in 0..4 {
            let data = l4_frame(6, ([10, 0, 1, 1], 1000 + p), ([10, 0, 1, 2], 80), ACK, 1000, u32::from(p) * 10 + k);
            many.push(Frame {
                ts_ns: 1_700_000_000_000_000_000 + u64::from(k) * 1_000_000 + u64::from(p),
                origlen: 1000,
                data,
            });
        }
    }
    many.sort_by_key(|f| f.ts_ns);
    let (o, got) = record_file(&tmp2, &many, &["--flow-cutoff", "1500", "--flow-table", "4"]);
    o.expect(0, "record --flow-table 4");
    let want_min = expected_cut(&many, 1500).iter().filter(|k| **k).count();
    assert!(got.len() >= want_min, "a full table kept {} of the {want_min} frames the rule keeps", got.len());
    assert!(stats(&tmp2.join("store"))["flows_evicted"].as_u64().unwrap() > 0);
    final_counters(&tmp2.join("store"));
});

#[test]
fn bad_reduce_options_are_one_sentence_and_exit_2() {
    let tmp = TempDir::new("reduce-bad");
    let store = tmp.join("store");
    for (opt, val, says) in [
        ("--dedup", "0s", "--dedup must be"),
        ("--dedup", "1 fortnight", "not a duration"),
        ("--dedup", "11s", "at most 10s"),
        ("--flow-cutoff", "lots", "--flow-cutoff"),
        ("--flow-table", "0", "--flow-table must be"),
        ("--flow-idle", "0s", "--flow-idle must be"),
    ] {
        let o = run_wirevault(&["record", "-o", store.to_str().unwrap(), "--synthetic", "count=10", opt, val]);
        o.expect(2, &format!("{opt} {val}"));
        assert!(o.stderr.contains(says), "{opt} {val}: {}", o.stderr);
        assert_eq!(o.stderr.trim().lines().count(), 1, "{opt} {val}: one sentence: {}", o.stderr);
        assert_no_panic(&o.stderr, opt);
    }
}

wvtest!(live_frames_sent_twice_are_stored_once, needs = [root, "ip", "tcpreplay", "tcpdump"], |t| {
    let _g = heavy_lock();
    live_dedup_run("dedup-live", &[]);
});

/// Sends every frame twice over a veth to a recorder with `--dedup 500ms`
/// and `extra`; asserts that each is stored once and counted once as
/// deduplicated. Returns the temp dir (it holds the store) and the checked files.
pub(crate) fn live_dedup_run(name: &str, extra: &[&str]) -> (TempDir, Vec<StoredFile>) {
    let tmp = TempDir::new(name);
    let pair = VethPair::new();
    // Every frame twice, back to back (a SPAN port's two copies); the
    // window is wide (a loaded machine may pause tcpreplay between the two).
    let sent = test_frames(1500, 1_700_000_000_000_000_000);
    let twice: Vec<Frame> =
        sent.iter().flat_map(|f| [f.clone(), Frame { ts_ns: f.ts_ns + 1_000, ..f.clone() }]).collect();
    let pcap = tmp.join("twice.pcap");
    write_pcap(&pcap, 1, 65535, false, &twice);
    let store = tmp.join("store");
    let mut r = Recorder::start(
        Some(&pair.ns_b),
        &store,
        tmp.path(),
        &[&["-i", pair.if_b, "--buffer", "64M", "-q", "--dedup", "500ms"], extra].concat(),
    );
    r.wait_ready();
    let out = run_ok(VethPair::exec(&pair.ns_a, "tcpreplay").args(["-i", pair.if_a, "--topspeed"]).arg(&pcap));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("Successful packets:        {}", twice.len())), "tcpreplay: {text}");
    r.wait_received(twice.len() as u64);
    r.terminate().expect(0, "recorder stopped by SIGTERM");
    let c = final_counters(&store);
    assert_eq!(
        (c.received, c.written, c.deduplicated, c.drops()),
        (twice.len() as u64, sent.len() as u64, sent.len() as u64, 0),
        "received, written, deduplicated, dropped"
    );
    let files = check_store(&store);
    assert_same_frames(&sent, &stream_records(&files, 0), false, "live --dedup");
    (tmp, files)
}

wvtest!(live_tcp_transfer_is_cut_where_the_rule_says, needs = [root, "ip", "tcpdump", "python3"], |t| {
    let _g = heavy_lock();
    live_cutoff_run("cutoff-live", &[]);
});

/// Three TCP transfers (200 KB, 5 KB, 60 KB) over a veth to a recorder with
/// `--flow-cutoff 20000` and `extra`, tcpdump beside it as the oracle: the
/// store holds exactly the frames the rule keeps of tcpdump's capture, the
/// counters add up, and `query` (all, and a filter) returns them from the
/// reduced store's index. Returns the temp dir (it holds the store) and the
/// checked files.
pub(crate) fn live_cutoff_run(name: &str, extra: &[&str]) -> (TempDir, Vec<StoredFile>) {
    let tmp = TempDir::new(name);
    let pair = VethPair::new();
    for (ns, dev, addr) in [(&pair.ns_a, pair.if_a, "10.77.0.1/24"), (&pair.ns_b, pair.if_b, "10.77.0.2/24")] {
        run_ok(Command::new("ip").args(["-n", ns, "addr", "add", addr, "dev", dev]));
        run_ok(Command::new("ip").args(["-n", ns, "link", "set", "dev", dev, "arp", "on"]));
    }
    let store = tmp.join("store");
    let peer = tmp.join("tcpdump.pcap");
    let mut td = Background(
        VethPair::exec(&pair.ns_b, "tcpdump")
            // A 64 MiB buffer: with the default 2 MiB, tcpdump dropped frames of the 200 KB
            // transfer on a loaded machine (the recorder, beside it, got them all).
            .args(["-i", pair.if_b, "-s", "0", "-B", "65536", "-U", "--immediate-mode", "-w"])
            .arg(&peer)
            .stderr(std::fs::File::create(tmp.join("tcpdump.err")).unwrap())
            .spawn()
            .unwrap(),
    );
    let mut r = Recorder::start(
        Some(&pair.ns_b),
        &store,
        tmp.path(),
        &[&["-i", pair.if_b, "--buffer", "64M", "-q", "--flow-cutoff", "20000"], extra].concat(),
    );
    r.wait_ready();
    // tcpdump is ready when it says it listens.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(tmp.join("tcpdump.err")).unwrap_or_default().contains("listening on") {
        assert!(std::time::Instant::now() < deadline, "tcpdump never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Three TCP connections of known size (200 KB, 5 KB, 60 KB) from a to b.
    let server = "import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\ns.bind(('10.77.0.2',9000));s.listen(8);print('up',flush=True)\nfor _ in range(3):\n  c,_=s.accept()\n  while c.recv(65536): pass\n  c.close()\n";
    let mut srv = VethPair::exec(&pair.ns_b, "python3")
        .args(["-c", server])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(srv.stdout.as_mut().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "up");
    let client = "import socket,sys\nfor n in (200000,5000,60000):\n  c=socket.create_connection(('10.77.0.2',9000));c.sendall(b'x'*n);c.shutdown(socket.SHUT_WR)\n  while c.recv(65536): pass\n  c.close()\n";
    run_ok(VethPair::exec(&pair.ns_a, "python3").args(["-c", client]));
    assert!(srv.wait().unwrap().success());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let o = r.terminate();
    o.expect(0, "recorder stopped by SIGTERM");
    // SAFETY: the pid is our own child's.
    unsafe { libc::kill(td.0.id() as libc::pid_t, libc::SIGINT) };
    let _ = td.0.wait();
    // The oracle is tcpdump's capture: it must be whole.
    let td_err = std::fs::read_to_string(tmp.join("tcpdump.err")).unwrap_or_default();
    assert!(
        td_err.lines().any(|l| l.trim() == "0 packets dropped by kernel"),
        "tcpdump lost frames, no oracle: {td_err}"
    );
    let (_, seen) = read_capture(&peer);
    let frames: Vec<Frame> = seen.iter().map(Rec::frame).collect();
    let keep = expected_cut(&frames, 20000);
    let want: Vec<Frame> = frames.iter().zip(&keep).filter(|(_, k)| **k).map(|(f, _)| f.clone()).collect();
    let c = final_counters(&store);
    assert_eq!(c.received, frames.len() as u64, "the recorder and tcpdump saw the same frames");
    assert_eq!(c.cut, (frames.len() - want.len()) as u64, "cut");
    assert!(c.cut > 0, "the 200 KB and 60 KB transfers pass the cutoff");
    let files = check_store(&store);
    let got = stream_records(&files, 0);
    assert_same_frames(&want, &got, false, "live --flow-cutoff against the rule on tcpdump's capture");
    // The query layer and the index on what was kept: all of it, then the 5 KB transfer's
    // connection by its port (the second the client opened).
    let all = query_frames(&store, &tmp.join("query.pcap"), &[]);
    assert_same_frames(&want, &all, false, "query over the cut store");
    // (source port, destination port, TCP flags) of an untagged IPv4/TCP frame (no IP options).
    let tcp = |f: &Frame| {
        let d = &f.data;
        (d.len() > 47 && d[12..14] == [0x08, 0x00] && d[14] == 0x45 && d[23] == 6)
            .then(|| (u16::from_be_bytes([d[34], d[35]]), u16::from_be_bytes([d[36], d[37]]), d[47]))
    };
    let client_ports: Vec<u16> =
        want.iter().filter_map(tcp).filter(|&(_, _, fl)| fl & (SYN | ACK) == SYN).map(|(s, _, _)| s).collect();
    assert_eq!(client_ports.len(), 3, "three connections opened");
    let second = client_ports[1];
    let one: Vec<Frame> =
        want.iter().filter(|f| tcp(f).is_some_and(|(s, d, _)| s == second || d == second)).cloned().collect();
    let filtered = query_frames(&store, &tmp.join("query-port.pcap"), &[&format!("tcp port {second}")]);
    assert!(!one.is_empty());
    assert_same_frames(&one, &filtered, false, "query tcp port of the 5 KB transfer");
    (tmp, files)
}
