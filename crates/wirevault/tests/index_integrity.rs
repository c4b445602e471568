//! Index integrity (issue 12, findings 8, 10, 14, 15 and the store lock in
//! `index`): a damaged, outdated or stale index never changes an answer (the
//! query reads the capture instead, with a note), `index` rebuilds such
//! indexes, writes them 0640 whatever the umask, leaves no partial index
//! when interrupted, refuses what is not a regular file and a locked store.

use crate::util::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `frames` with every UDP/TCP port 53 turned into 54 (same sizes).
fn without_port_53(frames: &[Frame]) -> Vec<Frame> {
    let mut out = frames.to_vec();
    for f in &mut out {
        if f.data.len() >= 38 && f.data[12..14] == [0x08, 0x00] {
            for at in [34, 36] {
                if f.data[at..at + 2] == [0, 53] {
                    f.data[at + 1] = 54;
                }
            }
        }
    }
    out
}

/// `wirevault query DIR --count [args] EXPR`: (count, stderr, exit code).
fn count(dir: &Path, args: &[&str], expr: &str) -> (u64, String, Option<i32>) {
    let out =
        wirevault().arg("query").arg(dir).arg("--count").args(args).arg(expr).stdin(Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_no_panic(&stderr, "query --count");
    let n = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap_or(u64::MAX);
    (n, stderr, out.status.code())
}

/// `tcpdump -r FILE EXPR | wc -l`.
fn index_ok(path: &Path) -> Outcome {
    let o = run_wirevault(&["index", path.to_str().unwrap()]);
    o.expect(0, "wirevault index");
    o
}

fn only_idx(dir: &Path) -> PathBuf {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "idx"))
        .collect();
    assert_eq!(v.len(), 1, "one index in {}", dir.display());
    v.pop().unwrap()
}

/// The count `wirevault query DIR --count EXPR` gives, through the query library the binary
/// calls (`wv_query::prepare`, then `run` into `Sink::Count`), in this process: (count,
/// warnings). `range` is the binary's `--from`/`--to` arguments, parsed as it parses them.
fn count_in_process(dir: &Path, range: &[&str], expr: &str) -> (u64, Vec<String>) {
    let time = |flag: &str| {
        let at = range.iter().position(|a| *a == flag)?;
        Some(wv_query::parse_time(range[at + 1], 0).expect("a time the binary takes"))
    };
    let q = wv_query::Query {
        store: dir.to_path_buf(),
        from_ns: time("--from"),
        to_ns: time("--to"),
        expr: expr.to_owned(),
        limit: None,
    };
    let p = wv_query::prepare(q).unwrap_or_else(|e| panic!("query {range:?} {expr}: {e}"));
    let r = wv_query::run(p, wv_query::Sink::Count).unwrap_or_else(|e| panic!("query {range:?} {expr}: {e}"));
    (r.matched, r.warnings)
}

