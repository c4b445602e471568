//! The second hostile trial's findings (after issue 12), each driving the
//! real binary: `--stats-file` safety, filters on DLT_NULL and byte-swapped
//! captures, LINKTYPE_ATM_CLIP, live start-up drops, `-Z` and hard links,
//! standard output into the store, `index` and signals, non-capture inputs,
//! the kernel ring's size, and a deleted interface.

use crate::util::*;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A small store made by `record --synthetic`.
fn synthetic_store(tmp: &TempDir, name: &str) -> PathBuf {
    let s = tmp.join(name);
    run_wirevault(&["record", "--synthetic", "size=100,count=50", "-o", s.to_str().unwrap(), "-q", "--buffer", "64M"])
        .expect(0, "synthetic store");
    s
}

fn query_count(file: &Path, filter: &str) -> u64 {
    let o = run_wirevault(&["query", file.to_str().unwrap(), "--count", filter]);
    o.expect(0, &format!("query --count {filter} on {}", file.display()));
    o.stdout.trim().parse().unwrap()
}

fn record_read_written(file: &Path, filter: &str, tmp: &TempDir, n: usize) -> u64 {
    let s = tmp.join(format!("rec-{n}"));
    let o = run_wirevault(&[
        "record",
        "-r",
        file.to_str().unwrap(),
        "-o",
        s.to_str().unwrap(),
        "-q",
        "--buffer",
        "64M",
        "--",
        filter,
    ]);
    o.expect(0, &format!("record --read {} {filter}", file.display()));
    final_counters(&s).written
}

// --- 2: --stats-file --------------------------------------------------------

#[test]
fn stats_file_refuses_symlinks_devices_and_files_in_the_store() {
    let tmp = TempDir::new("hr-stats");
    let store = synthetic_store(&tmp, "s");
    let victim = tmp.join("victim");
    fs::write(&victim, "keep").unwrap();
    let link = tmp.join("link.json");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let catalog = store.join("catalog.jsonl");
    let before = fs::read(&catalog).unwrap();
    for (sf, what) in [
        (link.clone(), "a symlink"),
        (PathBuf::from("/dev/null"), "a device"),
        (catalog.clone(), "the store's catalog"),
        (store.join("stream-000").join("x.json"), "a new file inside the store"),
    ] {
        let fresh = tmp.join(format!("new-{}", what.len()));
        for out in [&store, &fresh] {
            if out == &fresh && sf.starts_with(&store) {
                continue; // another store's files are not this recording's business
            }
            let o = run_wirevault(&[
                "record",
                "--synthetic",
                "size=100,count=5",
                "-o",
                out.to_str().unwrap(),
                "-q",
                "--buffer",
                "64M",
                "--stats-file",
                sf.to_str().unwrap(),
            ]);
            o.expect(2, &format!("--stats-file {what}"));
            assert!(o.stderr.contains("--stats-file"), "{what}: {}", o.stderr);
            assert_eq!(o.stderr.trim().lines().count(), 1, "{what}: one sentence: {}", o.stderr);
            if out == &fresh {
                assert!(!fresh.exists(), "{what}: a store was created");
            }
        }
    }
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep");
    assert!(fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(fs::read(&catalog).unwrap(), before, "the catalog was replaced");
    assert!(fs::metadata("/dev/null").unwrap().file_type().is_char_device_like());
}

trait CharDev {
    fn is_char_device_like(&self) -> bool;
}
impl CharDev for fs::FileType {
    fn is_char_device_like(&self) -> bool {
        use std::os::unix::fs::FileTypeExt;
        self.is_char_device()
    }
}

#[test]
fn stats_file_temp_is_never_followed_and_never_left() {
    let tmp = TempDir::new("hr-stats-tmp");
    let victim = tmp.join("victim");
    fs::write(&victim, "keep").unwrap();
    let sf = tmp.join("out.json");
    // Every name the old code used as its temporary file.
    std::os::unix::fs::symlink(&victim, tmp.join("out.json.part")).unwrap();
    let s = tmp.join("s");
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        "size=100,count=20",
        "-o",
        s.to_str().unwrap(),
        "-q",
        "--buffer",
        "64M",
        "--stats-file",
        sf.to_str().unwrap(),
    ]);
    o.expect(0, "record with --stats-file");
    assert_eq!(fs::read_to_string(&victim).unwrap(), "keep", "the temp file followed a symlink");
    let v: serde_json::Value = serde_json::from_str(&fs::read_to_string(&sf).unwrap()).unwrap();
    assert_eq!(v["state"], "done");
    let left: Vec<String> = fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("out.json") && n != "out.json" && n != "out.json.part")
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

