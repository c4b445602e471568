//! The second hostile trial's store findings (1, 3, 5, 8, 10, 11), each
//! driving the real binary: store paths through the store's directory
//! descriptor in `index` and `repair`, min/max catalog times, FIFOs planted
//! under store names, timestamps past 2106, truncated catalogued files,
//! and query's warnings while a recorder holds the lock.

use crate::util::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Runs wirevault with `args`, killed after `secs` seconds: `None` if it hung.
fn run_timeout(args: &[&str], secs: u64) -> Option<Outcome> {
    let mut child = wirevault()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run wirevault");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return Some(Outcome::from_output(child.wait_with_output().expect("output")));
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A small store made by `record --synthetic`.
fn synthetic_store(tmp: &TempDir, name: &str) -> PathBuf {
    let s = tmp.join(name);
    run_wirevault(&["record", "--synthetic", "size=100,count=50", "-o", s.to_str().unwrap(), "-q", "--buffer", "64M"])
        .expect(0, "synthetic store");
    s
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

// --- 5: FIFOs planted under store names ----------------------------------------

#[test]
fn fifos_under_store_names_are_refused_not_waited_on() {
    let tmp = TempDir::new("hs2-fifo");
    let input = tmp.join("in.pcap");
    write_pcap(&input, 1, 65535, false, &test_frames(5, 1_700_000_000_000_000_000));
    for name in [".lock", "catalog.jsonl"] {
        let store = synthetic_store(&tmp, &format!("s{}", name.trim_start_matches('.')));
        fs::remove_file(store.join(name)).ok();
        mkfifo(&store.join(name));
        // A .part file makes query probe the lock.
        fs::write(store.join("stream-000/20260101T000000.000000000Z-000099.pcap.part"), b"").unwrap();
        let runs: Vec<Vec<&str>> = vec![
            vec!["query", s(&store), "--count"],
            vec!["repair", s(&store)],
            vec!["index", s(&store)],
            vec!["record", "-r", s(&input), "-o", s(&store), "-q", "--buffer", "64M"],
        ];
        for args in runs {
            let what = format!("{args:?} with a FIFO {name}");
            let o = run_timeout(&args, 20).unwrap_or_else(|| panic!("{what}: hung"));
            if name == ".lock" && args[0] == "query" {
                // A query does not need the lock file: it may answer.
                assert_no_panic(&o.stderr, &what);
                continue;
            }
            assert_ne!(o.code, Some(0), "{what}: exit 0\n{}", o.stderr);
            assert_no_panic(&o.stderr, &what);
            assert!(o.stderr.contains(name) && o.stderr.contains("not a regular file"), "{what}: {}", o.stderr);
            assert!(!o.stderr.contains("neither a store"), "{what}: {}", o.stderr);
        }
    }
    // stats.json and catalog.jsonl.part as FIFOs: record neither hangs nor
    // loses what it recorded.
    for name in ["stats.json", "catalog.jsonl.part"] {
        let store = synthetic_store(&tmp, &format!("t{}", name.replace('.', "-")));
        fs::remove_file(store.join(name)).ok();
        mkfifo(&store.join(name));
        let args = ["record", "-r", s(&input), "-o", s(&store), "-q", "--buffer", "64M"];
        let o = run_timeout(&args, 20).unwrap_or_else(|| panic!("record with a FIFO {name}: hung"));
        assert_no_panic(&o.stderr, name);
        if o.code != Some(0) {
            assert!(o.stderr.contains(name), "{name}: {}", o.stderr);
        }
        let o = run_timeout(&["query", s(&store), "--count"], 20).expect("query hung");
        o.expect(0, "query after record");
    }
}

// --- 1: index and repair stay beneath the store ---------------------------------

/// The finding's repro: `stream-000` is a symlink to a root-only directory
/// holding a capture and an index; the store's owner wrote a catalog naming
/// them. Neither `index` nor `repair` may create, change or delete anything
/// there, nor copy the secret capture's metadata into the catalog.
#[test]
fn index_and_repair_never_follow_a_symlinked_stream_directory() {
    let Some(secret_src) = corpus_file("index_and_repair_never_follow", "ikev2four.pcap") else { return };
    let tmp = TempDir::new("hs2-beneath");
    let secret = tmp.join("secret");
    fs::create_dir_all(&secret).unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(&mut fs::metadata(&secret).unwrap().permissions(), 0o700);
    fs::copy(&secret_src, secret.join("secret.pcap")).unwrap();
    fs::write(secret.join("other.pcap.idx"), "keep").unwrap();
    let listing = |d: &Path| {
        let mut v: Vec<(String, Vec<u8>)> = fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), fs::read(e.path()).unwrap()))
            .collect();
        v.sort();
        v
    };
    let before = listing(&secret);
    let tail = r#""format":"pcap","linktype":1,"snaplen":65535,"first_ns":0,"last_ns":0,"packets":0,"bytes":0}"#;
    let cat = format!(
        "{{\"stream\":0,\"file\":\"stream-000/secret.pcap\",\"index\":null,{tail}\n{{\"stream\":0,\"file\":\"stream-000/other.pcap\",\"index\":\"stream-000/other.pcap.idx\",{tail}\n"
    );
    for cmd in ["index", "repair"] {
        let store = tmp.join(format!("store-{cmd}"));
        fs::create_dir_all(&store).unwrap();
        std::os::unix::fs::symlink(&secret, store.join("stream-000")).unwrap();
        fs::write(store.join("catalog.jsonl"), &cat).unwrap();
        let o = run_timeout(&[cmd, s(&store)], 60).expect("hung");
        assert_no_panic(&o.stderr, cmd);
        assert_eq!(listing(&secret), before, "{cmd} changed the directory behind the symlink\n{}", o.stderr);
        let after = fs::read_to_string(store.join("catalog.jsonl")).unwrap_or_default();
        assert!(!after.contains("\"packets\":4") && !after.contains("secret.pcap.idx"), "{cmd}: {after}");
        assert!(fs::symlink_metadata(store.join("stream-000")).unwrap().file_type().is_symlink());
    }
}