/// Finding 8: every single-byte change of a real index leaves every count
/// exact (tcpdump's), with a note when the index was set aside. Every byte (bit 0, and bit 7
/// of every fifth) is checked through the query library in this process, as the binary
/// calls it; a sample of them (the first 64 bytes and every 53rd) through the binary too,
/// whose count, exit status and note must be the library's. Through the binary alone the
/// ~28,000 queries took two minutes, the longest test of the suite.
wvtest!(every_byte_flip_of_an_index_keeps_counts_exact, needs = ["tcpdump"], |t| {
    let tmp = TempDir::new("idx-flip");
    let dir = tmp.join("caps");
    fs::create_dir(&dir).unwrap();
    let start = 1_700_000_000_000_000_000u64;
    let cap = dir.join("a.pcap");
    write_pcap(&cap, 1, 65535, true, &test_frames(1000, start));
    index_ok(&dir);
    let idx = only_idx(&dir);
    let good = fs::read(&idx).unwrap();
    // A time range in the middle (block table), a port (port postings), an
    // address and a protocol (their postings and directories), an IPv6 address.
    let from = format!("{}", (start + 700_000_000) as f64 / 1e9);
    let to = format!("{}", (start + 2_100_000_000) as f64 / 1e9);
    let queries: Vec<(Vec<&str>, &str, u64)> = vec![
        (vec![], "udp port 53", tcpdump_count(&cap, "udp port 53")),
        (vec![], "host 10.0.0.2 and tcp", tcpdump_count(&cap, "host 10.0.0.2 and tcp")),
        (vec!["--from", &from, "--to", &to], "ip proto 17", 0),
        (vec![], "ip6 host fd00::2 and udp", tcpdump_count(&cap, "ip6 host fd00::2 and udp")),
    ];
    // The time-bounded count, from a scan of the file alone (no index beside it).
    let lone = tmp.join("lone.pcap");
    fs::copy(&cap, &lone).unwrap();
    let want_time = count(&lone, &queries[2].0, queries[2].1).0;
    assert!(want_time > 0 && want_time < tcpdump_count(&cap, "ip proto 17"));
    let want: Vec<u64> = queries.iter().enumerate().map(|(i, q)| if i == 2 { want_time } else { q.2 }).collect();
    for (q, w) in queries.iter().zip(&want) {
        let (n, err, code) = count(&dir, &q.0, q.1);
        assert_eq!((n, code), (*w, Some(0)), "intact index, {}: {err}", q.1);
        assert!(!err.contains("index"), "intact index, {}: a note: {err}", q.1);
        let (n, warnings) = count_in_process(&dir, &q.0, q.1);
        assert_eq!(n, *w, "intact index, in process, {}: {warnings:?}", q.1);
        assert!(warnings.is_empty(), "intact index, in process, {}: {warnings:?}", q.1);
    }
    let through_binary = |at: usize| at < 64 || at.is_multiple_of(53);
    let (mut notes, mut by_binary) = (0, 0);
    for at in 0..good.len() {
        for bit in [0x01u8, 0x80].into_iter().filter(|b| *b == 0x01 || at % 5 == 0) {
            let mut bad = good.clone();
            bad[at] ^= bit;
            fs::write(&idx, &bad).unwrap();
            for (q, w) in queries.iter().zip(&want) {
                let what = format!("byte {at} of {} xor {bit:#x}, query {:?} {}", good.len(), q.0, q.1);
                let (n, warnings) = count_in_process(&dir, &q.0, q.1);
                assert_eq!(n, *w, "{what}: wrong count; warnings: {warnings:?}");
                let noted = warnings.iter().any(|w| w.contains("reading the whole file"));
                notes += usize::from(noted);
                if through_binary(at) {
                    let (n, err, code) = count(&dir, &q.0, q.1);
                    assert_eq!((n, code), (*w, Some(0)), "{what}: wrong count from the binary; stderr: {err}");
                    assert_eq!(err.contains("reading the whole file"), noted, "{what}: the binary's note: {err}");
                    by_binary += 1;
                }
            }
        }
    }
    fs::write(&idx, &good).unwrap();
    eprintln!("{} index bytes flipped: {notes} notes, {by_binary} queries through the binary", good.len());
    assert!(notes > good.len(), "damaged indexes were set aside with a note ({notes} notes)");
    assert!(by_binary > 400, "only {by_binary} queries through the binary");
});

/// Finding 8: an index of the older format (version 1) is not trusted: the
/// query reads the capture with a note saying to run `wirevault index`,
/// which rebuilds it.
#[test]
fn an_old_format_index_is_rebuilt_and_not_trusted() {
    let tmp = TempDir::new("idx-v1");
    let dir = tmp.join("caps");
    fs::create_dir(&dir).unwrap();
    let frames = test_frames(500, 1_700_000_000_000_000_000);
    write_pcap(&dir.join("a.pcap"), 1, 65535, true, &frames);
    index_ok(&dir);
    let want = count(&dir, &[], "udp port 53").0;
    assert!(want > 0);
    // A well-formed version-1 index that claims complete keys and has none.
    let mut v1 = Vec::new();
    v1.extend_from_slice(b"WVIDX\r\n\x1a");
    v1.extend_from_slice(&1u32.to_le_bytes()); // version
    v1.extend_from_slice(&1u32.to_le_bytes()); // KEYS_COMPLETE
    v1.extend_from_slice(&1u32.to_le_bytes()); // Ethernet
    v1.extend_from_slice(&64u32.to_le_bytes());
    v1.extend_from_slice(&(frames.len() as u64).to_le_bytes());
    v1.extend_from_slice(&frames[0].ts_ns.to_le_bytes());
    v1.extend_from_slice(&frames.last().unwrap().ts_ns.to_le_bytes());
    v1.extend_from_slice(&0u32.to_le_bytes()); // blocks
    v1.extend_from_slice(&11u32.to_le_bytes());
    v1.extend_from_slice(&0u64.to_le_bytes());
    for _ in 0..11 {
        v1.extend_from_slice(&240u64.to_le_bytes());
        v1.extend_from_slice(&0u64.to_le_bytes());
    }
    let idx = dir.join("a.pcap.idx");
    fs::write(&idx, &v1).unwrap();
    let (n, err, code) = count(&dir, &[], "udp port 53");
    assert_eq!((n, code), (want, Some(0)), "a version-1 index was trusted: {err}");
    assert!(err.contains("wirevault index"), "the note says to rebuild the index: {err}");
    let o = index_ok(&dir);
    assert_ne!(fs::read(&idx).unwrap(), v1, "index did not rebuild the old index: {}", o.stderr);
    let (n, err, _) = count(&dir, &[], "udp port 53");
    assert_eq!(n, want);
    assert!(!err.contains("index"), "a note after the rebuild: {err}");
}

