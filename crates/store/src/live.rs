//! What a running recorder has stored but not catalogued yet, for readers.
//!
//! A file reaches the catalog only once it is closed (at `--file-size` or
//! `--file-time`, hours later at low rates), so each stream's writer also
//! publishes `STORE/live-NNN.json`: the stream's files that hold data and
//! have no catalog line yet (the open one, the zero-copy path's carried ones,
//! closed ones waiting for their index), each as a catalog [`Entry`] whose
//! `file` is the `NAME.part` being written and whose `bytes` is the length
//! of its valid prefix: every write before it completed, and it ends at the
//! end of a record. The writer knows that length and a reader cannot find it
//! out: O_DIRECT writes complete out of order, a partial last page is written
//! zero-padded and rewritten later, and the preallocated tail reads as
//! zeros, which parse as empty pcap records. The file is replaced whole
//! (written beside it, then renamed; no fsync: a crash loses it with the
//! recorder) at most every [`PUBLISH_EVERY`] while data comes in, and when
//! the writer goes idle.
//!
//! Readers ([`read`]) trust the files only while the recorder that wrote
//! them holds the store's lock (its pid is in both), read each named file
//! up to `bytes` only, under its `.part` name or, once renamed, its final
//! one, and drop an entry whose final name the catalog already has
//! ([`uncatalogued`]). They read these files *before* the catalog: the
//! writer (or its index thread) takes a file out only after its catalog
//! line is written, so a file is in one of the two, or in both, whenever
//! a reader looks; never in neither.

use crate::catalog::{check_entry, Entry};
use crate::lock::LockState;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use wv_sys::fs::{Dir, Kind, Open};

/// How often a writer replaces its live file while data comes in, at most:
/// a packet is queryable this long after its write completed, and a
/// writer rewrites a few hundred bytes ten times a second.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// The largest live file a reader reads (a writer's holds a few entries).
const MAX_LEN: u64 = 1 << 20;

/// The live file of stream `stream`, in the store directory.
pub fn file_name(stream: usize) -> String {
    format!("live-{stream:03}.json")
}

/// The stream whose live file `name` is, if it is one.
fn stream_of(name: &str) -> Option<usize> {
    let n = name.strip_prefix("live-")?.strip_suffix(".json")?;
    n.parse().ok().filter(|s| file_name(*s) == name)
}

/// Is `name` (in the store directory) a live file or its temporary copy?
pub fn is_live_name(name: &str) -> bool {
    stream_of(name.strip_suffix(TMP).unwrap_or(name)).is_some()
}

/// The suffix of a live file being written.
const TMP: &str = ".new";

/// The file's content.
#[derive(Debug, Serialize, Deserialize)]
struct Doc {
    /// The recorder that wrote it (the pid its store lock names).
    pid: u32,
    files: Vec<Entry>,
}

/// The final name of a live entry's file (`NAME.part` -> `NAME`).
pub fn final_name(file: &str) -> &str {
    file.strip_suffix(crate::layout::PART).unwrap_or(file)
}

/// One stream's live file, shared by its writer and its index thread. Dropped
/// (the recording's end), the file is removed.
#[derive(Debug)]
pub struct LiveFiles {
    dir: Dir,
    name: String,
    files: Mutex<Vec<Entry>>,
    /// Changed since it was last written.
    dirty: AtomicBool,
}

impl LiveFiles {
    /// The live file of stream `stream` of `store`, written once (empty) to
    /// see that it can be; one left by an earlier recorder is replaced.
    pub fn create(store: &Path, stream: usize) -> io::Result<LiveFiles> {
        let live = LiveFiles {
            dir: Dir::open(store)?,
            name: file_name(stream),
            files: Mutex::new(Vec::new()),
            dirty: AtomicBool::new(true),
        };
        live.publish()?;
        Ok(live)
    }

