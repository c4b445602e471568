//! `wirevault record --synthetic`: the in-memory generator numbers its
//! frames (a 64-bit big-endian sequence number right after the UDP header,
//! sizes cycling through the spec's list), so a store can be checked for a
//! lost, duplicated or reordered frame at every file boundary without
//! keeping a copy of what was sent. Covers counting limits, rotation by size
//! and by time, pcapng output, snap length, SIGTERM under full load, and
//! option errors. Needs capinfos and tcpdump (tshark/editcap for pcapng);
//! skips without them (fails in CI). No root needed.

use crate::util::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The simple IMIX of `size=imix`, as captured lengths.
const IMIX: [u32; 12] = [60, 60, 60, 60, 60, 60, 60, 590, 590, 590, 590, 1514];
/// Offset of the sequence number: Ethernet + IPv4 + UDP headers.
const SEQ_AT: usize = 14 + 20 + 8;

fn synth(store: &Path, spec: &str, opts: &[&str]) -> Outcome {
    let out = wirevault()
        .args(["record", "-q", "--buffer", "64M", "-o"])
        .arg(store)
        .args(["--synthetic", spec])
        .args(opts)
        .output()
        .expect("run wirevault");
    Outcome::from_output(out)
}

fn seq(r: &Rec) -> u64 {
    let b = r.data.get(SEQ_AT..SEQ_AT + 8).expect("frame too short for a sequence number");
    u64::from_be_bytes(b.try_into().unwrap())
}

/// Asserts that `recs` are frames `first, first+1, ...` of the generator,
/// each with the size the spec gives it (`sizes`, cut at `snaplen`), and
/// timestamps that never go backwards.
fn assert_sequence(recs: &[Rec], first: u64, sizes: &[u32], snaplen: u32) {
    let mut prev_ts = 0;
    for (i, r) in recs.iter().enumerate() {
        let want = first + i as u64;
        assert_eq!(seq(r), want, "stored frame {i}: sequence number (lost, duplicated or reordered frame)");
        let size = sizes[(want % sizes.len() as u64) as usize];
        assert_eq!((r.origlen, r.caplen), (size, size.min(snaplen)), "frame {want}: origlen, caplen");
        assert!(r.ts_ns >= prev_ts, "frame {want}: timestamp goes backwards");
        prev_ts = r.ts_ns;
    }
}

fn paths(files: &[StoredFile]) -> Vec<PathBuf> {
    files.iter().map(|f| f.path.clone()).collect()
}

wvtest!(count_is_exact_across_size_rotation, needs = ["capinfos", "tcpdump"], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("synth-count");
    let store = tmp.join("store");
    let t0 = now_ns();
    let o = synth(&store, "size=imix,count=200k", &["--file-size", "1M"]);
    let t1 = now_ns();
    o.expect(0, "count=200k");
    assert!(o.stderr.contains("200000 packets received"), "summary: {}", o.stderr);
    let c = final_counters(&store);
    assert_eq!((c.received, c.written, c.filtered, c.drops()), (200_000, 200_000, 0, 0));
    // Once the writers have written everything out, the arena is empty.
    let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(store.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats["arena_fill"].as_f64(), Some(0.0), "{stats}");
    let files = check_store(&store);
    assert!(files.len() >= 60, "{} files of at most 1M for ~75 MB", files.len());
    for f in &files {
        let b = f.entry["bytes"].as_u64().unwrap();
        assert!(b <= 1 << 20, "{}: {b} bytes, over --file-size 1M", f.path.display());
    }
    let recs = stream_records(&files, 0);
    assert_eq!(recs.len(), 200_000);
    assert_sequence(&recs, 0, &IMIX, u32::MAX);
    assert!(recs[0].ts_ns >= t0 && recs.last().unwrap().ts_ns <= t1, "timestamps outside the run");
    assert_peers_read(&paths(&files), 3);
});