/// Finding 10: a capture replaced by another of the same size (a tcpdump
/// -C/-W ring) is indexed again, and until then its index is not trusted.
#[test]
fn a_same_size_replacement_is_reindexed_and_not_trusted() {
    let tmp = TempDir::new("idx-ring");
    let dir = tmp.join("ring");
    fs::create_dir(&dir).unwrap();
    let frames = test_frames(800, 1_700_000_000_000_000_000);
    let cap = dir.join("ring0.pcap");
    write_pcap(&cap, 1, 65535, true, &without_port_53(&frames));
    index_ok(&dir);
    assert_eq!(count(&dir, &[], "port 53").0, 0);
    for keep_mtime in [false, true] {
        let old = fs::metadata(&cap).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // The ring's next lap: other packets, the same size.
        let lap = tmp.join("lap.pcap");
        write_pcap(&lap, 1, 65535, true, &frames);
        fs::rename(&lap, &cap).unwrap();
        assert_eq!(fs::metadata(&cap).unwrap().len(), old.len(), "same size");
        if keep_mtime {
            // Even with the old mtime (cp -p, a clock step), the content tells.
            let t = libc::timespec { tv_sec: old.mtime(), tv_nsec: old.mtime_nsec() };
            let times = [t, t];
            let c = std::ffi::CString::new(cap.to_str().unwrap()).unwrap();
            // SAFETY: a valid NUL-terminated path and two timespecs.
            assert_eq!(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) }, 0);
        }
        let want = tcpdump_like_count(&frames);
        let (n, err, code) = count(&dir, &[], "port 53");
        assert_eq!((n, code), (want, Some(0)), "keep_mtime {keep_mtime}: a stale index was trusted: {err}");
        assert!(err.contains("wirevault index"), "keep_mtime {keep_mtime}: the note says to run index: {err}");
        let o = index_ok(&dir);
        assert!(o.stderr.contains("indexed 1 file"), "keep_mtime {keep_mtime}: not indexed again: {}", o.stderr);
        let (n, err, _) = count(&dir, &[], "port 53");
        assert_eq!(n, want);
        assert!(!err.contains("index"), "keep_mtime {keep_mtime}: a note after index: {err}");
        // Back to the first lap for the next round.
        write_pcap(&lap, 1, 65535, true, &without_port_53(&frames));
        fs::rename(&lap, &cap).unwrap();
        index_ok(&dir);
    }
}

/// Frames of [`test_frames`] that `port 53` selects (IPv4 TCP/UDP with
/// port 53 on either side).
fn tcpdump_like_count(frames: &[Frame]) -> u64 {
    frames
        .iter()
        .filter(|f| {
            let d = &f.data;
            d.len() >= 38 && d[12..14] == [0x08, 0x00] && (d[34..36] == [0, 53] || d[36..38] == [0, 53])
        })
        .count() as u64
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// Finding 14: index files and the catalog `index` writes are 0640 whatever
/// the umask.
#[test]
fn index_files_are_0640_whatever_the_umask() {
    for umask in ["000", "077"] {
        let tmp = TempDir::new("idx-mode");
        let dir = tmp.join("caps");
        fs::create_dir(&dir).unwrap();
        write_pcap(&dir.join("a.pcap"), 1, 65535, true, &test_frames(50, 1_700_000_000_000_000_000));
        let single = tmp.join("one.pcap");
        write_pcap(&single, 1, 65535, true, &test_frames(50, 1_700_000_000_000_000_000));
        for p in [&dir, &single] {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("umask {umask} && exec \"$0\" index \"$1\""))
                .arg(bin())
                .arg(p)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        }
        for f in [dir.join("a.pcap.idx"), dir.join("catalog.jsonl"), tmp.join("one.pcap.idx")] {
            assert_eq!(mode(&f), 0o640, "umask {umask}: {} is {:o}", f.display(), mode(&f));
        }
    }
}

fn leftovers(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            leftovers(&p, out);
        } else if p.to_string_lossy().ends_with(".part") {
            out.push(p);
        }
    }
}

