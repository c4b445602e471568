//! The store's catalog: one JSON line per closed capture file, so a query
//! can skip files outside its time range without opening them. The
//! retention that keeps the store inside its byte budget by deleting
//! cataloged files is [`crate::retention`]'s.
//!
//! All writer threads share one [`Catalog`]; appends and deletions happen
//! under its lock, so the file on disk and the in-memory list agree.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use wv_sys::fs::{Dir, Kind, Open};
use wv_wire::Format;

pub use crate::retention::{Budget, Deleted, LiveBudget, OnFull, Uncataloged};

/// One closed capture file. Paths are relative to the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub stream: usize,
    pub file: String,
    pub index: Option<String>,
    /// Written as its name; `""` (and, read back, any name wirevault does
    /// not know) is `None`: not known yet.
    #[serde(with = "format_name")]
    pub format: Option<Format>,
    pub linktype: u32,
    pub snaplen: u32,
    pub first_ns: u64,
    pub last_ns: u64,
    pub packets: u64,
    pub bytes: u64,
    /// Where the packets' timestamps came from. Added after the first
    /// catalogs: absent in older lines (and not written when unknown), so
    /// old catalogs read as before and old readers skip it (unknown keys
    /// are ignored); a name this version does not know reads as unknown.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "stamps_name")]
    pub timestamps: Option<Stamps>,
    /// How the file was written: `"copy"` (frames copied into the arena)
    /// or `"zero-copy"` (the kernel's ring blocks written in place,
    /// `record --zero-copy`). Optional both ways, as `timestamps`.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "path_name")]
    pub path: Option<WritePath>,
}

impl Entry {
    /// True for a file a recorder wrote (beneath `stream-NNN/`, or on an
    /// extra volume, `@k/...`), which does not change once closed; false
    /// for a capture of a directory `wirevault index` catalogued.
    pub fn recorded(&self) -> bool {
        self.file.starts_with("stream-") || self.file.starts_with('@')
    }
}

/// How a file was written (the catalog's `path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePath {
    /// Frames copied from the kernel's ring into the arena, written from there.
    Copy,
    /// The kernel's ring blocks rewritten into pcapng in place and written as they are.
    ZeroCopy,
}

impl WritePath {
    /// The catalog's name of it.
    pub fn name(self) -> &'static str {
        match self {
            WritePath::Copy => "copy",
            WritePath::ZeroCopy => "zero-copy",
        }
    }

    /// The value named `name`, if this version knows it.
    pub fn from_name(name: &str) -> Option<WritePath> {
        [WritePath::Copy, WritePath::ZeroCopy].into_iter().find(|s| s.name() == name)
    }

    /// What the zero-copy writer puts at the start of the body of the
    /// local-use block that fills each file's first page, so that `repair`
    /// can tell from the file itself how it was written: `ZeroCopy`, or
    /// `Copy` once the kernel refused writes from the ring (see
    /// [`crate::recover::ValidPrefix::path`]). Readers skip the block.
    pub fn mark(self) -> &'static [u8] {
        match self {
            WritePath::Copy => b"wirevault path: copy\n",
            WritePath::ZeroCopy => b"wirevault path: zero-copy\n",
        }
    }

    /// The longest [`WritePath::mark`].
    pub const MARK_MAX: usize = 26;

    /// The value whose mark `body` starts with.
    pub fn from_mark(body: &[u8]) -> Option<WritePath> {
        [WritePath::Copy, WritePath::ZeroCopy].into_iter().find(|s| body.starts_with(s.mark()))
    }
}

/// The catalog's `path` value: a [`WritePath`]'s name.
mod path_name {
    use super::WritePath;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<WritePath>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.map_or("", WritePath::name))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<WritePath>, D::Error> {
        Ok(WritePath::from_name(&String::deserialize(d)?))
    }
}

/// The source of a file's timestamps (the catalog's `timestamps`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stamps {
    /// The kernel's clock when the packet arrived (live capture, the generator).
    Software,
    /// The NIC's clock (`record --timestamps hw`): frames the NIC did not
    /// stamp carry the kernel's stamp; `stats.json` counts both.
    Hardware,
    /// Copied from the files `record --read` read.
    File,
}

