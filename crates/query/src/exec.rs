//! The query executor: choose files by time, narrow each file to candidate
//! blocks with its index, read the candidates, let libpcap decide each
//! packet, merge all files by timestamp, write pcap (ns).
//!
//! Files of a store are read lazily in order of their first timestamp: a
//! file is opened only when the merge reaches its start, so a query over a
//! long store keeps few files open. Each file yields its packets in file
//! order; the merge takes the earliest head, so one file's order is kept.

use crate::expr::Plan;
use crate::filter::{CompileError, ExactFilter};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use wv_index::catalog::{self, Entry};
use wv_index::{IndexError, IndexReader, KeyClass};
use wv_wire::reader::{Packet, Reader};

/// What to select.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// A store directory (with `catalog.jsonl`) or a single capture file.
    pub store: PathBuf,
    /// Inclusive lower bound, ns since the epoch.
    pub from_ns: Option<u64>,
    /// Exclusive upper bound, ns since the epoch.
    pub to_ns: Option<u64>,
    /// tcpdump filter expression ("" selects everything).
    pub expr: String,
    /// Stop after this many matching packets.
    pub limit: Option<u64>,
}

/// Why a query failed.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum QueryError {
    #[error("invalid filter expression '{expr}': {message}")]
    BadExpression { expr: String, message: String },
    #[error("{} is neither a store (no {}) nor a capture file; run `wirevault index` on a directory of captures first", path.display(), catalog::CATALOG_FILE)]
    NotAStore { path: PathBuf },
    #[error("{} cannot be read as a capture file: {source}", path.display())]
    BadCapture {
        path: PathBuf,
        #[source]
        source: wv_wire::reader::ReadError,
    },
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the selected packets have different link types ({first} and {other}); one pcap file cannot hold both: narrow the query by time")]
    MixedLinktypes { first: u32, other: u32 },
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
    #[error("cannot read {}: permission denied; run as a user that may read the store (its owner, or a member of its group)", path.display())]
    PermissionDenied { path: PathBuf },
    #[error("{} does not exist; give a store directory or a capture file", path.display())]
    Missing { path: PathBuf },
    #[error("{} is not a regular file (a FIFO, device or directory); give a store directory or a capture file", path.display())]
    NotRegular { path: PathBuf },
    #[error("{} is not a regular file (a FIFO, device or socket?); remove it and run `wirevault repair` (or `wirevault index`) on the store", path.display())]
    CatalogNotRegular { path: PathBuf },
    #[error("refusing to write {}: it is inside the store {} or is one of its stored files; write the output elsewhere", out.display(), store.display())]
    OutputInStore { out: PathBuf, store: PathBuf },
    /// Stopped by [`Prepared::cancel_when`]'s flag: `opened` of the query's
    /// `files` were opened and `read` records read (whether they matched or
    /// not) when it was seen.
    #[error("the query was cancelled after opening {opened} of its {files} files and reading {read} packets")]
    Cancelled { opened: usize, files: usize, read: u64 },
}

impl Report {
    /// Counts `path` as damaged, once however many problems it has.
    fn note_damaged(&mut self, path: &Path) {
        if !self.damaged_files.iter().any(|p| p == path) {
            self.damaged_files.push(path.to_path_buf());
            self.damaged += 1;
        }
    }
}

impl QueryError {
    /// True when the output's reader went away (EPIPE): not a failure of the query.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, QueryError::Output(e) if e.kind() == io::ErrorKind::BrokenPipe)
    }
}

/// What a query did, for the caller to report.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub matched: u64,
    /// Catalog files considered.
    pub files: usize,
    /// Files skipped without opening, by their time range.
    pub files_skipped_by_time: usize,
    /// Files read through their index (only candidate blocks).
    pub files_indexed: usize,
    /// Files read whole (no index, unusable index, or unindexable expression).
    pub files_scanned: usize,
    /// Blocks read, over all indexed files, and blocks those files have.
    pub blocks_read: u64,
    pub blocks_total: u64,
    /// Capture files still being written (`*.part`) that neither the
    /// recorder's live files nor the catalog name, not included (a crash's
    /// leftovers; a file just opened, before its writer said so).
    pub part_files: usize,
    /// A process holds the store's writer lock: the `.part` files are being
    /// recorded (otherwise a crash left them and `repair` is due).
    pub recording: bool,
    /// Catalogued files skipped in whole or in part because they are
    /// missing, shorter than catalogued or unreadable (each has a warning),
    /// each counted once.
    pub damaged: usize,
    /// The files counted in `damaged`.
    pub damaged_files: Vec<PathBuf>,
    /// Catalogued files deleted by the running recorder (retention) while
    /// the query ran: not damage.
    pub deleted_while_recording: usize,
    /// Catalogued files on a volume that cannot be read (not mounted,
    /// swapped), left out: not damage (said once per volume, before the
    /// query, with what to do), but missing from the answer.
    pub on_unusable_volume: usize,
    /// Problems that did not stop the query (unreadable tails, bad indexes).
    pub warnings: Vec<String>,
}

