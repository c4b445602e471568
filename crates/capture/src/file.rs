//! The file source (`record --read`): packets of existing pcap/pcapng files,
//! in file order, with their own timestamps.
//!
//! A file that cannot be read to its end contributes the packets before the
//! damage; the damage is reported (file, offset, what) and the next file is
//! read. The filter is compiled per link type, as tcpdump does per file.
//!
//! Files are read front to back, never sought, so a path may be a pipe: a
//! FIFO, `/dev/stdin`, or process substitution (`<(zcat x.pcap.gz)`); the
//! path `-` is standard input, as for tcpdump's `-r -`. A pipe is read only
//! once it has data ([`wv_sys::pipe::readable`]): while it has none, the
//! source answers [`Poll::Idle`] every 100 ms (counters, status and idle
//! flushes go on), and the stop flag given to [`FileSource::stop_on`] ends
//! the wait, so that Ctrl-C stops a recording whose writer is slow, or has
//! not come yet.

use crate::filter::{self, Filter};
use crate::{CaptureError, Delivery, Poll, Source};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wv_wire::reader::Reader;

const BATCH: usize = 512;

/// The most packet bytes, and packets, held back to be grouped by link type
/// (see [`FileSource::group_link_types`]).
const WINDOW_BYTES: usize = 32 << 20;
const WINDOW_PACKETS: usize = 1 << 18;

/// One packet held back in the [`Window`].
#[derive(Debug, Clone, Copy)]
struct Held {
    ts_ns: u64,
    linktype: u32,
    snaplen: u32,
    origlen: u32,
    start: usize,
    len: usize,
}

/// Packets of a file whose link types interleave, held back so that they
/// go out grouped by link type: a stream has one open file, which holds
/// one link type (libpcap refuses a pcapng file whose interfaces have
/// different link types), so packets handed over in input order would
/// make one file per change of link type.
#[derive(Default)]
struct Window {
    bytes: Vec<u8>,
    held: Vec<Held>,
    /// Where the next packet to hand over is in `held`, once sorted.
    next: usize,
    /// Being handed over (no packet is added until it is empty).
    draining: bool,
    /// The link type of the last packet handed over (the open file's).
    last_linktype: Option<u32>,
}

impl Window {
    fn full(&self) -> bool {
        self.bytes.len() >= WINDOW_BYTES || self.held.len() >= WINDOW_PACKETS
    }

    fn hold(&mut self, ts_ns: u64, linktype: u32, snaplen: u32, origlen: u32, data: &[u8]) {
        self.held.push(Held { ts_ns, linktype, snaplen, origlen, start: self.bytes.len(), len: data.len() });
        self.bytes.extend_from_slice(data);
    }

    /// Orders the held packets for handing over: the open file's link type
    /// first, then the others in the order they first appeared; each in
    /// input order.
    fn start_drain(&mut self) {
        if self.draining || self.held.is_empty() {
            return;
        }
        let mut order: Vec<u32> = self.last_linktype.into_iter().collect();
        for h in &self.held {
            if !order.contains(&h.linktype) {
                order.push(h.linktype);
            }
        }
        self.held.sort_by_key(|h| order.iter().position(|&l| l == h.linktype));
        self.next = 0;
        self.draining = true;
    }

    /// Hands held packets over while there is room (or, with `force`,
    /// regardless: the ones without room count as dropped). True when every one is.
    fn drain(&mut self, out: &mut Delivery<'_>, force: bool) -> bool {
        while self.draining {
            let Some(h) = self.held.get(self.next).copied() else {
                self.held.clear();
                self.bytes.clear();
                self.draining = false;
                break;
            };
            if !force && !out.has_room(h.len as u32) {
                return false;
            }
            out.packet(h.ts_ns, h.linktype, h.snaplen, h.origlen, &[&self.bytes[h.start..h.start + h.len]]);
            self.last_linktype = Some(h.linktype);
            self.next += 1;
        }
        true
    }
}

/// Reads a list of capture files one after the other.
pub struct FileSource {
    paths: Vec<PathBuf>,
    next: usize,
    /// The file being read, its reader and whether it is byte-swapped.
    cur: Option<(PathBuf, Reader<Input>, bool)>,
    expression: Option<String>,
    /// Per (link type, byte-swapped file) as tcpdump compiles per file.
    filters: Vec<((u32, bool), Option<Filter>)>,
    problems: Vec<String>,
    /// Files opened so far.
    pub files_read: usize,
    stopped: bool,
    /// Set when the recording stops: a pipe waiting for data reads as ended.
    stop: Arc<AtomicBool>,
    /// Set while a file is opened: its header is read whole, however long
    /// the pipe takes; afterwards a pipe with nothing yet says so.
    patient: Arc<AtomicBool>,
    /// Group the packets of a file whose link types interleave (see
    /// [`FileSource::group_link_types`]).
    group: bool,
    /// The current file's first link type, and whether another followed it.
    first_linktype: Option<u32>,
    mixed: bool,
    window: Window,
    /// Polls after the stop that found no room for the held packets.
    stalled: u32,
}