/// Finding 15: SIGINT or SIGTERM during `index` removes the partial index
/// and ends with a sentence, at whatever moment it comes.
#[test]
fn a_signal_during_index_leaves_no_partial_index() {
    let tmp = TempDir::new("idx-sig");
    let dir = tmp.join("caps");
    fs::create_dir(&dir).unwrap();
    // Big enough that indexing takes a while: 4 files of 150k small frames.
    let frames: Vec<Frame> = (0..150_000u32)
        .map(|i| {
            let data = make_frame(i, kind_of(i), min_frame_len(kind_of(i)).max(60));
            Frame { ts_ns: 1_700_000_000_000_000_000 + u64::from(i) * 1000, origlen: data.len() as u32, data }
        })
        .collect();
    for i in 0..4 {
        write_pcap(&dir.join(format!("f{i}.pcap")), 1, 65535, true, &frames);
    }
    let mut interrupted = 0;
    // Delays count from the moment `index` holds the signal (the first line
    // of its `main`), not from the spawn: on a loaded machine the spawn can
    // be milliseconds before the loader is done, a window no program covers.
    // 0 ms lands while the arguments are being parsed.
    for (n, delay_ms) in [0u64, 5, 30, 80, 150, 250, 400].iter().enumerate() {
        let sig = if n % 2 == 0 { libc::SIGINT } else { libc::SIGTERM };
        for e in fs::read_dir(&dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".idx") || name.starts_with("catalog") {
                fs::remove_file(e.path()).unwrap();
            }
        }
        let mut child = wirevault().arg("index").arg(&dir).stdin(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        wait_until_signals_are_held(&mut child, sig);
        std::thread::sleep(Duration::from_millis(*delay_ms));
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as i32, sig) };
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_no_panic(&err, "index under a signal");
        let mut left = Vec::new();
        leftovers(&dir, &mut left);
        assert!(left.is_empty(), "signal {sig} after {delay_ms} ms left {left:?}; stderr: {err}");
        match out.status.code() {
            Some(0) => {}
            Some(1) => {
                interrupted += 1;
                assert!(err.contains("interrupted"), "the sentence says what happened: {err}");
            }
            other => panic!("signal {sig} after {delay_ms} ms: exit {other:?} (killed by the signal?); stderr: {err}"),
        }
        // Whatever was indexed is usable (a directory gets its catalog once
        // every file is indexed).
        if !dir.join("catalog.jsonl").exists() {
            continue;
        }
        let (n, e, code) = count(&dir, &[], "udp port 53");
        assert_eq!(code, Some(0), "{e}");
        assert_eq!(n, 4 * (0..150_000u32).filter(|i| kind_of(*i) == Kind::Dns).count() as u64, "{e}");
    }
    assert!(interrupted > 0, "no run was interrupted");
}

/// Finding 15: `index` refuses what is not a regular file (a FIFO, a device)
/// with one sentence and exit 2, and creates nothing beside it.
#[test]
fn index_refuses_a_fifo_and_a_device() {
    let tmp = TempDir::new("idx-fifo");
    let fifo = tmp.join("pipe.pcap");
    mkfifo(&fifo);
    let mut child = wirevault().arg("index").arg(&fifo).stdin(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.is_some(), "index on a FIFO blocked");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    // Not a file index can use: the host's matter, exit 1 (issue 44).
    assert_eq!(out.status.code(), Some(1), "index on a FIFO: {err}");
    assert!(err.contains("not a regular file") && err.lines().count() == 1, "one sentence: {err}");
    assert!(!tmp.join("pipe.pcap.idx").exists());
    // A device: refused before anything is created beside it.
    let o = run_wirevault(&["index", "/dev/null"]);
    o.expect(1, "index /dev/null");
    assert!(o.stderr.contains("not a regular file"), "{}", o.stderr);
    assert!(!Path::new("/dev/null.idx").exists());
}

/// The store lock: `index` on a store or directory that another wirevault
/// process holds is refused with the lock's sentence (exit 1).
#[test]
fn index_refuses_a_locked_store() {
    let tmp = TempDir::new("idx-lock");
    let dir = tmp.join("caps");
    fs::create_dir(&dir).unwrap();
    write_pcap(&dir.join("a.pcap"), 1, 65535, true, &test_frames(50, 1_700_000_000_000_000_000));
    let held = wv_store::lock::StoreLock::exclusive(&dir, "record").unwrap();
    let o = run_wirevault(&["index", dir.to_str().unwrap()]);
    o.expect(1, "index on a locked store");
    assert!(o.stderr.contains("in use by another wirevault process"), "{}", o.stderr);
    assert!(!dir.join("a.pcap.idx").exists() && !dir.join("catalog.jsonl").exists());
    drop(held);
    index_ok(&dir);
    assert!(dir.join("a.pcap.idx").exists());
}

