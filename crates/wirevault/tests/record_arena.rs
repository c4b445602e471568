//! The arena's default size and its start-up cost (issue 17, "Also"):
//! without `--buffer` the arena comes from the machine's memory (checked
//! against /proc/meminfo), or from a `wirevault disk-bench --rate R --json`
//! result kept in the store as `disk-bench.json` (produced here by the real
//! disk-bench); stats.json reports the start-up CPU (arena pre-faulting
//! included) apart from the capture threads' per-packet CPU; a result that
//! is not usable is refused with one sentence, exit 2, before recording.

use crate::util::*;
use std::path::Path;

/// The default of a machine with `ram` bytes (crates/wirevault/src/cmd/record/plan.rs).
fn expected_default(ram: u64) -> u64 {
    (ram / 8).clamp(64 << 20, 4 << 30)
}

fn mem_total() -> u64 {
    let m = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 =
        m.lines().find(|l| l.starts_with("MemTotal:")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

fn record(store: &Path, extra: &[&str]) -> serde_json::Value {
    let mut a = vec![
        "record",
        "-q",
        "--no-tune-warnings",
        "-o",
        store.to_str().unwrap(),
        "--synthetic",
        "size=1514,count=5000",
    ];
    a.extend_from_slice(extra);
    run_wirevault(&a).expect(0, &format!("{a:?}"));
    stats(store)
}

#[test]
fn arena_default_follows_memory_and_a_disk_bench_result() {
    let _g = heavy_lock();
    let tmp = TempDir::new("arena-default");
    let block = 4u64 << 20;

    // From memory: the default of this machine's MemTotal (rounded down to whole blocks).
    let st = record(&tmp.join("mem"), &[]);
    assert_eq!(st["arena_from"], "memory", "{st}");
    assert_eq!(st["arena_bytes"].as_u64(), Some(expected_default(mem_total()) / block * block), "{st}");
    assert_eq!(st["written"], 5000);
    // Start-up is reported apart from the capture threads' CPU, and includes the pre-faulting.
    let (startup, prefault) = (st["startup_cpu_s"].as_f64().unwrap(), st["arena_prefault_cpu_s"].as_f64().unwrap());
    assert!(startup >= prefault && prefault >= 0.0, "{st}");
    assert!(st["capture_cpu_s"].as_f64().is_some(), "{st}");

    // --buffer wins.
    let st = record(&tmp.join("flag"), &["--buffer", "96M"]);
    assert_eq!((st["arena_from"].as_str(), st["arena_bytes"].as_u64()), (Some("--buffer"), Some(96 << 20)));

    // A disk-bench result in the store: its buffer with margin, from the real disk-bench.
    let bench_dir = tmp.join("bench");
    std::fs::create_dir_all(&bench_dir).unwrap();
    let o = run_wirevault(&[
        "disk-bench",
        bench_dir.to_str().unwrap(),
        "--files",
        "4",
        "--file-size",
        "16M",
        "--rate",
        "1mbps",
        "--json",
    ]);
    o.expect(0, "disk-bench");
    let mut v: serde_json::Value = serde_json::from_str(o.stdout.trim()).unwrap();
    let want = v["rate"]["buffer_with_margin_bytes"].as_u64().expect("a sustained rate has a buffer");
    // (kept in an existing store: a directory with other files is no new store)
    let store = tmp.join("benched");
    record(&store, &["--buffer", "64M"]);
    let with_result = |v: &serde_json::Value| {
        std::fs::write(store.join("disk-bench.json"), v.to_string()).unwrap();
        let mut a = vec!["record", "-o", store.to_str().unwrap(), "--synthetic", "size=1514,count=5000"];
        a.push("--no-tune-warnings");
        let o = run_wirevault(&a);
        o.expect(0, "record with a disk-bench result");
        (stats(&store), o.stderr)
    };
    // This run took well under a second: too short to see the disk's dips;
    // said, and the default is used.
    assert!(v["elapsed_s"].as_f64().unwrap() < 10.0, "{v}");
    let (st, err) = with_result(&v);
    assert_eq!(st["arena_from"], "memory", "{st}");
    assert!(err.contains("disk-bench.json comes from a run of") && err.contains("not used"), "{err}");
    // As a run of 12 s would say (the same figures, its length changed here:
    // the test does not write to the disk for 12 s), on the store's file system.
    v["elapsed_s"] = 12.0.into();
    let (st, err) = with_result(&v);
    assert_eq!(st["arena_from"], "disk-bench", "{st} {err}");
    assert_eq!(st["arena_bytes"].as_u64(), Some(want.max(64 << 20) / block * block), "{st}");
    // Measured on another file system than the store's: said, not used.
    v["dir"] = "/proc".into();
    let (st, err) = with_result(&v);
    assert_eq!(st["arena_from"], "memory", "{st}");
    assert!(err.contains("measured /proc, not the store's file system"), "{err}");

    // A file that is not such a result: one sentence, exit 2, nothing recorded.
    std::fs::write(store.join("disk-bench.json"), "{\"version\":1}").unwrap();
    let files = catalog(&store).len();
    let o = run_wirevault(&["record", "-q", "-o", store.to_str().unwrap(), "--synthetic", "count=10"]);
    o.expect(2, "unusable disk-bench.json");
    assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
    assert!(o.stderr.contains("disk-bench.json") && o.stderr.contains("--buffer"), "{}", o.stderr);
    assert_eq!(catalog(&store).len(), files, "nothing recorded");
}

/// The arena is paid for as the backlog needs it: its blocks are taken lowest first, so a
/// disk that keeps up reuses a few of a 1 GiB arena and no more than its first 64 MiB are
/// faulted in; on a
/// disk that falls behind (a throttled loop-mounted store) its use grows with the backlog and
/// the memory faulted in stays ahead of it. stats.json says how much was ever used; every
/// frame is in the files; the writer registers the blocks it writes from without a word.
wvtest!(arena_is_paid_for_as_the_backlog_needs_it, |test| {
    let _g = heavy_lock();
    let block = 4u64 << 20;
    let tmp = TempDir::new("arena-use");
    let store = tmp.join("store");
    let run = |store: &Path, rate: &str, throttle: Option<&crate::record_zerocopy_inflight::Throttle>| {
        let synthetic = format!("size=1514,rate={rate}");
        let args = ["-q", "--no-tune-warnings", "--buffer", "1G", "--synthetic", &synthetic, "--duration", "60s"];
        let r = Recorder::start(None, store, tmp.path(), &args);
        if let Some(t) = throttle {
            t.enter(r.pid());
        }
        r
    };
    // A disk that keeps up: 2,000 frames a second for two seconds.
    let mut r = run(&store, "2000pps", None);
    r.wait_received(4000);
    let o = r.terminate();
    o.expect(0, "record, interrupted");
    assert!(!o.stderr.contains("warning") && !o.stderr.contains("refused"), "{}", o.stderr);
    let st = stats(&store);
    assert_eq!(st["arena_bytes"].as_u64(), Some(1 << 30), "{st}");
    let (used, faulted) = (st["arena_used_bytes"].as_u64().unwrap(), st["arena_faulted_bytes"].as_u64().unwrap());
    assert!(used > 0 && used <= 3 * block, "a disk that keeps up used {used} bytes of the arena: {st}");
    // Faulted in: the first 64 MiB (`Tuning::arena_first`), or the use and a little more.
    assert!(
        faulted >= used && faulted <= (64 << 20u64).max(used + 8 * block),
        "{faulted} bytes faulted in for {used} used: {st}"
    );
    assert_eq!(st["arena_registered"], true, "{st}");
    let received = st["received"].as_u64().unwrap();
    assert_eq!(st["written"].as_u64(), Some(received), "{st}");
    let got: usize = check_store(&store).iter().map(|f| f.records.len()).sum();
    assert_eq!(got as u64, received, "frames in the files");

    // A disk that falls behind: 60 MB/s onto a store taking 16 MB/s.
    let Some((fs, throttle)) = crate::record_zerocopy_inflight::slow_store(test.name) else {
        return;
    };
    let slow = fs.dir.join("store");
    let mut r = run(&slow, "40000pps", Some(&throttle));
    r.wait_counter("arena_used_bytes", 64 << 20);
    let st = stats(&slow);
    let (used, faulted) = (st["arena_used_bytes"].as_u64().unwrap(), st["arena_faulted_bytes"].as_u64().unwrap());
    assert!(faulted >= used && used < 1 << 30, "{faulted} bytes faulted in for {used} used: {st}");
    let o = r.terminate();
    o.expect(0, "record, interrupted");
    let st = stats(&slow);
    let received = st["received"].as_u64().unwrap();
    assert_eq!(st["written"].as_u64(), Some(received), "every frame of the backlog written: {st}");
    assert!(st["arena_background_cpu_s"].as_f64().unwrap() > 0.0, "faulted in by the background thread: {st}");
    let got: usize = check_store(&slow).iter().map(|f| f.records.len()).sum();
    assert_eq!(got as u64, received, "frames in the files");
});

/// `--spill-above 0` sends every full-page write through the page cache
/// (the path a disk that falls behind takes): the files hold exactly the
/// frames, rotate as usual, are made durable and cataloged by the index
/// thread, tcpdump and capinfos read them, the index answers a filtered
/// query as tcpdump does, and stats.json counts the spilled bytes.
wvtest!(spilled_writes_keep_every_frame_and_the_index, needs = ["tcpdump", "capinfos"], |t| {
    let tmp = TempDir::new("arena-spill");
    let sent = test_frames(3000, 1_650_000_000_000_000_000);
    let input = tmp.join("sent.pcap");
    write_pcap(&input, 1, 65535, true, &sent);
    for format in ["pcap", "pcapng"] {
        let store = tmp.join(format!("store-{format}"));
        let o = run_wirevault(&[
            "record",
            "-q",
            "--buffer",
            "8M",
            "--block-size",
            "64K",
            "--file-size",
            "256K",
            "--format",
            format,
            "--spill-above",
            "0",
            "-o",
            store.to_str().unwrap(),
            "--read",
            input.to_str().unwrap(),
        ]);
        o.expect(0, format);
        assert!(o.stderr.contains("went through the page cache"), "{format}: {}", o.stderr);
        let s = stats(&store);
        assert!(s["spilled_bytes"].as_u64().unwrap() > 256 << 10, "{format}: {s}");
        let c = final_counters(&store);
        assert_eq!((c.written, c.drops()), (3000, 0), "{format}");
        let files = check_store(&store);
        assert!(files.len() > 3, "{format}: {} files", files.len());
        assert_same_frames(&sent, &stream_records(&files, 0), true, format);
        let paths: Vec<_> = files.iter().map(|f| f.path.clone()).collect();
        assert_peers_read(&paths, 3);
        // The index built on the way answers as tcpdump over the input.
        let out = tmp.join(format!("q-{format}.pcap"));
        run_wirevault(&["query", store.to_str().unwrap(), "-w", out.to_str().unwrap(), "udp"]).expect(0, "query");
        let (_, want) = tcpdump_frames(&input, &["udp"], tmp.path());
        let (_, got) = tcpdump_frames(&out, &[], tmp.path());
        assert!(!want.is_empty());
        assert_eq!(got.len(), want.len(), "{format}: udp packets");
        assert!(got.iter().zip(&want).all(|(a, b)| a.data == b.data && a.ts_ns == b.ts_ns), "{format}");
    }
    // `off`, and a value that is not a percentage.
    let store = tmp.join("store-off");
    run_wirevault(&[
        "record",
        "-q",
        "--spill-above",
        "off",
        "-o",
        store.to_str().unwrap(),
        "--read",
        input.to_str().unwrap(),
    ])
    .expect(0, "off");
    assert_eq!(stats(&store)["spilled_bytes"], 0);
    let o = run_wirevault(&[
        "record",
        "--spill-above",
        "150",
        "-o",
        tmp.join("x").to_str().unwrap(),
        "--read",
        input.to_str().unwrap(),
    ]);
    o.expect(2, "150%");
    assert!(o.stderr.contains("not a percentage"), "{}", o.stderr);
});
