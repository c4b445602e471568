//! The capture worker's end of a stream: lays records into the arena as the
//! file bytes they will be, and decides where files begin and end.
//!
//! HOT PATH: [`StreamProducer::append`] runs once per packet. No allocation,
//! no lock, no system call, no logging; one atomic load only when the cached
//! free space of the ring runs out, one queue push per arena block.

use crate::Format;
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;
use std::thread::Thread;
use wv_sys::byte_ring::Producer;
use wv_sys::uring::DIRECT_ALIGN;
use wv_wire::{pcap, pcapng};

/// Messages from the producer to the writer, in stream order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    /// A file starts at stream position `pos` (4 KiB aligned) with its header.
    Open { pos: u64, seq: u64, first_ns: u64, linktype: u32, snaplen: u32 },
    /// Bytes before `end` are final. With `flush`, write them now even if they
    /// do not fill an aligned block (bounds what a crash can lose when traffic is slow).
    Commit { end: u64, flush: bool },
    /// The open file ends at `end`; the next file, if any, starts at the next 4 KiB boundary.
    Close { end: u64, last_ns: u64, packets: u64 },
    /// No more messages.
    Done,
}

/// Rotation and layout choices for one stream.
#[derive(Debug, Clone, Copy)]
pub struct StreamConfig {
    pub format: Format,
    /// Close a file before it would exceed this many bytes.
    pub file_size: u64,
    /// Close files at multiples of this many nanoseconds since the epoch (clock-aligned).
    pub file_time_ns: Option<u64>,
    /// Commit granularity: the writer's block size.
    pub block_size: u64,
    /// Flush a partial block after this long without a commit.
    pub flush_after_ns: u64,
    /// Close a file at its time boundary by the wall clock, this long after
    /// the boundary, even if no packet arrives (live and generated traffic,
    /// whose timestamps follow the clock). The grace lets packets stamped
    /// before the boundary but handed over late by the kernel (a ring block
    /// is retired up to its timeout later) still go into their file. `None`
    /// for files read from disk, whose timestamps are not today's.
    pub clock_close_grace_ns: Option<u64>,
}

struct OpenFile {
    start: u64,
    last_ns: u64,
    packets: u64,
    linktype: u32,
    snaplen: u32,
    /// Time rotation boundary (u64::MAX if none).
    boundary: u64,
    /// Time rotation backwards: a packet stamped before this closes the
    /// file too (0 if none; see where `open_file` sets it).
    back_limit: u64,
}

/// The producer end of one stream.
pub struct StreamProducer {
    ring: Producer,
    queue: Arc<ArrayQueue<Msg>>,
    writer: Option<Thread>,
    cfg: StreamConfig,
    file: Option<OpenFile>,
    seq: u64,
    /// Where the block after the last committed one starts: an append that
    /// reaches it commits (compared, not divided per packet: a 64-bit
    /// division cost ~10 ns a packet on this VM's cores).
    next_block: u64,
    committed_head: u64,
    last_commit_ns: u64,
    /// The open file's last packet time before the record [`StreamProducer::append_held`] laid
    /// out, for [`StreamProducer::retract`].
    held_last_ns: u64,
}

/// The first time a pcap record cannot hold (2^32 seconds after the epoch).
pub const PCAP_TIME_LIMIT_NS: u64 = (u32::MAX as u64 + 1) * 1_000_000_000;

/// How far ahead of the head [`StreamProducer::append`] asks for the arena's
/// lines to write: 4 KiB, two or three 1514-byte records, fifty 64-byte
/// ones. Measured at 512 B to 16 KiB (RESULTS.md, 2026-11-28): 1514-byte
/// records cost ~13% less at 4 KiB than at 512 B (~20% less than with one
/// line 512 B ahead per record, before), more again at 8 and 16 KiB.
const PREFETCH_AHEAD: u64 = 4096;

/// Messages the queue must always have room for besides one per block.
const QUEUE_SLACK: usize = 8;

impl StreamProducer {
    pub fn new(ring: Producer, queue: Arc<ArrayQueue<Msg>>, cfg: StreamConfig) -> StreamProducer {
        StreamProducer {
            ring,
            queue,
            writer: None,
            cfg,
            file: None,
            seq: 0,
            next_block: cfg.block_size,
            committed_head: 0,
            last_commit_ns: 0,
            held_last_ns: 0,
        }
    }

