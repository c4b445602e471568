//! Signals at the edges of a run: `index` ends on the same signals as
//! `record`, and a signal while `record` still reads its configuration stops
//! it cleanly, before anything is created.

use crate::util::*;
use std::fs;
use std::process::Stdio;
use std::time::{Duration, Instant};

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