    /// The file's path, for messages.
    pub fn path(&self) -> std::path::PathBuf {
        self.dir.display(&self.name)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `e` (its `file` the `.part` name) in, in place of what was said
    /// of that file before; written at the next [`LiveFiles::publish`].
    pub fn set(&self, e: Entry) {
        let mut g = self.lock();
        match g.iter_mut().find(|x| x.file == e.file) {
            Some(x) => *x = e,
            None => g.push(e),
        }
        self.dirty.store(true, Ordering::Release);
    }

    /// Takes out the file catalogued (or given up) as `file` (its final or
    /// `.part` name). Only after its catalog line is written: see the module
    /// documentation.
    pub fn remove(&self, file: &str) {
        let mut g = self.lock();
        let before = g.len();
        g.retain(|x| final_name(&x.file) != final_name(file));
        if g.len() != before {
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// Whether something changed since the file was last written.
    pub fn dirty(&self) -> bool {
        self.dirty.load(Ordering::Acquire)
    }

    /// Writes the file if something changed: beside it, then renamed over it.
    pub fn publish(&self) -> io::Result<()> {
        if !self.dirty() {
            return Ok(());
        }
        let g = self.lock();
        self.dirty.store(false, Ordering::Release);
        let doc = Doc { pid: std::process::id(), files: g.clone() };
        let mut text = serde_json::to_vec(&doc).map_err(io::Error::other)?;
        text.push(b'\n');
        let tmp = format!("{}{TMP}", self.name);
        let r = self
            .dir
            .open_file(&tmp, Open::Create { truncate: true, append: false }, 0)
            .and_then(|mut f| f.write_all(&text))
            .and_then(|()| self.dir.rename_volatile(&tmp, &self.name).map(drop));
        if r.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        r
    }
}

impl Drop for LiveFiles {
    fn drop(&mut self) {
        let _ = self.dir.unlink(&self.name);
        let _ = self.dir.unlink(&format!("{}{TMP}", self.name));
    }
}

/// Removes every live file of `store` (and temporary copy): those an earlier
/// recorder left when it was killed. Run with the store's lock held.
pub fn remove_stale(store: &Dir) -> io::Result<usize> {
    let mut n = 0;
    for (name, kind) in store.list("")? {
        if kind == Kind::File && is_live_name(&name) {
            store.unlink(&name)?;
            n += 1;
        }
    }
    Ok(n)
}

/// The pid of the recorder holding a store's lock, from what the lock says
/// of its holder (`pid N, record`); `None` for anything else (no holder,
/// `repair`, `index`).
fn recorder_pid(lock: &LockState) -> Option<u32> {
    let LockState::Held { holder: Some(h) } = lock else { return None };
    let (pid, what) = h.strip_prefix("pid ")?.split_once(", ")?;
    (what == "record").then(|| pid.parse().ok()).flatten()
}

/// The live entries of `store` while a recorder holds its lock (`lock`, as
/// probed just before), each checked as a catalog line is (paths beneath
/// the store, the stream's directory) and naming a `.part` file; a file
/// another process wrote (a recorder killed earlier) is ignored. The second
/// value has one sentence per file that could not be read or entry that was
/// rejected. Read these before the catalog (see the module documentation).
pub fn read(store: &Path, lock: &LockState) -> (Vec<Entry>, Vec<String>) {
    let (mut entries, mut warnings) = (Vec::new(), Vec::new());
    let Some(pid) = recorder_pid(lock) else { return (entries, warnings) };
    let Ok(dir) = Dir::open(store) else { return (entries, warnings) };
    let Ok(names) = dir.list("") else { return (entries, warnings) };
    for (name, kind) in names {
        let Some(stream) = stream_of(&name).filter(|_| kind == Kind::File) else { continue };
        let mut text = Vec::new();
        let read = dir.open_file(&name, Open::Read, 0).and_then(|f| f.take(MAX_LEN).read_to_end(&mut text));
        let doc = match read {
            // Replaced by its writer while it was opened: the next query sees the new one.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => {
                warnings.push(format!(
                    "{}: {e}; packets of files still being written are left out",
                    dir.display(&name).display()
                ));
                continue;
            }
            Ok(_) => serde_json::from_slice::<Doc>(&text),
        };
        let doc = match doc {
            Ok(d) if d.pid == pid => d,
            // Another recorder's, killed before this one started (which removes them).
            Ok(_) => continue,
            Err(e) => {
                warnings.push(format!("{} is damaged ({e}); its files are left out", dir.display(&name).display()));
                continue;
            }
        };
        for e in doc.files {
            let part = e.file.ends_with(crate::layout::PART) && e.stream == stream;
            match check_entry(&e) {
                Ok(()) if part => entries.push(e),
                Ok(()) => warnings
                    .push(format!("{name}: \"{}\" is not a file of stream {stream} being written; left out", e.file)),
                Err(why) => warnings.push(format!("{name}: rejected: {why}")),
            }
        }
    }
    (entries, warnings)
}

/// The entries of `live` whose files `catalog` does not have yet (by final name).
pub fn uncatalogued(catalog: &[Entry], live: Vec<Entry>) -> Vec<Entry> {
    if live.is_empty() {
        return live;
    }
    let known: std::collections::HashSet<&str> = catalog.iter().map(|e| e.file.as_str()).collect();
    live.into_iter().filter(|e| !known.contains(final_name(&e.file))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lock::StoreLock;
    use wv_wire::Format;

    fn tmp(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("wv-live-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn entry(file: &str, packets: u64) -> Entry {
        Entry {
            stream: 0,
            file: file.into(),
            index: None,
            format: Some(Format::Pcap),
            linktype: 1,
            snaplen: 65535,
            first_ns: 1,
            last_ns: 2,
            packets,
            bytes: 24 + 76 * packets,
            timestamps: None,
            path: None,
        }
    }

    /// Written by a recorder that holds the lock: read back as set, a file
    /// taken out is gone from the next version, entries the catalog has are
    /// dropped, and the file goes with its writer. Without the lock, or with
    /// another process's pid in it, nothing is read.
    #[test]
    fn a_live_file_is_read_only_while_its_recorder_holds_the_lock() {
        let dir = tmp("read");
        let store = &dir;
        let live = LiveFiles::create(store, 0).unwrap();
        live.set(entry("stream-000/a.pcap.part", 3));
        live.set(entry("stream-000/b.pcap.part", 1));
        live.set(entry("stream-000/a.pcap.part", 5));
        live.publish().unwrap();
        assert!(!live.dirty());
        // Nobody holds the lock: a leftover, not read.
        assert_eq!(read(store, &crate::lock::state(store).unwrap()).0, vec![]);
        let held = StoreLock::exclusive(store, "record").unwrap();
        let (got, warnings) = read(store, &crate::lock::state(store).unwrap());
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(got, vec![entry("stream-000/a.pcap.part", 5), entry("stream-000/b.pcap.part", 1)]);
        let catalog = vec![entry("stream-000/a.pcap", 5)];
        assert_eq!(uncatalogued(&catalog, got), vec![entry("stream-000/b.pcap.part", 1)]);
        live.remove("stream-000/b.pcap");
        live.publish().unwrap();
        assert_eq!(read(store, &crate::lock::state(store).unwrap()).0, vec![entry("stream-000/a.pcap.part", 5)]);
        // Another process's file (a recorder killed before this one): ignored.
        std::fs::write(store.join("live-001.json"), br#"{"pid":1,"files":[]}"#).unwrap();
        drop(held);
        let _repair = StoreLock::exclusive(store, "repair").unwrap();
        assert_eq!(read(store, &crate::lock::state(store).unwrap()).0, vec![]);
        drop(live);
        assert!(!store.join("live-000.json").exists());
        assert_eq!(remove_stale(&Dir::open(store).unwrap()).unwrap(), 1);
        std::fs::remove_dir_all(store).unwrap();
    }

    /// Entries that could leave the store, or name no file being written of
    /// the file's own stream, are rejected with a sentence.
    #[test]
    fn hostile_live_entries_are_rejected() {
        let dir = tmp("hostile");
        let store = &dir;
        let _held = StoreLock::exclusive(store, "record").unwrap();
        let files =
            [entry("stream-000/../../etc/x.part", 1), entry("stream-000/a.pcap", 1), entry("stream-001/b.part", 1)];
        let doc = Doc { pid: std::process::id(), files: files.to_vec() };
        std::fs::write(store.join("live-000.json"), serde_json::to_vec(&doc).unwrap()).unwrap();
        std::fs::write(store.join("live-002.json"), b"{\"pid\":").unwrap();
        let (got, warnings) = read(store, &crate::lock::state(store).unwrap());
        assert_eq!(got, vec![]);
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(is_live_name("live-000.json.new") && !is_live_name("live-0.json") && !is_live_name("catalog.jsonl"));
        std::fs::remove_dir_all(store).unwrap();
    }
}
