//! `wirevault analyze` on live traffic through an impaired link: delay,
//! jitter, loss, duplication and the reordering jitter causes, made by
//! `tests/impair.py` between two namespaces (this kernel has no netem; the
//! forwarder stands in for it and logs what it did to every frame). Two
//! recorders, one at each end of the link: the figures analyze gives
//! equal tshark's where tshark has them, match what the forwarder was told
//! within the tolerances stated below, and equal what it did exactly where
//! a count allows it (loss, duplicates, unmatched frames).

use crate::analyze::{analyze_json, assert_tcp_marks_equal_tsharks, compare_with_tshark, n, py, tshark_rtp_stream};
use crate::util::*;
use std::collections::HashMap;
use std::process::Stdio;

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
    /// When its copy left (0: none).
    copy: i64,
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

/// RFC 3550's jitter (ms) of arrivals `(ms, nominal ms)` in order: its mean
/// over every packet after the first, as analyze's running mean.
fn rfc3550_mean(points: &[(f64, f64)]) -> f64 {
    let (mut j, mut sum) = (0.0f64, 0.0);
    for w in points.windows(2) {
        let d = (w[1].0 - w[0].0) - (w[1].1 - w[0].1);
        j += (d.abs() - j) / 16.0;
        sum += j;
    }
    sum / (points.len() - 1) as f64
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

/// The stamps a capture file holds of the test's UDP streams, by (port, the sender's number:
/// RTP's sequence number from 1000, plain UDP's first payload word), a copy after its original.
fn stamps_by_number(file: &std::path::Path) -> HashMap<(u16, u32), Vec<u64>> {
    let mut by = HashMap::<(u16, u32), Vec<u64>>::new();
    for rec in read_capture(file).1 {
        let d = &rec.data;
        if d.len() < 14 + 20 + 8 + 4 || d[12..14] != [8, 0] || d[23] != 17 {
            continue;
        }
        let (port, pl) = (u16::from_be_bytes([d[36], d[37]]), &d[42..]);
        let i = match port {
            40000 => u32::from(u16::from_be_bytes([pl[2], pl[3]])).wrapping_sub(1000),
            40010 => u32::from_be_bytes([pl[0], pl[1], pl[2], pl[3]]),
            _ => continue,
        };
        by.entry((port, i)).or_default().push(rec.ts_ns);
    }
    by
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
                    copy: w[4].parse().unwrap(),
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

        let all_b = tmp.join("b.pcap");
        run_ok(wirevault().arg("query").arg(&store_b).arg("-w").arg(&all_b));
        let r = analyze_json(&store_b, &["--examples", "1000000"]);

        // Duplication: each copy leaves right behind its original, within the 1 ms window
        // unless the forwarder was held up between the two sends.
        let in_window = frames.iter().filter(|f| f.copy > 0 && f.copy - f.out < 1_000_000).count() as i64;
        assert!(in_window > dups / 2, "{dups} copies, {in_window} within 1 ms of their original");
        // analyze judges by B's stamps, which lag the forwarder's send times by a few us that vary:
        // B's frames counted by the same rule are the reference, and they agree with the
        // forwarder's log but for copies sent within 100 us of the window's edge.
        assert_eq!((n(&r["duplicates"]["window_ns"]), n(&r["duplicates"]["window_frames"])), (1_000_000, 1024));
        let at_b = duplicates_in(&all_b, 1_000_000, 1024);
        let at_edge =
            frames.iter().filter(|f| f.copy > 0 && (f.copy - f.out - 1_000_000).abs() < 100_000).count() as i64;
        assert!(
            (at_b - in_window).abs() <= at_edge,
            "B holds {at_b} copies within 1 ms, the log {in_window} ({at_edge} at the edge)"
        );
        assert_eq!(n(&r["duplicates"]["packets"]) as i64, at_b, "duplicates: {}", r["duplicates"]);

        // RTP: loss from sequence numbers is the frames lost less the copies (as tshark counts).
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

        // Jitter, RTP and plain UDP: uniform delays over J ms give RFC 3550 jitter J/3 on
        // average. Against the forwarder's own send times within 20 us plus how much their lag
        // to B's stamps varies (a gain of 1/8 instead of 1/16 moves the plain stream's mean by
        // 50 us), and against J/3 within 0.6 ms (30%), unless the
        // forwarder was held up sending. Over ten runs RTP's mean was 1.69-2.15 ms (below
        // J/3: the running jitter starts at 0 and a copy right behind its original adds a
        // difference of 0), the plain stream's 2.12-2.28 ms (above: a lost packet or a
        // copy is a delta off the mean by a whole period, which RTP's clock accounts for).
        // The forwarder's delays (from the kernel's receive stamp to its send), and how
        // late it sent: the told figures are checked only if it kept its schedule.
        let mut delays: Vec<i64> = frames.iter().filter(|f| f.out > 0).map(|f| f.out - f.recv).collect();
        let mut lateness: Vec<i64> = frames.iter().filter(|f| f.out > 0).map(|f| f.out - f.due).collect();
        let (d50, d99) = (percentile(&mut delays, 0.5), percentile(&mut delays, 0.99));
        let late99 = percentile(&mut lateness, 0.99);
        // A Python loop behind a burst of TCP segments sends the last of them up to a
        // millisecond or so late; 2 ms late at p99 is a forwarder held up by the machine.
        let on_time = late99 < 2_000_000;
        eprintln!("{t}: forwarder's delays p50 {d50} ns p99 {d99} ns, late by {late99} ns at p99; on time: {on_time}");
        let plain = r["udp_streams"]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| n(&s["dst_port"]) == 40010)
            .expect("the plain UDP stream");
        let udp = |f: &Fwd| f.proto == "udp" && f.port == 40010;
        assert_eq!(n(&plain["packets"]) as i64, 300 - count(&udp, "lost") + count(&udp, "dup"), "{plain}");
        // Each store's stamps of the UDP streams' packets, to tell how far the forwarder's log
        // is from what the recorders saw: the forwarder notes its receive stamp and the time
        // before its send returns; A stamped the frame a little before the first, B a little after
        // the second, more so on a loaded machine.
        let all_a = tmp.join("a.pcap");
        run_ok(wirevault().arg("query").arg(&store_a).arg("-w").arg(&all_a));
        let (stamps_a, stamps_b) = (stamps_by_number(&all_a), stamps_by_number(&all_b));
        // Per matched frame, (A's lag behind the forwarder's receive stamp) + (B's behind its send).
        let mut both_lags = Vec::new();
        for (what, got, period, port, filter) in [
            ("RTP", s["mean_jitter_ms"].as_f64().unwrap(), 20.0, 40000, &rtp as &dyn Fn(&Fwd) -> bool),
            ("plain UDP", plain["mean_jitter_ms"].as_f64().unwrap(), 10.0, 40010, &udp),
        ] {
            // The forwarder's send times of the frames that got through and of their copies,
            // against the sender's schedule; and how much later B stamped each.
            let (mut points, mut after) = (Vec::new(), Vec::new());
            for (i, f) in frames.iter().filter(|f| filter(f)).enumerate() {
                let b = stamps_b.get(&(port, i as u32)).map_or(&[][..], |v| &v[..]);
                if f.out > 0 {
                    points.push((f.out as f64 / 1e6, i as f64 * period));
                    after.push(b.first().map(|&t| t as f64 / 1e6 - f.out as f64 / 1e6));
                    if let (Some(&ta), Some(&tb)) = (stamps_a.get(&(port, i as u32)).and_then(|v| v.first()), b.first())
                    {
                        both_lags.push(((f.recv - ta as i64) + (tb as i64 - f.out)).abs());
                    }
                    if f.verdict == "dup" {
                        // The copy when it really left: a loaded forwarder can send it ms later.
                        points.push((f.copy as f64 / 1e6, i as f64 * period));
                        after.push(b.get(1).map(|&t| t as f64 / 1e6 - f.copy as f64 / 1e6));
                    }
                }
            }
            // In the order the frames left (the order B stored them, which analyze reads): a copy
            // sent late can leave after the next original, and the sender's order would then count
            // a step back and a long step in the reference that analyze never saw.
            let mut by_departure: Vec<_> = points.into_iter().zip(after).collect();
            by_departure.sort_by(|x, y| x.0 .0.total_cmp(&y.0 .0));
            let (points, after): (Vec<_>, Vec<_>) = by_departure.into_iter().unzip();
            // The log's own uncertainty: the forwarder notes the time before its send returns,
            // and B stamps the frame a little later, more so on a loaded machine. Each jitter
            // step is off by the change of that lag from one packet to the next, so the mean
            // jitter by at most its mean change (a few us when quiet; it once reached 27 us in
            // a full t.name run, where the 20 us alone failed).
            let lag: Vec<f64> = after.iter().map(|a| a.expect("B stored every frame the forwarder sent")).collect();
            assert!(lag.len() > 100, "{what}: only {} packets through", lag.len());
            let spread = lag.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f64>() / (lag.len() - 1) as f64;
            // The slack is measured on the stamps under t.name: capped when the forwarder kept its
            // schedule, so that stamps gone noisy (or packets matched to the wrong log lines) fail
            // instead of widening it (4-6 us quiet; a loaded CI run had 38 us, late by 4.3 ms).
            assert!(
                !on_time || spread < 0.05,
                "{what}: B's stamps lag the forwarder's log by {spread} ms more from packet to packet"
            );
            let own = if what == "RTP" {
                rfc3550_mean(&points)
            } else {
                mean_delta_jitter(&points.iter().map(|p| p.0).collect::<Vec<_>>())
            };
            eprintln!(
            "{t}: {what} mean jitter {got:.3} ms, forwarder's {own:.3} ms (its lag to B's stamps changes by {:.1} us a packet), told J/3 {:.3} ms",
            spread * 1e3,
            JITTER_MS / 3.0
        );
            assert!(
            (got - own).abs() < 0.02 + spread,
            "{what} mean jitter {got} ms, the forwarder's send times give {own} ms (their lag to B's stamps changes by {spread} ms a packet)"
        );
            if on_time {
                assert!(
                    (got - JITTER_MS / 3.0).abs() < 0.5,
                    "{what} mean jitter {got} ms, told J/3 = {} ms",
                    JITTER_MS / 3.0
                );
            }
        }

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
        // Handshake RTT at B: from the SYN to the client's ACK, which crossed the link.
        let h = &r["tcp"]["handshake_rtt"];
        assert_eq!(n(&h["count"]), 1, "{h}");
        let rtt = n(&h["p50_ns"]) as f64 / 1e6;
        assert!(rtt >= DELAY_MS && (!on_time || rtt < DELAY_MS + JITTER_MS + 1.0), "handshake RTT {rtt} ms");
        compare_with_tshark(&all_b, &r);

        // One-way delay A to B, from the two stores: every frame A sent matches one B
        // received but the lost ones; percentiles as the forwarder's own, and as told.
        let d = analyze_json(&store_a, &["--against", store_b.to_str().unwrap(), "src", "host", A]);
        let d = &d["delay"];
        assert_eq!(n(&d["unmatched"]) as i64, lost, "{d}");
        assert_eq!(n(&d["matched"]) as usize, frames.len() - lost as usize, "{d}");
        let ms = |k: &str| d[k].as_i64().unwrap() as f64 / 1e6;
        // A percentile of the stores' delays is off the forwarder's by at most what separates
        // their stamps from its log (see above): within 0.3 ms plus the most that was on the
        // frames matched (tens of us when quiet; a loaded full run once missed 0.3 ms by 0.11).
        assert!(both_lags.len() > 100, "only {} UDP frames matched in both stores", both_lags.len());
        let lag = *both_lags.iter().max().unwrap() as f64 / 1e6;
        // Capped as the jitter's slack is (0.05-0.3 ms quiet; a loaded CI run had 4 ms, the
        // forwarder 4.3 ms late at p99).
        assert!(!on_time || lag < 2.0, "the stores' stamps are up to {lag} ms off the forwarder's log");
        eprintln!("{t}: delay {d}; stamps off the forwarder's log by up to {lag:.3} ms");
        assert!(ms("min_ns") >= DELAY_MS, "{d}");
        // The tail only when the forwarder kept its schedule: a loaded run (4.2 ms late at p99)
        // had the p99 0.4 ms off its log while the UDP frames matched one by one were off by
        // 0.05 ms at most; the late frames are its TCP bursts, which cannot be matched to the
        // log one by one. The median is checked always.
        for (k, own) in [("p50_ns", d50), ("p99_ns", d99)].into_iter().filter(|(k, _)| on_time || *k == "p50_ns") {
            let own = own as f64 / 1e6;
            assert!(
                (ms(k) - own).abs() < 0.3 + lag,
                "delay {k} {} ms, the forwarder's {own} ms (stamps off its log by up to {lag} ms)",
                ms(k)
            );
        }
        // Told: 10 ms + U[0, 6 ms): a median of 13 ms, a p99 of 15.94 ms.
        if on_time {
            let p50 = ms("p50_ns");
            assert!(
                (p50 - (DELAY_MS + JITTER_MS / 2.0)).abs() < 0.5,
                "delay p50 {p50} ms, told {DELAY_MS} + U[0, {JITTER_MS}) ms"
            );
            assert!(ms("p99_ns") < DELAY_MS + JITTER_MS + 0.5, "{d}");
        }
    }
);