impl Stamps {
    /// The catalog's name of it.
    pub fn name(self) -> &'static str {
        match self {
            Stamps::Software => "software",
            Stamps::Hardware => "hardware",
            Stamps::File => "file",
        }
    }

    /// The value named `name`, if this version knows it.
    pub fn from_name(name: &str) -> Option<Stamps> {
        [Stamps::Software, Stamps::Hardware, Stamps::File].into_iter().find(|s| s.name() == name)
    }
}

/// The catalog's `timestamps` value: a [`Stamps`]'s name.
mod stamps_name {
    use super::Stamps;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<Stamps>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.map_or("", Stamps::name))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Stamps>, D::Error> {
        Ok(Stamps::from_name(&String::deserialize(d)?))
    }
}

/// The catalog's `format` value: a [`Format`]'s name, or `""`.
mod format_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use wv_wire::Format;

    pub fn serialize<S: Serializer>(f: &Option<Format>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(f.map_or("", Format::name))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Format>, D::Error> {
        Ok(Format::from_name(&String::deserialize(d)?))
    }
}

pub(crate) struct Inner {
    pub(crate) file: File,
    /// Bytes of disk reserved for the catalog file (appends below this need no new block).
    pub(crate) reserved: u64,
    /// Entries with their on-disk size (capture + index), in catalog order.
    pub(crate) entries: Vec<(Entry, u64)>,
    pub(crate) total: u64,
    /// Bytes of closed files not cataloged yet ([`Uncataloged`]).
    pub(crate) pending: u64,
    /// The files this catalog appended (those of the running recording).
    pub(crate) own: std::collections::HashSet<String>,
    /// Bytes written beside files whose line is not appended yet ([`Catalog::beside`]): the
    /// index thread appends it after the writer closed the file.
    pub(crate) early: std::collections::HashMap<String, u64>,
    /// The latest of this catalog's own files retention deleted, oldest first (at most
    /// [`GONE_KEPT`]): what is written beside them afterwards has nothing to go with.
    pub(crate) gone: std::collections::VecDeque<String>,
}

/// How many deleted files [`Inner::gone`] remembers: more than can be closed and deleted
/// while one file's flow records are written.
pub(crate) const GONE_KEPT: usize = 1024;

/// Appends entries to `STORE/catalog.jsonl` and enforces the budget.
pub struct Catalog {
    pub(crate) dir: Dir,
    /// The store's volumes, which the entries' files are resolved through.
    pub(crate) vols: crate::volume::Volumes,
    path: PathBuf,
    inner: Mutex<Inner>,
}

/// Bytes a catalog entry occupies on disk: the capture file, its index and (`flows`) its flow
/// records (`flows/`), which retention deletes with it. A recording counts the flow records
/// it writes as it writes them ([`Catalog::beside`]).
fn disk_size(dir: &crate::volume::Volumes, e: &Entry, flows: bool) -> u64 {
    let len = |rel: &str| dir.lstat(rel).ok().filter(|s| s.kind == Kind::File).map_or(0, |s| s.len);
    let flows = if flows { len(&crate::layout::flows_rel(&e.file)) } else { 0 };
    let idx = e.index.as_deref().map_or(0, len).saturating_add(flows);
    // The file's real size where it can be seen: a damaged line's `bytes`
    // (u64::MAX) must not make retention delete everything, or nothing.
    let bytes = dir.lstat(&e.file).ok().filter(|s| s.kind == Kind::File).map_or(e.bytes.min(1 << 50), |s| s.len);
    // A damaged line may say anything (u64::MAX): sums saturate.
    bytes.saturating_add(idx)
}

/// Opens the catalog for appending (created 0640 if missing), no symlink followed.
pub(crate) fn open_append(dir: &Dir) -> io::Result<File> {
    dir.open_file(crate::layout::CATALOG, Open::Create { truncate: false, append: true }, 0)
}

