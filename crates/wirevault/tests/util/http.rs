//! HTTP through curl (a real client), and `wirevault serve` in the background.

use super::{unique, wirevault, VethPair};
use serde_json::Value;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One HTTP answer: status, headers (lower-case names), body.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A client of one server: its base URL, curl options (TLS files, tokens,
/// `--resolve`), and the network namespace it runs in (if any).
#[derive(Clone)]
pub struct Http {
    pub base: String,
    pub netns: Option<String>,
    pub opts: Vec<String>,
}

impl Http {
    pub fn new(base: &str) -> Http {
        Http { base: base.trim_end_matches('/').to_string(), netns: None, opts: vec![] }
    }

    pub fn with(&self, opts: &[&str]) -> Http {
        let mut h = self.clone();
        h.opts.extend(opts.iter().map(|s| s.to_string()));
        h
    }

    /// `curl -G` of `path` with `params` URL-encoded; `None` when curl
    /// itself fails (TLS refused, connection reset), with its message.
    pub fn try_get(&self, path: &str, params: &[(&str, &str)]) -> Result<Reply, String> {
        let n = unique();
        let dir = std::env::temp_dir();
        let (hfile, bfile) = (dir.join(format!("wv-http-{n}.h")), dir.join(format!("wv-http-{n}.b")));
        let mut cmd = match &self.netns {
            Some(ns) => VethPair::exec(ns, "curl"),
            None => Command::new("curl"),
        };
        cmd.args(["-sS", "-G", "--max-time", "120", "-D"]).arg(&hfile).arg("-o").arg(&bfile);
        cmd.args(&self.opts);
        for (k, v) in params {
            cmd.arg("--data-urlencode").arg(format!("{k}={v}"));
        }
        cmd.arg(format!("{}{path}", self.base));
        let out = cmd.stdin(Stdio::null()).output().expect("run curl");
        let head = fs::read_to_string(&hfile).unwrap_or_default();
        let body = fs::read(&bfile).unwrap_or_default();
        let _ = fs::remove_file(&hfile);
        let _ = fs::remove_file(&bfile);
        if !out.status.success() {
            return Err(format!("curl {path}: {} {}", out.status, String::from_utf8_lossy(&out.stderr)));
        }
        // The last response's head (after any 100-continue).
        let block = head.split("\r\n\r\n").filter(|b| b.starts_with("HTTP/")).last().unwrap_or("");
        let mut lines = block.lines();
        let status = lines.next().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Ok(Reply { status, headers, body })
    }

    pub fn get(&self, path: &str, params: &[(&str, &str)]) -> Reply {
        self.try_get(path, params).unwrap_or_else(|e| panic!("{e}"))
    }
}

/// `promtool check metrics` on the exposition.
pub fn promtool_ok(body: &[u8], what: &str) {
    let mut c = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    c.stdin.take().unwrap().write_all(body).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{what}: promtool check metrics failed: {}{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
        String::from_utf8_lossy(body)
    );
}

/// `wirevault serve` running in the background; its address is read from
/// its log line `api: serving STORE on SCHEME://ADDR/`.
pub struct Served {
    pub child: Child,
    pub addr: String,
    pub err: PathBuf,
}

impl Served {
    /// Starts `wirevault serve STORE --listen 127.0.0.1:0 ARGS...` and waits until it listens.
    pub fn start(store: &Path, logs: &Path, args: &[&str]) -> Served {
        let mut all = vec![store.to_str().expect("a UTF-8 path"), "--listen", "127.0.0.1:0"];
        all.extend_from_slice(args);
        Served::with_args(&all, logs)
    }

    /// Starts `wirevault serve ARGS...` (they must make it listen) and waits until it listens.
    pub fn with_args(args: &[&str], logs: &Path) -> Served {
        let err = logs.join(format!("serve-{}.err", unique()));
        let child = wirevault()
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&err).unwrap())
            .spawn()
            .expect("start wirevault serve");
        let mut s = Served { child, addr: String::new(), err };
        s.addr = s.wait_log_addr();
        s
    }

    fn wait_log_addr(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let log = fs::read_to_string(&self.err).unwrap_or_default();
            if let Some(addr) = served_addr(&log) {
                return addr;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                panic!("wirevault serve exited ({st}):\n{log}");
            }
            assert!(Instant::now() < deadline, "wirevault serve did not start listening:\n{log}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Sends a signal (SIGHUP reloads, SIGTERM stops).
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: our own child, not yet reaped.
        unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `host:port` of the log line `api: serving STORE on SCHEME://ADDR/`.
pub fn served_addr(log: &str) -> Option<String> {
    log.lines()
        .find(|l| l.contains("api: serving "))
        .and_then(|l| l.split("://").nth(1))
        .and_then(|rest| rest.split('/').next())
        .map(str::to_string)
}
