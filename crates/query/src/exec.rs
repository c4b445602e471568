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
    #[error("{} is not a regular file (a FIFO, device or directory); give a store directory or a capture file", path.display())]
    NotRegular { path: PathBuf },
    #[error("{} is not a regular file (a FIFO, device or socket?); remove it and run `wirevault repair` (or `wirevault index`) on the store", path.display())]
    CatalogNotRegular { path: PathBuf },
    #[error("refusing to write {}: it is inside the store {} or is one of its stored files; write the output elsewhere", out.display(), store.display())]
    OutputInStore { out: PathBuf, store: PathBuf },
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
    /// Capture files still being written (`*.part`), not included.
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
}

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
    store_dir: Option<wv_sys::fs::Dir>,
    /// What reading the catalog found wrong (damaged, duplicated, rejected
    /// lines, missing or uncataloged files), reported with the query's warnings.
    catalog_warnings: Vec<String>,
    recording: bool,
    /// A recorder (or repair, index) held the store's lock when it was opened.
    locked: bool,
    /// A single capture file, not a store directory.
    single: bool,
}

impl Prepared {
    /// The indexable plan of the expression (`None`: unindexable, scan).
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }
}

fn compile(expr: &str, linktype: u32, swapped: bool) -> Result<ExactFilter, QueryError> {
    ExactFilter::compile_file(expr, linktype, swapped).map_err(|CompileError { message }| QueryError::BadExpression {
        expr: wv_capture::filter::shown(expr),
        message,
    })
}

/// Opens the store, compiles the expression for every link type in it.
pub fn prepare(query: Query) -> Result<Prepared, QueryError> {
    let path = query.store.clone();
    let io_err = |path: &Path, e: io::Error| match e.kind() {
        io::ErrorKind::PermissionDenied => QueryError::PermissionDenied { path: path.to_path_buf() },
        _ => QueryError::Io { path: path.to_path_buf(), source: e },
    };
    let meta = std::fs::metadata(&path).map_err(|e| io_err(&path, e))?;
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
        // Entries whose paths could leave the store are rejected here, with a warning.
        let read = wv_store::catalog::read_checked(&path).map_err(io)?;
        // A recorder holding the lock renames files before it catalogs
        // them and deletes old ones (retention): those are in flight, not
        // damage, and are not reported as such.
        locked = matches!(wv_store::lock::state(&path), Ok(wv_store::lock::LockState::Held { .. }));
        catalog_warnings = read.warnings();
        catalog_warnings.extend(wv_store::catalog::audit(&path, &read.entries, locked));
        store_dir = Some(wv_sys::fs::Dir::open(&path).map_err(|source| QueryError::Io { path: path.clone(), source })?);
        let parts = count_part_files(&path);
        (path, read.entries, parts)
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
    for lt in linktypes {
        filters.insert(lt, compile(&query.expr, lt, swapped)?);
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
    })
}

/// Whether the capture file at `path` is written in the other byte order
/// than this machine's (see [`wv_capture::filter::swapped_header`]).
fn file_is_swapped(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::with_capacity(12);
    File::open(path).and_then(|f| f.take(12).read_to_end(&mut head)).is_ok()
        && wv_capture::filter::swapped_header(&head)
}

/// A single capture file as a one-entry store (its index beside it, if any).
fn single_file_entry(path: &Path) -> Result<(PathBuf, Vec<Entry>, usize), QueryError> {
    let root = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let idx = wv_index::index_path_for(path);
    let file = File::open(path).map_err(|e| QueryError::Io { path: path.to_path_buf(), source: e })?;
    let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = Reader::new(file).map_err(|_| QueryError::NotAStore { path: path.to_path_buf() })?;
    let (linktype, snaplen) = match reader.next_packet() {
        Ok(Some(p)) => (p.linktype, p.snaplen),
        _ => (wv_wire::linktype::ETHERNET, wv_wire::MAX_SNAPLEN),
    };
    let entry = Entry {
        stream: 0,
        file: name.clone(),
        index: idx.exists().then(|| wv_store::layout::index_rel(&name)),
        format: None,
        linktype,
        snaplen,
        first_ns: 0,
        last_ns: u64::MAX,
        packets: u64::MAX,
        bytes,
    };
    Ok((root, vec![entry], 0))
}