// --- 4 and 9: filters as tcpdump -r compiles them ---------------------------

const NULL_FILES: &[&str] = &[
    "quic_handshake.pcap",
    "icmpv6-RFC2894-RR.pcap",
    "quic_handshake_truncated.pcap",
    "quic_retry.pcap",
    "quic_vn.pcap",
];
const FILTERS: &[&str] = &["udp", "ip6", "tcp", "port 443", "icmp6", "ip", "not ip6"];

/// `src` rewritten as a big-endian pcap (headers and the DLT_NULL address
/// family, as a big-endian machine writes them).
fn to_big_endian(src: &Path, dst: &Path) {
    let b = fs::read(src).unwrap();
    let le = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    assert_eq!(le(0), 0xa1b2_c3d4, "{} is a little-endian microsecond pcap", src.display());
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_be_bytes());
    out.extend_from_slice(&2u16.to_be_bytes());
    out.extend_from_slice(&4u16.to_be_bytes());
    for o in [8, 12, 16, 20] {
        out.extend_from_slice(&le(o).to_be_bytes());
    }
    let mut o = 24;
    while o + 16 <= b.len() {
        let caplen = le(o + 8) as usize;
        for f in 0..4 {
            out.extend_from_slice(&le(o + 4 * f).to_be_bytes());
        }
        let mut data = b[o + 16..o + 16 + caplen].to_vec();
        if data.len() >= 4 {
            let af = u32::from_le_bytes(data[0..4].try_into().unwrap());
            data[0..4].copy_from_slice(&af.to_be_bytes());
        }
        out.extend_from_slice(&data);
        o += 16 + caplen;
    }
    fs::write(dst, out).unwrap();
}

wvtest!(dlt_null_filters_match_tcpdump, needs = ["tcpdump", corpus], |t| {
    let tmp = TempDir::new("hr-null");
    let mut n = 0;
    for name in NULL_FILES {
        let f = t.corpus_file(name);
        let be = tmp.join(format!("be-{name}"));
        to_big_endian(&f, &be);
        for file in [f.clone(), be] {
            for filter in FILTERS {
                let want = tcpdump_count(&file, filter);
                assert_eq!(query_count(&file, filter), want, "query {} --count {filter}", file.display());
                n += 1;
                assert_eq!(
                    record_read_written(&file, filter, &tmp, n),
                    want,
                    "record --read {} {filter}",
                    file.display()
                );
            }
        }
    }
    // A v6 address of quic_handshake.pcap.
    let f = t.corpus_file("quic_handshake.pcap");
    let want = tcpdump_count(&f, "host ::1");
    assert!(want > 0);
    assert_eq!(query_count(&f, "host ::1"), want);
});

wvtest!(atm_clip_filters_compile_as_tcpdump_r, needs = ["tcpdump", corpus], |t| {
    let f = t.corpus_file("heap-overflow-2.pcap");
    let tmp = TempDir::new("hr-atm");
    for filter in ["tcp", "ip", "udp"] {
        let want = tcpdump_count(&f, filter);
        assert_eq!(query_count(&f, filter), want, "query --count {filter}");
        assert_eq!(record_read_written(&f, filter, &tmp, filter.len()), want, "record --read {filter}");
    }
});

// --- 6: no drops at start-up -------------------------------------------------

wvtest!(live_capture_drops_nothing_at_start_up, needs = [root, "ip", "tcpreplay"], |t| {
    let _g = heavy_lock();
    let tmp = TempDir::new("hr-startup");
    let pair = VethPair::new();
    // 10 s of traffic at 200 pps (stopped with the test), so that a start-up
    // slowed down by a loaded machine still sees traffic from its first
    // moment on; the check is the kernel's drop count, not the total.
    let sent = test_frames(2000, 1_700_000_000_000_000_000);
    let pcap = tmp.join("sent.pcap");
    write_pcap(&pcap, 1, 65535, false, &sent);
    // Traffic first; the recorder starts while it flows.
    let _sender = Background(
        VethPair::exec(&pair.ns_a, "tcpreplay")
            .args(["-i", pair.if_a, "--pps=200"])
            .arg(&pcap)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tcpreplay"),
    );
    std::thread::sleep(Duration::from_millis(100));
    let store = tmp.join("store");
    let mut r = Recorder::start(Some(&pair.ns_b), &store, tmp.path(), &["-i", pair.if_b, "--buffer", "1G", "-q"]);
    r.wait_ready();
    std::thread::sleep(Duration::from_secs(2));
    r.terminate().expect(0, "recorder stopped by SIGTERM");
    let c = final_counters(&store);
    assert!(c.received > 100, "received {}", c.received);
    assert_eq!(c.kernel, 0, "kernel drops at start-up (received {})", c.received);
});

