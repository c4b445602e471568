//! The store as the API shows it: its catalog (read again only when the
//! file changed, so `status` and `/metrics` stay cheap while recording) and
//! the files a running recorder has not catalogued yet (its live files,
//! read every time: `wv_store::live`), the time they cover, and its
//! volumes' space.

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
    cached: Mutex<(Option<FileId>, Arc<Closed>)>,
}

/// What the catalog held at one moment.
#[derive(Default)]
struct Closed {
    entries: Vec<Entry>,
    totals: Totals,
}

/// Oldest and newest packet of some files with packets, and their bytes and packets.
#[derive(Default, Clone, Copy)]
struct Totals {
    span: Option<(u64, u64)>,
    bytes: u64,
    packets: u64,
}

impl Totals {
    fn of<'a>(entries: impl Iterator<Item = &'a Entry>) -> Totals {
        entries.fold(Totals::default(), |t, e| t.and(e))
    }

    fn and(self, e: &Entry) -> Totals {
        let span = match (self.span, e.packets > 0) {
            (s, false) => s,
            (None, true) => Some((e.first_ns, e.last_ns)),
            (Some((a, b)), true) => Some((a.min(e.first_ns), b.max(e.last_ns))),
        };
        Totals { span, bytes: self.bytes + e.bytes, packets: self.packets + e.packets }
    }
}

/// The catalog file's inode, length and modification time.
type FileId = (u64, u64, i64, i64);

/// The store's files at one moment: the catalog's, then those a running
/// recorder has stored and not catalogued yet (their `file` is the
/// `NAME.part` being written, `bytes` its valid prefix).
pub(crate) struct Catalogued {
    closed: Arc<Closed>,
    pub live: Vec<Entry>,
    /// Oldest and newest packet of the files with packets.
    pub span: Option<(u64, u64)>,
    pub bytes: u64,
    pub packets: u64,
}

impl Catalogued {
    /// Every file, the catalogued ones first.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.closed.entries.iter().chain(&self.live)
    }

    /// How many files [`Catalogued::entries`] has.
    pub fn files(&self) -> usize {
        self.closed.entries.len() + self.live.len()
    }
}

impl StoreView {
    pub fn new(store: &Path) -> StoreView {
        StoreView { store: store.to_path_buf(), cached: Mutex::new((None, Arc::default())) }
    }

    /// The store's files now (none when the store has no catalog yet); an
    /// error, as a sentence, when the store cannot be read (deleted, moved
    /// away, unreadable): not an empty store.
    pub fn catalog(&self) -> Result<Arc<Catalogued>, String> {
        // The live files before the catalog, as the query layer reads them
        // (a file leaves them only once its catalog line is written).
        let live = match wv_store::lock::state(&self.store) {
            Ok(lock) => wv_store::live::read(&self.store, &lock).0,
            Err(_) => Vec::new(),
        };
        let closed = self.closed()?;
        let live = wv_store::live::uncatalogued(&closed.entries, live);
        let t = live.iter().fold(closed.totals, Totals::and);
        Ok(Arc::new(Catalogued { closed, live, span: t.span, bytes: t.bytes, packets: t.packets }))
    }

    /// The catalog, read again only when its file changed.
    fn closed(&self) -> Result<Arc<Closed>, String> {
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
        let fresh = Arc::new(Closed { totals: Totals::of(entries.iter()), entries });
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

    fn vol(space: Option<(u64, u64)>, dev: Option<u64>) -> VolumeSpace {
        VolumeSpace { path: "/v".into(), space, dev }
    }

    #[test]
    fn volumes_on_one_file_system_count_once() {
        let vols = [vol(Some((10, 100)), Some(1)), vol(Some((10, 100)), Some(1)), vol(Some((5, 50)), Some(2))];
        assert_eq!(total_space(&vols), Some((15, 150)));
        // One whose space or device cannot be read adds nothing.
        let vols = [vol(Some((10, 100)), Some(1)), vol(None, Some(2)), vol(Some((5, 50)), None)];
        assert_eq!(total_space(&vols), Some((10, 100)));
        // The store's own directory unreadable: no figure at all.
        assert_eq!(total_space(&[vol(None, Some(1)), vol(Some((5, 50)), Some(2))]), None);
        assert_eq!(total_space(&[]), None);
    }
}
