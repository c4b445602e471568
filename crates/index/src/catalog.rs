//! The store's catalog as the index and query crates see it: the one
//! implementation lives in `wv_store::catalog`; this maps its errors.

use crate::IndexError;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

pub use wv_store::catalog::Entry;

/// File name of a store's catalog.
pub const CATALOG_FILE: &str = wv_store::layout::CATALOG;

/// Reads a store's catalog (damaged lines, left by a crash mid-append, are skipped).
pub fn read(store: &Path) -> Result<Vec<Entry>, IndexError> {
    wv_store::catalog::read(store)
        .map(|(entries, _bad)| entries)
        .map_err(|source| IndexError::Io { path: store.join(CATALOG_FILE), source })
}

/// Replaces a store's catalog atomically; it is left 0640 whatever the umask.
pub fn write(store: &Path, entries: &[Entry]) -> Result<(), IndexError> {
    use std::os::unix::fs::PermissionsExt;
    let path = store.join(CATALOG_FILE);
    wv_store::catalog::rewrite(store, entries)
        .and_then(|()| {
            let f =
                std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC).open(&path)?;
            f.set_permissions(std::fs::Permissions::from_mode(0o640))
        })
        .map_err(|source| IndexError::Io { path, source })
}
