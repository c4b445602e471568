//! The store's catalog: one JSON line per closed capture file, so a query
//! can skip files outside its time range without opening them; and the
//! retention that keeps the store inside its byte budget.
//!
//! All writer threads share one [`Catalog`]; appends and deletions happen
//! under its lock, so the file on disk and the in-memory list agree.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One closed capture file. Paths are relative to the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub stream: usize,
    pub file: String,
    pub index: Option<String>,
    pub format: String,
    pub linktype: u32,
    pub snaplen: u32,
    pub first_ns: u64,
    pub last_ns: u64,
    pub packets: u64,
    pub bytes: u64,
}

/// What to do when a new file would push the store over its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFull {
    /// Delete the oldest files (and their indexes) first.
    DeleteOldest,
    /// Stop recording.
    Stop,
}

/// The store's byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub max_bytes: u64,
    pub on_full: OnFull,
}

/// Files deleted to make room.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Deleted {
    pub files: u64,
    pub bytes: u64,
}

struct Inner {
    file: File,
    /// Bytes of disk reserved for the catalog file (appends below this need no new block).
    reserved: u64,
    /// Entries with their on-disk size (capture + index), in catalog order.
    entries: Vec<(Entry, u64)>,
    total: u64,
}

/// Appends entries to `STORE/catalog.jsonl` and enforces the budget.
pub struct Catalog {
    store: PathBuf,
    path: PathBuf,
    inner: Mutex<Inner>,
}

/// Bytes a catalog entry occupies on disk: the capture file and its index.
fn disk_size(store: &Path, e: &Entry) -> u64 {
    let idx = e.index.as_ref().and_then(|i| std::fs::metadata(store.join(i)).ok()).map_or(0, |m| m.len());
    e.bytes + idx
}

