//! The binary under test and the processes a test runs: one-shot runs and
//! their outcomes, background processes, and waiting for signal handling.

use super::{read_capture, Rec};
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_wirevault")
}

/// `wirevault` as a command, with arguments to add.
pub fn wirevault() -> Command {
    Command::new(bin())
}

/// Makes a FIFO (mode 0600) at `path`.
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("a path without NUL");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// Runs a command to completion; panics with its output if it fails.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Asserts that stderr shows no panic and no backtrace.
pub fn assert_no_panic(stderr: &str, what: &str) {
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE") && !stderr.contains("stack backtrace"),
        "{what}: wirevault panicked:\n{stderr}"
    );
}

/// How a wirevault run ended.
pub struct Outcome {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn from_output(o: Output) -> Outcome {
        Outcome {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }

    /// Asserts exit code `code` and no panic.
    pub fn expect(&self, code: i32, what: &str) -> &Self {
        assert_no_panic(&self.stderr, what);
        assert_eq!(self.code, Some(code), "{what}: exit code\nstdout: {}\nstderr: {}", self.stdout, self.stderr);
        self
    }
}

/// Waits until `child` has taken charge of `sig`: blocked it (the first
/// thing wirevault's `main` does) or installed a handler for it. A signal
/// sent before that lands in the dynamic loader or the runtime's start-up,
/// where no program can catch it; a test of what a signal does to wirevault
/// measures its delays from here. Kills the child and panics after 10 s, or
/// if it ends first.
pub fn wait_until_signals_are_held(child: &mut Child, sig: libc::c_int) {
    let bit = 1u64 << (sig - 1);
    let mask = |status: &str, key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("wirevault ended ({st}) before it held signal {sig}");
        }
        let status = fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        if (mask(&status, "SigBlk:") | mask(&status, "SigCgt:")) & bit != 0 {
            return;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("wirevault never blocked or caught signal {sig} (10 s)");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Runs wirevault to completion with `args`.
pub fn run_wirevault(args: &[&str]) -> Outcome {
    Outcome::from_output(wirevault().args(args).stdin(Stdio::null()).output().expect("run wirevault"))
}

/// What `wirevault query SRC -w OUT ARGS...` selects (it must exit 0): the frames it wrote.
pub fn query_frames(src: &Path, out: &Path, args: &[&str]) -> Vec<Rec> {
    let mut a = vec!["query", src.to_str().expect("a UTF-8 path"), "-w", out.to_str().expect("a UTF-8 path")];
    a.extend_from_slice(args);
    run_wirevault(&a).expect(0, &format!("{a:?}"));
    read_capture(out).1
}

/// A background process (traffic generator) killed and reaped on drop.
pub struct Background(pub Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