/// Capture files being written: `*.pcap.part` / `*.pcapng.part` in the
/// store and its stream directories.
fn count_part_files(store: &Path) -> usize {
    use wv_store::layout;
    let mut n = 0;
    let mut dirs = vec![store.to_path_buf()];
    if let Ok(rd) = std::fs::read_dir(store) {
        dirs.extend(rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
    }
    for d in dirs {
        if let Ok(rd) = std::fs::read_dir(&d) {
            n += rd
                .flatten()
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.strip_suffix(layout::PART).is_some_and(|n| !n.ends_with(layout::INDEX))
                        && !name.starts_with("catalog.")
                })
                .count();
        }
    }
    n
}

/// The packet at the head of one file's stream.
struct Head {
    ts_ns: u64,
    origlen: u32,
    linktype: u32,
    data: Vec<u8>,
}

/// One file being read: its reader over the byte ranges to read.
struct Cursor {
    reader: Reader<RangeRead>,
    path: PathBuf,
    head: Head,
}

impl Cursor {
    /// Moves to the next packet that is in the time range and passes the
    /// filter. False at the end of the file (or at an unreadable record,
    /// which is reported as a warning and counted as damage, as tcpdump
    /// stops there).
    fn advance(
        &mut self,
        from: u64,
        to: u64,
        expr: &str,
        filters: &mut HashMap<u32, ExactFilter>,
        report: &mut Report,
    ) -> Result<bool, QueryError> {
        let Cursor { reader, path, head } = self;
        scan(reader, path, from, to, expr, filters, report, |p, _| {
            head.set(p);
            Ok(false)
        })
    }
}

impl Head {
    fn set(&mut self, p: &Packet<'_>) {
        self.ts_ns = p.ts_ns;
        self.origlen = p.origlen;
        self.linktype = p.linktype;
        self.data.clear();
        self.data.extend_from_slice(p.data);
    }
}

/// Hands each packet of `reader` in `[from, to)` that passes the filter to
/// `f`, which returns whether to go on. True if `f` stopped the scan, false
/// at the end of the file (or at an unreadable record, which is reported as
/// a warning and counted as damage, as tcpdump stops there).
#[allow(clippy::too_many_arguments)]
fn scan(
    reader: &mut Reader<RangeRead>,
    path: &Path,
    from: u64,
    to: u64,
    expr: &str,
    filters: &mut HashMap<u32, ExactFilter>,
    report: &mut Report,
    mut f: impl FnMut(&Packet<'_>, &mut Report) -> Result<bool, QueryError>,
) -> Result<bool, QueryError> {
    loop {
        let p = match reader.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => return Ok(false),
            Err(e) => {
                report.warnings.push(format!("{}: {e}; the rest of this file is skipped", path.display()));
                report.note_damaged(path);
                return Ok(false);
            }
        };
        if p.ts_ns < from || p.ts_ns >= to {
            continue;
        }
        let filt = match filters.get(&p.linktype) {
            Some(x) => x,
            None => {
                // A link type the catalog did not name (a later pcapng interface).
                let x = compile(expr, p.linktype, file_is_swapped(path))?;
                filters.entry(p.linktype).or_insert(x)
            }
        };
        if !filt.matches(p.data, p.origlen) {
            continue;
        }
        if !f(&p, report)? {
            return Ok(true);
        }
    }
}

/// Reads a prefix (the file's header blocks) then byte ranges of a file, as
/// one continuous stream: the capture reader sees a valid, shorter file.
struct RangeRead {
    file: File,
    prefix: Vec<u8>,
    prefix_pos: usize,
    ranges: Vec<(u64, u64)>,
    cur: usize,
    pos: u64,
}