/// Where matching packets go.
pub enum Sink<'a> {
    /// Count only.
    Count,
    /// Write a nanosecond pcap file.
    Pcap(&'a mut dyn Write),
    /// Write a nanosecond pcap stream from a second thread: for a pipe or
    /// socket, whose copy into the kernel then overlaps with the query.
    PcapThreaded(&'a mut (dyn Write + Send)),
    /// As `PcapThreaded`, into a pipe: with no filter, byte ranges of stored
    /// pcap files that go out whole are spliced into it (zero copy).
    PcapPipe(&'a mut File),
    /// Hand each packet to a callback, in output order, instead of writing
    /// pcap (`replay`; any tool that consumes packets). Packets of several
    /// link types are passed as they are. An error from the callback stops
    /// the query and is returned as [`QueryError::Output`].
    Packets(&'a mut PacketFn<'a>),
    /// The pcap stream in chunks of about 1 MiB, each handed over whole to
    /// the callback (a server that sends them on without copying), which
    /// returns the buffer to fill next: one the consumer is done with
    /// (recycled: no allocation, no page faults) or `Vec::new()`. An error
    /// from it stops the query as [`QueryError::Output`].
    Chunks(&'a mut ChunkFn<'a>),
}

/// One selected packet, borrowed for the duration of a [`Sink::Packets`] call.
#[derive(Debug, Clone, Copy)]
pub struct PacketRef<'p> {
    pub ts_ns: u64,
    pub origlen: u32,
    pub linktype: u32,
    pub data: &'p [u8],
}

/// The callback of [`Sink::Packets`].
pub type PacketFn<'a> = dyn FnMut(PacketRef<'_>) -> io::Result<()> + 'a;

/// The callback of [`Sink::Chunks`]: takes a full chunk, returns an empty
/// buffer to fill next.
pub type ChunkFn<'a> = dyn FnMut(Vec<u8>) -> io::Result<Vec<u8>> + 'a;