impl Catalog {
    /// Opens (creating) the catalog of `store` for appending, loading what it holds.
    pub fn open(store: &Path) -> io::Result<Catalog> {
        let path = store.join(crate::layout::CATALOG);
        let dir = Dir::open(store)?;
        let vols = crate::volume::Volumes::open(store)?;
        let (entries, _) = read(store)?;
        let file = open_append(&dir)?;
        let entries: Vec<(Entry, u64)> =
            entries.into_iter().map(|e| (disk_size(&vols, &e, true), e)).map(|(s, e)| (e, s)).collect();
        let total = entries.iter().fold(0u64, |t, (_, s)| t.saturating_add(*s));
        let mut inner = Inner {
            file,
            reserved: 0,
            entries,
            total,
            pending: 0,
            own: Default::default(),
            early: Default::default(),
            gone: Default::default(),
        };
        reserve_ahead(&mut inner);
        Ok(Catalog { dir, vols, path, inner: Mutex::new(inner) })
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends one entry and makes it durable.
    pub fn append(&self, e: &Entry) -> io::Result<()> {
        let mut line = serde_json::to_vec(e).map_err(io::Error::other)?;
        line.push(b'\n');
        let size = disk_size(&self.vols, e, false);
        let mut g = self.lock();
        // Its flow records count once, through `beside`: those written before this line waited.
        let size = size.saturating_add(g.early.remove(&e.file).unwrap_or(0));
        g.file.write_all(&line)?;
        g.file.sync_data()?;
        g.entries.push((e.clone(), size));
        g.own.insert(e.file.clone());
        g.total = g.total.saturating_add(size);
        reserve_ahead(&mut g);
        Ok(())
    }

    /// Counts `bytes` written beside `file` (its flow records) against the budget, as part of
    /// the file: retention frees them with it. Before the file's line is appended they wait
    /// for it. `false` when retention already deleted the file: what was written beside it
    /// should go too.
    pub fn beside(&self, file: &str, bytes: u64) -> bool {
        let mut g = self.lock();
        // The file closed moments ago: its line is among the last.
        if let Some((_, size)) = g.entries.iter_mut().rev().find(|(e, _)| e.file == file) {
            *size = size.saturating_add(bytes);
            g.total = g.total.saturating_add(bytes);
            return true;
        }
        if g.gone.iter().any(|f| f == file) {
            return false;
        }
        *g.early.entry(file.to_string()).or_default() += bytes;
        true
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

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Keeps at least 64 KiB (a few hundred entries) of disk reserved past the
/// end of the catalog, so that the files closed when the disk fills up can
/// still be cataloged. Best effort: not every file system can preallocate.
pub(crate) fn reserve_ahead(g: &mut Inner) {
    const STEP: u64 = 1 << 20;
    let len = g.file.metadata().map_or(0, |m| m.len());
    if len + (64 << 10) > g.reserved {
        let to = (len + STEP).next_multiple_of(STEP);
        if wv_sys::fs::fallocate_keep_size(&g.file, 0, to).is_ok() {
            g.reserved = to;
        }
    }
}

/// What reading a catalog found besides its valid entries.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CatalogRead {
    /// Valid entries, in catalog order, each file once.
    pub entries: Vec<Entry>,
    /// 1-based numbers of damaged lines (not JSON of an entry: a crash
    /// mid-append, a truncated or edited line).
    pub bad_lines: Vec<usize>,
    /// One sentence per entry rejected because a path in it could leave the
    /// store or does not follow the store layout.
    pub rejected: Vec<String>,
    /// One sentence per line naming a file an earlier line already named.
    pub duplicates: Vec<String>,
}

impl CatalogRead {
    /// Sentences for everything that was wrong, for readers to print as warnings.
    pub fn warnings(&self) -> Vec<String> {
        let mut w: Vec<String> = self
            .bad_lines
            .iter()
            .map(|n| format!("{}: line {n} is damaged and was skipped; run `wirevault repair`", crate::layout::CATALOG))
            .collect();
        w.extend(self.rejected.iter().cloned());
        w.extend(self.duplicates.iter().cloned());
        w
    }
}

/// Checks the paths of a catalog entry: `file` is relative, made of plain
/// names (no `..`, no absolute path); in a recorded store it is
/// `stream-NNN/NAME` with NNN the entry's stream (catalogs that `index`
/// wrote for a plain directory of captures may name other relative paths);
/// `index` is absent or `FILE.idx`.
pub fn check_entry(e: &Entry) -> Result<(), String> {
    wv_sys::fs::check_rel(&e.file).map_err(|err| format!("file {err}"))?;

    // `@k/stream-NNN/NAME`: on extra volume k (see crate::volume).
    let (vol, file) = crate::volume::split(&e.file).map_err(|err| format!("file {err}"))?;
    let first = file.split('/').next().unwrap_or("");
    let is_stream_dir = first.strip_prefix("stream-").and_then(|n| n.parse::<usize>().ok()).is_some();
    if is_stream_dir || vol > 0 {
        let want = crate::layout::stream_dir(e.stream);
        match file.split_once('/') {
            Some((d, name)) if d == want && !name.contains('/') => {}
            _ => return Err(format!("file \"{}\" is not {want}/NAME for stream {}", e.file, e.stream)),
        }
    }
    if let Some(ix) = &e.index {
        let want = crate::layout::index_rel(&e.file);
        if *ix != want {
            return Err(format!("index \"{ix}\" is not \"{want}\""));
        }
    }
    Ok(())
}

/// The stream a store-relative path belongs to: NNN for `stream-NNN/...`,
/// else 0 (for catalogs `index` writes over a plain directory).
pub fn stream_of_path(rel: &str) -> usize {
    let rel = crate::volume::split(rel).map_or(rel, |(_, r)| r);
    rel.split_once('/')
        .and_then(|(d, _)| {
            d.strip_prefix("stream-")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|n| crate::layout::stream_dir(*n) == d)
        })
        .unwrap_or(0)
}

/// Parses catalog bytes: valid entries, damaged lines, rejected entries and
/// duplicates (see [`CatalogRead`]). Never fails: the fuzz target's entry.
pub fn parse(bytes: &[u8]) -> CatalogRead {
    let mut r = CatalogRead::default();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (i, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let n = i + 1;
        match serde_json::from_slice::<Entry>(line) {
            Ok(mut e) => {
                // Every reader takes [first_ns, last_ns] as a range. Older
                // versions wrote the first and last record's times, which go
                // the other way when records are out of order (or a line was
                // edited): the two are swapped, and `repair` puts the index's
                // true range in.
                if e.first_ns > e.last_ns {
                    std::mem::swap(&mut e.first_ns, &mut e.last_ns);
                }
                if let Err(why) = check_entry(&e) {
                    r.rejected.push(format!("{}: line {n} rejected: {why}", crate::layout::CATALOG));
                } else if let Some(first) = seen.get(&e.file) {
                    r.duplicates.push(format!(
                        "{}: line {n} names {} twice (first on line {first}); duplicate ignored",
                        crate::layout::CATALOG,
                        e.file
                    ));
                } else {
                    seen.insert(e.file.clone(), n);
                    r.entries.push(e);
                }
            }
            Err(_) => r.bad_lines.push(n),
        }
    }
    r
}

/// Reads and checks the catalog of `store` (see [`parse`]). A missing
/// catalog is empty; a symlinked one is an error (never followed).
pub fn read_checked(store: &Path) -> io::Result<CatalogRead> {
    use std::io::Read;
    let dir = Dir::open(store)?;
    let mut f = match dir.open_file(crate::layout::CATALOG, Open::Read, 0) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(CatalogRead::default()),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(io::Error::new(
                e.kind(),
                format!("{} is a symlink, not the store's catalog", crate::layout::CATALOG),
            ))
        }
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(parse(&bytes))
}

