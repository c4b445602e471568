//! The store's catalog: one JSON line per closed capture file, so a query
//! can skip files outside its time range without opening them.

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

/// Appends entries to `STORE/catalog.jsonl`; shared by all writer threads.
pub struct Catalog {
    path: PathBuf,
    file: Mutex<File>,
}

impl Catalog {
    /// Opens (creating) the catalog of `store` for appending.
    pub fn open(store: &Path) -> io::Result<Catalog> {
        let path = store.join(crate::layout::CATALOG);
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(Catalog {
            path,
            file: Mutex::new(file),
        })
    }

    /// Appends one entry and makes it durable.
    pub fn append(&self, e: &Entry) -> io::Result<()> {
        let mut line = serde_json::to_vec(e).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
        f.write_all(&line)?;
        f.sync_data()
    }

    pub fn path(&self) -> &Path {
        &self.path
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
    for (i, line) in io::BufReader::new(f).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(&line) {
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
    for e in entries {
        let mut line = serde_json::to_vec(e).map_err(io::Error::other)?;
        line.push(b'\n');
        f.write_all(&line)?;
    }
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, &path)?;
    File::open(store)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_read_rewrite() {
        let dir = std::env::temp_dir().join(format!("wv-cat-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c = Catalog::open(&dir).unwrap();
        let e = Entry {
            stream: 0,
            file: "stream-000/a.pcap".into(),
            index: None,
            format: "pcap".into(),
            linktype: 1,
            snaplen: 262_144,
            first_ns: 1,
            last_ns: 2,
            packets: 3,
            bytes: 4,
        };
        c.append(&e).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(c.path())
            .unwrap()
            .write_all(b"{\"stream\":0,\"fi")
            .unwrap();
        let (v, bad) = read(&dir).unwrap();
        assert_eq!(v, vec![e.clone()]);
        assert_eq!(bad, vec![2]);
        rewrite(&dir, &v).unwrap();
        assert_eq!(read(&dir).unwrap(), (vec![e], vec![]));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