/// A query that has been validated: the expression compiles and the store opens.
pub struct Prepared {
    query: Query,
    entries: Vec<Entry>,
    root: PathBuf,
    filters: HashMap<u32, ExactFilter>,
    plan: Option<Plan>,
    part_files: usize,
    /// The store's directory (None for a single capture file): catalog paths
    /// are opened beneath it, following no symlink.
    store_dir: Option<wv_store::volume::Volumes>,
    /// What reading the catalog found wrong (damaged, duplicated, rejected
    /// lines, missing or uncataloged files), reported with the query's warnings.
    catalog_warnings: Vec<String>,
    recording: bool,
    /// A recorder (or repair, index) held the store's lock when it was opened.
    locked: bool,
    /// A single capture file, not a store directory.
    single: bool,
    /// Set by the caller to stop the query (a client went away): looked at
    /// before each file and every few thousand records (`Stop`).
    cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl Prepared {
    /// The indexable plan of the expression (`None`: unindexable, scan).
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    /// The packets of the catalogued files that overlap the time range
    /// (an upper bound for a progress bar); `None` when a file's count is
    /// unknown (a single capture file).
    pub fn packets_upper_bound(&self) -> Option<u64> {
        let (from, to) = (self.query.from_ns.unwrap_or(0), self.query.to_ns.unwrap_or(u64::MAX));
        let mut n = 0u64;
        for e in self.entries.iter().filter(|e| e.packets > 0 && crate::time::overlaps(e.first_ns, e.last_ns, from, to))
        {
            if e.packets == u64::MAX {
                return None;
            }
            n = n.saturating_add(e.packets);
        }
        Some(n)
    }

    /// The bytes of the catalogued files that overlap the time range: an
    /// upper bound of the pcap this query writes, less its 24-byte header
    /// (`None` for a single capture file, whose size the catalog does not hold).
    pub fn bytes_upper_bound(&self) -> Option<u64> {
        let (from, to) = (self.query.from_ns.unwrap_or(0), self.query.to_ns.unwrap_or(u64::MAX));
        if self.single {
            return None;
        }
        Some(
            self.entries
                .iter()
                .filter(|e| e.packets > 0 && crate::time::overlaps(e.first_ns, e.last_ns, from, to))
                .map(|e| e.bytes)
                .sum(),
        )
    }

    /// The link types of the files that may hold packets in the time range
    /// (a single pcap file: its link type; a single pcapng file: none, not
    /// known before it is read), each once.
    pub fn linktypes(&self) -> Vec<u32> {
        // A single pcapng file's interfaces may differ: its entry holds the
        // first packet's link type only. Unknown, then.
        if self.single && self.entries.iter().any(|e| e.format == Some(wv_wire::Format::Pcapng)) {
            return Vec::new();
        }
        let (from, to) = (self.query.from_ns.unwrap_or(0), self.query.to_ns.unwrap_or(u64::MAX));
        let mut v: Vec<u32> = self
            .entries
            .iter()
            .filter(|e| e.packets > 0 && crate::time::overlaps(e.first_ns, e.last_ns, from, to))
            .map(|e| e.linktype)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The oldest and newest packet of the catalogued files (`None`: no
    /// file holds a packet).
    pub fn span(&self) -> Option<(u64, u64)> {
        let with = || self.entries.iter().filter(|e| e.packets > 0 && e.packets != u64::MAX);
        with().map(|e| e.first_ns).min().zip(with().map(|e| e.last_ns).max())
    }

    /// Why this query's time range selects nothing the store holds, if it has a range and
    /// that range does not ([`outside`]).
    pub fn outside(&self) -> Option<String> {
        let (from, to) = (self.query.from_ns, self.query.to_ns);
        (from.is_some() || to.is_some()).then(|| outside(self.span(), from, to)).flatten()
    }

    /// Stops the query, with [`QueryError::Cancelled`] (which says how far
    /// it got), once `flag` is set (a server whose client went away): before
    /// it opens another file, and inside a file within
    /// 4,096 records (a cancel is never reported as damage).
    pub fn cancel_when(&mut self, flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.cancel = Some(flag);
    }

    /// The caller's cancel flag, if any.
    fn cancel_flag(&self) -> Option<&std::sync::atomic::AtomicBool> {
        self.cancel.as_deref()
    }

    /// What reading the catalog found wrong before the query runs (files
    /// missing, not regular, not catalogued; unreadable volumes): known
    /// before the first byte, repeated in the report's warnings.
    pub fn warnings(&self) -> &[String] {
        &self.catalog_warnings
    }

    /// Capture files still being written or left by a crash (`*.part`)
    /// which the query leaves out (those a recorder's live files name are
    /// read up to what they say), and whether a recorder holds the store.
    pub fn open_files(&self) -> (usize, bool) {
        (self.part_files, self.recording)
    }
}

/// Why a time range `[from, to)` selects nothing of a store whose packets span `span`
/// ([`Prepared::span`]), if it does not: one sentence that the API answers in `outside` and
/// the command line says on standard error, instead of a silent empty answer.
pub fn outside(span: Option<(u64, u64)>, from: Option<u64>, to: Option<u64>) -> Option<String> {
    let time = wv_store::layout::utc_rfc3339;
    let Some((oldest, newest)) = span else {
        return Some("the store holds no packets yet".into());
    };
    if to.is_some_and(|t| t <= oldest) {
        return Some(format!("the range ends before the oldest packet on disk ({})", time(oldest)));
    }
    if from.is_some_and(|f| f > newest) {
        return Some(format!("the range starts after the newest stored packet ({})", time(newest)));
    }
    None
}

/// Opens the store, compiles the expression for every link type in it.
pub fn prepare(query: Query) -> Result<Prepared, QueryError> {
    let path = query.store.clone();
    let io_err = |path: &Path, e: io::Error| match e.kind() {
        io::ErrorKind::PermissionDenied => QueryError::PermissionDenied { path: path.to_path_buf() },
        _ => QueryError::Io { path: path.to_path_buf(), source: e },
    };
    let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => QueryError::Missing { path: path.clone() },
        _ => io_err(&path, e),
    })?;
    let single = !meta.is_dir();
    let mut catalog_warnings = Vec::new();
    let mut store_dir = None;
    let mut locked = false;
    let (root, entries, part_files) = if meta.is_dir() {
        let cat = path.join(catalog::CATALOG_FILE);
        match std::fs::symlink_metadata(&cat) {
            Ok(m) if m.is_file() || m.file_type().is_symlink() => {}
            // A store whose catalog is a FIFO, device or link: say so
            // (reading it could block, and it is not "not a store").
            Ok(m) if !m.is_dir() => return Err(QueryError::CatalogNotRegular { path: cat }),
            Ok(_) => return Err(QueryError::NotAStore { path }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(QueryError::NotAStore { path }),
            Err(e) => return Err(io_err(&cat, e)),
        }
        let io = |source| QueryError::Io { path: path.join(catalog::CATALOG_FILE), source };
        // Files on the store's extra volumes (`@k/...`) are opened beneath
        // those volumes, as the others beneath the store.
        let vols =
            wv_store::volume::Volumes::open(&path).map_err(|source| QueryError::Io { path: path.clone(), source })?;
        // Files being written (on the extra volumes too), looked for before
        // the live files and the catalog that may name them.
        let mut parts = files_being_written(&path, 0);
        for (id, d) in vols.all().iter().filter(|(id, _)| *id > 0) {
            parts.extend(files_being_written(d.path(), *id));
        }
        // A recorder holding the lock renames files before it catalogs
        // them and deletes old ones (retention): those are in flight, not
        // damage, and are not reported as such. Its live files say what it
        // has stored and not catalogued yet: read before the catalog, so
        // that no file is missed between the two (`wv_store::live`).
        let lock = wv_store::lock::state(&path);
        locked = matches!(lock, Ok(wv_store::lock::LockState::Held { .. }));
        let (live, live_warnings) =
            lock.as_ref().map_or_else(|_| Default::default(), |l| wv_store::live::read(&path, l));
        // Entries whose paths could leave the store are rejected here, with a warning.
        let read = wv_store::catalog::read_checked(&path).map_err(io)?;
        catalog_warnings = read.warnings();
        catalog_warnings.extend(live_warnings);
        catalog_warnings.extend(wv_store::catalog::audit(&path, &read.entries, locked));
        // (A volume that cannot be read was said by `audit`, once, with its files.)
        // Left out: the files being written that neither names.
        let named: std::collections::HashSet<&str> = live
            .iter()
            .map(|e| wv_store::live::final_name(&e.file))
            .chain(read.entries.iter().map(|e| e.file.as_str()))
            .collect();
        let left_out = parts.iter().filter(|p| !named.contains(wv_store::live::final_name(p))).count();
        let live = wv_store::live::uncatalogued(&read.entries, live);
        store_dir = Some(vols);
        let mut entries = read.entries;
        entries.extend(live);
        (path, entries, left_out)
    } else if !meta.is_file() {
        // Opening a FIFO would block until a writer comes.
        return Err(QueryError::NotRegular { path });
    } else {
        single_file_entry(&path).map_err(|e| match e {
            QueryError::Io { path, source } => io_err(&path, source),
            e => e,
        })?
    };
    let recording = part_files > 0 && !single && locked;
    let mut filters = HashMap::new();
    let mut linktypes: Vec<u32> = entries.iter().map(|e| e.linktype).collect();
    linktypes.sort_unstable();
    linktypes.dedup();
    if linktypes.is_empty() {
        linktypes.push(wv_wire::linktype::ETHERNET);
    }
    // Stored files are in this machine's byte order; a single file is
    // filtered as `tcpdump -r` filters it, in its own.
    let swapped = single && file_is_swapped(&query.store);
    // A link type libpcap cannot apply the expression to leaves its
    // packets out, with a warning, when another link type takes it (as
    // `tcpdump -r` refuses that one file); when none does, the expression
    // is what is wrong.
    let mut refused = None;
    for lt in linktypes {
        match ExactFilter::compile_file(&query.expr, lt, swapped) {
            Ok(f) => {
                filters.insert(lt, f);
            }
            Err(CompileError { message }) => {
                let (from, to) = (query.from_ns.unwrap_or(0), query.to_ns.unwrap_or(u64::MAX));
                let n = entries
                    .iter()
                    .filter(|e| e.linktype == lt && crate::time::overlaps(e.first_ns, e.last_ns, from, to))
                    .count();
                if n > 0 {
                    catalog_warnings.push(format!(
                        "the filter '{}' cannot be applied to link type {lt} ({message}): its packets ({n} file(s)) are left out",
                        wv_filter::shown(&query.expr)
                    ));
                }
                refused.get_or_insert(QueryError::BadExpression { expr: wv_filter::shown(&query.expr), message });
                filters.insert(lt, ExactFilter::nothing());
            }
        }
    }
    if let Some(e) = refused.filter(|_| filters.values().all(ExactFilter::matches_nothing)) {
        return Err(e);
    }
    let plan = crate::expr::plan(&query.expr);
    Ok(Prepared {
        query,
        entries,
        root,
        filters,
        plan,
        part_files,
        store_dir,
        catalog_warnings,
        recording,
        locked,
        single,
        cancel: None,
    })
}

/// Whether the capture file at `path` is written in the other byte order
/// than this machine's (see [`wv_filter::swapped_header`]).
fn file_is_swapped(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(12);
    File::open(path).and_then(|f| f.take(12).read_to_end(&mut head)).is_ok() && wv_filter::swapped_header(&head)
}

/// A single capture file as a one-entry store (its index beside it, if any).
fn single_file_entry(path: &Path) -> Result<(PathBuf, Vec<Entry>, usize), QueryError> {
    let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let idx = wv_index::index_path_for(path);
    let file = File::open(path).map_err(|e| QueryError::Io { path: path.to_path_buf(), source: e })?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    // A file that is no capture at all may be a store asked for by the
    // wrong name; an empty or damaged one is said to be so.
    let mut reader = Reader::new(file).map_err(|e| match e {
        wv_wire::reader::ReadError::NotCapture { .. } => QueryError::NotAStore { path: path.to_path_buf() },
        source => QueryError::BadCapture { path: path.to_path_buf(), source },
    })?;
    let (linktype, snaplen) = match reader.next_packet() {
        Ok(Some(p)) => (p.linktype, p.snaplen),
        _ => (wv_wire::linktype::ETHERNET, wv_wire::MAX_SNAPLEN),
    };
    let entry = Entry {
        stream: 0,
        file: name.clone(),
        index: idx.exists().then(|| wv_store::layout::index_rel(&name)),
        format: Some(reader.format()),
        linktype,
        snaplen,
        first_ns: 0,
        last_ns: u64::MAX,
        packets: u64::MAX,
        bytes,
        timestamps: None,
        path: None,
    };
    Ok((root, vec![entry], 0))
}

/// Capture files being written: `*.pcap.part` / `*.pcapng.part` in the
/// directory `dir` of volume `vol` (0: the store) and its stream
/// directories, named as the catalog would name them (`@k/stream-NNN/NAME.part`).
fn files_being_written(dir: &Path, vol: u32) -> Vec<String> {
    use wv_store::layout;
    let mut out = Vec::new();
    let mut dirs = vec![String::new()];
    if let Ok(rd) = std::fs::read_dir(dir) {
        dirs.extend(
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| format!("{}/", e.file_name().to_string_lossy())),
        );
    }
    for d in dirs {
        let Ok(rd) = std::fs::read_dir(dir.join(&d)) else { continue };
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.strip_suffix(layout::PART).is_some_and(|n| !n.ends_with(layout::INDEX))
                && !name.starts_with("catalog.")
            {
                out.push(wv_store::volume::on_volume(vol, &format!("{d}{name}")));
            }
        }
    }
    out
}

