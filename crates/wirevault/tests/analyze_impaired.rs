//! `wirevault analyze` on live traffic through an impaired link: delay,
//! jitter, loss, duplication and the reordering jitter causes, made by
//! `tests/impair.py` between two namespaces (this kernel has no netem; the
//! forwarder stands in for it and logs what it did to every frame). Two
//! recorders, one at each end of the link. Every check holds however loaded
//! the machine is: the figures analyze gives equal tshark's where tshark has
//! them, equal what is computed here from the same recorded stamps where it
//! has not (plain UDP jitter, one-way delay), and equal what the forwarder
//! did where a count allows it (loss, duplicates, unmatched frames). How near
//! they come to what the forwarder was told depends on the machine's load:
//! bench/analyze_impaired.sh reports that.

use crate::analyze::{analyze_json, assert_tcp_marks_equal_tsharks, compare_with_tshark, n, py, tshark_rtp_stream};
use crate::util::*;
use std::collections::HashMap;
use std::process::{Command, Stdio};

const DELAY_MS: f64 = 10.0;
const JITTER_MS: f64 = 6.0;
const LOSS: f64 = 0.02;
const DUPLICATE: f64 = 0.02;
const A: &str = "10.78.0.1";
const B: &str = "10.78.0.2";

/// One forwarded frame, from the forwarder's log.
struct Fwd {
    recv: i64,
    verdict: String,
    out: i64,
    proto: String,
    port: u16,
    /// When it was due to leave.
    due: i64,
}

/// Checksums, segmentation and coalescing in software: the forwarder copies
/// frames as they are on the wire.
fn offloads_off(ns: &str, dev: &str) {
    run_ok(VethPair::exec(ns, "ethtool").args(["-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro", "off"]));
}

/// analyze's jitter of a plain UDP stream (`wv_analyze::qos::udp`): RFC 3550's
/// estimator against the mean of the deltas before, its mean over the packets
/// after the second.
fn mean_delta_jitter(arrivals: &[f64]) -> f64 {
    let (mut j, mut sum) = (0.0f64, 0.0);
    for k in 2..arrivals.len() {
        let mean = (arrivals[k - 1] - arrivals[0]) / (k - 1) as f64;
        j += (((arrivals[k] - arrivals[k - 1]) - mean).abs() - j) / 16.0;
        sum += j;
    }
    sum / (arrivals.len() - 2) as f64
}

/// The UDP destination port of an untagged IPv4 frame (IHL 5), if it is one.
fn udp_dst_port(d: &[u8]) -> Option<u16> {
    (d.len() >= 14 + 20 + 8 && d[12..14] == [8, 0] && d[14] == 0x45 && d[23] == 17)
        .then(|| u16::from_be_bytes([d[36], d[37]]))
}

/// One-way delays (ns) of frames `here` against the `there` they reached, paired as the link
/// did: each frame there with the latest frame here of the same bytes and length that left at
/// least the link's delay before it and is not paired yet (a retransmission identical to a lost
/// original is paired, not the original); and how many here found none.
fn delays_by_content(here: &[Rec], there: &[Rec], delay_ns: u64) -> (Vec<i64>, u64) {
    let mut sent = HashMap::<(u32, &[u8]), Vec<(u64, bool)>>::new();
    for x in here {
        sent.entry((x.origlen, &x.data[..])).or_default().push((x.ts_ns, false));
    }
    let mut delays = Vec::new();
    for x in there {
        let Some(v) = sent.get_mut(&(x.origlen, &x.data[..])) else { continue };
        if let Some(s) = v.iter_mut().rev().find(|(t, used)| !used && t + delay_ns <= x.ts_ns) {
            s.1 = true;
            delays.push(x.ts_ns as i64 - s.0 as i64);
        }
    }
    let paired = delays.len() as u64;
    (delays, here.len() as u64 - paired)
}

/// The frames of a capture that are duplicates by analyze's rule, counted here apart: the
/// same bytes and original length as the latest earlier such frame, at most `frames` frames
/// and `window_ns` before it.
fn duplicates_in(file: &std::path::Path, window_ns: u64, frames: usize) -> i64 {
    let mut last = HashMap::<(u32, Vec<u8>), (usize, u64)>::new();
    let mut n = 0;
    for (i, rec) in read_capture(file).1.into_iter().enumerate() {
        if let Some((j, t)) = last.insert((rec.origlen, rec.data), (i, rec.ts_ns)) {
            n += i64::from(i - j <= frames && rec.ts_ns.abs_diff(t) <= window_ns);
        }
    }
    n
}

