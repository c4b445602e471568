//! The catalog against the files it lists, and `repair`: min/max catalog
//! times when times go back, files truncated or grown after they were
//! catalogued, absurd catalogued sizes (retention still deletes), and queries
//! during a recording, which must not ask for a repair.

use crate::util::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

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

fn stored_files(store: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(store.join("stream-000"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    v.sort();
    v
}

wvtest!(repair_fixes_a_truncated_catalogued_file, needs = ["tcpdump"], |t| {
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
    let want: u64 = stored_files(&store).iter().map(|f| tcpdump_count(f, "")).sum();
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
});

/// A catalogued file cut short (1,012 packets of 200 bytes cut to 30,000 bytes, as the trial's
/// 889 of 1,012): `repair` says how many of its catalogued packets are gone and how many
/// remain (tcpdump's count of the cut file) and exits 1; the next repair has nothing to do.
wvtest!(repair_says_how_many_catalogued_packets_a_cut_file_lost, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("hs2-lost");
    let store = tmp.join("s");
    run_wirevault(&["record", "--synthetic", "size=200,count=1012", "-o", s(&store), "-q", "--buffer", "64M"])
        .expect(0, "record");
    let f = &stored_files(&store)[0];
    Command::new("truncate").arg("-s").arg("30000").arg(f).status().unwrap();
    let o = run_wirevault(&["repair", s(&store)]);
    o.expect(1, "repair of a file cut short");
    let kept = tcpdump_count(f, "");
    let want = format!("{} of its 1012 catalogued packets are gone, {kept} remain", 1012 - kept);
    assert!(o.stderr.contains(&want), "no {want:?} in: {}", o.stderr);
    assert!(o.stderr.contains(f.file_name().unwrap().to_str().unwrap()), "{}", o.stderr);
    let again = run_wirevault(&["repair", s(&store)]);
    assert!(again.expect(0, "repair again").stderr.contains("nothing to repair"), "{}", again.stderr);
});

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