mod count;
mod cursor;
mod output;
mod outside;
mod visit;

use cursor::*;
use output::*;
pub use outside::{check_output, check_outside};
pub use visit::{visit, VisitFile};

/// Runs a prepared query into `sink`. With [`Sink::PcapThreaded`] a second
/// thread writes (see `Chunks`); its error, if any, is the one reported.
pub fn run(p: Prepared, sink: Sink<'_>) -> Result<Report, QueryError> {
    let dest = match sink {
        Sink::Count => return run_into(p, None),
        Sink::Pcap(w) => return run_into(p, Some(OutBytes::Inline(io::BufWriter::with_capacity(OUT_CHUNK, w)))),
        Sink::PcapThreaded(w) => Dest::Any(w),
        Sink::PcapPipe(f) => Dest::Pipe(f),
        Sink::Packets(f) => return run_into(p, Some(OutBytes::Each(f))),
        Sink::Chunks(f) => return run_into(p, Some(OutBytes::Owned(Vec::with_capacity(OUT_CAP), f))),
    };
    let pipe = matches!(dest, Dest::Pipe(_));
    std::thread::scope(|s| {
        let (tx, rx) = sync_channel::<Msg>(1);
        let (back_tx, back) = sync_channel::<Vec<u8>>(3);
        for _ in 0..2 {
            let _ = back_tx.send(Vec::with_capacity(OUT_CAP));
        }
        let writer = std::thread::Builder::new()
            .name("wv-query-out".into())
            .spawn_scoped(s, move || writer(dest, rx, back_tx))
            .map_err(QueryError::Output)?;
        let chunks = Chunks { cur: Vec::with_capacity(OUT_CAP), tx: Some(tx), pipe, back };
        let r = run_into(p, Some(OutBytes::Chunks(chunks)));
        let written = writer.join().unwrap_or_else(|_| Err(io::Error::other("the output thread panicked")));
        match (r, written) {
            (Err(QueryError::Output(_)), Err(e)) | (Ok(_), Err(e)) => Err(QueryError::Output(e)),
            (r, _) => r,
        }
    })
}