impl FileSource {
    pub fn new(paths: Vec<PathBuf>, expression: Option<String>) -> FileSource {
        FileSource {
            paths,
            next: 0,
            cur: None,
            expression,
            filters: Vec::new(),
            problems: Vec::new(),
            files_read: 0,
            stopped: false,
            stop: Arc::new(AtomicBool::new(false)),
            patient: Arc::new(AtomicBool::new(true)),
            group: false,
            first_linktype: None,
            mixed: false,
            window: Window::default(),
            stalled: 0,
        }
    }

    /// Once a file's packets change link type, holds up to 32 MiB (or
    /// 262,144 packets) of them back and hands them over grouped by link
    /// type, each group in input order, the open file's link type first:
    /// a stream writes one file at a time and a file holds one link type,
    /// so interleaved link types then make a few files per window instead
    /// of one per change. The window is handed over when it is full, at the
    /// end of each file, while a pipe has nothing new, and at the stop.
    /// For files of one link type nothing is held back or copied. Not for
    /// `-c` (which packets are the first N is the input's order) nor for
    /// `--dedup`/`--flow-cutoff` (they judge packets in time order).
    pub fn group_link_types(mut self, on: bool) -> FileSource {
        self.group = on;
        self
    }

    /// Reads of a pipe end (as at its end) once `stop` is set, instead of
    /// waiting for data that may never come; what was cut so is no problem.
    pub fn stop_on(mut self, stop: Arc<AtomicBool>) -> FileSource {
        self.stop = stop;
        self
    }

    /// A problem with the input, unless the recording was stopped meanwhile
    /// (an input cut by the stop is not damaged).
    fn problem(problems: &mut Vec<String>, stop: &AtomicBool, what: String) {
        if !stop.load(Ordering::Relaxed) {
            problems.push(what);
        }
    }

    /// What could not be read, one sentence each.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    fn open_next(&mut self) -> bool {
        while self.next < self.paths.len() {
            let p = self.paths[self.next].clone();
            self.next += 1;
            self.patient.store(true, Ordering::Relaxed);
            match open(&p, &self.stop, &self.patient).and_then(peek_order) {
                Ok((f, swapped)) => match Reader::new(f) {
                    Ok(r) => {
                        self.patient.store(false, Ordering::Relaxed);
                        self.first_linktype = None;
                        self.mixed = false;
                        self.cur = Some((p, r, swapped));
                        self.files_read += 1;
                        return true;
                    }
                    Err(e) => Self::problem(&mut self.problems, &self.stop, format!("{}: {e}", p.display())),
                },
                Err(e) => Self::problem(&mut self.problems, &self.stop, format!("{}: cannot open: {e}", p.display())),
            }
        }
        false
    }
}

/// What a file source reads from: a file or pipe, or standard input.
type Input = Box<dyn Read + Send>;

/// Opens `path` for reading; `-` is standard input. A pipe (or terminal)
/// is read through [`Stoppable`].
fn open(path: &Path, stop: &Arc<AtomicBool>, patient: &Arc<AtomicBool>) -> std::io::Result<Input> {
    let (stop, patient) = (stop.clone(), patient.clone());
    if path.as_os_str() == "-" {
        let stdin = std::io::stdin();
        if is_regular(&stdin) {
            return Ok(Box::new(stdin));
        }
        return Ok(Box::new(Stoppable { r: stdin, stop, patient }));
    }
    let f = wv_sys::pipe::open_read_now(path)?;
    if is_regular(&f) {
        return Ok(Box::new(f));
    }
    Ok(Box::new(Stoppable { r: f, stop, patient }))
}

/// True when `f` is a regular file (reads never wait).
fn is_regular(f: &impl AsRawFd) -> bool {
    wv_sys::fs::kind_of_fd(f.as_raw_fd()).is_ok_and(|k| k == wv_sys::fs::Kind::File)
}

/// A pipe read only once it has data or has ended. After 100 ms without,
/// a read says `WouldBlock` (the reader can be asked again), or waits on
/// while `patient` is set; after the stop it reads as ended.
struct Stoppable<R> {
    r: R,
    stop: Arc<AtomicBool>,
    patient: Arc<AtomicBool>,
}

impl<R: Read + AsRawFd> Read for Stoppable<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            if wv_sys::pipe::readable(&self.r, std::time::Duration::from_millis(100))? {
                return self.r.read(buf);
            }
            if !self.patient.load(Ordering::Relaxed) {
                return Err(std::io::ErrorKind::WouldBlock.into());
            }
        }
    }
}

/// The input with its first bytes read and put back in front, and whether
/// they say the file is byte-swapped (a pipe cannot be sought back).
fn peek_order(mut f: Input) -> std::io::Result<(Input, bool)> {
    let mut head = [0u8; 12];
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let swapped = filter::swapped_header(&head[..n]);
    Ok((Box::new(std::io::Cursor::new(head[..n].to_vec()).chain(f)), swapped))
}