/// A plain directory indexed by `index DIR`: a symlinked subdirectory is
/// not walked into, and nothing is written behind it.
#[test]
fn index_of_a_plain_directory_does_not_walk_symlinks() {
    let tmp = TempDir::new("hs2-plain");
    let outside = tmp.join("outside");
    fs::create_dir_all(&outside).unwrap();
    write_pcap(&outside.join("x.pcap"), 1, 65535, false, &test_frames(3, 1_700_000_000_000_000_000));
    let d = tmp.join("d");
    fs::create_dir_all(&d).unwrap();
    write_pcap(&d.join("a.pcap"), 1, 65535, false, &test_frames(4, 1_700_000_000_000_000_000));
    std::os::unix::fs::symlink(&outside, d.join("sub")).unwrap();
    let o = run_timeout(&["index", s(&d)], 60).expect("hung");
    o.expect(0, "index DIR");
    assert!(!outside.join("x.pcap.idx").exists(), "index wrote behind a symlinked directory");
    assert!(d.join("a.pcap.idx").exists());
    let cat = fs::read_to_string(d.join("catalog.jsonl")).unwrap();
    assert!(!cat.contains("sub/x.pcap"), "{cat}");
}

// --- 3: the catalog holds each file's min and max time ------------------------

fn count_between(store: &Path, from: &str, to: &str, expr: &[&str]) -> u64 {
    let mut args = vec!["query", s(store), "--count", "--from", from, "--to", to];
    args.extend_from_slice(expr);
    let o = run_wirevault(&args);
    o.expect(0, &format!("query --from {from} --to {to} {expr:?}"));
    o.stdout.trim().parse().unwrap()
}

fn with_times(times_ns: &[u64]) -> Vec<Frame> {
    let mut f = test_frames(times_ns.len() as u32, 0);
    for (fr, t) in f.iter_mut().zip(times_ns) {
        fr.ts_ns = *t;
    }
    f
}

