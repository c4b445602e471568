//! Temporary directories that outlive a failed test for inspection.

use super::unique;
use std::fs;
use std::path::{Path, PathBuf};

/// A temporary directory, removed on drop unless the test failed (then its
/// path is printed so the store can be inspected) or `WV_KEEP_TEMP` is set.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("wirevault-test-{}-{}-{name}", std::process::id(), unique()));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, p: impl AsRef<Path>) -> PathBuf {
        self.0.join(p)
    }
}

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("WV_KEEP_TEMP").is_some() {
            eprintln!("kept {}", self.0.display());
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}
