//! Per-file packet indexes: built while recording (or afterwards from
//! existing captures) and read by queries.
//!
//! * [`Builder`] is fed every record of one capture file and writes
//!   `NAME.idx` when the file closes; see [`format`](mod@format) for the file layout.
//! * [`IndexReader`] opens an index: block table (time → offset) and
//!   posting lists (IPv4, IPv6, port, IP protocol, VLAN → blocks).
//! * [`index_file`] indexes an existing pcap/pcapng file; [`index_path`]
//!   a file, a plain directory of captures (creating a catalog) or a store.
//! * [`catalog`] reads and rewrites a store's `catalog.jsonl`.
#![deny(unsafe_code)]

mod builder;
pub mod catalog;
pub mod format;
pub mod ident;
mod reader;

pub use builder::{Builder, IndexSummary, Offload, Work, DEFAULT_BLOCK_PACKETS, DEFAULT_RUN_PAIRS};
pub use format::KeyClass;
pub use reader::{BlockInfo, IndexReader};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use wv_wire::reader::{ReadError, Reader};

/// Why an index could not be built or read.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum IndexError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a usable index: {what}; `wirevault index` rebuilds it", path.display())]
    Corrupt { path: PathBuf, what: &'static str },
    #[error("{} has index format version {version} and this wirevault reads version {}; run `wirevault index` (or `wirevault repair` on a store) to rebuild it", path.display(), format::VERSION)]
    Version { path: PathBuf, version: u32 },
    #[error("{} is not used: {what}; run `wirevault index` to index it again", path.display())]
    Stale { path: PathBuf, what: &'static str },
    #[error("interrupted")]
    Interrupted,
    #[error("an index section is larger than 4 GiB")]
    TooLarge,
    #[error("cannot read capture file {}: {source}", path.display())]
    Capture {
        path: PathBuf,
        #[source]
        source: ReadError,
    },
    #[error("catalog {}: line {line}: {problem}", path.display())]
    Catalog { path: PathBuf, line: usize, problem: String },
}

/// The result of indexing one existing capture file.
#[derive(Debug, Clone)]
pub struct FileIndexed {
    pub index_path: PathBuf,
    pub summary: IndexSummary,
    pub format: wv_wire::Format,
    pub snaplen: u32,
    /// Size of the capture file.
    pub bytes: u64,
    /// The error that ended reading early, if any (the index covers the
    /// packets before it, as `tcpdump -r` would have printed them).
    pub truncated: Option<String>,
}

/// The index path of a capture file: `FILE.idx` (the store's one rule,
/// [`wv_store::layout::index_path`]).
pub use wv_store::layout::index_path as index_path_for;

/// How [`index_file_opts`] and [`index_path_opts`] work.
#[derive(Debug, Clone, Copy)]
pub struct IndexOptions<'a> {
    /// Packets per block (tests use 1 to make every packet its own block).
    pub block_packets: u32,
    /// Refuse a capture that is a symbolic link (inside a directory or store).
    pub nofollow: bool,
    /// Set (by a signal handler) to stop: the file being indexed is given
    /// up before its index is written, and [`IndexError::Interrupted`] returned.
    pub cancel: Option<&'a AtomicBool>,
}

impl Default for IndexOptions<'_> {
    fn default() -> Self {
        IndexOptions { block_packets: DEFAULT_BLOCK_PACKETS, nofollow: false, cancel: None }
    }
}

impl IndexOptions<'_> {
    fn cancelled(&self) -> bool {
        self.cancel.is_some_and(|c| c.load(Ordering::Relaxed))
    }
}

/// Builds `FILE.idx` for an existing pcap or pcapng file. A read error in
/// the middle of the file (a truncated or malformed record) ends the index
/// there, like tcpdump stops there; it is reported in
/// [`FileIndexed::truncated`]. An unreadable file header is an error.
pub fn index_file(capture: &Path) -> Result<FileIndexed, IndexError> {
    index_file_opts(capture, &IndexOptions::default())
}

/// [`index_file`] with `block_packets` packets per block (tests use 1 to
/// make every packet its own block).
pub fn index_file_with(capture: &Path, block_packets: u32) -> Result<FileIndexed, IndexError> {
    index_file_opts(capture, &IndexOptions { block_packets, ..IndexOptions::default() })
}