impl Catalog {
    /// Opens (creating) the catalog of `store` for appending, loading what it holds.
    pub fn open(store: &Path) -> io::Result<Catalog> {
        let path = store.join(crate::layout::CATALOG);
        let (entries, _) = read(store)?;
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let entries: Vec<(Entry, u64)> =
            entries.into_iter().map(|e| (disk_size(store, &e), e)).map(|(s, e)| (e, s)).collect();
        let total = entries.iter().map(|(_, s)| s).sum();
        let mut inner = Inner { file, reserved: 0, entries, total };
        reserve_ahead(&mut inner);
        Ok(Catalog { store: store.to_path_buf(), path, inner: Mutex::new(inner) })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends one entry and makes it durable.
    pub fn append(&self, e: &Entry) -> io::Result<()> {
        let mut line = serde_json::to_vec(e).map_err(io::Error::other)?;
        line.push(b'\n');
        let size = disk_size(&self.store, e);
        let mut g = self.lock();
        g.file.write_all(&line)?;
        g.file.sync_data()?;
        g.entries.push((e.clone(), size));
        g.total += size;
        reserve_ahead(&mut g);
        Ok(())
    }

    /// Bytes the cataloged files occupy.
    pub fn usage(&self) -> u64 {
        self.lock().total
    }

    /// Number of cataloged files.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes sure `reserve` more bytes fit under `budget`: deletes the oldest
    /// files (by first timestamp) with [`OnFull::DeleteOldest`], or returns
    /// `Err` with [`OnFull::Stop`] when they do not fit. Files being written
    /// are not in the catalog, so they are never deleted.
    pub fn make_room(&self, budget: &Budget, reserve: u64) -> Result<Deleted, io::Error> {
        let mut g = self.lock();
        let mut deleted = Deleted::default();
        if g.total + reserve <= budget.max_bytes {
            return Ok(deleted);
        }
        if budget.on_full == OnFull::Stop {
            return Err(io::Error::new(io::ErrorKind::StorageFull, "the store reached its --max-size budget"));
        }
        let mut order: Vec<usize> = (0..g.entries.len()).collect();
        order.sort_by_key(|&i| (g.entries[i].0.first_ns, g.entries[i].0.last_ns));
        let mut drop_set = vec![false; g.entries.len()];
        let mut total = g.total;
        for i in order {
            if total + reserve <= budget.max_bytes {
                break;
            }
            let (e, size) = &g.entries[i];
            if let Some(ix) = &e.index {
                let _ = std::fs::remove_file(self.store.join(ix));
            }
            match std::fs::remove_file(self.store.join(&e.file)) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                Err(err) => return Err(err),
            }
            total -= size;
            deleted.files += 1;
            deleted.bytes += size;
            drop_set[i] = true;
        }
        let mut i = 0;
        g.entries.retain(|_| {
            i += 1;
            !drop_set[i - 1]
        });
        g.total = total;
        let entries: Vec<Entry> = g.entries.iter().map(|(e, _)| e.clone()).collect();
        rewrite(&self.store, &entries)?;
        // The rename replaced the file our append handle points to.
        g.file = OpenOptions::new().append(true).open(&self.path)?;
        g.reserved = 0;
        reserve_ahead(&mut g);
        Ok(deleted)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Keeps at least 64 KiB (a few hundred entries) of disk reserved past the
/// end of the catalog, so that the files closed when the disk fills up can
/// still be cataloged. Best effort: not every file system can preallocate.
fn reserve_ahead(g: &mut Inner) {
    const STEP: u64 = 1 << 20;
    let len = g.file.metadata().map_or(0, |m| m.len());
    if len + (64 << 10) > g.reserved {
        let to = (len + STEP).next_multiple_of(STEP);
        if wv_sys::uring::fallocate_keep_size(&g.file, 0, to).is_ok() {
            g.reserved = to;
        }
    }
}

/// Reads every entry of the catalog of `store`. A missing catalog is empty;
/// a damaged line (a crash mid-append) is skipped and reported in the second
/// value as its 1-based line number.
pub fn read(store: &Path) -> io::Result<(Vec<Entry>, Vec<usize>)> {
    let path = store.join(crate::layout::CATALOG);
    let f = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (i, line) in io::BufReader::new(f).split(b'\n').enumerate() {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Entry>(&line) {
            Ok(e) => out.push(e),
            Err(_) => bad.push(i + 1),
        }
    }
    Ok((out, bad))
}

/// Replaces the catalog of `store` with `entries`, atomically (write, fsync, rename).
pub fn rewrite(store: &Path, entries: &[Entry]) -> io::Result<()> {
    let path = store.join(crate::layout::CATALOG);
    let tmp = store.join(format!("{}{}", crate::layout::CATALOG, crate::layout::PART));
    let mut f = File::create(&tmp)?;
    let mut buf = Vec::new();
    for e in entries {
        serde_json::to_writer(&mut buf, e).map_err(io::Error::other)?;
        buf.push(b'\n');
    }
    f.write_all(&buf)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, &path)?;
    File::open(store)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u64, dir: &Path) -> Entry {
        let name = format!("stream-000/f{n}.pcap");
        std::fs::create_dir_all(dir.join("stream-000")).unwrap();
        std::fs::write(dir.join(&name), vec![0u8; 1000]).unwrap();
        Entry {
            stream: 0,
            file: name,
            index: None,
            format: "pcap".into(),
            linktype: 1,
            snaplen: 262_144,
            first_ns: n,
            last_ns: n + 1,
            packets: 3,
            bytes: 1000,
        }
    }

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wv-cat-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn append_read_rewrite() {
        let dir = tmp("rw");
        let c = Catalog::open(&dir).unwrap();
        let e = entry(1, &dir);
        c.append(&e).unwrap();
        OpenOptions::new().append(true).open(c.path()).unwrap().write_all(b"{\"stream\":0,\"fi").unwrap();
        let (v, bad) = read(&dir).unwrap();
        assert_eq!(v, vec![e.clone()]);
        assert_eq!(bad, vec![2]);
        rewrite(&dir, &v).unwrap();
        assert_eq!(read(&dir).unwrap(), (vec![e], vec![]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn retention_deletes_oldest_first_and_survives_reopen() {
        let dir = tmp("ret");
        let c = Catalog::open(&dir).unwrap();
        for n in [3, 1, 2, 4] {
            c.append(&entry(n, &dir)).unwrap();
        }
        assert_eq!(c.usage(), 4000);
        let budget = Budget { max_bytes: 3500, on_full: OnFull::DeleteOldest };
        let d = c.make_room(&budget, 1000).unwrap();
        assert_eq!(d, Deleted { files: 2, bytes: 2000 });
        assert!(!dir.join("stream-000/f1.pcap").exists() && !dir.join("stream-000/f2.pcap").exists());
        assert!(dir.join("stream-000/f3.pcap").exists());
        c.append(&entry(5, &dir)).unwrap();
        let again = Catalog::open(&dir).unwrap();
        let firsts: Vec<u64> = read(&dir).unwrap().0.iter().map(|e| e.first_ns).collect();
        assert_eq!(firsts, vec![3, 4, 5]);
        assert_eq!(again.usage(), 3000);
        let stop = Budget { max_bytes: 3500, on_full: OnFull::Stop };
        assert!(again.make_room(&stop, 1000).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
