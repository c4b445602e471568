//! Helpers shared by the integration tests of every crate of the workspace
//! (a dev-dependency only, never published): where tcpdump's test corpus
//! is, whether outside tools are installed, and scratch directories.
//!
//! A test that needs something missing (the corpus, a tool) skips with a
//! printed `SKIP` line, except under CI (`CI=true`), where the corpus is
//! cloned beside the repository and `scripts/install-deps.sh` has installed
//! every tool, so a missing one is a failure.
#![deny(unsafe_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// True when running under CI, where skipping for a missing corpus or tool
/// is a failure.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Where the corpus is expected: `../shared/corpus/tcpdump-tests` beside the
/// repository (every crate sits two levels below the repository's root).
fn corpus_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/tcpdump-tests")
}

/// The tcpdump test captures (`../shared/corpus/tcpdump-tests` beside the
/// repository), or `None` with a printed `SKIP` line. Under CI a missing
/// corpus is a failure: CI clones the repository beside `shared/`.
pub fn corpus_dir(test: &str) -> Option<PathBuf> {
    let p = corpus_path();
    if p.is_dir() {
        return Some(p);
    }
    if in_ci() {
        panic!("{test}: CI needs the corpus at ../shared/corpus/tcpdump-tests beside the repository");
    }
    eprintln!("SKIP {test}: the tcpdump-tests corpus is not at ../shared/corpus");
    None
}

/// One file of the corpus (see [`corpus_dir`]); a corpus without it is a failure.
pub fn corpus_file(test: &str, name: &str) -> Option<PathBuf> {
    let p = corpus_dir(test)?.join(name);
    assert!(p.is_file(), "{test}: the corpus has no {name}");
    Some(p)
}

/// Every regular file of the corpus, sorted by name.
pub fn corpus_files(test: &str) -> Option<Vec<PathBuf>> {
    let dir = corpus_dir(test)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{test}: cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    Some(files)
}

/// True if `tool` is installed (on PATH or in an sbin directory).
pub fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()))
        || ["/usr/sbin", "/sbin"].iter().any(|d| Path::new(d).join(tool).is_file())
}

/// True if every tool is installed. A missing tool skips the test with a
/// `SKIP` line, or fails it under CI.
pub fn need_tools(test: &str, tools: &[&str]) -> bool {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have(t)).collect();
    if missing.is_empty() {
        return true;
    }
    if in_ci() {
        panic!("{test}: CI needs {} (scripts/install-deps.sh installs them)", missing.join(", "));
    }
    eprintln!("SKIP {test}: {} not installed (run scripts/install-deps.sh)", missing.join(", "));
    false
}

static UNIQUE: AtomicU32 = AtomicU32::new(0);

/// A fresh directory under the system's temporary directory, named after
/// the tag, the process and a counter (so tests running in
/// parallel never share one), removed with everything in it when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let n = UNIQUE.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("wv-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap_or_else(|e| panic!("cannot create {}: {e}", p.display()));
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside the directory.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes a pcapng file with two interfaces, Ethernet (0) and raw IP (1),
/// both with nanosecond stamps (`if_tsresol` 9), holding `packets`: each
/// (interface, time in ns, bytes), captured whole. Written by hand, not by
/// the code under test.
pub fn write_pcapng_two_interfaces(path: &Path, packets: &[(u32, u64, &[u8])]) {
    let block = |out: &mut Vec<u8>, t: u32, body: &[u8]| {
        let len = (12 + body.len().next_multiple_of(4)) as u32;
        out.extend_from_slice(&t.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(body);
        out.resize(out.len().next_multiple_of(4), 0);
        out.extend_from_slice(&len.to_le_bytes());
    };
    let mut out = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    shb.extend_from_slice(&[1, 0, 0, 0]);
    shb.extend_from_slice(&u64::MAX.to_le_bytes());
    block(&mut out, 0x0A0D_0D0A, &shb);
    for linktype in [1u16, 101] {
        let mut idb = Vec::new();
        idb.extend_from_slice(&linktype.to_le_bytes());
        idb.extend_from_slice(&[0, 0]);
        idb.extend_from_slice(&65535u32.to_le_bytes());
        // if_tsresol = 9, end of options
        idb.extend_from_slice(&[9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0]);
        block(&mut out, 1, &idb);
    }
    for &(ifc, ts, data) in packets {
        let mut epb = Vec::new();
        for v in [ifc, (ts >> 32) as u32, ts as u32, data.len() as u32, data.len() as u32] {
            epb.extend_from_slice(&v.to_le_bytes());
        }
        epb.extend_from_slice(data);
        block(&mut out, 6, &epb);
    }
    std::fs::write(path, out).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}