/// [`index_file`] with options. Only a regular file is read (a FIFO or a
/// device is refused without waiting on it). The index records the
/// capture's identity as it was when indexing started (a file that grows
/// meanwhile no longer matches its index, which is then not trusted).
pub fn index_file_opts(capture: &Path, opts: &IndexOptions) -> Result<FileIndexed, IndexError> {
    let file = ident::open_capture(capture, opts.nofollow)
        .map_err(|e| IndexError::Io { path: capture.to_path_buf(), source: e })?;
    let index_path = index_path_for(capture);
    index_open(file, capture, index_path.clone(), opts, |b| b.finish(&index_path))
}

/// [`index_file_opts`] of the capture `rel` beneath a store's directory
/// `dir`: the capture is opened, and its index `rel.idx` created and
/// renamed, through the directory's descriptor (no symlink followed at any
/// component: a store owned by another user cannot send the index, or the
/// read, outside it).
pub fn index_file_in(dir: &wv_sys::fs::Dir, rel: &str, opts: &IndexOptions) -> Result<FileIndexed, IndexError> {
    let shown = dir.display(rel);
    let file = ident::open_capture_in(dir, rel).map_err(|e| IndexError::Io { path: shown.clone(), source: e })?;
    let irel = wv_store::layout::index_rel(rel);
    index_open(file, &shown, dir.display(&irel), opts, |b| b.finish_in(dir, &irel))
}

fn index_open(
    file: std::fs::File,
    capture: &Path,
    index_path: PathBuf,
    opts: &IndexOptions,
    finish: impl FnOnce(Builder) -> Result<IndexSummary, IndexError>,
) -> Result<FileIndexed, IndexError> {
    let io = |e| IndexError::Io { path: capture.to_path_buf(), source: e };
    let id = ident::CaptureId::of(&file).map_err(io)?;
    let bytes = id.bytes;
    let mut reader = Reader::new(file).map_err(|e| IndexError::Capture { path: capture.to_path_buf(), source: e })?;
    let format = reader.format();
    let block_packets = opts.block_packets;
    let mut builder: Option<Builder> = None;
    let mut snaplen = 0;
    let mut truncated = None;
    loop {
        if opts.cancelled() {
            return Err(IndexError::Interrupted);
        }
        match reader.next_packet() {
            Ok(Some(p)) => {
                let b = builder.get_or_insert_with(|| {
                    snaplen = p.snaplen;
                    Builder::with_block_packets(p.linktype, block_packets)
                });
                if p.linktype == b.linktype() {
                    b.add(p.ts_ns, p.offset, p.data, p.origlen);
                } else {
                    b.add_opaque(p.ts_ns, p.offset);
                }
            }
            Ok(None) => break,
            Err(e) => {
                truncated = Some(e.to_string());
                break;
            }
        }
    }
    let mut builder = builder.unwrap_or_else(|| Builder::new(wv_wire::linktype::ETHERNET));
    builder.set_capture_id(id);
    builder.set_structure_after_packets(reader.structure_after_packets());
    let summary = finish(builder)?;
    Ok(FileIndexed { index_path, summary, format, snaplen, bytes, truncated })
}

/// Why the index `idx` of `capture` cannot be used as it is (damaged, of
/// another format version, or built from another file), or `Ok` when it
/// can; both are beneath a store's directory `dir` (no symlink followed). Returns the index's
/// packet count and time range (min, max) when it can be used.
pub fn check_index_in(dir: &wv_sys::fs::Dir, idx: &str, capture: &str) -> Result<(u64, u64, u64), IndexError> {
    let shown = dir.display(idx);
    let f = ident::open_capture_in(dir, idx).map_err(|e| IndexError::Io { path: shown.clone(), source: e })?;
    let r = IndexReader::from_file(f, &shown)?;
    r.verify()?;
    let f =
        ident::open_capture_in(dir, capture).map_err(|e| IndexError::Io { path: dir.display(capture), source: e })?;
    r.check_capture_with(&f, true)?;
    Ok((r.packets, r.first_ns, r.last_ns))
}

/// [`index_file_in`] as a store's repair calls it (`wv_store::recover::repair`'s indexer):
/// the index of one capture file beneath the store, and what it found.
pub fn index_for_repair(dir: &wv_sys::fs::Dir, capture: &str) -> std::io::Result<wv_store::recover::Indexed> {
    let fi = index_file_in(dir, capture, &Default::default()).map_err(std::io::Error::other)?;
    Ok(wv_store::recover::Indexed {
        packets: fi.summary.packets,
        first_ns: fi.summary.first_ns,
        last_ns: fi.summary.last_ns,
    })
}