/// Reads the valid entries of the catalog of `store` (see [`read_checked`]);
/// the second value lists the damaged lines (1-based). Rejected and
/// duplicated entries are left out.
pub fn read(store: &Path) -> io::Result<(Vec<Entry>, Vec<usize>)> {
    let r = read_checked(store)?;
    Ok((r.entries, r.bad_lines))
}

/// Is `name` a capture file name of the store layout (also `.part`)?
pub fn is_capture_name(name: &str) -> bool {
    let stem = name.strip_suffix(crate::layout::PART).unwrap_or(name);
    (stem.ends_with(".pcap") || stem.ends_with(".pcapng")) && crate::layout::seq_of(stem).is_some()
}

/// Compares the catalog with the stream directories: entries whose file
/// is missing (or not a regular file), and closed capture files no entry
/// names. One sentence each, for readers to print as warnings. With
/// `locked` (a recorder holds the store's lock) a missing file (deleted by
/// its retention) and a closed file not yet catalogued (renamed, its line
/// not yet appended) are in flight, not damage: they are not reported.
pub fn audit(store: &Path, entries: &[Entry], locked: bool) -> Vec<String> {
    let mut w = Vec::new();
    let Ok(dir) = crate::volume::Volumes::open(store) else { return w };
    // A volume that cannot be read (not mounted, swapped) is said once, with
    // what to do and how many catalogued files it holds: its files are not
    // missing (repair keeps their entries), so each is not said again.
    for (id, why) in dir.unusable() {
        let n = entries.iter().filter(|e| crate::volume::split(&e.file).is_ok_and(|(k, _)| k == id)).count();
        match n {
            0 => w.push(why.to_string()),
            n => w.push(format!("{why}; its {n} catalogued file(s) are left out")),
        }
    }
    for e in entries.iter().filter(|e| !dir.unreadable_volume(&e.file)) {
        match dir.lstat(&e.file) {
            Ok(s) if s.kind == Kind::File => {}
            Ok(_) => w.push(format!("{} is not a regular file; skipped (run `wirevault repair`)", e.file)),
            Err(err) if locked && err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => w.push(unreachable_entry(&e.file, &err)),
        }
    }
    if locked {
        return w;
    }
    let known: std::collections::HashSet<&str> = entries.iter().map(|e| e.file.as_str()).collect();
    for (_, d) in dir.stream_dirs().0 {
        for (name, kind) in dir.list(&d).unwrap_or_default() {
            let rel = format!("{d}/{name}");
            if kind == Kind::File
                && is_capture_name(&name)
                && !name.ends_with(crate::layout::PART)
                && !known.contains(rel.as_str())
            {
                w.push(format!("{rel} is not in the catalog (not queried); run `wirevault repair`"));
            }
        }
    }
    w
}