#[test]
fn count_option_stops_after_exactly_n_packets() {
    let tmp = TempDir::new("synth-c");
    let store = tmp.join("store");
    synth(&store, "size=64", &["-c", "12345"]).expect(0, "-c 12345");
    let c = final_counters(&store);
    assert_eq!(c.written, 12_345);
    let files = check_store(&store);
    assert_sequence(&stream_records(&files, 0), 0, &[64], u32::MAX);
    // Several workers share the count (each stored N: 3 workers, 3 N).
    let store = tmp.join("workers");
    synth(&store, "size=64", &["-c", "12345", "--workers", "3"]).expect(0, "-c 12345 --workers 3");
    assert_eq!(final_counters(&store).written, 12_345);
    let files = check_store(&store);
    let stored: usize = (0..3).map(|s| stream_records(&files, s).len()).sum();
    assert_eq!(stored, 12_345);
}

/// Regression: `-s`/`--snaplen` was ignored with `--synthetic` (and
/// `--read`): frames were stored whole with a header snaplen of 262144.
wvtest!(snaplen_cuts_frames_and_keeps_their_length, needs = ["capinfos", "tcpdump"], |t| {
    let tmp = TempDir::new("synth-snaplen");
    let store = tmp.join("store");
    synth(&store, "size=1514,count=1000", &["-s", "100"]).expect(0, "-s 100");
    let files = check_store(&store);
    for f in &files {
        assert_eq!(f.entry["snaplen"], 100);
    }
    assert_sequence(&stream_records(&files, 0), 0, &[1514], 100);
    assert_peers_read(&paths(&files), usize::MAX);
});

wvtest!(rotation_by_time_closes_files_at_clock_aligned_boundaries, needs = ["capinfos"], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("synth-time");
    let store = tmp.join("store");
    // 20k packets/s for 1.2 s: 6 or 7 windows of 200 ms.
    synth(&store, "size=590,rate=20k,duration=1200ms", &["--file-time", "200ms"]).expect(0, "--file-time");
    let c = final_counters(&store);
    assert_eq!(c.drops(), 0, "paced at 20k/s, nothing may drop");
    let files = check_store(&store);
    assert!(files.len() >= 5, "{} files in 1.2 s with --file-time 200ms", files.len());
    let window = 200_000_000u64;
    let mut prev = None;
    for f in &files {
        let (a, b) = (f.entry["first_ns"].as_u64().unwrap(), f.entry["last_ns"].as_u64().unwrap());
        assert_eq!(a / window, b / window, "{}: spans a 200 ms boundary ({a}..{b})", f.path.display());
        assert_ne!(Some(a / window), prev, "two files for one 200 ms window");
        prev = Some(a / window);
    }
    let recs = stream_records(&files, 0);
    assert_eq!(recs.len() as u64, c.written);
    assert_sequence(&recs, 0, &[590], u32::MAX);
    assert_peers_read(&paths(&files), 0);
});

wvtest!(
    pcapng_output_opens_in_wireshark_tools_with_the_same_frames,
    needs = ["capinfos", "tcpdump", "tshark", "editcap"],
    |t| {
        let tmp = TempDir::new("synth-pcapng");
        let store = tmp.join("store");
        synth(&store, "size=imix,count=30k", &["--format", "pcapng", "--file-size", "4M"]).expect(0, "pcapng");
        let files = check_store(&store);
        assert!(files.len() >= 2);
        let ours = stream_records(&files, 0);
        assert_sequence(&ours, 0, &IMIX, u32::MAX);
        assert_peers_read(&paths(&files), usize::MAX);
        let mut theirs = Vec::new();
        for (i, f) in files.iter().enumerate() {
            assert_eq!(f.format, wv_wire::reader::Format::Pcapng);
            let out = run_ok(Command::new("tshark").args(["-n", "-r"]).arg(&f.path).args([
                "-T",
                "fields",
                "-e",
                "frame.len",
            ]));
            let lens: Vec<u32> =
                String::from_utf8_lossy(&out.stdout).lines().map(|l| l.trim().parse().unwrap()).collect();
            let want: Vec<u32> = f.records.iter().map(|r| r.origlen).collect();
            assert_eq!(lens, want, "tshark's frame lengths of {}", f.path.display());
            let conv = tmp.join(format!("conv-{i}.pcap"));
            run_ok(Command::new("editcap").args(["-F", "nsecpcap"]).arg(&f.path).arg(&conv));
            theirs.extend(read_capture(&conv).1);
        }
        assert_eq!(ours.len(), theirs.len());
        for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert_eq!(a.data, b.data, "frame {i} as Wireshark reads it");
            assert_eq!(
                (a.ts_ns, a.origlen),
                (b.ts_ns, b.origlen),
                "frame {i}: timestamp, origlen as Wireshark reads them"
            );
        }
    }
);

