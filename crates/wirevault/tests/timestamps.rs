//! `wirevault timestamps` through the real binary: a file with known stamps
//! (equal ones, one going backwards, microsecond resolution in a nanosecond
//! file) gives exact numbers, checked against tshark's frame.time_epoch and
//! frame.time_delta; a store recorded live on a veth pair in a namespace is
//! reported per stream and agrees with tshark on the stream's files; the
//! NIC's capabilities agree with `ethtool -T`; bad input exits 2.

use crate::util::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn stamps_json(args: &[&str]) -> Value {
    let mut a = vec!["timestamps", "--json"];
    a.extend_from_slice(args);
    let o = run_wirevault(&a);
    o.expect(0, &format!("timestamps {args:?}"));
    serde_json::from_str(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", o.stdout))
}

/// tshark's stamps of `files` in order (ns), and how many of its
/// frame.time_delta values are negative.
fn tshark_stamps(files: &[PathBuf]) -> (Vec<u64>, u64) {
    let (mut ts, mut negative) = (Vec::new(), 0);
    for f in files {
        let o = std::process::Command::new("tshark")
            .args(["-n", "-r"])
            .arg(f)
            .args(["-T", "fields", "-e", "frame.time_epoch", "-e", "frame.time_delta"])
            .output()
            .expect("run tshark");
        assert!(o.status.success(), "tshark: {}", String::from_utf8_lossy(&o.stderr));
        for line in String::from_utf8_lossy(&o.stdout).lines().filter(|l| !l.is_empty()) {
            let mut cols = line.split('\t');
            let epoch = cols.next().unwrap();
            let (s, frac) = epoch.split_once('.').unwrap_or((epoch, "0"));
            let frac = format!("{frac:0<9}");
            ts.push(s.parse::<u64>().unwrap() * 1_000_000_000 + frac[..9].parse::<u64>().unwrap());
            if cols.next().unwrap_or("").starts_with('-') {
                negative += 1;
            }
        }
    }
    (ts, negative)
}

/// The statistics computed here from tshark's stamps, as the JSON names them.
fn expected(ts: &[u64]) -> Value {
    let mut res = 1_000_000_000u64;
    for &t in ts {
        while res > 1 && t % res != 0 {
            res /= 10;
        }
    }
    let (mut back, mut max_back, mut same, mut run, mut longest) = (0u64, 0u64, 0u64, 1u64, 1u64);
    let mut gaps = Vec::new();
    for w in ts.windows(2) {
        if w[1] < w[0] {
            back += 1;
            max_back = max_back.max(w[0] - w[1]);
            run = 1;
        } else {
            let g = w[1] - w[0];
            if g == 0 {
                same += 1;
                run += 1;
                longest = longest.max(run);
            } else {
                run = 1;
            }
            gaps.push(g);
        }
    }
    gaps.sort_unstable();
    serde_json::json!({
        "packets": ts.len(),
        "resolution_ns": res,
        "backwards": back,
        "max_step_back_ns": max_back,
        "same_as_previous": same,
        "longest_same_run": longest,
        "min_gap_ns": gaps.first(),
        "median_gap_ns": gaps.get(gaps.len().saturating_sub(1) / 2),
        "max_gap_ns": gaps.last(),
        "min_nonzero_gap_ns": gaps.iter().find(|g| **g > 0),
        "first_ns": ts.first(),
        "last_ns": ts.iter().max(),
    })
}

fn assert_matches(got: &Value, want: &Value, what: &str) {
    for (k, v) in want.as_object().unwrap() {
        if k == "last_ns" {
            continue; // ours is the last packet's, see below
        }
        assert_eq!(&got[k], v, "{what}: {k}\ngot {got}\nwant {want}");
    }
}

fn frames_at(offsets_us: &[u64], base: u64) -> Vec<Frame> {
    offsets_us
        .iter()
        .enumerate()
        .map(|(i, us)| {
            let data = make_frame(i as u32, Kind::Udp, 100);
            Frame { ts_ns: base + us * 1000, origlen: data.len() as u32, data }
        })
        .collect()
}

wvtest!(timestamps_of_a_known_file_are_exact_and_agree_with_tshark, needs = ["tshark"], |t| {
    let dir = TempDir::new("stamps-known");
    let base = 1_700_000_000_000_000_000;
    // Microsecond stamps in a nanosecond file: three equal, one 5 us back.
    let ns_file = dir.join("ns.pcap");
    write_pcap(&ns_file, 1, 65535, true, &frames_at(&[0, 1, 1, 1, 25, 20, 41, 41, 1000], base));
    // A microsecond file with 7 us steps.
    let us_file = dir.join("us.pcap");
    write_pcap(&us_file, 1, 65535, false, &frames_at(&[0, 7, 14, 21], base + 3_000_000));
    let out = stamps_json(&[ns_file.to_str().unwrap(), us_file.to_str().unwrap()]);
    let inputs = out["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 2);
    let s = &inputs[0]["streams"][0];
    assert_eq!(inputs[0]["kind"], "file");
    // By hand: gaps 1, 0, 0, 24, (back 5), 21, 0, 959 us.
    assert_eq!(s["packets"], 9);
    assert_eq!(s["resolution_ns"], 1000);
    assert_eq!(s["backwards"], 1);
    assert_eq!(s["max_step_back_ns"], 5000);
    assert_eq!(s["same_as_previous"], 3);
    assert_eq!(s["longest_same_run"], 3);
    assert_eq!(s["min_gap_ns"], 0);
    assert_eq!(s["median_gap_ns"], 1000);
    assert_eq!(s["max_gap_ns"], 959_000);
    assert_eq!(s["min_nonzero_gap_ns"], 1000);
    assert_eq!(s["median_exact"], true);
    // tshark's stamps give the same numbers, and its negative deltas are the steps back.
    for (inp, file) in inputs.iter().zip([&ns_file, &us_file]) {
        let (ts, negative) = tshark_stamps(std::slice::from_ref(file));
        let st = &inp["streams"][0];
        assert_matches(st, &expected(&ts), &file.display().to_string());
        assert_eq!(st["backwards"], negative);
    }
    assert_eq!(inputs[1]["streams"][0]["min_nonzero_gap_ns"], 7000);
    // The text form says the same.
    let o = run_wirevault(&["timestamps", ns_file.to_str().unwrap()]);
    o.expect(0, "timestamps (text)");
    assert!(o.stdout.contains("9 packets; resolution 1.000 us") && o.stdout.contains("1 backwards"), "{}", o.stdout);
    assert!(o.stdout.starts_with("clock source: "), "{}", o.stdout);
});

#[test]
fn timestamps_bad_input_is_one_sentence() {
    let dir = TempDir::new("stamps-bad");
    let junk = dir.join("junk");
    std::fs::write(&junk, b"not a capture at all").unwrap();
    // What the command line names but the host lacks: 1; a time that does not parse: 2 (issue 44).
    for (code, args) in [
        (1, vec!["timestamps", "/nonexistent/store"]),
        (1, vec!["timestamps", junk.to_str().unwrap()]),
        (1, vec!["timestamps", "-i", "no-such-if0"]),
        (2, vec!["timestamps", "--from", "never", dir.to_str().unwrap()]),
        (1, vec!["timestamps", dir.to_str().unwrap()]),
    ] {
        let o = run_wirevault(&args);
        o.expect(code, &format!("{args:?}"));
        assert_eq!(o.stderr.lines().count(), 1, "{args:?}: {}", o.stderr);
    }
}

/// The stream's files in recording order (per-stream sequence numbers).
fn stream_files(store: &Path, stream: u64) -> Vec<PathBuf> {
    let mut v: Vec<(String, PathBuf)> = catalog(store)
        .iter()
        .filter(|e| e["stream"].as_u64() == Some(stream))
        .map(|e| {
            let f = e["file"].as_str().unwrap().to_string();
            (f.rsplit('-').next().unwrap().to_string(), store.join(&f))
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, p)| p).collect()
}

wvtest!(
    timestamps_of_a_live_store_per_stream_agree_with_tshark,
    needs = [root, "tcpreplay", "tshark", "ethtool"],
    |t| {
        let _g = heavy_lock();
        let tmp = TempDir::new("stamps-live");
        let pair = VethPair::new();
        let sent = test_frames(1000, 1_700_000_000_000_000_000);
        let pcap = tmp.join("sent.pcap");
        write_pcap(&pcap, 1, 65535, false, &sent);
        let store = tmp.join("store");
        let mut r = Recorder::start(
            Some(&pair.ns_b),
            &store,
            tmp.path(),
            &["-i", pair.if_b, "--buffer", "64M", "-q", "--workers", "2", "--file-size", "256K"],
        );
        r.wait_ready();
        run_ok(VethPair::exec(&pair.ns_a, "tcpreplay").args(["-i", pair.if_a, "--pps", "5000"]).arg(&pcap));
        r.wait_received(1000);
        r.terminate().expect(0, "recorder stopped by SIGTERM");
        let out = stamps_json(&[store.to_str().unwrap()]);
        let inp = &out["inputs"][0];
        assert_eq!(inp["kind"], "store");
        let streams = inp["streams"].as_array().unwrap();
        assert!(!streams.is_empty() && streams.len() <= 2, "{inp}");
        let total: u64 = streams.iter().map(|s| s["packets"].as_u64().unwrap()).sum();
        assert_eq!(total, 1000);
        for s in streams {
            let id = s["stream"].as_u64().unwrap();
            let res = s["resolution_ns"].as_u64().unwrap();
            assert!([1, 10, 100, 1000, 10_000, 100_000, 1_000_000].contains(&res), "stream {id}: {s}");
            let (ts, negative) = tshark_stamps(&stream_files(&store, id));
            assert_matches(s, &expected(&ts), &format!("stream {id}"));
            assert_eq!(s["backwards"], negative, "stream {id}");
        }
        // The veth's stamping, from inside its namespace, agrees with ethtool -T.
        let o = Outcome::from_output(
            VethPair::exec(&pair.ns_b, bin()).args(["timestamps", "--json", "-i", pair.if_b]).output().unwrap(),
        );
        o.expect(0, "timestamps -i veth");
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        let caps: Vec<String> = v["interfaces"][0]["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect();
        let e = run_ok(VethPair::exec(&pair.ns_b, "ethtool").args(["-T", pair.if_b]));
        let text = String::from_utf8_lossy(&e.stdout);
        for cap in ["software-transmit", "software-receive", "software-system-clock", "hardware-receive"] {
            let ours = caps.iter().any(|c| c == cap);
            // ethtool -T prints each capability as "	NAME" (with its SOF_ flag name in parentheses).
            let theirs = text.lines().any(|l| l.trim_start().starts_with(cap));
            assert_eq!(ours, theirs, "{cap}: ours {caps:?}, ethtool -T:\n{text}");
        }
    }
);

#[test]
fn timestamps_of_a_damaged_store_warn_and_exit_1() {
    let dir = TempDir::new("stamps-damaged");
    let store = dir.join("store");
    run_wirevault(&["record", "--synthetic", "size=1514,count=2000", "-o", store.to_str().unwrap(), "-q"])
        .expect(0, "record --synthetic");
    let file = store.join(catalog(&store)[0]["file"].as_str().unwrap());
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len / 2).unwrap();
    let o = run_wirevault(&["timestamps", "--json", store.to_str().unwrap()]);
    o.expect(1, "timestamps of a cut store");
    assert!(o.stderr.contains(file.file_name().unwrap().to_str().unwrap()), "{}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout).unwrap();
    let n = v["inputs"][0]["streams"][0]["packets"].as_u64().unwrap();
    assert!(n > 0 && n < 2000, "{n} packets read from the cut file");
    assert_eq!(v["inputs"][0]["damaged_files"], 1);
}

/// tcpdump's corpus has one microsecond and one nanosecond pcap file whose
/// records 2 and 3 have a sub-second field out of range; tshark shows the
/// same frames as odd: a fraction of more than 9 digits ("Fractional second
/// ... is invalid") or a step back in time (the µs file's frame 3, 2^31 µs).
/// They are counted and named by frame, in the JSON and the text; a clean
/// file has none.
wvtest!(out_of_range_sub_second_fields_are_flagged_by_frame, needs = ["tshark", corpus], |t| {
    for name in ["timestamp_invalid_micro.pcap", "timestamp_invalid_nano.pcap"] {
        let f = t.corpus_file(name);
        let o = std::process::Command::new("tshark")
            .args(["-n", "-r"])
            .arg(&f)
            .args(["-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch", "-e", "frame.time_delta"])
            .output()
            .unwrap();
        let tshark = String::from_utf8_lossy(&o.stdout).to_string();
        // tshark's epoch column keeps the raw sub-second digits (more than
        // 9: out of range), or the frame steps back.
        let odd = |l: &str| {
            let c: Vec<&str> = l.split('\t').collect();
            c.get(1).and_then(|e| e.split_once('.')).is_some_and(|(_, f)| f.len() > 9)
                || c.get(2).is_some_and(|d| d.starts_with('-'))
        };
        let want: Vec<u64> =
            tshark.lines().filter(|l| odd(l)).map(|l| l.split('\t').next().unwrap().parse().unwrap()).collect();
        assert_eq!(want, [2, 3], "tshark on {name}: {tshark}");
        let out = stamps_json(&[f.to_str().unwrap()]);
        let s = &out["inputs"][0]["streams"][0];
        assert_eq!(s["fraction_out_of_range"], 2, "{name}: {s}");
        let at: Vec<u64> =
            s["fraction_out_of_range_at"].as_array().unwrap().iter().map(|a| a["frame"].as_u64().unwrap()).collect();
        assert_eq!(at, want, "{name}");
        assert_eq!(s["fraction_out_of_range_at"][0]["file"], f.to_str().unwrap());
        let text = run_wirevault(&["timestamps", f.to_str().unwrap()]);
        text.expect(0, name);
        assert!(
            text.stdout.contains("2 record(s) with a sub-second field out of range")
                && text.stdout.contains(&format!("frames 2, 3 of {}", f.display())),
            "{name}: {}",
            text.stdout
        );
    }
    let clean = t.corpus_file("afs.pcap");
    assert_eq!(stamps_json(&[clean.to_str().unwrap()])["inputs"][0]["streams"][0]["fraction_out_of_range"], 0);
});

/// A pcapng interface with if_tsresol 2^-20 s: the resolution is that
/// declaration, not a power of ten (its stamps in ns are divisible by none:
/// it said 1 ns); a 10^-6 interface still shows the power of ten its stamps
/// have.
#[test]
fn a_power_of_two_tsresol_is_reported_as_declared() {
    let dir = TempDir::new("stamps-tsresol");
    let block = |ty: u32, body: &[u8]| {
        let len = (12 + body.len().next_multiple_of(4)) as u32;
        let mut b = [ty.to_le_bytes(), len.to_le_bytes()].concat();
        b.extend(body);
        b.resize(len as usize - 4, 0);
        b.extend(len.to_le_bytes());
        b
    };
    let shb = block(0x0a0d_0d0a, &[&0x1a2b_3c4du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xff; 8]].concat());
    let idb = |r: u8| {
        block(
            1,
            &[&1u16.to_le_bytes()[..], &[0, 0], &65535u32.to_le_bytes(), &[9, 0, 1, 0, r, 0, 0, 0, 0, 0, 0, 0]]
                .concat(),
        )
    };
    let epb = |ts: u64| {
        let data = make_frame(1, Kind::Udp, 60);
        let n = (data.len() as u32).to_le_bytes();
        block(
            6,
            &[&0u32.to_le_bytes()[..], &((ts >> 32) as u32).to_le_bytes(), &(ts as u32).to_le_bytes(), &n, &n, &data]
                .concat(),
        )
    };
    let base = 1_700_000_000u64;
    let bin = dir.join("bin.pcapng");
    let units = |s: u64, frac: u64| (s << 20) + frac;
    std::fs::write(
        &bin,
        [shb.clone(), idb(0x80 | 20), epb(units(base, 1)), epb(units(base, 3)), epb(units(base + 1, 7))].concat(),
    )
    .unwrap();
    let dec = dir.join("dec.pcapng");
    std::fs::write(&dec, [shb, idb(6), epb(base * 1_000_000 + 5), epb(base * 1_000_000 + 9)].concat()).unwrap();
    let out = stamps_json(&[bin.to_str().unwrap(), dec.to_str().unwrap()]);
    let (b, d) = (&out["inputs"][0]["streams"][0], &out["inputs"][1]["streams"][0]);
    assert_eq!(b["declared_resolution"], serde_json::json!(["2^-20 s (~954 ns)"]), "{b}");
    assert_eq!(b["resolution_ns"], Value::Null, "{b}");
    assert_eq!(b["packets"], 3);
    assert_eq!(d["declared_resolution"], serde_json::json!(["10^-6 s (1 us)"]), "{d}");
    assert_eq!(d["resolution_ns"], 1000, "{d}");
    let text = run_wirevault(&["timestamps", bin.to_str().unwrap()]);
    text.expect(0, "timestamps of a 2^-20 file");
    assert!(text.stdout.contains("resolution 2^-20 s (~954 ns);"), "{}", text.stdout);
}
