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

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().expect("mkfifo");
    assert!(st.success(), "mkfifo {}", p.display());
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
