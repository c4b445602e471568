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
