//! Unattended-operation tests: a store that fills up (retention, --on-full
//! stop, ENOSPC on tmpfs and on an O_DIRECT ext4 loop device) and a crash
//! (kill -9) followed by a restart. They need root (mount); elsewhere they
//! skip with a message, except in CI, where that is a failure.

use crate::util::{bin, have, in_ci, is_root};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Skips (or, in CI, fails) when the test cannot run here.
fn require(ok: bool, what: &str) -> bool {
    if !ok {
        if in_ci() {
            panic!("CI must be able to run this test: {what}");
        }
        eprintln!("skipped: {what}");
    }
    ok
}

/// A size-limited file system mounted for one test, unmounted on drop.
struct Mount {
    dir: PathBuf,
    image: Option<PathBuf>,
}

impl Mount {
    fn tmpfs(tag: &str, size: &str) -> Option<Mount> {
        let dir = std::env::temp_dir().join(format!("wv-fault-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .ok()?
            .success();
        ok.then_some(Mount { dir, image: None })
    }

    fn ext4(tag: &str, mib: u32) -> Option<Mount> {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let image = base.join(format!("wv-fault-{tag}-{}.img", std::process::id()));
        let dir = base.join(format!("wv-fault-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok()?;
        let f = std::fs::File::create(&image).ok()?;
        f.set_len(u64::from(mib) << 20).ok()?;
        drop(f);
        let q = |c: &mut Command| {
            c.stdout(Stdio::null()).stderr(Stdio::null()).status().map(|s| s.success()).unwrap_or(false)
        };
        if !q(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image)) {
            return None;
        }
        if !q(Command::new("mount").args(["-o", "loop"]).arg(&image).arg(&dir)) {
            return None;
        }
        Some(Mount { dir, image: Some(image) })
    }

    fn store(&self) -> PathBuf {
        self.dir.join("store")
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(i) = &self.image {
            let _ = std::fs::remove_file(i);
        }
    }
}

fn record(args: &[&str]) -> Output {
    let out = Command::new(bin()).arg("record").args(args).output().expect("run wirevault");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked") && !err.contains("RUST_BACKTRACE"), "panic: {err}");
    out
}

fn stats(store: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(store.join("stats.json")).expect("stats.json")).expect("stats json")
}

fn catalog(store: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(store.join("catalog.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("catalog line"))
        .collect()
}

/// Every capture file in the store's stream directories.
fn capture_files(store: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for d in std::fs::read_dir(store).unwrap().flatten() {
        // stream-NNN (not flows/, which holds the flow records).
        if d.path().is_dir() && d.file_name().to_string_lossy().starts_with("stream-") {
            for f in std::fs::read_dir(d.path()).unwrap().flatten() {
                v.push(f.path());
            }
        }
    }
    v.sort();
    v
}

/// Checks that every file of the store is a closed, valid, cataloged capture
/// that tcpdump reads without a warning; returns the total packet count.
fn check_store(store: &Path) -> u64 {
    let cat = catalog(store);
    let mut total = 0;
    for f in capture_files(store) {
        let name = f.to_string_lossy().to_string();
        assert!(!name.ends_with(".part"), "left over: {name}");
        if name.ends_with(".idx") {
            continue;
        }
        let rel = f.strip_prefix(store).unwrap().to_string_lossy().to_string();
        let e = cat.iter().find(|e| e["file"] == rel.as_str()).unwrap_or_else(|| panic!("{rel} not in the catalog"));
        assert_eq!(e["bytes"].as_u64().unwrap(), std::fs::metadata(&f).unwrap().len(), "{rel} size");
        let t = Command::new("tcpdump").arg("-nr").arg(&f).output().unwrap();
        assert!(t.status.success(), "tcpdump failed on {rel}: {}", String::from_utf8_lossy(&t.stderr));
        let n = t.stdout.iter().filter(|&&b| b == b'\n').count() as u64;
        let err = String::from_utf8_lossy(&t.stderr);
        assert!(!err.contains("truncated") && !err.contains("warning"), "{rel}: {err}");
        assert_eq!(n, e["packets"].as_u64().unwrap(), "{rel} packet count");
        total += n;
    }
    for e in &cat {
        assert!(store.join(e["file"].as_str().unwrap()).is_file(), "catalog entry without file: {e}");
    }
    total
}

fn dropped_total(s: &serde_json::Value) -> u64 {
    s["dropped"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum()
}

fn du(store: &Path) -> u64 {
    capture_files(store).iter().map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0)).sum()
}

const SMALL: [&str; 4] = ["--buffer", "8M", "--block-size", "256K"];

/// These tests pace traffic and assert on drops: they run one at a time so
/// that they do not starve each other's writer threads on a 2-core machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn retention_keeps_the_store_under_budget_and_capture_goes_on() {
    if !require(is_root() && have("tcpdump"), "retention test needs root (tmpfs) and tcpdump") {
        return;
    }
    let _g = serial();
    let m = Mount::tmpfs("ret", "64m").expect("mount tmpfs");
    let store = m.store();
    let s = store.to_str().unwrap();
    // 30 MB/s for 4 s = 120 MB into a 24 MB budget.
    // A 32M arena holds a second of this traffic: retention must keep up, not the arena.
    let args =
        ["-o", s, "--synthetic", "size=1514,rate=20k,duration=4s", "--file-size", "2M", "--max-size", "24M", "-q"];
    let args: Vec<&str> = args.into_iter().chain(["--buffer", "32M", "--block-size", "256K"]).collect();
    let out = record(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("retention deleted"), "{err}");
    let st = stats(&store);
    assert_eq!(st["balanced"], true);
    assert_eq!(dropped_total(&st), 0, "capture must go on while retention deletes: {st}");
    assert!(du(&store) <= 24 << 20, "usage {} over the budget", du(&store));
    let n = check_store(&store);
    assert!(n > 0);
    // Every remaining packet is queryable.
    let q = Command::new(bin()).args(["query", s, "--count", "udp"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&q.stdout).trim(), n.to_string());
    // The oldest files went first: what is left are the newest files, with no gap.
    let mut seqs: Vec<u64> = catalog(&store)
        .iter()
        .map(|e| {
            let f = e["file"].as_str().unwrap();
            f.rsplit_once('-').unwrap().1.trim_end_matches(".pcap").parse().unwrap()
        })
        .collect();
    seqs.sort();
    let newest = *seqs.last().unwrap();
    assert_eq!(seqs, ((newest + 1 - seqs.len() as u64)..=newest).collect::<Vec<_>>(), "not the newest files");
    assert!(seqs[0] > 1, "nothing was deleted");
}

#[test]
fn on_full_stop_stops_cleanly_with_exit_code_3() {
    if !require(is_root() && have("tcpdump"), "on-full test needs root (tmpfs) and tcpdump") {
        return;
    }
    let _g = serial();
    let m = Mount::tmpfs("stop", "64m").expect("mount tmpfs");
    let store = m.store();
    let mut args = vec![
        "-o",
        store.to_str().unwrap(),
        "--synthetic",
        "size=1514,rate=20k,duration=10s",
        "--file-size",
        "2M",
        "--max-size",
        "16M",
        "--on-full",
        "stop",
        "-q",
    ];
    args.extend(SMALL);
    let t = Instant::now();
    let out = record(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("--max-size"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(9), "did not stop at the budget");
    assert_eq!(stats(&store)["balanced"], true);
    assert!(du(&store) <= 16 << 20);
    check_store(&store);
}

/// At full speed the index threads fall behind and several closed files wait for their
/// catalog line at once: they count against the budget all the same. (With a reserve of two
/// files per stream this store held 59.4 MB of a 50 MiB budget, 3 of 3 runs.)
#[test]
fn on_full_stop_never_passes_the_budget() {
    if !require(have("tcpdump"), "on-full test needs tcpdump") {
        return;
    }
    let _g = serial();
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wv-budget-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let store = base.join("store");
    for _ in 0..2 {
        let _ = std::fs::remove_dir_all(&store);
        let args = [
            "-o",
            store.to_str().unwrap(),
            "--synthetic",
            "size=imix,count=3M",
            "--file-size",
            "8M",
            "--max-size",
            "50M",
        ];
        let out = record(&[&args[..], &["--on-full", "stop", "-q"]].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(du(&store) <= 50 << 20, "{} bytes in a budget of {}", du(&store), 50 << 20);
        assert!(du(&store) > 30 << 20, "stopped early: {} bytes", du(&store));
        assert_eq!(stats(&store)["balanced"], true);
        check_store(&store);
    }
    let _ = std::fs::remove_dir_all(&base);
}

fn disk_full(m: &Mount) {
    let store = m.store();
    let mut args = vec![
        "-o",
        store.to_str().unwrap(),
        "--synthetic",
        "size=1514,rate=20k,duration=20s",
        "--file-size",
        "4M",
        "-q",
    ];
    args.extend(SMALL);
    let out = record(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(err.contains("disk is full"), "{err}");
    let st = stats(&store);
    assert_eq!(st["balanced"], true, "{st}");
    assert!(st["written"].as_u64().unwrap() > 1000);
    assert_eq!(check_store(&store), st["written"].as_u64().unwrap());
}

#[test]
fn disk_full_on_tmpfs_keeps_every_file_valid() {
    if !require(is_root() && have("tcpdump"), "disk-full test needs root (tmpfs) and tcpdump") {
        return;
    }
    let _g = serial();
    let m = Mount::tmpfs("enospc", "24m").expect("mount tmpfs");
    disk_full(&m);
}

#[test]
fn disk_full_with_o_direct_keeps_every_file_valid() {
    if !require(
        is_root() && have("tcpdump") && have("mkfs.ext4"),
        "O_DIRECT disk-full test needs root, mkfs.ext4 and tcpdump",
    ) {
        return;
    }
    let _g = serial();
    let m = Mount::ext4("enospc4", 40).expect("mount ext4 loop image");
    disk_full(&m);
}

#[test]
fn kill_9_then_restart_recovers_every_complete_packet() {
    if !require(is_root() && have("tcpdump"), "crash test needs tcpdump") {
        return;
    }
    let _g = serial();
    let base = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wv-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let store = base.join("store");
    let s = store.to_str().unwrap();
    let mut child = Command::new(bin())
        .args(["record", "-o", s, "--synthetic", "size=1514,rate=5k,duration=10m", "--file-size", "16M", "-q"])
        .args(SMALL)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let parts: Vec<PathBuf> = capture_files(&store)
        .into_iter()
        .filter_map(|f| f.to_str().and_then(|s| s.strip_suffix(".part")).map(PathBuf::from))
        .filter(|f| f.extension().is_some_and(|e| e == "pcap"))
        .collect();
    assert!(!parts.is_empty(), "expected a partial file after kill -9");
    // Read every partial file whole first, as a backup or `tcpdump -r` would:
    // the page cache then holds pages of zeros over the unwritten blocks,
    // which must not pass for written ones.
    for p in &parts {
        let part = p.with_extension("pcap.part");
        assert!(std::fs::read(&part).is_ok_and(|b| b.len() > 24), "{}", part.display());
    }
    // Restart: record repairs the store first and reports it.
    let out = record(&["-o", s, "--synthetic", "size=60,count=10", "-q"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("repaired") && err.contains("recovered 1 partial file(s)"), "{err}");
    let total = check_store(&store);
    // Index queries equal tcpdump's selection over the same files.
    for expr in ["udp port 5003", "host 10.0.0.5 or net 10.200.88.0/24", "not udp"] {
        let q = Command::new(bin()).args(["query", s, "--count", expr]).output().unwrap();
        let mut want = 0;
        for f in capture_files(&store).iter().filter(|f| !f.to_string_lossy().ends_with(".idx")) {
            let t = Command::new("tcpdump").arg("-nr").arg(f).arg(expr).output().unwrap();
            want += t.stdout.iter().filter(|&&b| b == b'\n').count();
        }
        assert_eq!(String::from_utf8_lossy(&q.stdout).trim(), want.to_string(), "{expr}");
    }
    assert!(total > 5000, "recovered only {total} packets");
    // Every recovered record is a whole synthetic frame of this run: none
    // reads into unwritten (zero) blocks.
    // (A partial file without one complete packet was deleted by repair.)
    for p in parts.iter().filter(|p| p.exists()) {
        let f = std::fs::File::open(p).unwrap();
        let mut r = wv_wire::reader::Reader::new(f).unwrap();
        let mut tail: Option<Vec<u8>> = None;
        let mut n = 0;
        while let Some(pkt) = r.next_packet().unwrap() {
            assert_eq!(pkt.caplen, 1514, "{} record {n}", p.display());
            let t = pkt.data[pkt.data.len() - 64..].to_vec();
            assert_eq!(t, *tail.get_or_insert_with(|| t.clone()), "{} record {n}: damaged tail", p.display());
            n += 1;
        }
        assert!(n > 0, "{}", p.display());
    }
    let rep = Command::new(bin()).args(["repair", s]).output().unwrap();
    assert!(String::from_utf8_lossy(&rep.stderr).contains("nothing to repair"));
    let _ = std::fs::remove_dir_all(&base);
}