fn percentile(v: &mut [i64], p: f64) -> i64 {
    v.sort_unstable();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Host A (one namespace) and host B (another) joined through a third
/// namespace where `impair.py` forwards A to B with 10 ms of delay, 6 ms of
/// uniform jitter, 2% loss and 2% duplication (B to A untouched). TCP (2 MB),
/// an RTP stream (20 ms, 250 packets), a plain UDP stream (10 ms, 300
/// packets) and ping cross it; `wirevault record` runs on A's and on B's
/// interface.
wvtest!(
    impaired_link_figures_match_the_impairment_and_tshark,
    needs = [root, "tshark", "python3", "ping", "ip", "ethtool", "ss"],
    |t| {
        let _heavy = heavy_lock();
        let tmp = TempDir::new("analyze-impaired");
        // A = near.ns_a, the forwarder in near.ns_b (its veth-b towards A), B = far.ns_b;
        // far's veth-a moves into the forwarder's namespace.
        let (near, far) = (VethPair::new(), VethPair::new());
        let (ns_a, ns_m, ns_b) = (&near.ns_a, &near.ns_b, &far.ns_b);
        ip(&["-n", &far.ns_a, "link", "set", "dev", far.if_a, "netns", ns_m]);
        ip(&["-n", ns_m, "link", "set", "dev", far.if_a, "up"]);
        let (mac_a, mac_b) = ("02:00:00:00:78:01", "02:00:00:00:78:02");
        host(ns_a, near.if_a, (A, mac_a), (B, mac_b));
        host(ns_b, far.if_b, (B, mac_b), (A, mac_a));
        offloads_off(ns_a, near.if_a);
        offloads_off(ns_b, far.if_b);
        offloads_off(ns_m, near.if_b);
        offloads_off(ns_m, far.if_a);
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/impair.py");
        let mut fwd = VethPair::exec(ns_m, "python3")
            .args([script, near.if_b, far.if_a, "--seed", "11"])
            .args(["--delay-ms", &DELAY_MS.to_string(), "--jitter-ms", &JITTER_MS.to_string()])
            .args(["--loss", &LOSS.to_string(), "--duplicate", &DUPLICATE.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 starts");
        {
            use std::io::BufRead;
            let mut line = String::new();
            std::io::BufReader::new(fwd.stdout.as_mut().unwrap()).read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "ready", "impair.py did not start");
        }
        let (store_a, store_b) = (tmp.join("store-a"), tmp.join("store-b"));
        let mut rec_a = Recorder::start(Some(ns_a), &store_a, tmp.path(), &["-i", near.if_a, "--buffer", "64M", "-q"]);
        let mut rec_b = Recorder::start(Some(ns_b), &store_b, tmp.path(), &["-i", far.if_b, "--buffer", "64M", "-q"]);
        rec_a.wait_ready();
        rec_b.wait_ready();

        let server = py(
        ns_b,
        "import socket\ns=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('10.78.0.2', 5001)); s.listen(1)\nc,_=s.accept()\nn=0\nwhile True:\n    d=c.recv(65536)\n    if not d: break\n    n+=len(d)\nc.sendall(str(n).encode()); c.close()",
    );
        let sink = py(ns_b, "import socket,time\nu=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('10.78.0.2', 40000)); v=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); v.bind(('10.78.0.2', 40010)); time.sleep(30)");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let client = py(
        ns_a,
        "import socket\nc=socket.create_connection(('10.78.0.2', 5001))\nc.sendall(b'x'*2000000); c.shutdown(socket.SHUT_WR)\nprint(c.recv(100))",
    );
        // Both streams from one busy-waiting sender at exact times: the jitter is the link's.
        let streams = py(
        ns_a,
        "import socket,struct,time\nr=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); r.bind(('10.78.0.1', 40002))\nu=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(('10.78.0.1', 40012))\nt0=time.time()+0.05\nev=sorted([(0.02*i, 0, i) for i in range(250)] + [(0.01*i, 1, i) for i in range(300)])\nfor t,k,i in ev:\n    while time.time() < t0+t: pass\n    if k == 0: r.sendto(struct.pack('!BBHII',0x80,0,1000+i,160*i,0x5eed0001)+b'\\xd5'*160, ('10.78.0.2', 40000))\n    else: u.sendto(struct.pack('!I', i)+b'u'*96, ('10.78.0.2', 40010))",
    );
        let ping = VethPair::exec(ns_a, "ping").args(["-c", "10", "-i", "0.05", "-q", B]).output().unwrap();
        assert!(ping.status.success(), "ping through the forwarder");
        for (name, mut c) in [("streams", streams), ("client", client), ("server", server)] {
            assert!(c.wait().unwrap().success(), "{name}");
        }
        // The connection's last frames (a lost FIN or final ACK is sent again after a
        // timeout of 200 ms or more), then past the longest delay: nothing is left to cross.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        for ns in [ns_a, ns_b] {
            loop {
                let states = ["state", "syn-sent", "state", "syn-recv", "state", "fin-wait-1", "state", "closing"];
                let out = run_ok(VethPair::exec(ns, "ss").args(["-Htan"]).args(states).args(["state", "last-ack"]));
                if out.stdout.is_empty() {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "the connection never closed: {out:?}");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
        rec_a.terminate().expect(0, "recorder A stopped by SIGTERM");
        rec_b.terminate().expect(0, "recorder B stopped by SIGTERM");
        let mut sink = sink;
        let _ = sink.kill();
        let _ = sink.wait();
        // SAFETY: fwd is our own child, not yet reaped.
        unsafe { libc::kill(fwd.id() as libc::pid_t, libc::SIGTERM) };
        let log = fwd.wait_with_output().unwrap();
        assert!(log.status.success(), "impair.py");
        let log = String::from_utf8_lossy(&log.stdout);
        let mut frames = Vec::new();
        for line in log.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w[0] {
                "F" => frames.push(Fwd {
                    recv: w[1].parse().unwrap(),
                    verdict: w[2].to_string(),
                    out: w[3].parse().unwrap(),
                    proto: w[5].to_string(),
                    port: w[6].parse().unwrap(),
                    due: w[7].parse().unwrap(),
                }),
                "S" => assert!(w[2] == "0" && w[4] == "0", "the forwarder's own sockets dropped frames: {line}"),
                _ => {}
            }
        }
        let count = |f: &dyn Fn(&Fwd) -> bool, v: &str| frames.iter().filter(|x| f(x) && x.verdict == v).count() as i64;
        let any = |_: &Fwd| true;
        let (lost, dups) = (count(&any, "lost"), count(&any, "dup"));
        eprintln!("{t}: {} frames A to B, {lost} lost, {dups} duplicated", frames.len());
        assert!(lost > 0 && dups > 0, "the forwarder lost {lost} and duplicated {dups} frames");

        let (all_a, all_b) = (tmp.join("a.pcap"), tmp.join("b.pcap"));
        run_ok(wirevault().arg("query").arg(&store_a).arg("-w").arg(&all_a));
        run_ok(wirevault().arg("query").arg(&store_b).arg("-w").arg(&all_b));
        let r = analyze_json(&store_b, &["--examples", "1000000"]);
        let recs_b = read_capture(&all_b).1;

        // Duplicates: analyze's count is B's copies counted here by its rule (the same bytes
        // within 1 ms and 1024 frames), whatever the machine's load did to the copies' spacing.
        assert_eq!((n(&r["duplicates"]["window_ns"]), n(&r["duplicates"]["window_frames"])), (1_000_000, 1024));
        let at_b = duplicates_in(&all_b, 1_000_000, 1024);
        assert_eq!(n(&r["duplicates"]["packets"]) as i64, at_b, "duplicates: {}", r["duplicates"]);

        // RTP: loss from sequence numbers is the frames lost less the copies (as tshark counts);
        // packets, loss and jitter as tshark gives them for the same packets.
        let rtp = |f: &Fwd| f.proto == "udp" && f.port == 40000;
        let s =
            r["rtp"]["streams"].as_array().unwrap().iter().find(|s| n(&s["ssrc"]) == 0x5eed_0001).expect("RTP stream");
        let (rtp_lost, rtp_dups) = (count(&rtp, "lost"), count(&rtp, "dup"));
        assert_eq!(n(&s["packets"]) as i64, 250 - rtp_lost + rtp_dups, "{s}");
        // Sequence numbers see no loss before the first or after the last packet through.
        let through: Vec<i64> =
            frames.iter().filter(|f| rtp(f)).enumerate().filter(|(_, f)| f.out > 0).map(|(i, _)| i as i64).collect();
        let expected = through.last().unwrap() - through[0] + 1;
        assert_eq!(s["lost"].as_i64().unwrap(), expected - (250 - rtp_lost + rtp_dups), "{s}");
        let (cols, tshark_max_jitter) = tshark_rtp_stream(&all_b, 0x5eed_0001);
        assert!(cols.contains(&s["packets"].to_string()), "tshark {cols:?}, analyze {s}");
        assert!(cols.contains(&s["lost"].to_string()), "tshark {cols:?}, analyze {s}");
        let max_jitter = s["max_jitter_ms"].as_f64().unwrap();
        assert!((max_jitter - tshark_max_jitter).abs() < 0.0015, "max jitter {max_jitter}, tshark {tshark_max_jitter}");
        // The mean jitter: the column before the max, also 3 decimals.
        let pct = cols.iter().position(|c| c.starts_with('(')).expect("lost percentage");
        let tshark_mean_jitter: f64 = cols[pct + 5].parse().unwrap();
        let rtp_mean_jitter = s["mean_jitter_ms"].as_f64().unwrap();
        assert!(
            (rtp_mean_jitter - tshark_mean_jitter).abs() < 0.0015,
            "mean jitter {rtp_mean_jitter}, tshark {tshark_mean_jitter}"
        );

        // Plain UDP (no peer tool reports its jitter): RFC 3550's estimator against the mean
        // delta, computed here from B's stamps in the order B stored them (analyze keeps the
        // running jitter in f32: within 0.1 us).
        let plain = r["udp_streams"]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| n(&s["dst_port"]) == 40010)
            .expect("the plain UDP stream");
        let udp = |f: &Fwd| f.proto == "udp" && f.port == 40010;
        assert_eq!(n(&plain["packets"]) as i64, 300 - count(&udp, "lost") + count(&udp, "dup"), "{plain}");
        let plain_at_b: Vec<f64> =
            recs_b.iter().filter(|x| udp_dst_port(&x.data) == Some(40010)).map(|x| x.ts_ns as f64 / 1e6).collect();
        assert_eq!(plain_at_b.len() as u64, n(&plain["packets"]), "plain UDP frames in B's capture");
        let plain_mean_jitter = plain["mean_jitter_ms"].as_f64().unwrap();
        let own = mean_delta_jitter(&plain_at_b);
        assert!(
            (plain_mean_jitter - own).abs() < 1e-4,
            "plain UDP mean jitter {plain_mean_jitter} ms, B's stamps give {own} ms"
        );

        // TCP: retransmissions, out of order segments (the jitter reorders back-to-back
        // segments) and duplicate ACKs frame by frame as tshark marks them.
        assert_tcp_marks_equal_tsharks(&all_b, &r);
        let tcp = |f: &Fwd| f.proto == "tcp";
        let reordered = {
            let mut sent: Vec<(i64, usize)> =
                frames.iter().enumerate().filter(|(_, f)| tcp(f) && f.out > 0).map(|(i, f)| (f.out, i)).collect();
            sent.sort();
            sent.windows(2).filter(|w| w[1].1 < w[0].1).count()
        };
        eprintln!(
            "{t}: TCP: {} lost, {reordered} left behind a later one; analyze: {} retransmissions, {} out of order",
            count(&tcp, "lost"),
            r["tcp"]["retransmissions"],
            r["tcp"]["out_of_order"]
        );
        assert!(
            reordered > 0 && n(&r["tcp"]["out_of_order"]) > 0,
            "jitter reordered {reordered} segments: {}",
            r["tcp"]
        );
        if count(&tcp, "lost") > 0 {
            assert!(n(&r["tcp"]["retransmissions"]) > 0, "segments lost and none retransmitted: {}", r["tcp"]);
        }
        // Handshake RTT at B, tshark's initial RTT: from the SYN to the client's ACK, which
        // crossed the link, so never less than its delay.
        let h = &r["tcp"]["handshake_rtt"];
        assert_eq!(n(&h["count"]), 1, "{h}");
        let out = run_ok(Command::new("tshark").args(["-n", "-r"]).arg(&all_b).args([
            "-Y",
            "tcp.analysis.initial_rtt",
            "-T",
            "fields",
            "-e",
            "tcp.analysis.initial_rtt",
        ]));
        let tshark_rtt: f64 =
            String::from_utf8_lossy(&out.stdout).lines().next().expect("tshark's initial RTT").parse().unwrap();
        let rtt = n(&h["p50_ns"]) as f64 / 1e6;
        assert!((rtt - tshark_rtt * 1e3).abs() < 0.001, "handshake RTT {rtt} ms, tshark {tshark_rtt} s");
        assert!(rtt >= DELAY_MS, "handshake RTT {rtt} ms, below the link's delay");
        compare_with_tshark(&all_b, &r);

        // One-way delay A to B, from the two stores: every frame A sent matches one B
        // received but the lost ones, and the figures are those of pairing the frames as the
        // link did (`delays_by_content`).
        let d = analyze_json(&store_a, &["--against", store_b.to_str().unwrap(), "src", "host", A]);
        let d = &d["delay"];
        assert_eq!(n(&d["unmatched"]) as i64, lost, "{d}");
        assert_eq!(n(&d["matched"]) as usize, frames.len() - lost as usize, "{d}");
        let from_a = tmp.join("from-a.pcap");
        // (Nanosecond stamps kept: tcpdump -w writes microseconds by default.)
        run_ok(
            Command::new("tcpdump")
                .args(["--time-stamp-precision=nano", "-r"])
                .arg(&all_a)
                .arg("-w")
                .arg(&from_a)
                .args(["src", "host", A]),
        );
        let (mut delays, unmatched) = delays_by_content(&read_capture(&from_a).1, &recs_b, (DELAY_MS * 1e6) as u64);
        assert_eq!(unmatched as i64, lost, "frames of A's that B does not hold");
        delays.sort_unstable();
        let rank = |q: f64| delays[((q * delays.len() as f64).ceil() as usize).clamp(1, delays.len()) - 1];
        let want = [
            ("min_ns", delays[0]),
            ("p50_ns", rank(0.5)),
            ("p90_ns", rank(0.9)),
            ("p99_ns", rank(0.99)),
            ("max_ns", *delays.last().unwrap()),
        ];
        for (k, v) in want {
            assert_eq!(d[k].as_i64().unwrap(), v, "delay {k}: {d}");
        }
        // The forwarder holds each frame at least the delay after its receive stamp, which is
        // later than A's.
        assert!(d["min_ns"].as_i64().unwrap() as f64 / 1e6 >= DELAY_MS, "{d}");

        // How near the figures come to what the forwarder was told depends on how well a Python
        // loop kept its schedule on this machine: that is bench/analyze_impaired.sh's table,
        // which reads this report.
        let mut delays: Vec<i64> = frames.iter().filter(|f| f.out > 0).map(|f| f.out - f.recv).collect();
        let mut lateness: Vec<i64> = frames.iter().filter(|f| f.out > 0).map(|f| f.out - f.due).collect();
        let report = serde_json::json!({
            "told": {"delay_ms": DELAY_MS, "jitter_ms": JITTER_MS, "loss": LOSS, "duplicate": DUPLICATE},
            "forwarder": {"frames": frames.len(), "lost": lost, "duplicated": dups,
                "delay_p50_ns": percentile(&mut delays, 0.5), "delay_p99_ns": percentile(&mut delays, 0.99),
                "late_p99_ns": percentile(&mut lateness, 0.99)},
            "analyze": {"rtp_mean_jitter_ms": rtp_mean_jitter, "plain_mean_jitter_ms": plain_mean_jitter,
                "handshake_rtt_ms": rtt, "delay_p50_ns": d["p50_ns"], "delay_p99_ns": d["p99_ns"],
                "duplicates": at_b, "retransmissions": r["tcp"]["retransmissions"], "out_of_order": r["tcp"]["out_of_order"]},
        });
        eprintln!("{t}: {report}");
        if let Some(path) = std::env::var_os("WV_IMPAIRED_REPORT") {
            std::fs::write(path, report.to_string()).expect("write the report");
        }
    }
);
