//! Reading one file of a query: its index narrows it to candidate blocks
//! ([`open_cursor`], [`block_ranges`]), a [`RangeRead`] reads those byte
//! ranges as one stream, and [`Cursor::advance`] yields the packets in the
//! time range that pass the filter. A damaged file is skipped from the
//! damage on, with a warning.

use super::*;
/// The packet at the head of one file's stream.
pub(super) struct Head {
    pub(super) ts_ns: u64,
    pub(super) origlen: u32,
    pub(super) linktype: u32,
    pub(super) data: Vec<u8>,
}

/// One file being read: its reader over the byte ranges to read.
pub(super) struct Cursor {
    pub(super) reader: Reader<RangeRead>,
    pub(super) path: PathBuf,
    pub(super) head: Head,
    /// The catalog's times of the file's first and last packet.
    pub(super) span: (u64, u64),
}

impl Cursor {
    /// Moves to the next packet that is in the time range and passes the
    /// filter. False at the end of the file (or at an unreadable record,
    /// which is reported as a warning and counted as damage, as tcpdump
    /// stops there).
    pub(super) fn advance(
        &mut self,
        from: u64,
        to: u64,
        expr: &str,
        filters: &mut HashMap<u32, ExactFilter>,
        report: &mut Report,
        stop: &mut Stop<'_>,
    ) -> Result<bool, QueryError> {
        let Cursor { reader, path, head, .. } = self;
        scan(reader, path, from, to, expr, filters, report, stop, |p, _| {
            head.set(p);
            Ok(false)
        })
    }
}

impl Cursor {
    /// When this file is read whole and is a nanosecond little-endian pcap
    /// file (version 2.4) of link type `linktype`, its records are the
    /// output's bytes: the file and the offset of the next record.
    pub(super) fn splice_source(&self, linktype: u32) -> Option<(std::sync::Arc<File>, u64, u64)> {
        let rr = self.reader.get_ref();
        // Read whole: to its end, or (a file being written) to the end of its valid prefix.
        let whole = matches!(rr.ranges[..], [(0, _)]);
        if !rr.prefix.is_empty() || !whole || self.reader.format() != wv_wire::Format::Pcap {
            return None;
        }
        let mut h = [0u8; wv_wire::pcap::FILE_HEADER_LEN];
        rr.file.read_exact_at(&mut h, 0).ok()?;
        let ok = h[0..4] == [0x4d, 0x3c, 0xb2, 0xa1] && h[4..8] == [2, 0, 4, 0] && h[20..24] == linktype.to_le_bytes();
        let off = self.reader.offset();
        ok.then(|| Some((std::sync::Arc::new(rr.file.try_clone().ok()?), off, off))).flatten()
    }
}

impl Head {
    pub(super) fn set(&mut self, p: &Packet<'_>) {
        self.ts_ns = p.ts_ns;
        self.origlen = p.origlen;
        self.linktype = p.linktype;
        self.data.clear();
        self.data.extend_from_slice(p.data);
    }
}

/// How many records [`scan`] reads between two looks at the cancel flag:
/// a few hundred KiB of small packets, well under a millisecond of
/// filtering, so a cancelled query stops inside a 1 GiB file at once, and
/// the per-packet cost is one decrement.
pub(super) const CANCEL_EVERY: u32 = 4096;

/// The caller's cancel flag ([`Prepared::cancel_when`]) as the readers of
/// one query (or one counting thread) look at it: once per
/// [`CANCEL_EVERY`] records read, and before each file is opened. It also
/// counts the records read, and the files opened, for
/// [`QueryError::Cancelled`].
pub(super) struct Stop<'a> {
    flag: Option<&'a std::sync::atomic::AtomicBool>,
    /// Records to read before the next look at the flag.
    left: u32,
    /// Records read before the current countdown started.
    before: u64,
    /// Files opened so far, of `files`.
    pub(super) opened: usize,
    pub(super) files: usize,
}