/// The start of running `p`: its bounds (from, to, limit) and a report
/// holding what preparing it found.
fn begin(p: &mut Prepared) -> ((u64, u64, u64), Report) {
    let bounds = (p.query.from_ns.unwrap_or(0), p.query.to_ns.unwrap_or(u64::MAX), p.query.limit.unwrap_or(u64::MAX));
    let report = Report {
        files: p.entries.len(),
        part_files: p.part_files,
        recording: p.recording,
        warnings: std::mem::take(&mut p.catalog_warnings),
        ..Report::default()
    };
    (bounds, report)
}

/// The entries that may hold packets in `[from, to)` (with their catalog
/// positions); the others are counted as skipped by time. Files are looked
/// up beneath `store_dir` (else `root`).
///
/// A directory of captures (indexed by `wirevault index`, not recorded) may
/// have files that grew since: one whose size is not its entry's is kept
/// whatever its times (the reader then reads it whole and says it changed).
/// A recorded store's closed files do not change.
fn in_range<'a>(
    entries: &'a [Entry],
    (store_dir, root): (Option<&wv_store::volume::Volumes>, &Path),
    from: u64,
    to: u64,
    report: &mut Report,
) -> Vec<(usize, &'a Entry)> {
    let changed = |e: &Entry| {
        !e.recorded()
            && match store_dir {
                Some(d) => d.lstat(&e.file).is_ok_and(|st| st.len != e.bytes),
                None => std::fs::metadata(root.join(&e.file)).is_ok_and(|m| m.len() != e.bytes),
            }
    };
    let mut files = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        if (e.packets == 0 || !crate::time::overlaps(e.first_ns, e.last_ns, from, to)) && !changed(e) {
            report.files_skipped_by_time += 1;
        } else {
            files.push((i, e));
        }
    }
    files
}

