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
}

/// The producer end of one stream.
pub struct StreamProducer {
    ring: Producer,
    queue: Arc<ArrayQueue<Msg>>,
    writer: Option<Thread>,
    cfg: StreamConfig,
    file: Option<OpenFile>,
    seq: u64,
    committed_block: u64,
    committed_head: u64,
    last_commit_ns: u64,
}

/// The first time a pcap record cannot hold (2^32 seconds after the epoch).
pub const PCAP_TIME_LIMIT_NS: u64 = (u32::MAX as u64 + 1) * 1_000_000_000;

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
            committed_block: 0,
            committed_head: 0,
            last_commit_ns: 0,
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

    /// The thread to wake when a message is queued.
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
    /// in all (the caller summed them once). Returns false if the packet was
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
    ) -> bool {
        debug_assert_eq!(parts.iter().map(|p| p.len()).sum::<usize>(), caplen as usize);
        let rec = self.cfg.format.record_len(caplen);
        if let Some(f) = &self.file {
            let size = self.ring.head() - f.start;
            if f.linktype != linktype
                || f.snaplen != snaplen
                || ts_ns >= f.boundary
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
            return false;
        }
        if self.file.is_none() {
            self.open_file(ts_ns, linktype, snaplen);
        }
        match self.cfg.format {
            Format::Pcap => {
                let mut h = [0u8; pcap::RECORD_HEADER_LEN];
                pcap::emit_record_header(&mut h, ts_ns, caplen, origlen);
                self.ring.write(&h);
                for p in parts {
                    self.ring.write(p);
                }
            }
            Format::Pcapng => {
                let mut h = [0u8; pcapng::EPB_HEADER_LEN];
                pcapng::emit_epb_header(&mut h, ts_ns, caplen, origlen);
                self.ring.write(&h);
                for p in parts {
                    self.ring.write(p);
                }
                let mut t = [0u8; 7];
                let n = pcapng::emit_epb_trailer(&mut t, caplen);
                self.ring.write(&t[..n]);
            }
        }
        let f = self.file.as_mut().expect("file opened above");
        f.packets += 1;
        f.last_ns = ts_ns;
        let block = self.ring.head() / self.cfg.block_size;
        if block != self.committed_block {
            self.committed_block = block;
            self.commit(false);
        }
        true
    }

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
        self.file = Some(OpenFile { start, last_ns: first_ns, packets: 0, linktype, snaplen, boundary });
    }

    /// Ends the open file, if any, at the current head.
    pub fn close_file(&mut self) {
        if let Some(f) = self.file.take() {
            self.ring.publish();
            self.push(Msg::Close { end: self.ring.head(), last_ns: f.last_ns, packets: f.packets });
            self.committed_head = self.ring.head();
            self.committed_block = self.ring.head() / self.cfg.block_size;
        }
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