/// The filter for `linktype`, compiled on first use (a failure is reported once
/// and makes every packet of that link type count as filtered).
fn filter_for<'f>(
    filters: &'f mut Vec<((u32, bool), Option<Filter>)>,
    problems: &mut Vec<String>,
    expr: &str,
    path: &std::path::Path,
    linktype: u32,
    snaplen: u32,
    swapped: bool,
) -> &'f Option<Filter> {
    let i = match filters.iter().position(|(l, _)| *l == (linktype, swapped)) {
        Some(i) => i,
        None => {
            let f = filter::compile_file(expr, linktype, snaplen, swapped)
                .map_err(|e| {
                    problems.push(format!(
                        "{}: {e}; its packets of link type {linktype} are counted as filtered",
                        path.display()
                    ))
                })
                .ok();
            filters.push(((linktype, swapped), f));
            filters.len() - 1
        }
    };
    &filters[i].1
}

impl Source for FileSource {
    fn problems(&self) -> Vec<String> {
        self.problems.clone()
    }

    fn unread(&self) -> Option<String> {
        let rest = self.paths.len() - self.next;
        let files = if rest > 0 { format!("; {rest} more file(s) not read") } else { String::new() };
        // A regular file read to its last byte (`-c` met at its last packet) left nothing.
        let whole = |path: &Path, at: u64| std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == at);
        match &self.cur {
            Some((path, r, _)) if rest == 0 && whole(path, r.offset()) => None,
            Some((path, r, _)) => Some(format!("{} read up to byte {}{files}", path.display(), r.offset())),
            None if rest > 0 => Some(format!("{rest} file(s) not read")),
            None => None,
        }
    }

    fn stop_intake(&mut self) -> Result<(), CaptureError> {
        self.stopped = true;
        Ok(())
    }

    /// Packets held back (grouped by link type) still go out after the stop.
    fn drained_when_idle(&self) -> bool {
        self.window.held.is_empty()
    }

    fn poll(&mut self, out: &mut Delivery<'_>) -> Result<Poll, CaptureError> {
        // Packets held back are handed over first, the read ones too at the stop.
        if self.stopped || self.cur.is_none() {
            self.window.start_drain();
        }
        // After the stop, a writer that frees no room for 5 s (it failed) does not hold the
        // recording up: what is held then counts as dropped (arena full).
        let force = self.stopped && self.stalled >= 25_000;
        if !self.window.drain(out, force) {
            self.stalled += u32::from(self.stopped);
            std::thread::sleep(std::time::Duration::from_micros(200));
            return Ok(Poll::Idle);
        }
        if self.stopped || (self.cur.is_none() && !self.open_next()) {
            return Ok(Poll::End);
        }
        let FileSource { cur, expression, filters, problems, stop, group, first_linktype, mixed, window, .. } = self;
        let (path, reader, swapped) = cur.as_mut().expect("opened above");
        let swapped = *swapped;
        for _ in 0..BATCH {
            // With `-c`, no packet is read past the last one stored (tcpdump
            // -r -c reads no further either): read ahead, it would count as
            // received and dropped.
            if out.limit_reached() {
                return Ok(Poll::Packets);
            }
            // Never drop what is read from a file: wait for the writer instead.
            if !out.has_room(wv_wire::reader::MAX_BLOCK_LEN.min(wv_wire::MAX_SNAPLEN)) {
                std::thread::sleep(std::time::Duration::from_micros(200));
                return Ok(Poll::Idle);
            }
            match reader.next_packet() {
                Ok(Some(p)) => {
                    let keep = match expression {
                        None => true,
                        Some(expr) => match filter_for(filters, problems, expr, path, p.linktype, p.snaplen, swapped) {
                            Some(f) => f.matches(p.data, p.origlen),
                            None => false,
                        },
                    };
                    if !keep {
                        out.filtered();
                        continue;
                    }
                    if *group && !*mixed {
                        *mixed = first_linktype.is_some_and(|l| l != p.linktype);
                        first_linktype.get_or_insert(p.linktype);
                    }
                    if !*mixed {
                        out.packet(p.ts_ns, p.linktype, p.snaplen, p.origlen, &[p.data]);
                        window.last_linktype = Some(p.linktype);
                        continue;
                    }
                    window.hold(p.ts_ns, p.linktype, p.snaplen, p.origlen, p.data);
                    if window.full() {
                        window.start_drain();
                        return Ok(Poll::Packets);
                    }
                }
                Ok(None) => {
                    *cur = None;
                    return Ok(Poll::Packets);
                }
                // A pipe with nothing yet: what is held goes out, the pump ticks, then asks again.
                Err(e) if e.is_would_block() => {
                    window.start_drain();
                    return Ok(Poll::Idle);
                }
                Err(e) => {
                    Self::problem(problems, stop, format!("{}: {e}", path.display()));
                    *cur = None;
                    return Ok(Poll::Packets);
                }
            }
        }
        Ok(Poll::Packets)
    }
}
