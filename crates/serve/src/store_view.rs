//! The store as the API shows it: its catalog (read again only when the
//! file changed, so `status` and `/metrics` stay cheap while recording),
//! the time it covers, and its volume's space.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use wv_store::catalog::Entry;

/// One directory the store's files go to, and its file system's space.
pub(crate) struct VolumeSpace {
    pub path: PathBuf,
    /// Free and total bytes (`None`: cannot be read).
    pub space: Option<(u64, u64)>,
    /// The file system's device (two volumes on one share its space).
    dev: Option<u64>,
}

/// The catalog as last read, and what identified the file then.
pub(crate) struct StoreView {
    store: PathBuf,
    cached: Mutex<(Option<FileId>, Arc<Catalogued>)>,
}

/// The catalog file's inode, length and modification time.
type FileId = (u64, u64, i64, i64);

/// What the catalog held at one moment.
#[derive(Default)]
pub(crate) struct Catalogued {
    pub entries: Vec<Entry>,
    /// Oldest and newest packet of the catalogued files with packets.
    pub span: Option<(u64, u64)>,
    pub bytes: u64,
    pub packets: u64,
}

impl StoreView {
    pub fn new(store: &Path) -> StoreView {
        StoreView { store: store.to_path_buf(), cached: Mutex::new((None, Arc::default())) }
    }

    /// The catalog now (an empty one when the store has none yet); an
    /// error, as a sentence, when the store cannot be read (deleted, moved
    /// away, unreadable): not an empty store.
    pub fn catalog(&self) -> Result<Arc<Catalogued>, String> {
        use std::os::unix::fs::MetadataExt;
        let path = self.store.join(wv_store::layout::CATALOG);
        let id = std::fs::metadata(&path).ok().map(|m| (m.ino(), m.len(), m.mtime(), m.mtime_nsec()));
        let mut c = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if id.is_some() && c.0 == id {
            return Ok(c.1.clone());
        }
        let entries = wv_store::catalog::read_checked(&self.store)
            .map_err(|e| format!("cannot read the store {}: {e}", self.store.display()))?
            .entries;
        let with = || entries.iter().filter(|e| e.packets > 0);
        let span = with().map(|e| e.first_ns).min().zip(with().map(|e| e.last_ns).max());
        let bytes = entries.iter().map(|e| e.bytes).sum();
        let packets = entries.iter().map(|e| e.packets).sum();
        let fresh = Arc::new(Catalogued { entries, span, bytes, packets });
        *c = (id, fresh.clone());
        Ok(fresh)
    }

    /// Free and total bytes of the file systems the store writes to: its
    /// directory's and those of its extra volumes (`record --volume`), each
    /// file system counted once (two volumes on one disk share its space).
    /// `None` when the store directory's own cannot be read.
    pub fn space(&self) -> Option<(u64, u64)> {
        total_space(&self.volumes())
    }

    /// The store directory and its usable extra volumes, each with the free
    /// and total bytes of its file system.
    pub fn volumes(&self) -> Vec<VolumeSpace> {
        use std::os::unix::fs::MetadataExt;
        let mut dirs = vec![self.store.clone()];
        if self.store.join(wv_store::volume::REGISTRY).exists() {
            if let Ok(v) = wv_store::volume::Volumes::open(&self.store) {
                dirs.extend(v.all().iter().filter(|(id, _)| *id > 0).map(|(_, d)| d.path().to_path_buf()));
            }
        }
        dirs.into_iter()
            .map(|path| VolumeSpace {
                space: wv_sys::fs::fs_space(&path).ok(),
                dev: std::fs::metadata(&path).ok().map(|m| m.dev()),
                path,
            })
            .collect()
    }

    pub fn path(&self) -> &Path {
        &self.store
    }
}

/// RFC 3339 with nanoseconds, UTC.
pub(crate) fn time(ns: u64) -> String {
    wv_store::layout::utc_rfc3339(ns)
}

/// Why a time range selects nothing the store holds, if it does not (the command line's
/// sentence too: `wv_query::outside`).
pub(crate) use wv_query::outside;

/// [`StoreView::space`] of volumes already read ([`StoreView::volumes`]).
pub(crate) fn total_space(vols: &[VolumeSpace]) -> Option<(u64, u64)> {
    vols.first()?.space?;
    let mut seen = std::collections::HashSet::new();
    let (mut free, mut total) = (0u64, 0u64);
    for v in vols {
        if let (Some((f, t)), Some(dev)) = (v.space, v.dev) {
            if seen.insert(dev) {
                free += f;
                total += t;
            }
        }
    }
    Some((free, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_says_which_edge() {
        assert!(outside(None, None, None).unwrap().contains("no packets"));
        let s = Some((100, 200));
        assert_eq!(outside(s, Some(100), Some(201)), None);
        assert_eq!(outside(s, Some(200), None), None);
        assert!(outside(s, None, Some(100)).unwrap().contains("ends before"));
        assert!(outside(s, Some(201), None).unwrap().contains("starts after"));
    }
}