impl<'a> Stop<'a> {
    pub(super) fn new(flag: Option<&'a std::sync::atomic::AtomicBool>, files: usize) -> Stop<'a> {
        Stop { flag, left: CANCEL_EVERY, before: 0, opened: 0, files }
    }

    /// True once the flag is set (looked at now).
    pub(super) fn cancelled(&self) -> bool {
        self.flag.is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Records read so far.
    pub(super) fn read(&self) -> u64 {
        self.before + u64::from(CANCEL_EVERY - self.left)
    }

    /// The error that says how far the query got.
    pub(super) fn error(&self) -> QueryError {
        QueryError::Cancelled { opened: self.opened, files: self.files, read: self.read() }
    }

    /// Counts one record read; every [`CANCEL_EVERY`] records, whether the
    /// flag is set.
    #[inline]
    fn tick(&mut self) -> bool {
        self.left -= 1;
        if self.left > 0 {
            return false;
        }
        self.before += u64::from(CANCEL_EVERY);
        self.left = CANCEL_EVERY;
        self.cancelled()
    }
}

/// Hands each packet of `reader` in `[from, to)` that passes the filter to
/// `f`, which returns whether to go on. True if `f` stopped the scan, false
/// at the end of the file (or at an unreadable record, which is reported as
/// a warning and counted as damage, as tcpdump stops there). A cancel
/// (`stop`) seen between records is [`QueryError::Cancelled`], never damage.
#[allow(clippy::too_many_arguments)]
pub(super) fn scan(
    reader: &mut Reader<RangeRead>,
    path: &Path,
    from: u64,
    to: u64,
    expr: &str,
    filters: &mut HashMap<u32, ExactFilter>,
    report: &mut Report,
    stop: &mut Stop<'_>,
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
        if stop.tick() {
            return Err(stop.error());
        }
        if p.ts_ns < from || !crate::time::before_end(p.ts_ns, to) {
            continue;
        }
        let filt = match filters.get(&p.linktype) {
            Some(x) => x,
            None => {
                // A link type the catalog did not name (a later pcapng
                // interface): as for those it names (see `prepare`).
                let x = ExactFilter::compile_file(expr, p.linktype, file_is_swapped(path)).unwrap_or_else(|e| {
                    report.warnings.push(format!(
                        "{}: the filter '{}' cannot be applied to link type {} ({e}): its packets are left out",
                        path.display(),
                        wv_filter::shown(expr),
                        p.linktype
                    ));
                    ExactFilter::nothing()
                });
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
pub(super) struct RangeRead {
    pub(super) file: File,
    pub(super) prefix: Vec<u8>,
    pub(super) prefix_pos: usize,
    pub(super) ranges: Vec<(u64, u64)>,
    pub(super) cur: usize,
    pub(super) pos: u64,
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
pub(super) fn candidates(idx: &IndexReader, plan: &Plan) -> Result<Option<Vec<u32>>, IndexError> {
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

pub(super) fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
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

pub(super) fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
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

/// Opens one file for reading: through its index when it has a usable one
/// and the plan narrows, else whole. `None` when nothing in it can match.
pub(super) fn open_cursor(
    root: &Path,
    store_dir: Option<&wv_store::volume::Volumes>,
    e: &Entry,
    plan: Option<&Plan>,
    (from, to): (u64, u64),
    locked: bool,
    report: &mut Report,
) -> Result<Option<Cursor>, QueryError> {
    // On a volume that is not mounted (or swapped): said once for the
    // volume before the query (`catalog::audit`), not damage, nothing to repair.
    if store_dir.is_some_and(|v| v.unreadable_volume(&e.file)) {
        report.on_unusable_volume += 1;
        return Ok(None);
    }
    let path = store_dir.map_or_else(|| root.join(&e.file), |v| v.display(&e.file));
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
    // A file being written (a recorder's live entry, `NAME.part`) may have
    // been renamed to `NAME` since: the same file, its bytes as they were.
    let opened = open(&e.file).or_else(|err| match e.file.strip_suffix(wv_store::layout::PART) {
        Some(closed) if err.kind() == io::ErrorKind::NotFound => open(closed),
        _ => Err(err),
    });
    let file = match opened {
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
    // A file being written is read up to the end of its valid prefix only:
    // the bytes after it may be a page of zeros or a preallocated tail
    // (which would parse as empty records), or a write in flight.
    let live = e.file.ends_with(wv_store::layout::PART);
    let mut ranges = vec![(0u64, if live { e.bytes } else { u64::MAX })];
    let mut prefix = Vec::new();
    let mut indexed = false;
    if let Some(rel) = &e.index {
        // An index that is damaged (checksums), of another format version,
        // or built from another file than this one is not used. It is
        // opened beneath the store, following no symlink.
        let ipath = store_dir.map_or_else(|| root.join(rel), |v| v.display(rel));
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
                let time_narrows = idx.blocks.iter().any(|b| !crate::time::overlaps(b.min_ts, b.max_ts, from, to));
                // A pcapng file with interfaces or sections declared after
                // its first packet is read whole: a block read apart would
                // miss them (and its packets' times or link types with them).
                // The index still says when nothing in it can match.
                if idx.late_structure {
                    let overlaps = idx.blocks.iter().any(|b| crate::time::overlaps(b.min_ts, b.max_ts, from, to));
                    if !overlaps || cand.as_ref().is_some_and(|c| c.is_empty()) {
                        report.files_indexed += 1;
                        return Ok(None);
                    }
                } else if cand.is_some() || time_narrows {
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
            // Deleted by the running recorder's retention between the
            // capture's open and its index's: the capture, open, is read
            // whole; nothing is damaged.
            Err(IndexError::Io { source, .. }) if locked && source.kind() == io::ErrorKind::NotFound => {}
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
        Ok(reader) => Ok(Some(Cursor {
            reader,
            path,
            head: Head { ts_ns: 0, origlen: 0, linktype: 0, data: Vec::new() },
            span: (e.first_ns, e.last_ns),
        })),
        Err(err) => {
            damaged(report, format!("{err}; skipped"));
            Ok(None)
        }
    }
}

/// Byte ranges `[start, end)` of a capture file.
pub(super) type ByteRanges = Vec<(u64, u64)>;

/// The file prefix to replay (its header blocks) and the byte ranges of the
/// candidate blocks that overlap the time range, adjacent blocks joined.
pub(super) fn block_ranges(
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
        if !crate::time::overlaps(bi.min_ts, bi.max_ts, from, to) {
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