/// [`check_index_in`] as a store's repair calls it: why the index `idx` of `capture` (both
/// beneath the store) cannot be used as it is, if it cannot; else what it holds.
pub fn check_for_repair(dir: &wv_sys::fs::Dir, idx: &str, capture: &str) -> Result<wv_store::recover::Indexed, String> {
    let (packets, first_ns, last_ns) = check_index_in(dir, idx, capture).map_err(|e| e.to_string())?;
    Ok(wv_store::recover::Indexed { packets, first_ns, last_ns })
}

/// What [`index_path`] did.
#[derive(Debug, Default)]
pub struct IndexReport {
    /// Files indexed now.
    pub indexed: Vec<FileIndexed>,
    /// Files that already had a usable index.
    pub already: usize,
    /// Files indexed again because their index was unusable, with the reason.
    pub rebuilt: Vec<(PathBuf, String)>,
    /// Files that could not be indexed, with the reason.
    pub failed: Vec<(PathBuf, String)>,
    /// Catalog entries of a plain directory whose file is gone (left out).
    pub gone: Vec<String>,
    /// The catalog written, if any.
    pub catalog: Option<PathBuf>,
    /// Stopped by [`IndexOptions::cancel`]: the files not reached keep what
    /// they had (a plain directory without a catalog gets none).
    pub interrupted: bool,
}

fn is_capture_name(name: &str) -> bool {
    [".pcap", ".pcapng", ".cap", ".pcap.gz"].iter().any(|s| name.ends_with(s) && !name.ends_with(".pcap.gz"))
}

fn new_entry(file: String) -> catalog::Entry {
    catalog::Entry {
        // Catalog entries under stream-NNN/ must name their stream.
        stream: wv_store::catalog::stream_of_path(&file),
        file,
        index: None,
        format: None,
        linktype: 0,
        snaplen: 0,
        first_ns: 0,
        last_ns: 0,
        packets: 0,
        bytes: 0,
        timestamps: None,
        path: None,
    }
}

/// Indexes PATH: a capture file (writes `FILE.idx`), a store (every catalog
/// entry without an index; the catalog is rewritten atomically), or a plain
/// directory of capture files (each indexed; a `catalog.jsonl` is created
/// so that the directory can be queried as a store).
pub fn index_path(path: &Path) -> Result<IndexReport, IndexError> {
    index_path_opts(path, &IndexOptions::default())
}