// --- 7: -Z and hard links ----------------------------------------------------

wvtest!(user_switch_does_not_chown_hard_links, needs = [root], |t| {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let tmp = TempDir::new("hr-chown");
    let secret = tmp.join("secret");
    fs::write(&secret, "").unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o666)).unwrap();
    let store = synthetic_store(&tmp, "s");
    let idx = fs::read_dir(store.join("stream-000"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pcap"))
        .unwrap()
        .with_extension("pcap.idx");
    let _ = fs::remove_file(&idx);
    fs::hard_link(&secret, &idx).unwrap();
    let o = run_wirevault(&[
        "record",
        "--synthetic",
        "size=100,count=5",
        "-o",
        store.to_str().unwrap(),
        "-q",
        "--buffer",
        "64M",
        "-Z",
        "nobody",
    ]);
    assert_no_panic(&o.stderr, "record -Z nobody");
    assert_eq!(fs::metadata(&secret).unwrap().uid(), 0, "a hard link to a root file was chowned: {}", o.stderr);
    assert!(o.stderr.contains(".pcap.idx") && o.stderr.contains("warning"), "no warning naming it: {}", o.stderr);
});

// --- 12: standard output into the store ---------------------------------------

#[test]
fn query_refuses_standard_output_inside_the_store() {
    let tmp = TempDir::new("hr-stdout");
    let store = synthetic_store(&tmp, "s");
    let cap = fs::read_dir(store.join("stream-000"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pcap"))
        .unwrap();
    let before = fs::read(&cap).unwrap();
    for append in [true, false] {
        let target = if append { cap.clone() } else { store.join("stream-000").join("new.pcap") };
        let out = fs::OpenOptions::new().create(true).append(true).open(&target).unwrap();
        let o = Outcome::from_output(
            wirevault().args(["query", store.to_str().unwrap()]).stdout(out).stderr(Stdio::piped()).output().unwrap(),
        );
        o.expect(2, "query > file in the store");
        assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
        let _ = fs::remove_file(store.join("stream-000").join("new.pcap"));
    }
    assert_eq!(fs::read(&cap).unwrap(), before, "a stored capture was appended to");
    // A file outside the store is still fine.
    let out = fs::File::create(tmp.join("out.pcap")).unwrap();
    let o = Outcome::from_output(wirevault().args(["query", store.to_str().unwrap()]).stdout(out).output().unwrap());
    o.expect(0, "query > file outside the store");
}

// --- 13: index and signals ----------------------------------------------------

#[test]
fn index_handles_the_same_signals_as_record() {
    let tmp = TempDir::new("hr-index-sig");
    let s = tmp.join("s");
    run_wirevault(&[
        "record",
        "--synthetic",
        "size=64,count=3M",
        "-o",
        s.to_str().unwrap(),
        "-q",
        "--no-index",
        "--buffer",
        "256M",
        "--file-size",
        "1T",
    ])
    .expect(0, "big store");
    let cap = fs::read_dir(s.join("stream-000"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "pcap"))
        .unwrap();
    for (sig, name) in [(libc::SIGHUP, "HUP"), (libc::SIGUSR1, "USR1"), (libc::SIGALRM, "ALRM")] {
        let mut child = wirevault().arg("index").arg(&cap).stderr(Stdio::piped()).spawn().unwrap();
        wait_until_signals_are_held(&mut child, sig);
        std::thread::sleep(Duration::from_millis(150));
        // SAFETY: our own child, not yet reaped.
        unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        let st = child.wait().unwrap();
        let part = cap.with_extension("pcap.idx.part");
        assert!(!part.exists(), "SIG{name} left {}", part.display());
        assert!(st.code().is_some(), "SIG{name} killed index ({st})");
        let _ = fs::remove_file(cap.with_extension("pcap.idx"));
    }
}

/// A signal that comes before `record` has installed its handlers (here:
/// while it waits to read its config from a FIFO) is held until they are:
/// the recorder then stops cleanly with exit 0 instead of dying by the
/// signal's default action.
#[test]
fn a_signal_while_record_reads_its_config_stops_it_cleanly() {
    let tmp = TempDir::new("hr-early-sig");
    let fifo = tmp.join("cfg.toml");
    mkfifo(&fifo);
    let store = tmp.join("s");
    let mut child = wirevault()
        .args(["record", "--config", fifo.to_str().unwrap()])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // It blocks opening the FIFO, with SIGTERM held since its main began.
    wait_until_signals_are_held(&mut child, libc::SIGTERM);
    // SAFETY: our own child, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(200));
    assert!(child.try_wait().unwrap().is_none(), "record died of a SIGTERM sent while it read its config");
    fs::write(
        &fifo,
        format!("output = {store:?}\nsynthetic = \"size=64,rate=1k,duration=10m\"\nbuffer = \"16M\"\nno-tune-warnings = true\n"),
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("record did not stop on the SIGTERM it got while reading its config");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_no_panic(&err, "record stopped by an early SIGTERM");
    assert_eq!(out.status.code(), Some(0), "exit code; stderr: {err}");
    if store.join("catalog.jsonl").exists() {
        check_store(&store);
    }
}

// --- 14: non-capture inputs ----------------------------------------------------

#[test]
fn record_read_checks_every_input_before_creating_the_store() {
    let tmp = TempDir::new("hr-read-check");
    let good = tmp.join("good.pcap");
    write_pcap(&good, 1, 65535, false, &test_frames(10, 1_700_000_000_000_000_000));
    for inputs in [vec!["/etc/passwd"], vec![good.to_str().unwrap(), "/etc/passwd"]] {
        let s = tmp.join("new");
        let mut args = vec!["record", "-r"];
        args.extend(inputs.iter());
        args.extend(["-o", s.to_str().unwrap(), "-q"]);
        let o = run_wirevault(&args);
        o.expect(1, "record -r /etc/passwd"); // not a capture file: exit 1 (issue 44)
        assert!(o.stderr.contains("/etc/passwd"), "{}", o.stderr);
        assert_eq!(o.stderr.trim().lines().count(), 1, "{}", o.stderr);
        assert!(!s.exists(), "a store was created for a non-capture input");
    }
    // Standard input still works.
    let s = tmp.join("stdin");
    let o = Outcome::from_output(
        wirevault()
            .args(["record", "-r", "-", "-o", s.to_str().unwrap(), "-q", "--buffer", "64M"])
            .stdin(fs::File::open(&good).unwrap())
            .output()
            .unwrap(),
    );
    o.expect(0, "record -r - < good.pcap");
    assert_eq!(final_counters(&s).written, 10);
}

// --- 15: kernel ring size ------------------------------------------------------

#[test]
fn ring_size_is_an_option_with_bounds() {
    for (v, what) in [("1P", "absurd"), ("1K", "too small"), ("abc", "not a size")] {
        let s = TempDir::new("hr-ring");
        let o = run_wirevault(&["record", "-i", "lo", "-o", s.join("s").to_str().unwrap(), "--ring-size", v]);
        o.expect(2, &format!("--ring-size {v} ({what})"));
        assert!(o.stderr.contains("--ring-size"), "{}", o.stderr);
        assert!(!o.stderr.contains("unexpected argument"), "{}", o.stderr);
        assert!(!s.join("s").exists());
    }
}

wvtest!(ring_size_sizes_live_rings, needs = [root, "ip", "tcpreplay"], |t| {
    let tmp = TempDir::new("hr-ring-live");
    let pair = VethPair::new();
    let store = tmp.join("store");
    let mut r = Recorder::start(
        Some(&pair.ns_b),
        &store,
        tmp.path(),
        &["-i", pair.if_b, "--buffer", "64M", "-q", "--workers", "4", "--ring-size", "64M"],
    );
    r.wait_ready();
    r.terminate().expect(0, "recorder with --ring-size");
});

// --- 16: a deleted interface -----------------------------------------------------

wvtest!(deleted_interface_is_called_gone, needs = [root, "ip"], |t| {
    let tmp = TempDir::new("hr-gone");
    let pair = VethPair::new();
    let store = tmp.join("store");
    let mut r = Recorder::start(Some(&pair.ns_b), &store, tmp.path(), &["-i", pair.if_b, "--buffer", "64M", "-q"]);
    r.wait_ready();
    run_ok(Command::new("ip").args(["-n", &pair.ns_b, "link", "del", pair.if_b]));
    let o = r.wait(Duration::from_secs(20));
    assert_no_panic(&o.stderr, "deleted interface");
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("no longer exists"), "{}", o.stderr);
    assert!(!o.stderr.contains("bring it up"), "{}", o.stderr);
});