fn run_into(mut p: Prepared, bytes: Option<OutBytes<'_>>) -> Result<Report, QueryError> {
    let ((from, to, limit), mut report) = begin(&mut p);
    // Files that may hold packets in [from, to), by first timestamp.
    let mut files = in_range(&p.entries, (p.store_dir.as_ref(), &p.root), from, to, &mut report);
    files.sort_by_key(|(i, e)| (e.first_ns, *i));
    let default_linktype = files.first().map_or(wv_wire::linktype::ETHERNET, |(_, e)| e.linktype);
    let snaplen = files.iter().map(|(_, e)| e.snaplen).max().filter(|s| *s > 0).unwrap_or(wv_wire::MAX_SNAPLEN);

    if bytes.is_none() && p.query.limit.is_none() {
        let threads = count::threads_for(files.len());
        if threads > 1 {
            count::count_files(&p, &files, (from, to), threads, &mut report)?;
            return Ok(report);
        }
    }
    let mut out = bytes.map(|w| PcapOut { w, linktype: None, snaplen, wrapped: 0 });
    let mut cursors: Vec<Cursor> = Vec::new();
    let splice_ok = p.query.expr.trim().is_empty() && p.query.limit.is_none();
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut next = 0;
    let expr = p.query.expr.clone();
    let cancel = p.cancel.clone();
    let mut stop = Stop::new(cancel.as_deref(), files.len());
    while report.matched < limit {
        // Open every file that may start before the earliest head.
        while next < files.len() && heap.peek().is_none_or(|Reverse((ts, _))| files[next].1.first_ns <= *ts) {
            if stop.cancelled() {
                return Err(stop.error());
            }
            let (_, e) = files[next];
            next += 1;
            stop.opened = next;
            let Some(mut c) =
                open_cursor(&p.root, p.store_dir.as_ref(), e, p.plan.as_ref(), (from, to), p.locked, &mut report)?
            else {
                continue;
            };
            if c.advance(from, to, &expr, &mut p.filters, &mut report, &mut stop)? {
                heap.push(Reverse((c.head.ts_ns, cursors.len())));
            }
            cursors.push(c);
        }
        let Some(Reverse((_, ci))) = heap.pop() else {
            break;
        };
        let c = &mut cursors[ci];
        report.matched += 1;
        if let Some(o) = out.as_mut() {
            o.packet(&c.head)?;
        }
        let more = if heap.is_empty() {
            // The only file with packets ahead, until the next file starts:
            // write its packets straight from the reader's buffer (no copy
            // into `head`, no heap). The first packet at or past the next
            // file's start, or past the limit, goes back to the merge.
            let bound = files.get(next).map_or(u64::MAX, |(_, e)| e.first_ns);
            // With no filter, a stored pcap file whose records are the
            // output's bytes and which goes out whole from here (the time
            // range covers it, no other file starts before its last
            // packet, no limit) is spliced: the reader still reads and
            // checks each record; the runs of checked records it laid out
            // contiguously are sent from the file, not copied.
            let (first_ns, last_ns) = c.span;
            let mut sp = match out.as_ref() {
                Some(PcapOut { w: OutBytes::Chunks(ch), linktype: Some(lt), .. })
                    if splice_ok
                        && ch.pipe
                        && from <= first_ns
                        && crate::time::before_end(last_ns, to)
                        && last_ns < bound =>
                {
                    c.splice_source(*lt)
                }
                _ => None,
            };
            let Cursor { reader, path, head, .. } = c;
            let more = scan(reader, path, from, to, &expr, &mut p.filters, &mut report, &mut stop, |pk, report| {
                if pk.ts_ns >= bound || report.matched >= limit {
                    head.set(pk);
                    return Ok(false);
                }
                report.matched += 1;
                let Some(o) = out.as_mut() else {
                    return Ok(true);
                };
                let Some((_, s, e)) = sp.as_mut() else {
                    return o.record(pk.ts_ns, pk.origlen, pk.linktype, pk.data).map(|()| true);
                };
                // A record joins the run only if it follows the run's last
                // one in the file and is stored exactly as it would be
                // written (same link type, header bytes equal to the ones
                // written for its time and lengths: not truncated to the
                // snaplen, no nanoseconds field of 10^9 or more, lengths in
                // order). Anything else ends the run and is copied.
                let mut rh = [0u8; wv_wire::pcap::RECORD_HEADER_LEN];
                wv_wire::pcap::emit_record_header(&mut rh, pk.ts_ns, pk.data.len() as u32, pk.origlen);
                let end = pk.offset + (rh.len() + pk.data.len()) as u64;
                if pk.offset == *e && pk.stored_header == rh && o.linktype == Some(pk.linktype) {
                    *e = end;
                    if *e - *s >= 64 << 20 {
                        o.w.splice_run(&mut sp).map_err(QueryError::Output)?;
                    }
                } else {
                    o.w.splice_run(&mut sp).map_err(QueryError::Output)?;
                    o.record(pk.ts_ns, pk.origlen, pk.linktype, pk.data)?;
                    if let Some((_, s, e)) = sp.as_mut() {
                        (*s, *e) = (end, end);
                    }
                }
                Ok(true)
            });
            if let Some(o) = out.as_mut() {
                o.w.splice_run(&mut sp).map_err(QueryError::Output)?;
            }
            more?
        } else {
            c.advance(from, to, &expr, &mut p.filters, &mut report, &mut stop)?
        };
        if more {
            heap.push(Reverse((c.head.ts_ns, ci)));
        } else {
            // Release the reader's buffer; the slot keeps heap indices valid.
            c.head.data = Vec::new();
        }
    }
    if let Some(mut o) = out {
        if o.linktype.is_none() {
            o.header(default_linktype).map_err(QueryError::Output)?;
        }
        o.w.finish().map_err(QueryError::Output)?;
        if o.wrapped > 0 {
            report.warnings.push(format!(
                "{} packet(s) dated after 2106-02-07T06:28:15Z were written with their seconds modulo 2^32 (a pcap record holds 32 bits of seconds; tcpdump -w writes them so too)",
                o.wrapped
            ));
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A nanosecond pcap file of `n` 60-byte Ethernet frames, 1 µs apart.
    fn pcap_of(path: &Path, n: u32) {
        let mut b = Vec::with_capacity(24 + n as usize * 76);
        b.extend([0x4d, 0x3c, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        b.extend(65535u32.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        for i in 0..n {
            b.extend(1_700_000_000u32.to_le_bytes());
            b.extend((i * 1000).to_le_bytes());
            b.extend(60u32.to_le_bytes());
            b.extend(60u32.to_le_bytes());
            b.extend([0u8; 60]);
        }
        std::fs::write(path, b).unwrap();
    }

    /// A cancel flag set while a file is being read stops the query inside
    /// that file, within `CANCEL_EVERY` records, as a cancel (how far it
    /// got), not as damage.
    #[test]
    fn a_cancel_stops_the_query_inside_a_file() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let dir = wv_testkit::TempDir::new("query-cancel");
        let f = dir.join("big.pcap");
        let n = 20 * CANCEL_EVERY;
        pcap_of(&f, n);
        let mut p = prepare(Query { store: f.clone(), ..Query::default() }).unwrap();
        let flag = std::sync::Arc::new(AtomicBool::new(false));
        p.cancel_when(flag.clone());
        let mut seen = 0u64;
        let mut each = |_: PacketRef<'_>| -> io::Result<()> {
            seen += 1;
            flag.store(true, Ordering::Relaxed);
            Ok(())
        };
        match run(p, Sink::Packets(&mut each)) {
            Err(QueryError::Cancelled { opened: 1, files: 1, read }) => {
                assert!(read > 0 && read <= u64::from(CANCEL_EVERY), "read {read} of {n} after the cancel");
            }
            other => panic!("not cancelled inside the file: {other:?}"),
        }
        assert!(seen < u64::from(CANCEL_EVERY), "{seen} packets handed over after the cancel");
    }

    /// `scan` (also the counting threads' reader) with the flag set reads
    /// `CANCEL_EVERY` records, then stops with the cancel; nothing is
    /// counted as damaged.
    #[test]
    fn scan_looks_at_the_flag_every_few_thousand_records() {
        let dir = wv_testkit::TempDir::new("query-cancel-scan");
        let f = dir.join("big.pcap");
        pcap_of(&f, 3 * CANCEL_EVERY);
        let p = prepare(Query { store: f.clone(), ..Query::default() }).unwrap();
        let mut report = Report::default();
        let (from, to) = (0, u64::MAX);
        let mut c = open_cursor(&p.root, None, &p.entries[0], None, (from, to), false, &mut report).unwrap().unwrap();
        let set = std::sync::atomic::AtomicBool::new(true);
        let mut stop = Stop::new(Some(&set), 1);
        stop.opened = 1;
        let mut filters = p.filters;
        let mut n = 0u64;
        let r = scan(&mut c.reader, &c.path, from, to, "", &mut filters, &mut report, &mut stop, |_, _| {
            n += 1;
            Ok(true)
        });
        assert!(
            matches!(r, Err(QueryError::Cancelled { opened: 1, files: 1, read }) if read == u64::from(CANCEL_EVERY)),
            "{r:?}"
        );
        assert_eq!(n, u64::from(CANCEL_EVERY) - 1);
        assert_eq!((report.damaged, report.warnings.len()), (0, 0), "{report:?}");
    }

    #[test]
    fn set_ops() {
        assert_eq!(intersect(&[1, 3, 5, 7], &[2, 3, 7, 9]), vec![3, 7]);
        assert_eq!(union(&[1, 3, 5], &[2, 3, 9]), vec![1, 2, 3, 5, 9]);
        assert_eq!(union(&[], &[4]), vec![4]);
    }
}
