//! The store's catalog as the index and query crates see it: the one
//! implementation lives in `wv_store::catalog`; this maps its errors.

use crate::IndexError;
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

/// Replaces a store's catalog atomically (through the store's directory,
/// no symlink followed); it is left 0640 whatever the umask.
pub fn write(store: &Path, entries: &[Entry]) -> Result<(), IndexError> {
    wv_store::catalog::rewrite(store, entries)
        .map_err(|source| IndexError::Io { path: store.join(CATALOG_FILE), source })
}
