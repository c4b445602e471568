//! What the machine offers a test: root, outside tools, the tcpdump corpus,
//! CI's rule that a missing one is a failure, and a lock for heavy tests.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

/// True when running under CI, where skipping for a missing tool is a failure.
pub fn in_ci() -> bool {
    wv_testkit::in_ci()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// True if the test may go on; prints why not otherwise.
pub fn need_root(test: &str) -> bool {
    if is_root() {
        return true;
    }
    eprintln!("SKIP {test}: needs root (network namespaces, AF_PACKET sockets)");
    false
}

/// True if every tool is installed. A missing tool skips the test with a
/// message, or fails it under CI.
pub fn need_tools(test: &str, tools: &[&str]) -> bool {
    wv_testkit::need_tools(test, tools)
}

/// The tcpdump test captures (`../shared/corpus/tcpdump-tests` beside the
/// repository), or `None` with a printed `SKIP` line. Under CI a missing
/// corpus is a failure: CI clones the repository beside `shared/`.
pub fn corpus_dir(test: &str) -> Option<PathBuf> {
    wv_testkit::corpus_dir(test)
}

/// One file of the corpus (see [`corpus_dir`]).
pub fn corpus_file(test: &str, name: &str) -> Option<PathBuf> {
    wv_testkit::corpus_file(test, name)
}

/// True if `tool` is installed (on PATH or in an sbin directory).
pub fn have(tool: &str) -> bool {
    wv_testkit::have(tool)
}

/// Serialises tests that put load on the machine (live capture, traffic at
/// top speed), so that parallel tests do not make each other drop packets.
pub fn heavy_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// One thing a [`wvtest!`] needs from the machine.
pub enum Need {
    /// Root (network namespaces, AF_PACKET sockets, mounts).
    Root,
    /// The tcpdump test corpus (see [`corpus_dir`]).
    Corpus,
    /// One outside tool.
    Tool(&'static str),
    /// A list of outside tools, as a file's `TOOLS` constant names them.
    Tools(&'static [&'static str]),
}

/// The test a [`wvtest!`] runs: its name, as `stringify!` gives it, for
/// `SKIP` lines, temp directories and corpus look-ups.
pub struct Test {
    pub name: &'static str,
    /// When the test passed its needs, for the `WV_TEST_TIMES` line.
    started: std::time::Instant,
}

/// With `WV_TEST_TIMES=FILE`, every test that ran appends `NAME SECONDS`
/// to FILE when it ends (passed or panicked), to find the slow ones of the
/// suite; `sort -k2 -n -r FILE | head` lists them.
impl Drop for Test {
    fn drop(&mut self) {
        let Some(path) = std::env::var_os("WV_TEST_TIMES") else { return };
        let line = format!("{} {:.2}\n", self.name, self.started.elapsed().as_secs_f64());
        // One write of one short line with O_APPEND: parallel tests do not interleave.
        let f = std::fs::OpenOptions::new().create(true).append(true).open(path);
        if let Ok(mut f) = f {
            let _ = std::io::Write::write_all(&mut f, line.as_bytes());
        }
    }
}

/// The test's name, so that a message can say `{t}`.
impl std::fmt::Display for Test {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl Test {
    /// The test named `name` if the machine has everything in `needs`:
    /// root first, then every tool at once (one `SKIP` line names all the
    /// missing ones), then the corpus. `None` when it must skip; under CI a
    /// missing tool or corpus fails, as [`need_tools`] and [`corpus_dir`] do.
    pub fn ready(name: &'static str, needs: &[Need]) -> Option<Test> {
        if needs.iter().any(|n| matches!(n, Need::Root)) && !need_root(name) {
            return None;
        }
        let mut tools: Vec<&str> = Vec::new();
        for n in needs {
            match n {
                Need::Tool(t) => tools.push(t),
                Need::Tools(ts) => tools.extend_from_slice(ts),
                Need::Root | Need::Corpus => {}
            }
        }
        if !tools.is_empty() && !need_tools(name, &tools) {
            return None;
        }
        if needs.iter().any(|n| matches!(n, Need::Corpus)) && corpus_dir(name).is_none() {
            return None;
        }
        Some(Test { name, started: std::time::Instant::now() })
    }

    /// True if the tools of one part of the test are installed; prints
    /// `SKIP NAME (PART)` otherwise (a failure under CI).
    pub fn has_tools(&self, part: &str, tools: &[&str]) -> bool {
        need_tools(&format!("{} ({part})", self.name), tools)
    }

    /// True if running as root; prints `SKIP NAME (PART)` otherwise.
    pub fn has_root(&self, part: &str) -> bool {
        need_root(&format!("{} ({part})", self.name))
    }

    /// The corpus directory; the test must declare `needs = [corpus]`.
    pub fn corpus_dir(&self) -> PathBuf {
        corpus_dir(self.name).unwrap_or_else(|| panic!("{}: uses the corpus without `needs = [corpus]`", self.name))
    }

    /// One file of the corpus, which must hold it.
    pub fn corpus_file(&self, file: &str) -> PathBuf {
        let p = self.corpus_dir().join(file);
        assert!(p.is_file(), "{}: the corpus has no {file}", self.name);
        p
    }

    /// Every regular file of the corpus, sorted by name.
    pub fn corpus_files(&self) -> Vec<PathBuf> {
        self.corpus_dir();
        wv_testkit::corpus_files(self.name).expect("the corpus is there")
    }
}

/// Defines the `#[test]` fn `NAME`, which skips (prints `SKIP NAME: ...`)
/// unless the machine has what it needs, then runs the body with `t`, the
/// [`Test`] of that name:
///
/// ```ignore
/// wvtest!(live_frames_are_stored, needs = [root, TOOLS, "tshark", corpus], |t| {
///     let src = t.corpus_file("afs.pcap");
///     ...
/// });
/// ```
///
/// A need is `root`, `corpus`, a tool's name as a string literal, or the
/// name of a `&[&str]` constant of tools. The name comes from `stringify!`,
/// so a test can no longer print another test's name.
macro_rules! wvtest {
    ($name:ident, needs = [$($need:tt),* $(,)?], |$t:ident| $body:block) => {
        #[test]
        fn $name() {
            let Some($t) = $crate::util::Test::ready(stringify!($name), &[$($crate::util::wvtest!(@need $need)),*])
            else {
                return;
            };
            let _ = &$t;
            $body
        }
    };
    ($name:ident, |$t:ident| $body:block) => {
        $crate::util::wvtest!($name, needs = [], |$t| $body);
    };
    (@need root) => {
        $crate::util::Need::Root
    };
    (@need corpus) => {
        $crate::util::Need::Corpus
    };
    (@need $tool:literal) => {
        $crate::util::Need::Tool($tool)
    };
    (@need $tools:ident) => {
        $crate::util::Need::Tools($tools)
    };
}
pub(crate) use wvtest;