impl Read for RangeRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.prefix_pos < self.prefix.len() {
            let n = (self.prefix.len() - self.prefix_pos).min(buf.len());
            buf[..n].copy_from_slice(&self.prefix[self.prefix_pos..self.prefix_pos + n]);
            self.prefix_pos += n;
            return Ok(n);
        }
        while let Some(&(s, e)) = self.ranges.get(self.cur) {
            if self.pos < s {
                self.pos = s;
            }
            if self.pos >= e {
                self.cur += 1;
                continue;
            }
            let want = (e - self.pos).min(buf.len() as u64) as usize;
            let n = self.file.read_at(&mut buf[..want], self.pos)?;
            if n == 0 {
                self.cur = self.ranges.len();
                return Ok(0);
            }
            self.pos += n as u64;
            return Ok(n);
        }
        Ok(0)
    }
}

/// Candidate blocks of one index for `plan`; `None` means every block.
fn candidates(idx: &IndexReader, plan: &Plan) -> Result<Option<Vec<u32>>, IndexError> {
    let ethernet = idx.linktype == wv_wire::linktype::ETHERNET;
    Ok(match plan {
        Plan::All => None,
        Plan::V4(a, b) => Some(idx.lookup_range(KeyClass::Ipv4, u128::from(*a), u128::from(*b))?),
        Plan::V6(a, b) => Some(idx.lookup_range(KeyClass::Ipv6, *a, *b)?),
        Plan::Port(a, b) => Some(idx.lookup_range(KeyClass::Port, u128::from(*a), u128::from(*b))?),
        Plan::Proto(p) => Some(idx.lookup_range(KeyClass::Proto, u128::from(*p), u128::from(*p))?),
        Plan::Vlan(a, b) if ethernet => Some(idx.lookup_range(KeyClass::Vlan, u128::from(*a), u128::from(*b))?),
        Plan::Vlan(..) => None,
        Plan::And(a, b) => match (candidates(idx, a)?, candidates(idx, b)?) {
            (None, x) | (x, None) => x,
            (Some(x), Some(y)) => Some(intersect(&x, &y)),
        },
        Plan::Or(a, b) => match (candidates(idx, a)?, candidates(idx, b)?) {
            (Some(x), Some(y)) => Some(union(&x, &y)),
            _ => None,
        },
    })
}

fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(a.len() + b.len()));
    while i < a.len() || j < b.len() {
        let take_a = j >= b.len() || (i < a.len() && a[i] <= b[j]);
        let v = if take_a { a[i] } else { b[j] };
        if take_a {
            i += 1;
            if j < b.len() && b[j] == v {
                j += 1;
            }
        } else {
            j += 1;
        }
        out.push(v);
    }
    out
}

/// Bytes handed to the output thread at a time (fewer hand-offs, fewer
/// wake-ups: each costs a futex call and a context switch).
const OUT_CHUNK: usize = 1 << 20;
/// Room for one more record of the largest snapshot length beyond a chunk
/// (a record of an odd file beyond that grows a buffer once).
const OUT_CAP: usize = OUT_CHUNK + wv_wire::MAX_SNAPLEN as usize + wv_wire::pcap::RECORD_HEADER_LEN;

/// Output buffers passed to a writer thread: the query fills one while the
/// thread writes another, so the copy into a pipe (or the page cache)
/// overlaps with reading and filtering instead of adding to it. Three
/// buffers circulate; none is allocated after the start.
struct Chunks {
    cur: Vec<u8>,
    tx: Option<SyncSender<Vec<u8>>>,
    back: Receiver<Vec<u8>>,
}

/// The writer thread went away: its own error is reported after the join.
fn writer_gone() -> io::Error {
    io::Error::other("the output thread stopped")
}

impl Chunks {
    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        if self.cur.len() + b.len() > self.cur.capacity() {
            self.hand_off()?;
        }
        self.cur.extend_from_slice(b);
        if self.cur.len() >= OUT_CHUNK {
            self.hand_off()?;
        }
        Ok(())
    }

    fn hand_off(&mut self) -> io::Result<()> {
        if self.cur.is_empty() {
            return Ok(());
        }
        let next = self.back.recv().map_err(|_| writer_gone())?;
        let full = std::mem::replace(&mut self.cur, next);
        self.tx.as_ref().ok_or_else(writer_gone)?.send(full).map_err(|_| writer_gone())
    }

    /// Hands off the last bytes and ends the thread's input.
    fn finish(&mut self) -> io::Result<()> {
        let r = self.hand_off();
        self.tx = None;
        r
    }
}

