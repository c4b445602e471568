//! `wirevault record` as a test drives it: in the background, waited on
//! through stats.json, stopped by signal.

use super::{bin, run_wirevault, unique, wirevault, Outcome, VethPair};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// A `wirevault record` running in the background (optionally inside a
/// network namespace), with its output going to files. Dropping it kills
/// the process if it is still running.
pub struct Recorder {
    child: Option<Child>,
    pub store: PathBuf,
    out: PathBuf,
    err: PathBuf,
}

impl Recorder {
    /// Starts `wirevault record -o STORE ARGS...` (in `netns` if given).
    pub fn start(netns: Option<&str>, store: &Path, logs: &Path, args: &[&str]) -> Recorder {
        let n = unique();
        let out = logs.join(format!("recorder-{n}.out"));
        let err = logs.join(format!("recorder-{n}.err"));
        let mut cmd = match netns {
            Some(ns) => VethPair::exec(ns, bin()),
            None => wirevault(),
        };
        cmd.arg("record").arg("-o").arg(store).args(args);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).unwrap())
            .stderr(fs::File::create(&err).unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        Recorder { child: Some(child), store: store.to_path_buf(), out, err }
    }

    /// The recorder's process id (to send it signals).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn stderr_now(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }

    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.as_mut().and_then(|c| c.try_wait().ok().flatten())
    }

    /// Waits until the recorder has all its sources open: a live interface its full rings
    /// (stats.json `rings`; it captures on a small ring before them), anything else once
    /// stats.json says it captures.
    pub fn wait_ready(&mut self) {
        self.wait_for("stats.json to say the full rings capture", |s| {
            fs::read_to_string(s.join("stats.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v["state"] != "starting" && v["rings"] != "small")
        });
    }

    /// Waits until stats.json says the recorder captures (on a live interface's small ring,
    /// before its full rings), as its "capturing on" line does.
    pub fn wait_capturing(&mut self) {
        self.wait_for("stats.json to say it captures", |s| {
            fs::read_to_string(s.join("stats.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .is_some_and(|v| v["state"] == "capturing")
        });
    }

    /// Waits until stats.json counts at least `n` received packets.
    pub fn wait_received(&mut self, n: u64) {
        self.wait_counter("received", n);
    }

    /// Waits until the top-level counter `key` of stats.json reaches `n`.
    pub fn wait_counter(&mut self, key: &str, n: u64) {
        self.wait_for(&format!("stats.json {key} >= {n}"), |s| {
            fs::read_to_string(s.join("stats.json"))
                .ok()
                .and_then(|t| serde_json::from_str::<Value>(&t).ok())
                .and_then(|v| v[key].as_u64())
                .is_some_and(|r| r >= n)
        });
    }

    fn wait_for(&mut self, what: &str, done: impl Fn(&Path) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if done(&self.store) {
                return;
            }
            if let Some(st) = self.exited() {
                panic!("wirevault exited ({st}) while the test waited for {what}:\n{}", self.stderr_now());
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}:\n{}", self.stderr_now());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits (up to 60 s) for the process to end.
    pub fn terminate(self) -> Outcome {
        let pid = self.child.as_ref().unwrap().id() as libc::pid_t;
        // SAFETY: pid is our own child, not yet reaped, so it cannot have been reused.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        self.wait(Duration::from_secs(60))
    }

    /// Waits up to `timeout` for the process to end on its own.
    pub fn wait(mut self, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(st) = self.exited() {
                break st;
            }
            if Instant::now() >= deadline {
                let e = self.stderr_now();
                drop(self); // kills it
                panic!("wirevault did not exit within {timeout:?}:\n{e}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        self.child = None;
        Outcome {
            code: status.code(),
            stdout: fs::read_to_string(&self.out).unwrap_or_default(),
            stderr: fs::read_to_string(&self.err).unwrap_or_default(),
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Records `record --synthetic SPEC` (quietly) into the store `store`.
pub fn record_synthetic(store: &Path, spec: &str) {
    run_wirevault(&["record", "--synthetic", spec, "-o", store.to_str().unwrap(), "-q", "--no-tune-warnings"])
        .expect(0, "record");
}
