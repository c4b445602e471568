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

use crate::{CaptureError, Delivery, Poll, Source};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wv_filter::{self as filter, Filter};
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
struct Window {
    /// Handed over once it holds this many packet bytes, or this many
    /// packets ([`WINDOW_BYTES`], [`WINDOW_PACKETS`]; smaller in tests).
    max_bytes: usize,
    max_packets: usize,
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
    /// An empty window of at most `max_bytes` packet bytes and `max_packets` packets.
    fn new(max_bytes: usize, max_packets: usize) -> Window {
        Window {
            max_bytes,
            max_packets,
            bytes: Vec::new(),
            held: Vec::new(),
            next: 0,
            draining: false,
            last_linktype: None,
        }
    }

    fn full(&self) -> bool {
        self.bytes.len() >= self.max_bytes || self.held.len() >= self.max_packets
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
    /// Such polls (200 µs apart) after which what is held is dropped.
    stall_limit: u32,
}

/// Polls 200 µs apart without room after the stop (5 s) before the held
/// packets count as dropped.
const STALL_POLLS: u32 = 25_000;

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
            window: Window::new(WINDOW_BYTES, WINDOW_PACKETS),
            stalled: 0,
            stall_limit: STALL_POLLS,
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
        let force = self.stopped && self.stalled >= self.stall_limit;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::{run, Limits};
    use crate::{Counts, SharedCounts};
    use crossbeam_queue::ArrayQueue;
    use wv_store::stream::{Msg, StreamConfig, StreamProducer};
    use wv_sys::byte_ring::Consumer;

    /// A pcapng file with two interfaces, Ethernet (0) and raw IP (1), and
    /// `n` packets of `len` bytes alternating between them, each filled
    /// with its number. Returns (link type, bytes) of each, in input order.
    fn two_link_types(path: &Path, n: u32, len: usize) -> Vec<(u32, Vec<u8>)> {
        let sent: Vec<(u32, Vec<u8>)> = (0..n)
            .map(|i| (if i % 2 == 0 { 1 } else { 101 }, i.to_le_bytes().into_iter().cycle().take(len).collect()))
            .collect();
        let packets: Vec<(u32, u64, &[u8])> = (0..n)
            .zip(&sent)
            .map(|(i, (_, data))| (i % 2, 1_700_000_000_000_000_000 + 1000 * u64::from(i), &data[..]))
            .collect();
        wv_testkit::write_pcapng_two_interfaces(path, &packets);
        sent
    }

    /// The writer's stand-in: collects the bytes of each file of the
    /// stream (as the writer would write them) until `Done`, releasing
    /// the arena as it goes.
    fn files_of(q: Arc<ArrayQueue<Msg>>, mut c: Consumer) -> std::thread::JoinHandle<Vec<Vec<u8>>> {
        std::thread::spawn(move || {
            let (mut files, mut cur, mut at) = (Vec::new(), Vec::new(), 0u64);
            loop {
                let Some(m) = q.pop() else {
                    std::thread::yield_now();
                    continue;
                };
                let end = match m {
                    Msg::Open { pos, .. } => {
                        at = pos;
                        continue;
                    }
                    Msg::Commit { end, .. } | Msg::Close { end, .. } => end,
                    Msg::Done => return files,
                };
                if end > at {
                    let (a, b) = c.slices(at, end).expect("committed and not released");
                    cur.extend_from_slice(a);
                    cur.extend_from_slice(b);
                    at = end;
                    c.release(end);
                }
                if let Msg::Close { .. } = m {
                    files.push(std::mem::take(&mut cur));
                }
            }
        })
    }

    /// The files of a stream: each one's link type and packets.
    type Files = Vec<(u32, Vec<Vec<u8>>)>;