/// Where [`PcapOut`] puts its bytes.
enum OutBytes<'a> {
    Inline(io::BufWriter<&'a mut dyn Write>),
    Chunks(Chunks),
}

impl OutBytes<'_> {
    #[inline]
    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            OutBytes::Inline(w) => w.write_all(b),
            OutBytes::Chunks(c) => c.write_all(b),
        }
    }
    fn finish(&mut self) -> io::Result<()> {
        match self {
            OutBytes::Inline(w) => w.flush(),
            OutBytes::Chunks(c) => c.finish(),
        }
    }
}

/// Writes a little-endian nanosecond pcap stream.
struct PcapOut<'a> {
    w: OutBytes<'a>,
    linktype: Option<u32>,
    snaplen: u32,
}

impl PcapOut<'_> {
    fn header(&mut self, linktype: u32) -> io::Result<()> {
        let mut h = [0u8; wv_wire::pcap::FILE_HEADER_LEN];
        wv_wire::pcap::emit_file_header(&mut h, self.snaplen, linktype);
        self.linktype = Some(linktype);
        self.w.write_all(&h)
    }
    fn packet(&mut self, h: &Head) -> Result<(), QueryError> {
        self.record(h.ts_ns, h.origlen, h.linktype, &h.data)
    }
    #[inline]
    fn record(&mut self, ts_ns: u64, origlen: u32, linktype: u32, data: &[u8]) -> Result<(), QueryError> {
        match self.linktype {
            None => self.header(linktype).map_err(QueryError::Output)?,
            Some(lt) if lt != linktype => {
                return Err(QueryError::MixedLinktypes { first: lt, other: linktype });
            }
            Some(_) => {}
        }
        let mut rh = [0u8; wv_wire::pcap::RECORD_HEADER_LEN];
        wv_wire::pcap::emit_record_header(&mut rh, ts_ns, data.len() as u32, origlen);
        self.w.write_all(&rh).map_err(QueryError::Output)?;
        self.w.write_all(data).map_err(QueryError::Output)
    }
}

/// Runs a prepared query into `sink`. With [`Sink::PcapThreaded`] a second
/// thread writes (see [`Chunks`]); its error, if any, is the one reported.
pub fn run(p: Prepared, sink: Sink<'_>) -> Result<Report, QueryError> {
    let w = match sink {
        Sink::Count => return run_into(p, None),
        Sink::Pcap(w) => return run_into(p, Some(OutBytes::Inline(io::BufWriter::with_capacity(OUT_CHUNK, w)))),
        Sink::PcapThreaded(w) => w,
    };
    std::thread::scope(|s| {
        let (tx, rx) = sync_channel::<Vec<u8>>(1);
        let (back_tx, back) = sync_channel::<Vec<u8>>(3);
        for _ in 0..2 {
            let _ = back_tx.send(Vec::with_capacity(OUT_CAP));
        }
        let writer = std::thread::Builder::new()
            .name("wv-query-out".into())
            .spawn_scoped(s, move || -> io::Result<()> {
                for mut buf in rx {
                    w.write_all(&buf)?;
                    buf.clear();
                    let _ = back_tx.send(buf);
                }
                w.flush()
            })
            .map_err(QueryError::Output)?;
        let chunks = Chunks { cur: Vec::with_capacity(OUT_CAP), tx: Some(tx), back };
        let r = run_into(p, Some(OutBytes::Chunks(chunks)));
        let written = writer.join().unwrap_or_else(|_| Err(io::Error::other("the output thread panicked")));
        match (r, written) {
            (Err(QueryError::Output(_)), Err(e)) | (Ok(_), Err(e)) => Err(QueryError::Output(e)),
            (r, _) => r,
        }
    })
}