#[test]
fn time_ranges_are_exact_when_times_go_back() {
    let tmp = TempDir::new("hs2-times");
    const S: u64 = 1_000_000_000;
    let day1: Vec<u64> = (0..20).map(|i| (1000 + i) * S).collect();
    let day2: Vec<u64> = (0..20).map(|i| (5000 + i) * S).collect();
    write_pcap(&tmp.join("day1.pcap"), 1, 65535, true, &with_times(&day1));
    write_pcap(&tmp.join("day2.pcap"), 1, 65535, true, &with_times(&day2));
    let store = tmp.join("s");
    run_wirevault(&[
        "record",
        "-r",
        s(&tmp.join("day2.pcap")),
        s(&tmp.join("day1.pcap")),
        "-o",
        s(&store),
        "-q",
        "--buffer",
        "64M",
    ])
    .expect(0, "record day2 day1");
    let all: Vec<u64> = day1.iter().chain(&day2).copied().collect();
    for (from, to) in [(0, 1010 * S), (1000 * S, 6000 * S), (5005 * S, 5010 * S), (1015 * S, 5003 * S)] {
        let want = all.iter().filter(|t| (from..to).contains(*t)).count() as u64;
        assert_eq!(count_between(&store, &time_arg(from), &time_arg(to), &[]), want, "day2 day1, [{from}, {to})");
    }
    // One file with jittered times.
    let jit = tmp.join("jitter.pcap");
    write_pcap(&jit, 1, 65535, true, &with_times(&[1000 * S, 500 * S, 2000 * S, 100 * S]));
    let store = tmp.join("j");
    run_wirevault(&["record", "-r", s(&jit), "-o", s(&store), "-q", "--buffer", "64M"]).expect(0, "record jitter");
    assert_eq!(count_between(&store, "0", "600", &[]), 2);
    assert_eq!(count_between(&store, "0", "600", &["ip or not ip"]), 2);
    // Many packets with jitter across the index's blocks: ranges inside
    // one block range stay exact (each block's min and max).
    let mut x: u64 = 12345;
    let many: Vec<u64> = (0..3000u64)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            1_700_000_000 * S + i * 1_000_000 + (x >> 33) % 80_000_000
        })
        .collect();
    let m = tmp.join("many.pcap");
    write_pcap(&m, 1, 65535, true, &with_times(&many));
    let store = tmp.join("m");
    run_wirevault(&["record", "-r", s(&m), "-o", s(&store), "-q", "--buffer", "64M"]).expect(0, "record many");
    let base = 1_700_000_000 * S;
    for (a, b) in [
        (1_000_000_500u64, 1_000_030_000u64),
        (500_000_000, 500_100_000),
        (0, 50_000_000),
        (2_990_000_000, 3_100_000_000),
    ] {
        let (from, to) = (base + a - 1_000_000_000 + 1_000_000_000, base + b);
        let want = many.iter().filter(|t| (from..to).contains(*t)).count() as u64;
        for expr in [&[][..], &["ip or not ip"][..]] {
            assert_eq!(
                count_between(&store, &time_arg(from), &time_arg(to), expr),
                want,
                "jitter [{from}, {to}) {expr:?}"
            );
        }
    }
}

/// `repair` corrects a catalog whose times are the first and last record's
/// (written by an older version), from the index's time range.
#[test]
fn repair_corrects_catalog_times() {
    let tmp = TempDir::new("hs2-retime");
    const S: u64 = 1_000_000_000;
    let jit = tmp.join("jitter.pcap");
    write_pcap(&jit, 1, 65535, true, &with_times(&[1000 * S, 500 * S, 2000 * S, 100 * S]));
    let store = tmp.join("j");
    run_wirevault(&["record", "-r", s(&jit), "-o", s(&store), "-q", "--buffer", "64M"]).expect(0, "record jitter");
    let cat = fs::read_to_string(store.join("catalog.jsonl")).unwrap();
    let old = cat
        .replace(&format!("\"first_ns\":{}", 100 * S), &format!("\"first_ns\":{}", 1000 * S))
        .replace(&format!("\"last_ns\":{}", 2000 * S), &format!("\"last_ns\":{}", 100 * S));
    fs::write(store.join("catalog.jsonl"), &old).unwrap();
    // Read as the range [100, 1000] (the two times swapped into order): the
    // packet at 2000 is outside it until repair puts the index's range in.
    assert_eq!(count_between(&store, "1500", "2500", &[]), 0, "the stand-in for an old catalog");
    run_wirevault(&["repair", s(&store)]).expect(0, "repair");
    assert_eq!(count_between(&store, "0", "600", &[]), 2);
    assert_eq!(count_between(&store, "1500", "2500", &[]), 1);
}