/// SIGTERM while the unpaced generator runs flat out: exit 0, a summary,
/// balanced counters, no `.part` file, only valid files, and since the
/// generator waits for the store instead of dropping, an unbroken sequence.
wvtest!(sigterm_under_full_load_leaves_only_valid_files, needs = ["capinfos", "tcpdump"], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("synth-sigterm");
    let store = tmp.join("store");
    let mut r = Recorder::start(
        None,
        &store,
        tmp.path(),
        &["--synthetic", "size=1514,duration=10m", "--buffer", "64M", "--file-size", "16M", "-q"],
    );
    r.wait_ready();
    r.wait_counter("stored_in_arena", 100_000);
    let o = r.terminate();
    o.expect(0, "SIGTERM");
    assert!(o.stderr.contains("packets received"), "no summary: {}", o.stderr);
    let c = final_counters(&store);
    assert!(c.written >= 100_000);
    assert_eq!(c.arena_full + c.write_error + c.kernel, 0, "the unpaced generator must not drop");
    let files = check_store(&store);
    let recs = stream_records(&files, 0);
    assert_eq!(recs.len() as u64, c.written);
    assert_sequence(&recs, 0, &[1514], u32::MAX);
    assert_peers_read(&paths(&files), 2);
});

/// A 20 MiB tmpfs mounted for one test, unmounted on drop.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(dir: PathBuf, size: &str) -> SmallFs {
        std::fs::create_dir_all(&dir).unwrap();
        run_ok(Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&dir));
        SmallFs(dir)
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// Disk full: exit 3 with one clear message, every closed file valid and
/// in the catalog, the unwritten rest counted as write errors, and the
/// stored frames an unbroken prefix of the generated sequence.
wvtest!(disk_full_exits_3_and_leaves_valid_files, needs = [root, "mount", "umount", "capinfos"], |t| {
    let tmp = TempDir::new("synth-full");
    let fs = SmallFs::mount(tmp.join("fs"), "20M");
    let store = fs.0.join("store");
    let o = synth(&store, "size=1514,duration=10m", &["--file-size", "4M"]);
    o.expect(3, "disk full");
    assert!(o.stderr.contains("disk is full"), "message: {}", o.stderr);
    let c = final_counters(&store);
    assert!(c.write_error > 0, "nothing counted as write error");
    let files = check_store(&store);
    assert!(files.len() >= 3, "{} files in 20M at --file-size 4M", files.len());
    let recs = stream_records(&files, 0);
    assert_eq!(recs.len() as u64, c.written, "written counter vs frames on disk");
    assert_sequence(&recs, 0, &[1514], u32::MAX);
    assert_peers_read(&paths(&files), 1);
});

#[test]
fn duration_stops_the_recording() {
    let tmp = TempDir::new("synth-duration");
    let store = tmp.join("store");
    let t = Instant::now();
    synth(&store, "size=64,rate=10k", &["--duration", "700ms"]).expect(0, "--duration");
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(700) && took < Duration::from_secs(20), "took {took:?}");
    let c = final_counters(&store);
    assert!(c.written > 1000 && c.written < 20_000, "{} written in 700 ms at 10k/s", c.written);
    check_store(&store);
}