/// [`index_path`] with options. In a store or directory, an index that is
/// damaged, of an older format or built from another file than the one now
/// there (a same-size replacement too: see [`ident`]) is built again;
/// captures are opened without following symbolic links. A directory whose
/// catalog `index` made before (no `stream-NNN/` files) is looked at again:
/// new captures are added and entries whose file is gone are left out.
pub fn index_path_opts(path: &Path, opts: &IndexOptions) -> Result<IndexReport, IndexError> {
    let mut report = IndexReport::default();
    let meta = std::fs::metadata(path).map_err(|e| IndexError::Io { path: path.to_path_buf(), source: e })?;
    if !meta.is_dir() {
        report.indexed.push(index_file_opts(path, opts)?);
        return Ok(report);
    }
    // Every path below is taken from the directory (its catalog, its
    // listing) and resolved beneath it, following no symlink at any
    // component: the directory may belong to another user than the one
    // indexing it.
    let dir = wv_sys::fs::Dir::open(path).map_err(|e| IndexError::Io { path: path.to_path_buf(), source: e })?;
    let cat_path = path.join(catalog::CATALOG_FILE);
    let existed = std::fs::symlink_metadata(&cat_path).is_ok();
    let mut entries = if existed { catalog::read(path)? } else { Vec::new() };
    let recorded = entries.iter().any(|e| e.recorded());
    // A recorded store's files may lie on its extra volumes (`@k/...`),
    // each resolved beneath its volume.
    let vols =
        wv_store::volume::Volumes::open(path).map_err(|e| IndexError::Io { path: path.to_path_buf(), source: e })?;
    if !recorded {
        // A plain directory: every capture file under it, sorted by path;
        // entries of an earlier run whose file is gone are left out.
        let mut files = Vec::new();
        collect_captures(&dir, "", &mut files)?;
        files.sort();
        let known: std::collections::HashSet<String> = entries.iter().map(|e| e.file.clone()).collect();
        entries.retain(|e| {
            let there = files.binary_search(&e.file).is_ok();
            if !there {
                report.gone.push(e.file.clone());
            }
            there
        });
        entries.extend(files.into_iter().filter(|f| !known.contains(f)).map(new_entry));
    }
    let mut changed = !report.gone.is_empty();
    let mut keep = Vec::with_capacity(entries.len());
    let mut rest = entries.into_iter();
    for mut e in rest.by_ref() {
        if opts.cancelled() {
            report.interrupted = true;
            keep.push(e);
            break;
        }
        let capture = vols.display(&e.file);
        let (vdir, inner) = match vols.resolve(&e.file) {
            Ok((d, inner)) => (d, inner.to_string()),
            Err(err) => {
                report.failed.push((capture, err.to_string()));
                keep.push(e);
                continue;
            }
        };
        if e.index.is_some() {
            match check_index_in(vdir, &wv_store::layout::index_rel(&inner), &inner) {
                Ok((packets, first_ns, last_ns)) => {
                    // The catalog holds the min and max time (older
                    // versions wrote the first and last record's).
                    if packets == e.packets && packets > 0 && (e.first_ns, e.last_ns) != (first_ns, last_ns) {
                        (e.first_ns, e.last_ns) = (first_ns, last_ns);
                        changed = true;
                    }
                    report.already += 1;
                    keep.push(e);
                    continue;
                }
                Err(why) => report.rebuilt.push((capture.clone(), why.to_string())),
            }
        }
        match index_file_in(vdir, &inner, opts) {
            Ok(fi) => {
                e.index = Some(wv_store::layout::index_rel(&e.file));
                e.format = Some(fi.format);
                e.linktype = fi.summary.linktype;
                e.snaplen = fi.snaplen;
                e.first_ns = fi.summary.first_ns;
                e.last_ns = fi.summary.last_ns;
                e.packets = fi.summary.packets;
                e.bytes = fi.bytes;
                report.indexed.push(fi);
                changed = true;
                keep.push(e);
            }
            Err(IndexError::Interrupted) => {
                report.interrupted = true;
                report.rebuilt.retain(|(p, _)| *p != capture);
                keep.push(e);
                break;
            }
            Err(err) => {
                report.failed.push((capture, err.to_string()));
                // An index that no longer fits its capture is not kept.
                if let Some(rel) = e.index.take() {
                    let _ = vols.unlink(&rel);
                    changed = true;
                }
                // A store keeps its entry (unindexed); a plain directory
                // leaves out what is not a readable capture.
                if recorded {
                    keep.push(e);
                } else {
                    changed = true;
                }
            }
        }
    }
    keep.extend(rest);
    if report.interrupted {
        // Entries not reached keep what they had; files new to a plain
        // directory that were not reached are not cataloged half-known.
        keep.retain(|e| recorded || e.index.is_some() || e.packets > 0);
        if !existed {
            return Ok(report);
        }
    }
    if !recorded {
        // A query merges a stream's files in catalog order: sort by time.
        keep.sort_by(|a, b| (a.first_ns, &a.file).cmp(&(b.first_ns, &b.file)));
    }
    if existed && !changed {
        return Ok(report);
    }
    catalog::write(path, &keep)?;
    report.catalog = Some(cat_path);
    Ok(report)
}
/// The capture files beneath `rel` of `dir` (store-relative paths); a
/// symlink (to a file or a directory) is not followed.
/// True when the file `rel` beneath `dir` starts as a pcap or pcapng file
/// does, whatever its name: tcpdump's `-C`/`-W` rings name theirs
/// `trace.pcap1`, `trace.pcap00`, other tools `.dmp`, `.PCAP`, or nothing.
/// The files wirevault writes beside captures are never taken.
fn starts_as_capture(dir: &wv_sys::fs::Dir, rel: &str) -> bool {
    use std::io::Read;
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let ours = [wv_store::layout::INDEX, wv_store::layout::PART].iter().any(|s| name.ends_with(s))
        || name == catalog::CATALOG_FILE
        || name.starts_with('.');
    let mut magic = [0u8; 4];
    !ours
        && dir
            .open_file(rel, wv_sys::fs::Open::Read, libc::O_NONBLOCK)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && wv_wire::Format::of_magic(magic).is_some()
}

fn collect_captures(dir: &wv_sys::fs::Dir, rel: &str, out: &mut Vec<String>) -> Result<(), IndexError> {
    use wv_sys::fs::Kind;
    let io = |e| IndexError::Io { path: dir.display(rel), source: e };
    for (name, kind) in dir.list(rel).map_err(io)? {
        let sub = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
        match kind {
            Kind::Dir => collect_captures(dir, &sub, out)?,
            Kind::File if is_capture_name(&name) || starts_as_capture(dir, &sub) => out.push(sub),
            _ => {}
        }
    }
    Ok(())
}