    /// What the recording meets after the source's first poll.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Then {
        /// Nothing: it reads to the end.
        Nothing,
        /// A stop (as SIGINT makes).
        Stop,
        /// That poll fails (as a socket error would).
        Fail,
    }

    /// The source with [`Then`] after its first poll, noting how many
    /// packets its window held then.
    struct AfterFirstPoll<'a> {
        src: &'a mut FileSource,
        stop: &'a AtomicBool,
        then: Then,
        polls: u32,
        held_then: usize,
    }

    impl Source for AfterFirstPoll<'_> {
        fn poll(&mut self, out: &mut Delivery<'_>) -> Result<Poll, CaptureError> {
            let p = self.src.poll(out);
            self.polls += 1;
            if self.polls == 1 {
                self.held_then = self.src.window.held.len();
                match self.then {
                    Then::Nothing => {}
                    Then::Stop => self.stop.store(true, Ordering::Relaxed),
                    Then::Fail => return Err(CaptureError::Other("the test's poll failure".into())),
                }
            }
            p
        }

        fn stop_intake(&mut self) -> Result<(), CaptureError> {
            self.src.stop_intake()
        }

        fn drained_when_idle(&self) -> bool {
            self.src.drained_when_idle()
        }
    }

    /// A 2 MiB arena's stream writing pcap files into `q`.
    fn stream() -> (StreamProducer, Arc<ArrayQueue<Msg>>, Consumer) {
        let (p, c) = wv_sys::byte_ring::byte_ring(wv_sys::mem::AlignedBuf::new(1, false).unwrap());
        let cfg = StreamConfig {
            format: wv_store::Format::Pcap,
            file_size: 1 << 40,
            file_time_ns: None,
            block_size: 1 << 16,
            flush_after_ns: u64::MAX,
            clock_close_grace_ns: None,
        };
        let q = Arc::new(ArrayQueue::new(1 << 12));
        (StreamProducer::new(p, q.clone(), cfg), q, c)
    }

    /// Records `src` (with `then` after its first poll) through
    /// [`crate::worker::run`] into `s`: what `run` returns, the counts it
    /// published, and the packets the window held after the first poll.
    fn run_source(
        src: &mut FileSource,
        s: &mut StreamProducer,
        then: Then,
    ) -> (Result<Counts, CaptureError>, Counts, usize) {
        let stop = AtomicBool::new(false);
        let limits = Limits { max_packets: None, quota: None, snaplen: 65535 };
        let shared = SharedCounts::default();
        let reduce = crate::reduce::Reduce::new(None, None);
        let mut w = AfterFirstPoll { src, stop: &stop, then, polls: 0, held_then: 0 };
        let r = run(&mut w, s, &stop, &shared, limits, reduce);
        (r, shared.load().0, w.held_then)
    }

    /// Records `src` (with `then` after its first poll) into a 2 MiB arena
    /// as pcap files: what `run` returned, the counts published, the
    /// packets held in the window after the first poll, and per file its
    /// link type and packets.
    fn record(src: &mut FileSource, then: Then) -> (Result<Counts, CaptureError>, Counts, usize, Files) {
        let (mut s, q, c) = stream();
        let writer = files_of(q, c);
        let (r, counts, held) = run_source(src, &mut s, then);
        let files = writer.join().unwrap();
        let files = files
            .into_iter()
            .map(|f| {
                let mut r = Reader::new(std::io::Cursor::new(f)).unwrap();
                let mut packets = Vec::new();
                let mut linktype = 0;
                while let Some(p) = r.next_packet().unwrap() {
                    linktype = p.linktype;
                    packets.push(p.data.to_vec());
                }
                (linktype, packets)
            })
            .collect();
        (r, counts, held, files)
    }

    /// Every packet of `sent` is in `files` once, each link type's in input
    /// order, and each file holds only its own link type's.
    fn each_once_in_order(sent: &[(u32, Vec<u8>)], files: &Files) {
        for lt in [1, 101] {
            let want: Vec<&Vec<u8>> = sent.iter().filter(|(l, _)| *l == lt).map(|(_, d)| d).collect();
            let got: Vec<&Vec<u8>> = files.iter().filter(|(l, _)| *l == lt).flat_map(|(_, p)| p).collect();
            assert!(want == got, "link type {lt}: {} packets sent, {} stored, or out of order", want.len(), got.len());
        }
        for (lt, packets) in files {
            let of_lt = |d: &Vec<u8>| sent.iter().any(|(l, s)| l == lt && s == d);
            assert!(packets.iter().all(of_lt), "a file of link type {lt} holds another's packet");
        }
    }

    /// A window that fills up goes out grouped (the open file's link type
    /// first) and reading goes on: each window adds one file, and every
    /// packet is stored once, in input order per link type. By packets and
    /// by bytes; the full-size window groups the whole file into two.
    #[test]
    fn a_full_window_goes_out_grouped_and_reading_goes_on() {
        let dir = wv_testkit::TempDir::new("file-window");
        let f = dir.join("two.pcapng");
        let sent = two_link_types(&f, 40, 100);
        // The first packet goes out before the link types are seen to mix;
        // the other 39 fill six windows of 6 and one of 3 at the end.
        for (max_bytes, max_packets) in [(usize::MAX, 6), (600, usize::MAX), (550, usize::MAX)] {
            let mut src = FileSource::new(vec![f.clone()], None).group_link_types(true);
            src.window = Window::new(max_bytes, max_packets);
            let (r, counts, _, files) = record(&mut src, Then::Nothing);
            assert!(r.is_ok(), "{r:?}");
            assert_eq!((counts.delivered, counts.stored), (40, 40), "window {max_bytes} B, {max_packets} packets");
            each_once_in_order(&sent, &files);
            let linktypes: Vec<u32> = files.iter().map(|(l, _)| *l).collect();
            assert_eq!(linktypes, [1, 101].repeat(4), "window {max_bytes} B, {max_packets} packets");
        }
        let mut src = FileSource::new(vec![f.clone()], None).group_link_types(true);
        let (r, counts, _, files) = record(&mut src, Then::Nothing);
        assert!(r.is_ok(), "{r:?}");
        assert_eq!(counts.stored, 40);
        each_once_in_order(&sent, &files);
        assert_eq!(files.iter().map(|(l, _)| *l).collect::<Vec<_>>(), [1, 101]);
    }

    /// A stop (SIGINT) while packets are held in the window: every packet
    /// read is stored, the held ones too, even when they need more room
    /// than the arena has (the drain waits for the writer); what was not
    /// read yet is said to be unread.
    #[test]
    fn a_stop_stores_every_held_packet() {
        let dir = wv_testkit::TempDir::new("file-window-stop");
        let f = dir.join("two.pcapng");
        // 511 held packets of 6000 bytes: more than the 2 MiB arena.
        let sent = two_link_types(&f, 2000, 6000);
        let mut src = FileSource::new(vec![f.clone()], None).group_link_types(true);
        let (r, counts, held, files) = record(&mut src, Then::Stop);
        assert!(r.is_ok(), "{r:?}");
        assert!(held * 6000 > 2 << 20, "the window held {held} packets at the stop");
        let read = BATCH;
        assert_eq!((counts.delivered, counts.stored), (read as u64, read as u64), "{counts:?}");
        each_once_in_order(&sent[..read], &files);
        let unread = src.unread().expect("the rest is said to be unread");
        assert!(unread.contains("read up to byte"), "{unread}");
    }

    /// A poll that fails while packets are held in the window (a socket
    /// error on a live source): the recording ends with that error, and
    /// every packet the source had taken in is still stored, held ones too.
    #[test]
    fn a_failed_poll_still_stores_every_held_packet() {
        let dir = wv_testkit::TempDir::new("file-window-fail");
        let f = dir.join("two.pcapng");
        let sent = two_link_types(&f, 2000, 100);
        let mut src = FileSource::new(vec![f.clone()], None).group_link_types(true);
        let (r, counts, held, files) = record(&mut src, Then::Fail);
        assert!(matches!(&r, Err(CaptureError::Other(m)) if m == "the test's poll failure"), "{r:?}");
        assert!(held > 100, "the window held {held} packets when the poll failed");
        let read = BATCH;
        assert_eq!((counts.delivered, counts.stored), (read as u64, read as u64), "{counts:?}");
        each_once_in_order(&sent[..read], &files);
    }

    /// A stop while packets are held and the writer frees no room (it
    /// failed): after the stall limit the held packets that do not fit
    /// count as dropped (arena full), and the counts add up.
    #[test]
    fn a_stop_with_a_stalled_writer_counts_what_is_held_as_dropped() {
        let dir = wv_testkit::TempDir::new("file-window-stall");
        let f = dir.join("two.pcapng");
        two_link_types(&f, 2000, 6000);
        let mut src = FileSource::new(vec![f.clone()], None).group_link_types(true);
        src.stall_limit = 20;
        // The writer's end of the arena is kept and never released.
        let (mut s, _q, _c) = stream();
        let (r, counts, held) = run_source(&mut src, &mut s, Then::Stop);
        assert!(r.is_ok(), "{r:?}");
        assert!(held * 6000 > 2 << 20, "the window held {held} packets at the stop");
        let read = BATCH as u64;
        assert_eq!(counts.delivered, read, "{counts:?}");
        assert!(counts.stored > 0 && counts.dropped_arena_full > 0, "{counts:?}");
        assert_eq!(counts.stored + counts.dropped_arena_full, read, "{counts:?}");
        assert!(src.stalled >= 20, "stalled {} polls", src.stalled);
    }
}
