//! Faults during a live recording on a veth pair: signals at random moments,
//! and damage done to the store while it is being recorded (the live part of
//! `store_safety`). After each: nothing outside
//! the store changed, nothing written before was lost (every file closed
//! before the event is still there, byte for byte, compared with a copy),
//! the store is consistent and the counters add up.
//!
//! The moments are drawn from a seed printed by the test (`WV_SEED=N` to
//! replay one).

use crate::util::*;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The test's random delays, from `WV_SEED` when given (to replay a run), else the clock.
fn rng_from_env() -> Rng {
    let seed = std::env::var("WV_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| now_ns() | 1);
    eprintln!("hostile_live: WV_SEED={seed}");
    Rng(seed)
}

/// Every closed, cataloged capture file of a store and its bytes.
fn closed_files(store: &Path) -> BTreeMap<String, Vec<u8>> {
    catalog(store)
        .iter()
        .filter_map(|e| {
            let rel = e["file"].as_str()?.to_string();
            let bytes = fs::read(store.join(&rel)).ok()?;
            Some((rel, bytes))
        })
        .collect()
}

/// A file beside the store (outside it), and what it held.
struct Sentinel(PathBuf, Vec<u8>);

impl Sentinel {
    fn plant(dir: &Path) -> Sentinel {
        let p = dir.join("outside.pcap");
        let bytes = b"not part of any store".to_vec();
        fs::write(&p, &bytes).unwrap();
        Sentinel(p, bytes)
    }

    fn check(&self, what: &str) {
        assert_eq!(fs::read(&self.0).ok().as_deref(), Some(&self.1[..]), "{what}: a file outside the store changed");
    }
}

fn kill(pid: u32, sig: libc::c_int) {
    // SAFETY: pid is a child of this test that has not been reaped yet.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Starts tcpreplay looping `pcap` at `pps` from the A side until dropped.
fn sender(pair: &VethPair, pcap: &Path, pps: &str) -> Background {
    Background(
        VethPair::exec(&pair.ns_a, "tcpreplay")
            .args(["-q", "--loop", "0", "--pps", pps, "-i", pair.if_a])
            .arg(pcap)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tcpreplay"),
    )
}

/// INT, TERM, HUP and QUIT at a random moment of a live recording end it
/// cleanly; PIPE is ignored (the recording goes on and ends at a TERM).
/// Files closed before the signal are kept byte for byte; every packet
/// counted as written is in the store's valid files; tcpdump and capinfos
/// read them all.
wvtest!(
    signals_at_random_moments_of_a_live_recording_lose_nothing,
    needs = [root, "tcpreplay", "tcpdump", "capinfos"],
    |t| {
        let _g = heavy_lock();
        let mut rng = rng_from_env();
        let tmp = TempDir::new("hostile-signals");
        let sentinel = Sentinel::plant(tmp.path());
        let pair = VethPair::new();
        let sent = test_frames(2000, 1_700_000_000_000_000_000);
        let pcap = tmp.join("sent.pcap");
        write_pcap(&pcap, 1, 65535, false, &sent);
        let _tx = sender(&pair, &pcap, "20000");
        for (sig, name) in [
            (libc::SIGINT, "INT"),
            (libc::SIGTERM, "TERM"),
            (libc::SIGHUP, "HUP"),
            (libc::SIGQUIT, "QUIT"),
            (libc::SIGPIPE, "PIPE"),
        ] {
            // The same store each time: a restart must also keep what earlier recordings left.
            let store = tmp.join("store");
            let before_start = if store.exists() { closed_files(&store) } else { BTreeMap::new() };
            let mut r = Recorder::start(
                Some(&pair.ns_b),
                &store,
                tmp.path(),
                &["-i", pair.if_b, "--buffer", "16M", "--block-size", "256K", "--file-size", "256K", "-q"],
            );
            r.wait_ready();
            std::thread::sleep(Duration::from_millis(rng.below(1500)));
            let before = closed_files(&store);
            kill(r.pid(), sig);
            let o = if sig == libc::SIGPIPE {
                std::thread::sleep(Duration::from_millis(300 + rng.below(700)));
                r.terminate()
            } else {
                r.wait(Duration::from_secs(60))
            };
            o.expect(0, &format!("SIG{name}"));
            let files = check_store(&store);
            let c = final_counters(&store);
            let after = closed_files(&store);
            for (rel, bytes) in before_start.iter().chain(before.iter()) {
                assert_eq!(
                    after.get(rel),
                    Some(bytes),
                    "SIG{name}: {rel}, closed before the signal, changed or is gone"
                );
            }
            let new_packets: u64 = files
                .iter()
                .filter(|f| !before_start.contains_key(f.entry["file"].as_str().unwrap()))
                .map(|f| f.records.len() as u64)
                .sum();
            assert_eq!(c.written, new_packets, "SIG{name}: written counter vs packets in this recording's files");
            for f in &files {
                for rec in &f.records {
                    assert!(sent.iter().any(|s| s.data == rec.data), "SIG{name}: a stored frame that was never sent");
                }
            }
            sentinel.check(&format!("SIG{name}"));
        }
        let files = check_store(&tmp.join("store"));
        let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
        assert_peers_read(&paths, 5);
    }
);

/// A local user who owns the store plants links and damages files while it
/// is being recorded. The recording goes on (or stops cleanly), nothing
/// outside the store changes, files closed before are kept, and queries
/// afterwards are exact (against tcpdump -r over the files) or warn.
wvtest!(
    damage_during_a_live_recording_never_reaches_outside_the_store,
    needs = [root, "tcpreplay", "tcpdump", "capinfos"],
    |t| {
        let _g = heavy_lock();
        let tmp = TempDir::new("hostile-damage");
        let sentinel = Sentinel::plant(tmp.path());
        let pair = VethPair::new();
        let sent = test_frames(2000, 1_700_000_000_000_000_000);
        let pcap = tmp.join("sent.pcap");
        write_pcap(&pcap, 1, 65535, false, &sent);
        let _tx = sender(&pair, &pcap, "20000");
        let store = tmp.join("store");
        let mut r = Recorder::start(
            Some(&pair.ns_b),
            &store,
            tmp.path(),
            &[
                "-i",
                pair.if_b,
                "--buffer",
                "16M",
                "--block-size",
                "256K",
                "--file-size",
                "256K",
                "--max-size",
                "4M",
                "-q",
            ],
        );
        r.wait_ready();
        r.wait_counter("files", 2);
        // Links to the sentinel everywhere the store holds a path.
        let s = &sentinel.0;
        let _ = fs::remove_file(store.join("stats.json"));
        std::os::unix::fs::symlink(s, store.join("stats.json")).unwrap();
        // Retention may be rewriting the catalog through this very name right
        // now (the recorder's own .part exists for a moment): plant when free.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while let Err(e) = std::os::unix::fs::symlink(s, store.join("catalog.jsonl.part")) {
            assert!(e.kind() == std::io::ErrorKind::AlreadyExists && std::time::Instant::now() < deadline, "{e}");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::os::unix::fs::symlink(s, store.join("stream-000/20990101T000000.000000000Z-999999.pcap.part")).unwrap();
        std::os::unix::fs::symlink(s, store.join("stream-000/20990101T000000.000000000Z-999998.pcap")).unwrap();
        std::os::unix::fs::symlink(tmp.path(), store.join("stream-001")).unwrap();
        // A catalog line pointing outside, appended as a crash could never write it.
        {
            use std::io::Write;
            let mut f = fs::OpenOptions::new().append(true).open(store.join("catalog.jsonl")).unwrap();
            writeln!(
            f,
            r#"{{"stream":0,"file":"../outside.pcap","index":null,"format":"pcap","linktype":1,"snaplen":65535,"first_ns":1,"last_ns":2,"packets":1,"bytes":21}}"#
        )
        .unwrap();
        }
        // Retention (--max-size 4M) deletes the oldest files while this goes on.
        // (stats.json is a link now: the recorder keeps writing the file it
        // opened, which nobody can see any more, so wait by the clock.)
        std::thread::sleep(Duration::from_secs(2));
        let o = r.terminate();
        o.expect(0, "recording with a damaged store");
        sentinel.check("after the recording");
        assert!(tmp.path().join("outside.pcap").is_file(), "retention deleted a file outside the store");
        // The query warns about the bad line if it is still there (retention
        // rewrites the catalog from what the recorder cataloged, which drops it).
        let out = run_wirevault(&["query", store.to_str().unwrap(), "--count", "udp"]);
        out.expect(0, "query of the damaged store");
        let still = fs::read_to_string(store.join("catalog.jsonl")).unwrap().contains("../outside.pcap");
        assert!(!still || out.stderr.contains("outside.pcap"), "no warning about the bad line: {}", out.stderr);
        sentinel.check("after query");
        // repair cleans up what it may, follows no link, and the store is consistent after.
        let _ = run_wirevault(&["repair", store.to_str().unwrap()]);
        sentinel.check("after repair");
        for l in ["stats.json", "catalog.jsonl.part", "stream-001"] {
            let p = store.join(l);
            if let Ok(m) = fs::symlink_metadata(&p) {
                if m.file_type().is_symlink() {
                    fs::remove_file(&p).unwrap();
                }
            }
        }
        for l in ["20990101T000000.000000000Z-999999.pcap.part", "20990101T000000.000000000Z-999998.pcap"] {
            let _ = fs::remove_file(store.join("stream-000").join(l));
        }
        let out = run_wirevault(&["repair", store.to_str().unwrap()]);
        out.expect(0, "repair after the links are gone");
        let files = check_store(&store);
        let mut want = 0u64;
        for f in &files {
            want += tcpdump_frames(&f.path, &["udp"], tmp.path()).1.len() as u64;
        }
        let out = run_wirevault(&["query", store.to_str().unwrap(), "--count", "udp"]);
        out.expect(0, "query after repair");
        assert_eq!(out.stdout.trim().parse::<u64>().unwrap(), want, "query count vs tcpdump -r over the files");
        sentinel.check("at the end");
    }
);