/// The warning for a catalogued file that cannot be looked at: missing
/// (repair drops its entry), or there but not readable (permissions, I/O:
/// the cause, since a repair would not help).
fn unreachable_entry(file: &str, err: &io::Error) -> String {
    if err.kind() == io::ErrorKind::NotFound {
        format!("the catalog names {file}, which is missing; run `wirevault repair`")
    } else {
        format!("the catalog names {file}, which cannot be read: {err}; skipped (check the store's permissions)")
    }
}

/// Replaces the catalog of `store` with `entries`, atomically (write, fsync, rename).
pub fn rewrite(store: &Path, entries: &[Entry]) -> io::Result<()> {
    rewrite_in(&Dir::open(store)?, entries)
}

/// [`rewrite`] through the store's directory: the temporary file is created
/// new (0640, no symlink followed) and renamed over the catalog.
pub fn rewrite_in(dir: &Dir, entries: &[Entry]) -> io::Result<()> {
    let mut buf = Vec::new();
    for e in entries {
        serde_json::to_writer(&mut buf, e).map_err(io::Error::other)?;
        buf.push(b'\n');
    }
    dir.replace(crate::layout::CATALOG, |f| f.write_all(&buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;

    #[test]
    fn an_unreadable_entry_is_not_called_missing() {
        let gone = unreachable_entry("stream-000/a.pcap", &io::Error::from(io::ErrorKind::NotFound));
        assert!(gone.contains("which is missing"), "{gone}");
        let denied = unreachable_entry("stream-000/a.pcap", &io::Error::from_raw_os_error(libc::EACCES));
        assert!(denied.contains("cannot be read") && denied.contains("ermission denied"), "{denied}");
        assert!(!denied.contains("missing") && !denied.contains("repair"), "{denied}");
    }

    /// The catalog line is the entry's one layout (serde both ways): a line
    /// as DESIGN.md gives it parses, and emits back byte for byte.
    #[test]
    fn entry_line_parse_emit_round_trip() {
        let line = r#"{"stream":1,"file":"stream-001/20261122T101500.123456789Z-000001.pcapng","index":"stream-001/20261122T101500.123456789Z-000001.pcapng.idx","format":"pcapng","linktype":1,"snaplen":262144,"first_ns":1795342500123456789,"last_ns":1795342501000000000,"packets":42,"bytes":4096}"#;
        let e: Entry = serde_json::from_str(line).unwrap();
        assert_eq!(e.format, Some(Format::Pcapng));
        assert_eq!(e.index.as_deref(), Some(crate::layout::index_rel(&e.file).as_str()));
        assert_eq!(serde_json::to_string(&e).unwrap(), line);
        let back: Entry = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
        // Unindexed, format not known yet (a plain directory being indexed).
        let none = Entry { index: None, format: None, ..e };
        let text = serde_json::to_string(&none).unwrap();
        assert!(text.contains(r#""index":null,"format":"","#), "{text}");
        assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), none);
    }

    /// The `timestamps` key is optional both ways: a line without it (every
    /// catalog before it existed) reads as unknown and is written back
    /// byte for byte; a known source round-trips; an unknown name is unknown,
    /// not a damaged line.
    #[test]
    fn path_key_is_backward_compatible() {
        let old = r#"{"stream":0,"file":"stream-000/a.pcapng","index":null,"format":"pcapng","linktype":1,"snaplen":65535,"first_ns":1,"last_ns":2,"packets":3,"bytes":4}"#;
        let e: Entry = serde_json::from_str(old).unwrap();
        assert_eq!(e.path, None);
        assert_eq!(serde_json::to_string(&e).unwrap(), old);
        for p in [WritePath::Copy, WritePath::ZeroCopy] {
            let with = Entry { path: Some(p), ..e.clone() };
            let text = serde_json::to_string(&with).unwrap();
            assert!(text.ends_with(&format!(r#","bytes":4,"path":"{}"}}"#, p.name())), "{text}");
            assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), with);
        }
        let future = old.replace(r#""bytes":4}"#, r#""bytes":4,"path":"teleport"}"#);
        assert_eq!(serde_json::from_str::<Entry>(&future).unwrap().path, None);
    }

    #[test]
    fn timestamps_key_is_backward_compatible() {
        let old = r#"{"stream":0,"file":"stream-000/a.pcap","index":null,"format":"pcap","linktype":1,"snaplen":65535,"first_ns":1,"last_ns":2,"packets":3,"bytes":4}"#;
        let e: Entry = serde_json::from_str(old).unwrap();
        assert_eq!(e.timestamps, None);
        assert_eq!(serde_json::to_string(&e).unwrap(), old);
        for s in [Stamps::Software, Stamps::Hardware, Stamps::File] {
            let with = Entry { timestamps: Some(s), ..e.clone() };
            let text = serde_json::to_string(&with).unwrap();
            assert!(text.ends_with(&format!(r#","bytes":4,"timestamps":"{}"}}"#, s.name())), "{text}");
            assert_eq!(serde_json::from_str::<Entry>(&text).unwrap(), with);
        }
        let future = old.replace(r#""bytes":4}"#, r#""bytes":4,"timestamps":"atomic","later":1}"#);
        let r = parse(future.as_bytes());
        assert_eq!((r.entries.len(), r.bad_lines.len()), (1, 0));
        assert_eq!(r.entries[0].timestamps, None);
    }

    fn entry(n: u64, dir: &Path) -> Entry {
        let name = format!("stream-000/f{n}.pcap");
        std::fs::create_dir_all(dir.join("stream-000")).unwrap();
        std::fs::write(dir.join(&name), vec![0u8; 1000]).unwrap();
        Entry {
            stream: 0,
            file: name,
            index: None,
            format: Some(Format::Pcap),
            linktype: 1,
            snaplen: 262_144,
            first_ns: n,
            last_ns: n + 1,
            packets: 3,
            bytes: 1000,
            timestamps: None,
            path: None,
        }
    }

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("wv-cat-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn hostile_lines_are_rejected_and_duplicates_dropped() {
        let line = |stream: usize, file: &str, index: &str| {
            format!("{{\"stream\":{stream},\"file\":\"{file}\",\"index\":{index},\"format\":\"pcap\",\"linktype\":1,\"snaplen\":65535,\"first_ns\":1,\"last_ns\":2,\"packets\":3,\"bytes\":4}}\n")
        };
        let mut text = String::new();
        text += &line(0, "stream-000/a.pcap", "\"stream-000/a.pcap.idx\"");
        text += &line(0, "stream-000/../../victim.pcap", "null");
        text += &line(0, "/etc/shadow", "null");
        text += &line(1, "stream-000/b.pcap", "null");
        text += &line(0, "stream-000/c.pcap", "\"../x.idx\"");
        text += &line(0, "stream-000/a.pcap", "null");
        text += "{\"stream\":0,\"fi\n";
        text += &line(0, "plain/dir/x.pcap", "null");
        // Its times the other way: swapped into a range.
        text += &line(0, "stream-000/d.pcap", "null")
            .replace("\"first_ns\":1,\"last_ns\":2", "\"first_ns\":2,\"last_ns\":1");
        let r = parse(text.as_bytes());
        let files: Vec<&str> = r.entries.iter().map(|e| e.file.as_str()).collect();
        assert_eq!(files, ["stream-000/a.pcap", "plain/dir/x.pcap", "stream-000/d.pcap"]);
        assert_eq!((r.entries[2].first_ns, r.entries[2].last_ns), (1, 2));
        assert_eq!(r.rejected.len(), 4, "{:?}", r.rejected);
        assert_eq!(r.duplicates.len(), 1);
        assert_eq!(r.bad_lines, vec![7]);
        assert_eq!(r.warnings().len(), 6);
        assert_eq!(stream_of_path("stream-002/x.pcap"), 2);
        assert_eq!(stream_of_path("x.pcap"), 0);
    }

    /// A file's flow records count with it, written after its line (`beside`) or found when the
    /// catalog opens; retention frees them with it.
    #[test]
    fn flow_files_count_with_their_file() {
        let dir = tmp("beside");
        let c = Catalog::open(&dir).unwrap();
        let (e1, e2) = (entry(1, &dir), entry(2, &dir));
        c.append(&e1).unwrap();
        c.append(&e2).unwrap();
        assert_eq!(c.usage(), 2000);
        for e in [&e1, &e2] {
            std::fs::create_dir_all(dir.join("flows/stream-000")).unwrap();
            std::fs::write(dir.join(crate::layout::flows_rel(&e.file)), vec![0u8; 300]).unwrap();
        }
        assert!(c.beside(&e1.file, 300) && c.beside(&e2.file, 300));
        assert_eq!(c.usage(), 2600);
        assert_eq!(Catalog::open(&dir).unwrap().usage(), 2600, "found again when the catalog opens");
        let budget = crate::catalog::Budget { max_bytes: 2000, on_full: crate::catalog::OnFull::DeleteOldest };
        let d = c.make_room(&budget, 500).unwrap();
        assert_eq!((d.files, d.bytes), (1, 1300));
        assert!(!dir.join(crate::layout::flows_rel(&e1.file)).exists());
        assert_eq!(c.usage(), 1300);
        assert!(!c.beside(&e1.file, 300), "deleted: what is written beside it goes too");
        // Written before the file's line (the index thread appends it later): counted then.
        let e3 = entry(3, &dir);
        assert!(c.beside(&e3.file, 200));
        assert_eq!(c.usage(), 1300);
        c.append(&e3).unwrap();
        assert_eq!(c.usage(), 2500);
        std::fs::remove_dir_all(&dir).unwrap();
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
        // This catalog appended them: the recording's own files.
        assert_eq!(d, Deleted { files: 2, bytes: 2000, own_files: 2, own_last_ns: 3 });
        assert!(!dir.join("stream-000/f1.pcap").exists() && !dir.join("stream-000/f2.pcap").exists());
        assert!(dir.join("stream-000/f3.pcap").exists());
        c.append(&entry(5, &dir)).unwrap();
        let again = Catalog::open(&dir).unwrap();
        let firsts: Vec<u64> = read(&dir).unwrap().0.iter().map(|e| e.first_ns).collect();
        assert_eq!(firsts, vec![3, 4, 5]);
        assert_eq!(again.usage(), 3000);
        let stop = Budget { max_bytes: 3500, on_full: OnFull::Stop };
        assert!(again.make_room(&stop, 1000).is_err());
        // Files of an earlier run are not this one's.
        let d = again.make_room(&Budget { max_bytes: 2500, on_full: OnFull::DeleteOldest }, 1000).unwrap();
        assert_eq!(d, Deleted { files: 2, bytes: 2000, ..Deleted::default() });
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_volume_deletes_its_oldest_only_when_that_makes_room() {
        let dir = tmp("vol-room");
        let c = Catalog::open(&dir).unwrap();
        for n in [3, 1, 2, 4] {
            c.append(&entry(n, &dir)).unwrap();
        }
        // All four files and the free space would not hold the next file:
        // nothing is deleted (the volume is taken out instead).
        assert_eq!(c.make_room_on(0, 500, 10_000).unwrap(), Deleted::default());
        assert_eq!(c.len(), 4);
        // Two of them make the room.
        assert_eq!(
            c.make_room_on(0, 500, 2000).unwrap(),
            Deleted { files: 2, bytes: 2000, own_files: 2, own_last_ns: 3 }
        );
        let firsts: Vec<u64> = read(&dir).unwrap().0.iter().map(|e| e.first_ns).collect();
        assert_eq!(firsts, vec![3, 4]);
        // Another volume's files are not this one's.
        assert_eq!(c.make_room_on(1, 0, 1).unwrap(), Deleted::default());
        assert_eq!(c.usage(), 2000);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