// --- 10: repair fixes catalogued files that changed size -----------------------

fn tcpdump_count_all(file: &Path) -> u64 {
    let o = Command::new("tcpdump").arg("-r").arg(file).arg("--count").output().expect("tcpdump");
    let t = String::from_utf8_lossy(&o.stdout);
    t.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("tcpdump --count: {t}"))
}

fn stored_files(store: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(store.join("stream-000"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    v.sort();
    v
}

#[test]
fn repair_fixes_a_truncated_catalogued_file() {
    if !need_tools("repair_fixes_a_truncated_catalogued_file", &["tcpdump"]) {
        return;
    }
    let tmp = TempDir::new("hs2-trunc");
    let store = tmp.join("s");
    run_wirevault(&["record", "--synthetic", "size=300,count=2000", "-o", s(&store), "-q", "--buffer", "64M"])
        .expect(0, "record");
    let files = stored_files(&store);
    let f = &files[0];
    let len = fs::metadata(f).unwrap().len();
    Command::new("truncate").arg("-s").arg((len - 1000).to_string()).arg(f).status().unwrap();
    let o = run_wirevault(&["repair", s(&store)]);
    // Packets the catalog counted are gone: said, exit 1 (issue 44).
    o.expect(1, "repair of a truncated file");
    assert!(o.stderr.contains("catalogued packets are gone"), "{}", o.stderr);
    let o = run_wirevault(&["query", s(&store), "--strict", "--count"]);
    o.expect(0, "query --strict after repair");
    let want: u64 = stored_files(&store).iter().map(|f| tcpdump_count_all(f)).sum();
    assert_eq!(o.stdout.trim().parse::<u64>().unwrap(), want, "{}", o.stderr);
    assert!(o.stderr.is_empty() || !o.stderr.contains("repair"), "{}", o.stderr);
    let again = run_wirevault(&["repair", s(&store)]);
    assert!(again.expect(0, "repair again").stderr.contains("nothing to repair"), "{}", again.stderr);
    check_store(&store);

    // Truncated again: query counts the one damaged file once.
    let f = &stored_files(&store)[0];
    let len = fs::metadata(f).unwrap().len();
    Command::new("truncate").arg("-s").arg((len - 1000).to_string()).arg(f).status().unwrap();
    let o = run_wirevault(&["query", s(&store), "--strict", "--count"]);
    assert!(o.stderr.contains("1 damaged"), "{}", o.stderr);
}

/// A catalogued file cut short (1,012 packets of 200 bytes cut to 30,000 bytes, as the trial's
/// 889 of 1,012): `repair` says how many of its catalogued packets are gone and how many
/// remain (tcpdump's count of the cut file) and exits 1; the next repair has nothing to do.
#[test]
fn repair_says_how_many_catalogued_packets_a_cut_file_lost() {
    if !need_tools("repair_says_how_many_catalogued_packets_a_cut_file_lost", &["tcpdump"]) {
        return;
    }
    let tmp = TempDir::new("hs2-lost");
    let store = tmp.join("s");
    run_wirevault(&["record", "--synthetic", "size=200,count=1012", "-o", s(&store), "-q", "--buffer", "64M"])
        .expect(0, "record");
    let f = &stored_files(&store)[0];
    Command::new("truncate").arg("-s").arg("30000").arg(f).status().unwrap();
    let o = run_wirevault(&["repair", s(&store)]);
    o.expect(1, "repair of a file cut short");
    let kept = tcpdump_count_all(f);
    let want = format!("{} of its 1012 catalogued packets are gone, {kept} remain", 1012 - kept);
    assert!(o.stderr.contains(&want), "no {want:?} in: {}", o.stderr);
    assert!(o.stderr.contains(f.file_name().unwrap().to_str().unwrap()), "{}", o.stderr);
    let again = run_wirevault(&["repair", s(&store)]);
    assert!(again.expect(0, "repair again").stderr.contains("nothing to repair"), "{}", again.stderr);
}

#[test]
fn absurd_catalog_bytes_are_fixed_and_retention_still_deletes() {
    let tmp = TempDir::new("hs2-absurd");
    let store = tmp.join("s");
    let rec = |store: &Path, extra: &[&str]| {
        let mut a = vec![
            "record",
            "--synthetic",
            "size=500,count=4000",
            "-o",
            s(store),
            "-q",
            "--buffer",
            "64M",
            "--block-size",
            "256K",
            "--file-size",
            "256K",
        ];
        a.extend_from_slice(extra);
        run_wirevault(&a).expect(0, &format!("record {extra:?}"));
    };
    rec(&store, &[]);
    let cat = fs::read_to_string(store.join("catalog.jsonl")).unwrap();
    let first = cat.lines().next().unwrap().to_string();
    let bytes = first.split("\"bytes\":").nth(1).unwrap().trim_end_matches('}').to_string();
    let bad = first.replace(&format!("\"bytes\":{bytes}"), "\"bytes\":18446744073709551615");
    fs::write(store.join("catalog.jsonl"), cat.replacen(&first, &bad, 1)).unwrap();
    // Retention with the absurd line: the budget holds, old files go.
    let other = tmp.join("t");
    fs::create_dir_all(&other).unwrap();
    for e in fs::read_dir(&store).unwrap() {
        let e = e.unwrap();
        let to = other.join(e.file_name());
        // The flow records (flows/) play no part in retention's budget.
        if e.file_name() == "flows" {
            continue;
        }
        if e.path().is_dir() {
            fs::create_dir_all(&to).unwrap();
            for f in fs::read_dir(e.path()).unwrap() {
                let f = f.unwrap();
                fs::copy(f.path(), to.join(f.file_name())).unwrap();
            }
        } else {
            fs::copy(e.path(), &to).unwrap();
        }
    }
    rec(&other, &["--max-size", "1M"]);
    // (Captures only: an index written after its file was cataloged is
    // not in the sum the budget checks.)
    let used: u64 = stored_files(&other).iter().map(|f| fs::metadata(f).unwrap().len()).sum();
    assert!(used <= 1 << 20, "retention kept {used} bytes over a 1M budget");
    assert!(!fs::read_to_string(other.join("catalog.jsonl")).unwrap().contains(&first[..60]));
    // repair fixes the line.
    let o = run_wirevault(&["repair", s(&store)]);
    o.expect(0, "repair of an absurd bytes");
    assert!(!o.stdout.contains("consistent"), "{}", o.stdout);
    let fixed = fs::read_to_string(store.join("catalog.jsonl")).unwrap();
    assert!(!fixed.contains("18446744073709551615"), "{fixed}");
    check_store(&store);
    run_wirevault(&["query", s(&store), "--strict", "--count"]).expect(0, "query --strict");
}

// --- 11: query during a recording does not ask for repair ----------------------

#[test]
fn queries_during_a_recording_do_not_ask_for_repair() {
    let _heavy = heavy_lock();
    let tmp = TempDir::new("hs2-inflight");
    let store = tmp.join("s");
    let mut rec = Recorder::start(
        None,
        &store,
        tmp.path(),
        &[
            "--synthetic",
            "size=200,rate=20k,duration=6s",
            "--buffer",
            "16M",
            "--block-size",
            "64K",
            "--file-size",
            "64K",
            "--max-size",
            "1M",
            "-q",
        ],
    );
    rec.wait_ready();
    let start = Instant::now();
    let mut runs = 0;
    let mut max_count = 0u64;
    while start.elapsed() < Duration::from_secs(5) {
        let o = run_wirevault(&["query", s(&store), "--count"]);
        assert_no_panic(&o.stderr, "query while recording");
        if o.code != Some(0) {
            // The store may not exist for a moment at the start.
            assert!(!o.stderr.contains("repair"), "{}", o.stderr);
            continue;
        }
        runs += 1;
        max_count = max_count.max(o.stdout.trim().parse::<u64>().unwrap());
        assert!(!o.stderr.contains("wirevault repair"), "query while recording asks for repair:\n{}", o.stderr);
    }
    let o = rec.wait(Duration::from_secs(30));
    o.expect(0, "record");
    assert!(runs > 5, "only {runs} queries ran");
    let written = final_counters(&store).written;
    assert!(max_count <= written, "a query counted {max_count} of {written} written");
}

// --- 8: times past 2106 -----------------------------------------------------------

#[test]
fn times_past_2106_are_refused_in_pcap_and_kept_in_pcapng() {
    let Some(input) = corpus_file("times_past_2106", "time_2106_overflow.pcapng") else { return };
    if !need_tools("times_past_2106", &["tcpdump"]) {
        return;
    }
    let tmp = TempDir::new("hs2-2106");
    let count = |store: &Path, range: &[&str]| -> u64 {
        let mut a = vec!["query", s(store), "--count"];
        a.extend_from_slice(range);
        let o = run_wirevault(&a);
        o.expect(0, &format!("query {range:?}"));
        o.stdout.trim().parse().unwrap()
    };
    let stored = |store: &Path| -> u64 {
        fs::read_dir(store.join("stream-000"))
            .map(|d| {
                d.map(|e| e.unwrap().path())
                    .filter(|p| !p.to_string_lossy().ends_with(".idx"))
                    .map(|p| tcpdump_count_all(&p))
                    .sum()
            })
            .unwrap_or(0)
    };
    let limit = (u32::MAX as u64 + 1) * 1_000_000_000;
    for format in ["pcap", "pcapng"] {
        let store = tmp.join(format);
        let o = run_wirevault(&["record", "-r", s(&input), "-o", s(&store), "-q", "--format", format]);
        o.expect(0, &format!("record --format {format}"));
        // The catalog holds the times the stored records hold.
        for e in catalog(&store) {
            let (_, recs) = read_capture(&store.join(e["file"].as_str().unwrap()));
            for r in recs {
                let (lo, hi) = (e["first_ns"].as_u64().unwrap(), e["last_ns"].as_u64().unwrap());
                assert!(
                    lo <= r.ts_ns && r.ts_ns <= hi,
                    "{format}: a stored time {} outside the catalog's {e}",
                    r.ts_ns
                );
            }
        }
        let c = final_counters(&store);
        let in_file = tcpdump_count_all(&input);
        assert_eq!(c.received, in_file);
        let on_disk = stored(&store);
        assert_eq!(c.written, on_disk, "{format}: written vs stored");
        assert_eq!(count(&store, &[]), on_disk, "{format}");
        assert_eq!(count(&store, &["--from", "0", "--to", "100"]), 0, "{format}: a wrapped time");
        let late = count(&store, &["--from", "2106-02-07T06:28:16Z"]);
        if format == "pcap" {
            assert_eq!(c.timestamp_range, in_file, "{format}: the packet past 2106 is counted as a drop");
            assert!(o.stderr.contains("--format pcapng"), "{}", o.stderr);
            assert_eq!(late, 0);
        } else {
            assert_eq!(c.timestamp_range, 0);
            assert_eq!(late, on_disk, "pcapng keeps the time");
        }
        // The catalog holds what the files hold.
        for e in catalog(&store) {
            assert!(e["first_ns"].as_u64().unwrap() >= limit, "{format}: {e}");
        }
    }
}