/// `index` on a directory does not follow a symlinked capture named in its
/// catalog (nor index what it points to).
#[test]
fn index_does_not_follow_a_symlinked_capture() {
    let tmp = TempDir::new("idx-link");
    let dir = tmp.join("caps");
    fs::create_dir(&dir).unwrap();
    write_pcap(&dir.join("a.pcap"), 1, 65535, true, &test_frames(50, 1_700_000_000_000_000_000));
    index_ok(&dir);
    let outside = tmp.join("secret.pcap");
    write_pcap(&outside, 1, 65535, true, &test_frames(60, 1_700_000_000_000_000_000));
    fs::remove_file(dir.join("a.pcap")).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("a.pcap")).unwrap();
    let o = run_wirevault(&["index", dir.to_str().unwrap()]);
    assert_no_panic(&o.stderr, "index");
    assert!(o.stderr.contains("a.pcap"), "the symlink is named: {}", o.stderr);
    let idx = fs::read(dir.join("a.pcap.idx")).unwrap_or_default();
    // The old index is kept or removed, never rebuilt from the link's target.
    let packets = if idx.len() >= 32 { u64::from_le_bytes(idx[24..32].try_into().unwrap()) } else { 0 };
    assert_ne!(packets, 60, "the index was built from the symlink's target");
}

/// `repair` rebuilds an index that is there but unusable (damaged by one
/// flipped byte), says so, and the store answers exactly again without a
/// note. (Before, `repair` rebuilt only missing indexes and called such a
/// store consistent.)
#[test]
fn repair_rebuilds_a_damaged_index() {
    let tmp = TempDir::new("idx-repair");
    let store = tmp.join("store");
    let o = run_wirevault(&[
        "record",
        "-o",
        store.to_str().unwrap(),
        "--synthetic",
        "size=200,count=3000,flows=50",
        "-q",
        "--buffer",
        "8M",
        "--block-size",
        "256K",
    ]);
    o.expect(0, "record");
    let files = check_store(&store);
    let idx = store.join(files[0].entry["index"].as_str().unwrap());
    let (want, err, _) = count(&store, &[], "udp");
    assert!(want > 0 && !err.contains("index"), "{err}");
    let mut bytes = fs::read(&idx).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x01;
    fs::write(&idx, &bytes).unwrap();
    let o = run_wirevault(&["repair", store.to_str().unwrap()]);
    o.expect(0, "repair");
    assert!(o.stderr.contains("index rebuilt"), "repair did not rebuild the damaged index: {}", o.stderr);
    assert_ne!(fs::read(&idx).unwrap(), bytes, "the damaged index is still there");
    let (n, err, code) = count(&store, &[], "udp");
    assert_eq!((n, code), (want, Some(0)));
    assert!(!err.contains("index"), "a note after the repair: {err}");
    let o = run_wirevault(&["repair", store.to_str().unwrap()]);
    o.expect(0, "second repair");
    assert!(o.stderr.contains("nothing to repair"), "{}", o.stderr);
}

/// `index` on a pcap file that holds its header and no packet: the summary says 0 packets
/// and gives no percentage (before: "index 320 bytes (1333.33% of 24 capture bytes)"), and
/// `query --count` on it says 0, as `tcpdump -r` does.
#[test]
fn index_of_a_header_only_file_prints_no_percentage() {
    let tmp = TempDir::new("idx-header-only");
    let f = tmp.join("empty.pcap");
    write_pcap(&f, 1, 65535, true, &[]);
    let o = run_wirevault(&["index", f.to_str().unwrap()]);
    o.expect(0, "index");
    let line = o.stderr.lines().find(|l| l.contains("indexed 1 file")).unwrap_or_else(|| panic!("{}", o.stderr));
    assert!(line.contains("0 packets") && !line.contains('%'), "{line}");
    let q = run_wirevault(&["query", f.to_str().unwrap(), "--count"]);
    assert_eq!(q.expect(0, "query --count").stdout.trim(), "0");
    if have("tcpdump") {
        let t = Command::new("tcpdump").arg("-r").arg(&f).output().unwrap();
        assert!(t.status.success() && t.stdout.is_empty(), "{}", String::from_utf8_lossy(&t.stderr));
    }
}