wvtest!(bad_options_exit_2_with_one_sentence, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("synth-bad");
    let store = tmp.join("store");
    let cases: &[(&str, &[&str], &str)] = &[
        ("size=10", &[], "size"),
        ("size=64,bogus=1", &[], "bogus"),
        ("count=many", &[], "many"),
        ("size=64,count=10", &["--file-size", "1K"], "--file-size"),
        ("size=64,count=10", &["--block-size", "5000"], "--block-size"),
        ("size=64,count=10", &["--buffer", "lots"], "--buffer"),
        ("size=64,count=10", &["--file-time", "soon"], "--file-time"),
        ("size=64,count=10", &["--workers", "65"], "--workers"),
        ("size=64,count=10", &["--format", "erf"], "erf"),
    ];
    for (spec, opts, needle) in cases {
        let o = synth(&store, spec, opts);
        let what = format!("--synthetic {spec} {opts:?}");
        o.expect(2, &what);
        assert!(o.stderr.contains(needle), "{what}: message does not mention {needle}: {}", o.stderr);
        assert!(!store.exists(), "{what}: store created");
    }
    let expr = "udp port nonsense";
    let o = synth(&store, "size=64,count=10", &expr.split(' ').collect::<Vec<_>>());
    o.expect(2, "bad filter");
    let msg = libpcap_filter_error(expr);
    assert!(o.stderr.contains(&msg), "stderr lacks libpcap's \"{msg}\": {}", o.stderr);
    assert_eq!(o.stderr.lines().count(), 1, "one line expected: {}", o.stderr);
});

/// `-o` given twice with different directories (an n2disk user's way to
/// name a second disk) is refused in one sentence pointing to `--volume`,
/// with nothing created; clap alone kept the last and recorded there.
#[test]
fn a_second_output_directory_is_refused() {
    let tmp = TempDir::new("two-outputs");
    let (a, b) = (tmp.join("a"), tmp.join("b"));
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        "count=10",
        "-o",
        a.to_str().unwrap(),
        "-o",
        b.to_str().unwrap(),
        "-q",
    ]);
    o.expect(2, "two stores");
    assert!(o.stderr.contains("-o is given twice") && o.stderr.contains("--volume"), "{}", o.stderr);
    assert!(!a.exists() && !b.exists(), "a store was created");
    // Combined short flags (`-qoDIR`) are the same second -o.
    let qo = format!("-qo{}", b.display());
    let o = run_wirevault(&["record", "--synthetic", "count=10", "-o", a.to_str().unwrap(), &qo]);
    o.expect(2, "two stores, the second in -qo");
    assert!(o.stderr.contains("-o is given twice"), "{}", o.stderr);
    assert!(!a.exists() && !b.exists(), "a store was created");
    // The same directory twice is one store.
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        "count=10",
        "-o",
        a.to_str().unwrap(),
        "--output",
        a.to_str().unwrap(),
        "-q",
    ]);
    o.expect(0, "the same store twice");
}