    /// Whether a packet time fits this stream's records: a pcap record
    /// holds 32-bit seconds (up to 2106-02-07T06:28:15Z); pcapng 64-bit
    /// time. A packet that does not fit is not stored (the caller counts it
    /// as `timestamp_range`): wrapped, its time would lie.
    #[inline]
    pub fn time_fits(&self, ts_ns: u64) -> bool {
        self.cfg.format != Format::Pcap || ts_ns < PCAP_TIME_LIMIT_NS
    }

    /// Numbers the next file `seq + 1` (continue an existing stream directory).
    pub fn set_last_seq(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// The thread to wake when a message is queued: the writer thread ([`crate::writer::run`]),
    /// which otherwise looks at the queue only once a second when it has nothing in flight.
    pub fn set_writer(&mut self, t: Thread) {
        self.writer = Some(t);
    }

    /// Fraction of the arena in use.
    pub fn arena_fill(&self) -> f64 {
        self.ring.fill()
    }

    /// True if a record of up to `caplen` captured bytes (plus a new file's
    /// header) fits now. Sources that must not drop (files, the unpaced
    /// generator) wait for this instead of dropping.
    pub fn has_room(&mut self, caplen: u32) -> bool {
        let need = self.cfg.format.record_len(caplen) + DIRECT_ALIGN + self.cfg.format.preamble_len() as u64;
        self.ring.has_room(need) && self.queue.len() + QUEUE_SLACK <= self.queue.capacity()
    }

    /// Stores one packet whose captured bytes are the concatenation of `parts`
    /// (a VLAN tag re-inserted by the caller is one of them), `caplen` bytes
    /// in all (the caller summed them once). Returns where its bytes start in
    /// the arena (for [`StreamProducer::holds`]), or None if the packet was
    /// dropped because the arena is full; the caller counts what happened.
    #[inline]
    pub fn append(
        &mut self,
        ts_ns: u64,
        linktype: u32,
        snaplen: u32,
        origlen: u32,
        caplen: u32,
        parts: &[&[u8]],
    ) -> Option<u64> {
        let at = self.append_held(ts_ns, linktype, snaplen, origlen, caplen, parts)?;
        self.keep();
        Some(at)
    }

    /// [`StreamProducer::append`] that leaves the record to be judged: until
    /// [`StreamProducer::keep`] or [`StreamProducer::retract`], nothing after the last commit
    /// reaches the writer, so the record may still be taken back.
    #[inline]
    pub fn append_held(
        &mut self,
        ts_ns: u64,
        linktype: u32,
        snaplen: u32,
        origlen: u32,
        caplen: u32,
        parts: &[&[u8]],
    ) -> Option<u64> {
        debug_assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), caplen as usize);
        let rec = self.cfg.format.record_len(caplen);
        if let Some(f) = &self.file {
            let size = self.ring.head() - f.start;
            if f.linktype != linktype
                || f.snaplen != snaplen
                || ts_ns >= f.boundary
                || ts_ns < f.back_limit
                || (f.packets > 0 && size + rec > self.cfg.file_size)
            {
                self.close_file();
            }
        }
        // Room for this record, plus a file header and alignment padding if a
        // file must be opened, plus queue slots for the messages it may cause.
        let open_cost = if self.file.is_none() {
            let pad = self.ring.head().next_multiple_of(DIRECT_ALIGN) - self.ring.head();
            pad + self.cfg.format.preamble_len() as u64
        } else {
            0
        };
        if !self.ring.has_room(open_cost + rec) || self.queue.len() + QUEUE_SLACK > self.queue.capacity() {
            return None;
        }
        if self.file.is_none() {
            self.open_file(ts_ns, linktype, snaplen);
        }
        // The record's header, its bytes (where the frame's copy starts),
        // and for pcapng the padding and closing length.
        match self.cfg.format {
            Format::Pcap => {
                let mut h = [0u8; pcap::RECORD_HEADER_LEN];
                pcap::emit_record_header(&mut h, ts_ns, caplen, origlen);
                self.ring.write_array(&h);
            }
            Format::Pcapng => {
                let mut h = [0u8; pcapng::EPB_HEADER_LEN];
                pcapng::emit_epb_header(&mut h, ts_ns, caplen, origlen);
                self.ring.write_array(&h);
            }
        }
        let at = self.ring.head();
        self.ring.prefetch_ahead(PREFETCH_AHEAD);
        for p in parts {
            self.ring.write(p);
        }
        if matches!(self.cfg.format, Format::Pcapng) {
            let mut t = [0u8; 7];
            let n = pcapng::emit_epb_trailer(&mut t, caplen);
            self.ring.write(&t[..n]);
        }
        let f = self.file.as_mut().expect("file opened above");
        f.packets += 1;
        self.held_last_ns = f.last_ns;
        f.last_ns = ts_ns;
        Some(at)
    }

    /// The record [`StreamProducer::append_held`] laid out stays: a commit if it reached the
    /// next block.
    #[inline]
    pub fn keep(&mut self) {
        if self.ring.head() >= self.next_block {
            self.next_block = self.block_after(self.ring.head());
            self.commit(false);
        }
    }

    /// The record [`StreamProducer::append_held`] laid out at `at` (its bytes' position) is
    /// taken back: the arena's head returns to its header. (A file it opened stays open,
    /// named by its time.)
    #[inline]
    pub fn retract(&mut self, at: u64) {
        let header = match self.cfg.format {
            Format::Pcap => pcap::RECORD_HEADER_LEN,
            Format::Pcapng => pcapng::EPB_HEADER_LEN,
        };
        self.ring.rewind(at - header as u64);
        if let Some(f) = self.file.as_mut() {
            f.packets -= 1;
            f.last_ns = self.held_last_ns;
        }
    }

    /// The bytes of the record [`StreamProducer::append_held`] just laid out at `at`, of
    /// `caplen` bytes, in one or two slices: where the copy path judges a frame, in the cache.
    #[inline]
    pub fn copy_at(&self, at: u64, caplen: u32) -> (&[u8], &[u8]) {
        self.ring.written(at, at + u64::from(caplen)).unwrap_or((&[], &[]))
    }

    /// Whether the packet [`StreamProducer::append`] stored at `at` (its
    /// position, or the position's low [`StreamProducer::POS_BITS`] bits)
    /// is still in the arena and has these bytes (`parts` joined) and
    /// lengths: false once the arena has been written over it. Both formats
    /// end a record's header with its captured and original lengths, which
    /// are compared too.
    #[inline]
    pub fn holds(&self, at: u64, caplen: u32, origlen: u32, parts: &[&[u8]]) -> bool {
        let head = self.ring.head();
        let at = head - (head.wrapping_sub(at) & ((1 << Self::POS_BITS) - 1));
        let Some(start) = at.checked_sub(LENS_LEN as u64) else {
            return false;
        };
        let Some((a, b)) = self.ring.written(start, at + u64::from(caplen)) else {
            return false;
        };
        let mut lens = [0u8; LENS_LEN];
        lens[..4].copy_from_slice(&caplen.to_le_bytes());
        lens[4..].copy_from_slice(&origlen.to_le_bytes());
        same_bytes([a, b].into_iter(), std::iter::once(&lens[..]).chain(parts.iter().copied()))
    }

    /// Bits of a position [`StreamProducer::holds`] needs: it finds the
    /// rest from the arena's head (positions within 2^48 bytes of it).
    pub const POS_BITS: u32 = 48;

    fn open_file(&mut self, first_ns: u64, linktype: u32, snaplen: u32) {
        self.ring.pad_to(DIRECT_ALIGN);
        let start = self.ring.head();
        self.seq += 1;
        self.push(Msg::Open { pos: start, seq: self.seq, first_ns, linktype, snaplen });
        match self.cfg.format {
            Format::Pcap => {
                let mut h = [0u8; pcap::FILE_HEADER_LEN];
                pcap::emit_file_header(&mut h, snaplen, linktype);
                self.ring.write(&h);
            }
            Format::Pcapng => {
                let mut h = [0u8; pcapng::PREAMBLE_LEN];
                pcapng::emit_preamble(&mut h, snaplen, linktype);
                self.ring.write(&h);
            }
        }
        let boundary = match self.cfg.file_time_ns {
            Some(t) if t > 0 => (first_ns / t).saturating_add(1).saturating_mul(t),
            _ => u64::MAX,
        };
        // Files read one after the other may go back in time (two captures
        // given in that order): a packet more than a whole period before
        // this file's window starts a file of its own window, as one past
        // it does. Live sources do not (the kernel hands a packet of the
        // last window over late now and then: see `clock_close_grace_ns`),
        // nor do small reorderings of a file.
        let back_limit = match (self.cfg.file_time_ns, self.cfg.clock_close_grace_ns) {
            (Some(t), None) if t > 0 && boundary != u64::MAX => boundary.saturating_sub(t.saturating_mul(2)),
            _ => 0,
        };
        self.file = Some(OpenFile { start, last_ns: first_ns, packets: 0, linktype, snaplen, boundary, back_limit });
    }

    /// Ends the open file, if any, at the current head.
    pub fn close_file(&mut self) {
        if let Some(f) = self.file.take() {
            self.ring.publish();
            self.push(Msg::Close { end: self.ring.head(), last_ns: f.last_ns, packets: f.packets });
            self.committed_head = self.ring.head();
            self.next_block = self.block_after(self.ring.head());
        }
    }

    /// Where the block after the one holding position `pos` starts.
    fn block_after(&self, pos: u64) -> u64 {
        (pos / self.cfg.block_size + 1) * self.cfg.block_size
    }

    fn commit(&mut self, flush: bool) {
        self.ring.publish();
        self.push(Msg::Commit { end: self.ring.head(), flush });
        self.committed_head = self.ring.head();
    }

    fn push(&mut self, m: Msg) {
        // The caller reserved QUEUE_SLACK slots before appending, so this only
        // fails if the writer thread died; then the message is moot.
        let _ = self.queue.push(m);
        if let Some(t) = &self.writer {
            t.unpark();
        }
    }

    /// Called by the worker when it is idle or between batches, with the
    /// current wall clock: closes the file at its time boundary and flushes a
    /// partial block that has waited too long.
    pub fn tick(&mut self, now_ns: u64) {
        if let (Some(f), Some(grace)) = (&self.file, self.cfg.clock_close_grace_ns) {
            if now_ns >= f.boundary.saturating_add(grace) {
                self.close_file();
                return;
            }
        }
        if self.file.is_some() && self.ring.head() != self.committed_head {
            if now_ns.saturating_sub(self.last_commit_ns) >= self.cfg.flush_after_ns {
                self.last_commit_ns = now_ns;
                if self.queue.len() + QUEUE_SLACK <= self.queue.capacity() {
                    self.commit(true);
                }
            }
        } else {
            self.last_commit_ns = now_ns;
        }
    }

    /// Closes the open file and tells the writer there is nothing more.
    pub fn finish(&mut self) {
        self.close_file();
        while self.queue.push(Msg::Done).is_err() {
            if let Some(t) = &self.writer {
                t.unpark();
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        if let Some(t) = &self.writer {
            t.unpark();
        }
    }
}

/// Bytes at the end of a record header that hold the captured and
/// original lengths, little-endian (pcap's record header and pcapng's EPB
/// header both end so: a unit test checks).
const LENS_LEN: usize = 8;

/// True when two sequences of slices hold the same bytes.
#[inline]
fn same_bytes<'a, 'b>(a: impl Iterator<Item = &'a [u8]>, b: impl Iterator<Item = &'b [u8]>) -> bool {
    let (mut a, mut b) = (a.filter(|s| !s.is_empty()), b.filter(|s| !s.is_empty()));
    let (mut x, mut y): (&[u8], &[u8]) = (&[], &[]);
    loop {
        if x.is_empty() {
            x = a.next().unwrap_or(&[]);
        }
        if y.is_empty() {
            y = b.next().unwrap_or(&[]);
        }
        if x.is_empty() || y.is_empty() {
            return x.is_empty() && y.is_empty();
        }
        let n = x.len().min(y.len());
        if x[..n] != y[..n] {
            return false;
        }
        (x, y) = (&x[n..], &y[n..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wv_sys::byte_ring::byte_ring;
    use wv_sys::mem::AlignedBuf;

    fn producer(format: Format) -> (StreamProducer, wv_sys::byte_ring::Consumer) {
        let (p, c) = byte_ring(AlignedBuf::new(1, false).unwrap());
        let cfg = StreamConfig {
            format,
            file_size: 1 << 40,
            file_time_ns: None,
            block_size: 1 << 16,
            flush_after_ns: u64::MAX,
            clock_close_grace_ns: None,
        };
        (StreamProducer::new(p, Arc::new(ArrayQueue::new(1 << 12)), cfg), c)
    }

    #[test]
    fn time_rotation_follows_files_read_back_in_time() {
        let sec = 1_000_000_000u64;
        for (grace, want) in [(None, 5), (Some(sec), 3)] {
            let (mut s, _c) = producer(Format::Pcap);
            s.cfg.file_time_ns = Some(5 * sec);
            s.cfg.clock_close_grace_ns = grace;
            let mut files = 0;
            // 0..15 s, then (a second file given after the first) 0..9 s;
            // a packet 1 s back across a boundary starts no file.
            for t in [0, 4, 6, 11, 9, 14, 0, 3, 7] {
                let was = s.file.as_ref().map(|f| f.start);
                s.append(t * sec, 1, 65535, 60, 60, &[&[0u8; 60]]).unwrap();
                files += usize::from(s.file.as_ref().map(|f| f.start) != was);
            }
            // Read files: [0,5) [5,10) [10,15) [0,5) [5,10); live: no file back in time.
            assert_eq!(files, want, "grace {grace:?}");
        }
    }

    #[test]
    fn record_headers_end_with_the_lengths() {
        let mut h = [0u8; pcap::RECORD_HEADER_LEN];
        pcap::emit_record_header(&mut h, 123_456_789_012, 0x0102_0304, 0x0506_0708);
        assert_eq!(h[h.len() - LENS_LEN..], [4, 3, 2, 1, 8, 7, 6, 5]);
        let mut h = [0u8; pcapng::EPB_HEADER_LEN];
        pcapng::emit_epb_header(&mut h, 123_456_789_012, 0x0102_0304, 0x0506_0708);
        assert_eq!(h[h.len() - LENS_LEN..], [4, 3, 2, 1, 8, 7, 6, 5]);
    }

    #[test]
    fn holds_a_stored_packet_until_the_arena_is_written_over() {
        for format in [Format::Pcap, Format::Pcapng] {
            let (mut s, mut c) = producer(format);
            let frame: Vec<u8> = (0..300u32).map(|i| (i * 7) as u8).collect();
            let (a, b) = frame.split_at(100);
            let at = s.append(1, 1, 65535, 400, 300, &[a, b]).unwrap();
            let low = at & ((1 << StreamProducer::POS_BITS) - 1);
            assert!(s.holds(at, 300, 400, &[&frame]));
            assert!(s.holds(low, 300, 400, &[&frame[..1], &frame[1..]]), "{format:?}");
            assert!(!s.holds(at, 300, 401, &[&frame]), "origlen differs");
            assert!(!s.holds(at, 299, 400, &[&frame[..299]]), "caplen differs");
            let mut other = frame.clone();
            other[299] ^= 1;
            assert!(!s.holds(at, 300, 400, &[&other]), "last byte differs");
            assert!(!s.holds(at + 1, 300, 400, &[&frame]), "wrong place");
            // Fill the arena past the packet (the writer releases as it goes, a quarter of the
            // arena behind): the packet stays while its block is not given back, and once
            // its block is taken again it is never found there.
            let cap = s.ring.capacity();
            let filler = vec![0u8; 1000];
            let (mut n, mut gone) = (0, false);
            while s.ring.head() < at + 2 * cap {
                let released = s.ring.head().saturating_sub(cap / 4);
                c.release(released);
                assert!(s.append(2, 1, 65535, 1000, 1000, &[&filler]).is_some());
                n += 1;
                let holds = s.holds(at, 300, 400, &[&frame]);
                if released < at - LENS_LEN as u64 {
                    assert!(holds, "{format:?}: still there after {n} packets");
                }
                assert!(!(gone && holds), "{format:?}: found again after {n} packets");
                gone |= !holds;
            }
            assert!(gone, "{format:?}: written over");
        }
    }

    #[test]
    fn same_bytes_across_any_split() {
        let x: Vec<u8> = (0..50).collect();
        for i in 0..=50 {
            for j in 0..=50 {
                let a = [&x[..i], &[][..], &x[i..]];
                let b = [&x[..j], &x[j..]];
                assert!(same_bytes(a.into_iter(), b.into_iter()));
                assert!(!same_bytes(a.into_iter(), [&x[..j]].into_iter()) || j == 50);
                assert!(!same_bytes([&x[..i]].into_iter(), b.into_iter()) || i == 50);
            }
        }
        assert!(same_bytes(std::iter::empty(), [&[][..]].into_iter()));
        assert!(!same_bytes([&[1u8][..]].into_iter(), [&[2u8][..]].into_iter()));
    }
}
