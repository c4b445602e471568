//! Per-file packet indexes: built while recording (or afterwards from
//! existing captures) and read by queries.
//!
//! * [`Builder`] is fed every record of one capture file and writes
//!   `NAME.idx` when the file closes; see [`format`] for the file layout.
//! * [`IndexReader`] opens an index: block table (time → offset) and
//!   posting lists (IPv4, IPv6, port, IP protocol, VLAN → blocks).
//! * [`index_file`] indexes an existing pcap/pcapng file; [`index_path`]
//!   a file, a plain directory of captures (creating a catalog) or a store.
//! * [`catalog`] reads and rewrites a store's `catalog.jsonl`.
#![deny(unsafe_code)]

mod builder;
pub mod catalog;
pub mod format;
mod reader;

pub use builder::{Builder, IndexSummary, Offload, Work, DEFAULT_BLOCK_PACKETS, DEFAULT_RUN_PAIRS};
pub use format::KeyClass;
pub use reader::{BlockInfo, IndexReader};

use std::fs::File;
use std::path::{Path, PathBuf};
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
    #[error("{} is not a usable index: {what}", path.display())]
    Corrupt { path: PathBuf, what: &'static str },
    #[error("{} has index format version {version}, this wirevault reads version {}", path.display(), format::VERSION)]
    Version { path: PathBuf, version: u32 },
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
    /// "pcap" or "pcapng".
    pub format: &'static str,
    pub snaplen: u32,
    /// Size of the capture file.
    pub bytes: u64,
    /// The error that ended reading early, if any (the index covers the
    /// packets before it, as `tcpdump -r` would have printed them).
    pub truncated: Option<String>,
}

/// The index path of a capture file: `FILE.idx`.
pub fn index_path_for(capture: &Path) -> PathBuf {
    let mut p = capture.as_os_str().to_owned();
    p.push(".idx");
    PathBuf::from(p)
}

/// Builds `FILE.idx` for an existing pcap or pcapng file. A read error in
/// the middle of the file (a truncated or malformed record) ends the index
/// there, like tcpdump stops there; it is reported in
/// [`FileIndexed::truncated`]. An unreadable file header is an error.
pub fn index_file(capture: &Path) -> Result<FileIndexed, IndexError> {
    index_file_with(capture, DEFAULT_BLOCK_PACKETS)
}

/// [`index_file`] with `block_packets` packets per block (tests use 1 to
/// make every packet its own block).
pub fn index_file_with(capture: &Path, block_packets: u32) -> Result<FileIndexed, IndexError> {
    let io = |e| IndexError::Io { path: capture.to_path_buf(), source: e };
    let file = File::open(capture).map_err(io)?;
    let bytes = file.metadata().map_err(io)?.len();
    let mut reader = Reader::new(file).map_err(|e| IndexError::Capture { path: capture.to_path_buf(), source: e })?;
    let format = match reader.format() {
        wv_wire::reader::Format::Pcap => "pcap",
        wv_wire::reader::Format::Pcapng => "pcapng",
    };
    let mut builder: Option<Builder> = None;
    let mut snaplen = 0;
    let mut truncated = None;
    loop {
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
    let builder = builder.unwrap_or_else(|| Builder::new(wv_wire::linktype::ETHERNET));
    let index_path = index_path_for(capture);
    let summary = builder.finish(&index_path)?;
    Ok(FileIndexed { index_path, summary, format, snaplen, bytes, truncated })
}

/// What [`index_path`] did.
#[derive(Debug, Default)]
pub struct IndexReport {
    /// Files indexed now.
    pub indexed: Vec<FileIndexed>,
    /// Files that already had an index (store catalog entries).
    pub already: usize,
    /// Files that could not be indexed, with the reason.
    pub failed: Vec<(PathBuf, String)>,
    /// The catalog written, if any.
    pub catalog: Option<PathBuf>,
}

fn is_capture_name(name: &str) -> bool {
    [".pcap", ".pcapng", ".cap", ".pcap.gz"].iter().any(|s| name.ends_with(s) && !name.ends_with(".pcap.gz"))
}

/// Indexes PATH: a capture file (writes `FILE.idx`), a store (every catalog
/// entry without an index; the catalog is rewritten atomically), or a plain
/// directory of capture files (each indexed; a `catalog.jsonl` is created
/// so that the directory can be queried as a store).
pub fn index_path(path: &Path) -> Result<IndexReport, IndexError> {
    let mut report = IndexReport::default();
    let meta = std::fs::metadata(path).map_err(|e| IndexError::Io { path: path.to_path_buf(), source: e })?;
    if !meta.is_dir() {
        report.indexed.push(index_file(path)?);
        return Ok(report);
    }
    let cat_path = path.join(catalog::CATALOG_FILE);
    let (mut entries, existed) = if cat_path.exists() {
        (catalog::read(path)?, true)
    } else {
        // A plain directory: every capture file under it, sorted by path.
        let mut files = Vec::new();
        collect_captures(path, path, &mut files)?;
        files.sort();
        let entries = files
            .into_iter()
            .map(|rel| catalog::Entry {
                // Catalog entries under stream-NNN/ must name their stream.
                stream: wv_store::catalog::stream_of_path(&rel),
                file: rel,
                index: None,
                format: String::new(),
                linktype: 0,
                snaplen: 0,
                first_ns: 0,
                last_ns: 0,
                packets: 0,
                bytes: 0,
            })
            .collect();
        (entries, false)
    };
    let mut keep = Vec::with_capacity(entries.len());
    for mut e in entries.drain(..) {
        if e.index.is_some() {
            report.already += 1;
            keep.push(e);
            continue;
        }
        let capture = path.join(&e.file);
        match index_file(&capture) {
            Ok(fi) => {
                e.index = Some(format!("{}.idx", e.file));
                if !existed {
                    e.format = fi.format.to_string();
                    e.linktype = fi.summary.linktype;
                    e.snaplen = fi.snaplen;
                    e.first_ns = fi.summary.first_ns;
                    e.last_ns = fi.summary.last_ns;
                    e.packets = fi.summary.packets;
                    e.bytes = fi.bytes;
                }
                report.indexed.push(fi);
                keep.push(e);
            }
            Err(err) => {
                report.failed.push((capture, err.to_string()));
                // A store keeps its entry (unindexed); a plain directory
                // leaves out what is not a readable capture.
                if existed {
                    keep.push(e);
                }
            }
        }
    }
    if !existed {
        // A query merges a stream's files in catalog order: sort by time.
        keep.sort_by(|a, b| (a.first_ns, &a.file).cmp(&(b.first_ns, &b.file)));
    }
    if existed && report.indexed.is_empty() {
        return Ok(report);
    }
    catalog::write(path, &keep)?;
    report.catalog = Some(cat_path);
    Ok(report)
}

fn collect_captures(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), IndexError> {
    let io = |e| IndexError::Io { path: dir.to_path_buf(), source: e };
    for ent in std::fs::read_dir(dir).map_err(io)? {
        let ent = ent.map_err(io)?;
        let p = ent.path();
        let ft = ent.file_type().map_err(io)?;
        if ft.is_dir() {
            collect_captures(root, &p, out)?;
        } else if ft.is_file() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if is_capture_name(&name) {
                if let Ok(rel) = p.strip_prefix(root) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    Ok(())
}