fn run_into(mut p: Prepared, bytes: Option<OutBytes<'_>>) -> Result<Report, QueryError> {
    let from = p.query.from_ns.unwrap_or(0);
    let to = p.query.to_ns.unwrap_or(u64::MAX);
    let limit = p.query.limit.unwrap_or(u64::MAX);
    let mut report = Report {
        files: p.entries.len(),
        part_files: p.part_files,
        recording: p.recording,
        warnings: std::mem::take(&mut p.catalog_warnings),
        ..Report::default()
    };

    // Files that may hold packets in [from, to), by first timestamp.
    let mut files: Vec<(usize, &Entry)> = Vec::new();
    for (i, e) in p.entries.iter().enumerate() {
        if e.packets == 0 || e.last_ns < from || e.first_ns >= to {
            report.files_skipped_by_time += 1;
        } else {
            files.push((i, e));
        }
    }
    files.sort_by_key(|(i, e)| (e.first_ns, *i));
    let default_linktype = files.first().map_or(wv_wire::linktype::ETHERNET, |(_, e)| e.linktype);
    let snaplen = files.iter().map(|(_, e)| e.snaplen).max().filter(|s| *s > 0).unwrap_or(wv_wire::MAX_SNAPLEN);

    let mut out = bytes.map(|w| PcapOut { w, linktype: None, snaplen });
    let mut cursors: Vec<Cursor> = Vec::new();
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut next = 0;
    let expr = p.query.expr.clone();
    while report.matched < limit {
        // Open every file that may start before the earliest head.
        while next < files.len() && heap.peek().is_none_or(|Reverse((ts, _))| files[next].1.first_ns <= *ts) {
            let (_, e) = files[next];
            next += 1;
            let Some(mut c) =
                open_cursor(&p.root, p.store_dir.as_ref(), e, p.plan.as_ref(), (from, to), p.locked, &mut report)?
            else {
                continue;
            };
            if c.advance(from, to, &expr, &mut p.filters, &mut report)? {
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
            let Cursor { reader, path, head } = c;
            scan(reader, path, from, to, &expr, &mut p.filters, &mut report, |pk, report| {
                if pk.ts_ns >= bound || report.matched >= limit {
                    head.set(pk);
                    return Ok(false);
                }
                report.matched += 1;
                if let Some(o) = out.as_mut() {
                    o.record(pk.ts_ns, pk.origlen, pk.linktype, pk.data)?;
                }
                Ok(true)
            })?
        } else {
            c.advance(from, to, &expr, &mut p.filters, &mut report)?
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
    }
    Ok(report)
}

/// Opens one file for reading: through its index when it has a usable one
/// and the plan narrows, else whole. `None` when nothing in it can match.
fn open_cursor(
    root: &Path,
    store_dir: Option<&wv_sys::fs::Dir>,
    e: &Entry,
    plan: Option<&Plan>,
    (from, to): (u64, u64),
    locked: bool,
    report: &mut Report,
) -> Result<Option<Cursor>, QueryError> {
    let path = root.join(&e.file);
    // A damaged store still answers: a missing, short or unreadable file is
    // skipped (in part) with a warning naming it, and counted.
    let damaged = |report: &mut Report, why: String| {
        report.warnings.push(format!("{}: {why}", path.display()));
        report.note_damaged(&path);
    };
    // A store's files are opened beneath it, following no symlink.
    // O_NONBLOCK: a FIFO planted in place of a capture must not make the
    // open wait for a writer (no effect on regular files).
    let open = |rel: &str| match store_dir {
        Some(d) => d.open_file(rel, wv_sys::fs::Open::Read, libc::O_NONBLOCK),
        None => {
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(root.join(rel))
        }
    };
    let file = match open(&e.file) {
        Ok(f) => f,
        // Deleted by the running recorder's retention since the catalog
        // was read: its packets are gone on purpose, nothing to repair.
        Err(err) if locked && err.kind() == io::ErrorKind::NotFound => {
            report.deleted_while_recording += 1;
            return Ok(None);
        }
        Err(err) => {
            damaged(report, format!("{err}; skipped (run `wirevault repair` on the store)"));
            return Ok(None);
        }
    };
    match file.metadata() {
        Ok(m) if !m.is_file() => {
            damaged(report, "not a regular file; skipped".to_string());
            return Ok(None);
        }
        Ok(m) if m.len() < e.bytes && e.packets != u64::MAX => {
            damaged(report, format!("{} bytes, {} catalogued; packets past its end are missing", m.len(), e.bytes))
        }
        Ok(_) => {}
        Err(err) => {
            damaged(report, format!("{err}; skipped"));
            return Ok(None);
        }
    }
    let mut ranges = vec![(0u64, u64::MAX)];
    let mut prefix = Vec::new();
    let mut indexed = false;
    if let Some(rel) = &e.index {
        // An index that is damaged (checksums), of another format version,
        // or built from another file than this one is not used. It is
        // opened beneath the store, following no symlink.
        let ipath = root.join(rel);
        let opened = open(rel)
            .map_err(|source| IndexError::Io { path: ipath.clone(), source })
            .and_then(|f| IndexReader::from_file(f, &ipath))
            .and_then(|idx| {
                let cand = match plan {
                    Some(pl) if idx.keys_complete => candidates(&idx, pl)?,
                    _ => None,
                };
                idx.check_capture(&file)?;
                Ok((idx, cand))
            });
        match opened {
            Ok((idx, cand)) => {
                let time_narrows = idx.blocks.iter().any(|b| b.max_ts < from || b.min_ts >= to);
                if cand.is_some() || time_narrows {
                    let (pre, r) = match block_ranges(&file, &idx, cand.as_deref(), from, to, report) {
                        Ok(x) => x,
                        Err(err) => {
                            damaged(report, format!("{err}; skipped"));
                            return Ok(None);
                        }
                    };
                    prefix = pre;
                    ranges = r;
                    indexed = true;
                    if ranges.is_empty() {
                        report.files_indexed += 1;
                        return Ok(None);
                    }
                }
            }
            Err(err) => report.warnings.push(format!("{err}; reading the whole file")),
        }
    }
    if indexed {
        report.files_indexed += 1;
    } else {
        report.files_scanned += 1;
    }
    let rr = RangeRead { file, prefix, prefix_pos: 0, ranges, cur: 0, pos: 0 };
    match Reader::with_buffer_len(rr, 256 << 10) {
        Ok(reader) => {
            Ok(Some(Cursor { reader, path, head: Head { ts_ns: 0, origlen: 0, linktype: 0, data: Vec::new() } }))
        }
        Err(err) => {
            damaged(report, format!("{err}; skipped"));
            Ok(None)
        }
    }
}

/// Byte ranges `[start, end)` of a capture file.
type ByteRanges = Vec<(u64, u64)>;

/// The file prefix to replay (its header blocks) and the byte ranges of the
/// candidate blocks that overlap the time range, adjacent blocks joined.
fn block_ranges(
    file: &File,
    idx: &IndexReader,
    cand: Option<&[u32]>,
    from: u64,
    to: u64,
    report: &mut Report,
) -> io::Result<(Vec<u8>, ByteRanges)> {
    let blocks = &idx.blocks;
    report.blocks_total += blocks.len() as u64;
    let Some(first) = blocks.first() else {
        return Ok((Vec::new(), Vec::new()));
    };
    // pcap: the 24-byte file header; pcapng: everything before the first
    // packet block (section header and interface descriptions).
    let mut magic = [0u8; 4];
    file.read_exact_at(&mut magic, 0)?;
    let prefix_len = if wv_wire::Format::sniff(magic) == wv_wire::Format::Pcapng {
        first.offset
    } else {
        wv_wire::pcap::FILE_HEADER_LEN as u64
    };
    let mut prefix = vec![0u8; prefix_len.min(16 << 20) as usize];
    file.read_exact_at(&mut prefix, 0)?;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut push = |b: usize| {
        let bi = &blocks[b];
        if bi.max_ts < from || bi.min_ts >= to {
            return;
        }
        report.blocks_read += 1;
        let start = bi.offset;
        let end = blocks.get(b + 1).map_or(u64::MAX, |n| n.offset);
        match ranges.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => ranges.push((start, end)),
        }
    };
    match cand {
        Some(c) => c.iter().filter(|b| (**b as usize) < blocks.len()).for_each(|b| push(*b as usize)),
        None => (0..blocks.len()).for_each(&mut push),
    }
    Ok((prefix, ranges))
}

/// Refuses an output path that is the store, lies inside it, or is one of
/// its stored files under another name (a hard link): writing it would
/// truncate recorded packets. Compared by device and inode, not by name:
/// the target (through symlinks, as opening it would follow them) and each
/// of its parent directories up to `/` against the store directory, and an
/// existing target against every catalogued file and index.
pub fn check_output(p: &Prepared, out: &Path) -> Result<(), QueryError> {
    let files: Vec<&str> =
        p.entries.iter().flat_map(|e| std::iter::once(e.file.as_str()).chain(e.index.as_deref())).collect();
    check_outside(&p.root, (!p.single).then_some(p.query.store.as_path()), &files, out)
}

/// The check of [`check_output`] for any writer of a file beside a store
/// (`record --stats-file`): `out` must not be the store directory `store`
/// (`None` for a single capture file, whose directory is `root`), lie
/// inside it, or be any file it holds (`files`, relative to `root`, and
/// everything two levels deep in the store) under another name.
pub fn check_outside(root: &Path, store: Option<&Path>, files: &[&str], out: &Path) -> Result<(), QueryError> {
    use std::os::unix::fs::MetadataExt;
    let id = |m: &std::fs::Metadata| (m.dev(), m.ino());
    let shown = store.map_or_else(|| root.join(files.first().copied().unwrap_or_default()), Path::to_path_buf);
    let refuse = || QueryError::OutputInStore { out: out.to_path_buf(), store: shown.clone() };
    // Where opening `out` would land: follow a final symlink (even a
    // dangling one, which open(O_CREAT) would create the target of).
    let mut target = out.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&target) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&target).map_err(QueryError::Output)?;
                target = target.parent().unwrap_or(Path::new(".")).join(link);
            }
            _ => break,
        }
    }
    let mut protected: Vec<(u64, u64)> = Vec::new();
    let store_dir = if store.is_none() { None } else { std::fs::metadata(root).ok().map(|m| id(&m)) };
    protected.extend(store_dir);
    protected.extend(files.iter().filter_map(|f| std::fs::metadata(root.join(f)).ok()).map(|m| id(&m)));
    if store.is_some() {
        // Everything else the store holds (catalog, stats, `.part` files),
        // two levels deep as the layout is: a hard link to any is refused too.
        let mut dirs = vec![root.to_path_buf()];
        let mut i = 0;
        while i < dirs.len() {
            if let Ok(rd) = std::fs::read_dir(&dirs[i]) {
                for ent in rd.flatten() {
                    let Ok(m) = ent.metadata() else { continue };
                    if m.is_dir() && i == 0 {
                        dirs.push(ent.path());
                    } else if m.is_file() {
                        protected.push(id(&m));
                    }
                }
            }
            i += 1;
        }
    }
    if let Ok(m) = std::fs::metadata(&target) {
        if protected.contains(&id(&m)) {
            return Err(refuse());
        }
    }
    if let Some(store) = store_dir {
        let parent = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        // A parent that does not exist: creating the output fails anyway.
        if let Ok(dir) = std::fs::canonicalize(&parent) {
            for d in dir.ancestors() {
                if std::fs::metadata(d).is_ok_and(|m| id(&m) == store) {
                    return Err(refuse());
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_ops() {
        assert_eq!(intersect(&[1, 3, 5, 7], &[2, 3, 7, 9]), vec![3, 7]);
        assert_eq!(union(&[1, 3, 5], &[2, 3, 9]), vec![1, 2, 3, 5, 9]);
        assert_eq!(union(&[], &[4]), vec![4]);
    }
}