/// Ingesting files into a budget smaller than they are: retention deletes
/// the run's own first files. Not what was asked: a warning that says so,
/// and up to which packet the input is gone (the store's oldest packet is
/// after it). A live recording that deletes its own old files is a ring
/// buffer at work: said, but not as a warning.
#[test]
fn retention_deleting_the_input_being_read_is_a_warning() {
    let tmp = TempDir::new("ingest-over-budget");
    let (a, b, input) = (tmp.join("a"), tmp.join("b"), tmp.join("in.pcap"));
    synth(&a, "size=1000,count=20000", &[]).expect(0, "the input's store");
    run_wirevault(&["query", a.to_str().unwrap(), "-w", input.to_str().unwrap()]).expect(0, "the input");
    let o = run_wirevault(&[
        "record",
        "-r",
        input.to_str().unwrap(),
        "-o",
        b.to_str().unwrap(),
        "--file-size",
        "1M",
        "--max-size",
        "6M",
        "-q",
    ]);
    o.expect(0, "ingest over budget");
    let line = o.stderr.lines().find(|l| l.contains("retention deleted")).unwrap_or_else(|| panic!("{}", o.stderr));
    assert!(line.contains("warning:") && line.contains("written by this run") && line.contains("--max-size"), "{line}");
    // "its packets up to TIME are no longer in the store": TIME is before
    // the oldest packet the store holds, and after the input's first.
    let until = line.split("up to ").nth(1).and_then(|r| r.split(' ').next()).unwrap_or_else(|| panic!("{line}"));
    let oldest = catalog(&b).iter().filter_map(|e| e["first_ns"].as_u64()).min().unwrap();
    let first_in = catalog(&a).iter().filter_map(|e| e["first_ns"].as_u64()).min().unwrap();
    let until_ns = rfc3339_ns(until);
    assert!(first_in <= until_ns && until_ns < oldest, "{line}: the store starts at {oldest}, the input at {first_in}");
    // A recording's own old files deleted by a synthetic (live-like) run: said plainly.
    let c = tmp.join("c");
    let o = synth(&c, "size=1000,count=20000", &["--file-size", "1M", "--max-size", "6M"]);
    o.expect(0, "synthetic over budget");
    let line = o.stderr.lines().find(|l| l.contains("retention deleted")).unwrap_or_else(|| panic!("{}", o.stderr));
    assert!(line.contains("written by this run") && !line.contains("warning"), "{line}");
}

/// Nanoseconds since the epoch of `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`.
fn rfc3339_ns(t: &str) -> u64 {
    let out = Command::new("date").args(["-u", "-d", t, "+%s%N"]).output().expect("date");
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or_else(|_| panic!("not a time: {t}"))
}

/// The summary lists the drop causes its recording can have: a synthetic or `--read`
/// recording no kernel and no AF_XDP causes, a pcapng one no "time past pcap's range", an
/// AF_PACKET recording the kernel's but no AF_XDP causes (before: all eight, every time).
wvtest!(the_summary_lists_only_the_drop_causes_of_its_source, |t| {
    let tmp = TempDir::new("summary-causes");
    let summary = |o: &Outcome| -> String {
        o.stderr.lines().find(|l| l.contains("packets received")).unwrap_or_else(|| panic!("{}", o.stderr)).to_owned()
    };
    let xdp = ["fill ring empty", "AF_XDP other"];
    let o = synth(&tmp.join("a"), "size=64,count=100", &[]);
    o.expect(0, "synthetic");
    let s = summary(&o);
    for gone in xdp.iter().chain(&["kernel"]) {
        assert!(!s.contains(gone), "{gone}: {s}");
    }
    assert!(s.contains("arena full 0") && s.contains("write error 0") && s.contains("time past pcap's range 0"), "{s}");
    let o = synth(&tmp.join("b"), "size=64,count=100", &["--format", "pcapng"]);
    assert!(!summary(o.expect(0, "pcapng")).contains("pcap's range"), "{}", o.stderr);
    let file = tmp.join("in.pcap");
    write_pcap(&file, 1, 65535, true, &test_frames(20, 1_700_000_000_000_000_000));
    let o = run_wirevault(&["record", "-r", file.to_str().unwrap(), "-o", tmp.join("c").to_str().unwrap(), "-q"]);
    let s = summary(o.expect(0, "--read"));
    assert!(!s.contains("kernel") && !s.contains("AF_XDP"), "{s}");
    if !t.has_root("live part") {
        return;
    }
    let pair = VethPair::new();
    let out = VethPair::exec(&pair.ns_a, bin())
        .args(["record", "-i", pair.if_a, "--duration", "1s", "-q", "--buffer", "64M", "-o"])
        .arg(tmp.join("d"))
        .output()
        .unwrap();
    let o = Outcome::from_output(out);
    let s = summary(o.expect(0, "-i veth"));
    assert!(s.contains("kernel 0"), "{s}");
    for gone in xdp {
        assert!(!s.contains(gone), "{gone}: {s}");
    }
});
