//! The capture worker loop (one per stream, on its own pinned thread).
//!
//! HOT PATH: [`Delivery::packet`] (or [`Delivery::packets`], a batch at a time)
//! runs once per packet.

use crate::reduce::{Judge, Reduce, Verdict};
use crate::{CaptureError, Counts, KernelCounts, Poll, SharedCounts, Source};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use wv_store::stream::StreamProducer;

/// Where a source puts its packets during one poll.
pub struct Delivery<'a> {
    out: Sink<'a>,
    /// `--dedup` and `--flow-cutoff`.
    reduce: &'a mut Reduce,
}

/// Where [`Delivery`] stores and counts packets: apart from the reducers
/// that judge them, so that both can be borrowed at once.
struct Sink<'a> {
    stream: &'a mut StreamProducer,
    counts: &'a mut Counts,
    /// Packets that may still be stored before the count limit.
    remaining: &'a mut u64,
    /// The count limit shared with the other workers (then `remaining` is
    /// unlimited): each stored packet takes one from it.
    quota: Option<&'a Quota>,
    /// The user's snapshot length (`-s`): packets are cut to it.
    snaplen: u32,
}

/// No reducer: every frame is stored (the path without `--dedup` and
/// `--flow-cutoff`, compiled without them).
struct Keep;

impl Judge for Keep {
    type Prepared = ();
    type Pending = ();

    #[inline(always)]
    fn prepare(&self, _linktype: u32, _origlen: u32, _parts: &[&[u8]]) {}

    #[inline(always)]
    fn judge(&mut self, _ts_ns: u64, _origlen: u32, (): &(), _same: impl FnMut(u64) -> bool) -> Result<(), Verdict> {
        Ok(())
    }

    #[inline(always)]
    fn stored(&mut self, (): (), _ts_ns: u64, _at: u64) {}
}

/// One packet for [`Delivery::packets`]: its captured bytes are its parts
/// (at most four) joined.
#[derive(Clone, Copy)]
pub struct Frame<'a> {
    pub ts_ns: u64,
    pub linktype: u32,
    pub snaplen: u32,
    pub origlen: u32,
    /// The parts' lengths summed (computed once, where the frame is made).
    caplen: u32,
    parts: [&'a [u8]; 4],
    n: u8,
}

impl<'a> Frame<'a> {
    /// A frame without parts (to fill arrays).
    pub const EMPTY: Frame<'static> =
        Frame { ts_ns: 0, linktype: 0, snaplen: 0, origlen: 0, caplen: 0, parts: [&[]; 4], n: 0 };

    /// A packet of the given parts (beyond the fourth are ignored).
    #[inline]
    pub fn new(ts_ns: u64, linktype: u32, snaplen: u32, origlen: u32, parts: &[&'a [u8]]) -> Frame<'a> {
        let mut f = Frame { ts_ns, linktype, snaplen, origlen, caplen: 0, parts: [&[]; 4], n: 0 };
        for p in parts.iter().take(4) {
            f.parts[f.n as usize] = p;
            f.caplen += p.len() as u32;
            f.n += 1;
        }
        f
    }

    /// A packet in one part, as most sources hand them.
    #[inline]
    pub fn one(ts_ns: u64, linktype: u32, snaplen: u32, origlen: u32, data: &'a [u8]) -> Frame<'a> {
        Frame { ts_ns, linktype, snaplen, origlen, caplen: data.len() as u32, parts: [data, &[], &[], &[]], n: 1 }
    }

    /// The captured bytes, in parts.
    #[inline]
    pub fn parts(&self) -> &[&'a [u8]] {
        &self.parts[..self.n as usize]
    }

    /// The captured length (the parts' lengths summed).
    #[inline]
    pub fn caplen(&self) -> u32 {
        self.caplen
    }

    /// The frame cut to `snaplen` bytes, which it is longer than (so its
    /// captured length is `snaplen`). The callers compare first: most
    /// frames fit.
    #[inline]
    fn cut(&self, snaplen: u32) -> Frame<'a> {
        let mut c = Frame { snaplen, caplen: snaplen, ..*self };
        let (mut left, mut n) = (snaplen as usize, 0);
        for p in self.parts() {
            let take = p.len().min(left);
            c.parts[n] = &p[..take];
            n += 1;
            left -= take;
        }
        c.n = n as u8;
        c
    }
}

/// Packets [`Delivery::packets`] prepares together before storing them: the
/// table lookups of `--dedup` and `--flow-cutoff` for all of them are started
/// at once (see [`crate::reduce::Prepared`]), so that their memory latencies
/// overlap instead of adding up. 32 lines in flight are more than a core's
/// fill buffers: the later ones queue, none is lost.
pub const BATCH: usize = 32;
/// How many frames ahead of the one being stored [`Delivery::packets`]
/// prepares (the prefetch distance).
const AHEAD: usize = 8;
/// How many frames ahead of the one being stored [`Judge::touch`] asks
/// for the buckets again: eight 1514-byte frames' copies pass ~48 KiB
/// through the first-level cache, more than it holds (32-48 KiB).
const NEAR: usize = 2;

impl Delivery<'_> {
    /// Stores one packet whose captured bytes are the concatenation of
    /// `parts` (at most four), cut to the user's snapshot length.
    #[inline]
    pub fn packet(&mut self, ts_ns: u64, linktype: u32, snaplen: u32, origlen: u32, parts: &[&[u8]]) {
        let f = Frame::new(ts_ns, linktype, snaplen, origlen, parts);
        if self.reduce.is_off() {
            return self.out.packet(&mut Keep, &f);
        }
        self.packet_reduced(&f);
    }

    /// [`Delivery::packet`] with a reducer on, compiled for each set of
    /// them (see [`Judge`]).
    #[inline(never)]
    fn packet_reduced(&mut self, f: &Frame<'_>) {
        let Delivery { out, reduce } = self;
        match (&mut reduce.dedup, &mut reduce.cutoff) {
            (Some(d), None) => out.packet(d, f),
            (None, Some(c)) => out.packet(c, f),
            (Some(d), Some(c)) => out.packet(&mut (d, c), f),
            (None, None) => out.packet(&mut Keep, f),
        }
    }

    /// True when [`Delivery::packets`] gains from batches (a reducer is on);
    /// without, sources may hand packets one by one.
    #[inline]
    pub fn batches(&self) -> bool {
        !self.reduce.is_off()
    }

    /// Stores packets as [`Delivery::packet`] does, one after the other,
    /// with the reducers' table lookups of up to [`BATCH`] of them started
    /// together first.
    #[inline]
    pub fn packets(&mut self, frames: &[Frame<'_>]) {
        let Delivery { out, reduce } = self;
        match (&mut reduce.dedup, &mut reduce.cutoff) {
            (None, None) => {
                for f in frames {
                    out.packet(&mut Keep, f);
                }
            }
            (Some(d), None) => out.packets(d, frames),
            (None, Some(c)) => out.packets(c, frames),
            (Some(d), Some(c)) => out.packets(&mut (d, c), frames),
        }
    }

    /// True if a packet of up to `caplen` bytes can be stored now without a
    /// drop. Lossless sources (files, the unpaced generator) check this and
    /// return [`Poll::Idle`] to wait for the writer instead of dropping.
    #[inline]
    pub fn has_room(&mut self, caplen: u32) -> bool {
        self.out.stream.has_room(caplen)
    }

    /// Counts one packet that reached user space and was rejected by the filter.
    #[inline]
    pub fn filtered(&mut self) {
        self.out.counts.delivered += 1;
        self.out.counts.filtered_user += 1;
    }

    /// Publishes the counters to `shared`, with the ones kept elsewhere
    /// brought up to date: the cutoff table's evictions and this thread's
    /// CPU time since `cpu0` (a system call: once per publish, not per packet).
    fn publish(&mut self, shared: &SharedCounts, cpu0: u64) {
        let out = &mut self.out;
        out.counts.flows_evicted = self.reduce.cutoff.as_ref().map_or(0, |c| c.evicted);
        out.counts.cpu_ns = wv_sys::cpu::thread_cpu_ns().saturating_sub(cpu0);
        shared.publish(out.counts, out.stream.arena_fill());
    }

    /// Takes the source's kernel-side counters.
    fn kernel(&mut self, kc: KernelCounts) {
        let c = &mut *self.out.counts;
        c.filtered_kernel = kc.filtered;
        c.dropped_kernel = kc.dropped;
        c.dropped_fill_ring = kc.dropped_fill_ring;
        c.dropped_xsk_other = kc.dropped_xsk_other;
        c.ts_hardware = kc.stamped_hardware;
        c.ts_software = kc.stamped_software;
    }

    /// True once the count limit is reached.
    pub fn limit_reached(&self) -> bool {
        *self.out.remaining == 0 || self.out.quota.is_some_and(Quota::is_spent)
    }
}

impl Sink<'_> {
    /// [`Delivery::packet`] judged by `r`.
    #[inline(always)]
    fn packet<R: Judge>(&mut self, r: &mut R, f: &Frame<'_>) {
        let snaplen = f.snaplen.min(self.snaplen);
        if f.caplen() > snaplen {
            let c = f.cut(snaplen);
            let p = r.prepare(c.linktype, c.origlen, c.parts());
            return self.store(r, &c, &p);
        }
        let p = r.prepare(f.linktype, f.origlen, f.parts());
        self.store(r, &Frame { snaplen, ..*f }, &p)
    }

    /// [`Delivery::packets`] judged by `r`.
    #[inline(always)]
    fn packets<R: Judge>(&mut self, r: &mut R, frames: &[Frame<'_>]) {
        for chunk in frames.chunks(BATCH) {
            let mut prepared = [R::Prepared::default(); BATCH];
            // The frames' first bytes (the headers the reducers read) may not
            // be in the cache either (the kernel wrote them): their loads are
            // started together too.
            for f in chunk {
                wv_sys::mem::prefetch(f.parts[0].as_ptr());
            }
            // Software pipelining: frame i + AHEAD is prepared (hashed, its
            // buckets prefetched) just before frame i is judged and copied,
            // so the hashing overlaps the copies' memory traffic and every
            // bucket has AHEAD frames' time to arrive.
            let n = chunk.len();
            for i in 0..AHEAD.min(n) {
                prepared[i] = self.prepare(r, &chunk[i]);
            }
            for i in 0..n {
                if let Some(f) = chunk.get(i + AHEAD) {
                    prepared[i + AHEAD] = self.prepare(r, f);
                }
                if i + NEAR < n {
                    r.touch(&prepared[i + NEAR]);
                }
                let f = &chunk[i];
                let snaplen = f.snaplen.min(self.snaplen);
                if f.caplen() > snaplen {
                    self.store_inline(r, &f.cut(snaplen), &prepared[i]);
                } else {
                    self.store_inline(r, &Frame { snaplen, ..*f }, &prepared[i]);
                }
            }
        }
    }

    /// [`Judge::prepare`] of a frame as it will be stored (cut to the
    /// user's snapshot length).
    #[inline(always)]
    fn prepare<R: Judge>(&self, r: &R, f: &Frame<'_>) -> R::Prepared {
        let snaplen = f.snaplen.min(self.snaplen);
        if f.caplen() > snaplen {
            let c = f.cut(snaplen);
            return r.prepare(c.linktype, c.origlen, c.parts());
        }
        r.prepare(f.linktype, f.origlen, f.parts())
    }

    /// Stores a frame already cut to the snapshot length (its `snaplen`
    /// the one it is stored under), judged by `r` from what it prepared of
    /// the frame.
    #[inline]
    fn store<R: Judge>(&mut self, r: &mut R, f: &Frame<'_>, prepared: &R::Prepared) {
        self.store_inline(r, f, prepared);
    }

    /// [`Sink::store`] always inlined: into the batch loop, where it saves
    /// the call's spills and reloads; left to the compiler on the one-by-one
    /// path, where inlining it cost the plain run (RESULTS.md, 2026-11-27).
    #[inline(always)]
    fn store_inline<R: Judge>(&mut self, r: &mut R, f: &Frame<'_>, prepared: &R::Prepared) {
        let Frame { ts_ns, linktype, snaplen, origlen, caplen, .. } = *f;
        let parts = f.parts();
        self.counts.delivered += 1;
        if *self.remaining == 0 {
            self.counts.dropped_shutdown += 1;
            return;
        }
        if !self.stream.time_fits(ts_ns) {
            self.counts.dropped_timestamp_range += 1;
            return;
        }
        if r.after_copy() {
            return self.store_judging_copy(r, f, prepared);
        }
        let stream = &*self.stream;
        let same = move |at| stream.holds(at, caplen, origlen, parts);
        let pending = match r.judge(ts_ns, origlen, prepared, same) {
            Ok(p) => p,
            Err(Verdict::Duplicate) => {
                self.counts.deduplicated += 1;
                return;
            }
            // Cut (a judge's Err is never Store).
            Err(_) => {
                self.counts.cut += 1;
                return;
            }
        };
        if self.quota.is_some_and(|q| q.take(1) == 0) {
            self.counts.dropped_shutdown += 1;
            return;
        }
        if let Some(at) = self.stream.append(ts_ns, linktype, snaplen, origlen, caplen, parts) {
            r.stored(pending, ts_ns, at);
            *self.remaining -= 1;
            self.counts.stored += 1;
            self.counts.stored_bytes += u64::from(caplen);
            self.counts.wire_bytes += origlen as u64;
        } else {
            if let Some(q) = self.quota {
                q.give_back(1);
            }
            self.counts.dropped_arena_full += 1;
        }
    }
}

impl Sink<'_> {
    /// [`Sink::store_inline`] for a judge that reads the frame's copy ([`Judge::after_copy`]):
    /// the frame is laid out in the arena first, judged there, and taken back out if it is
    /// not to be stored.
    #[inline(always)]
    fn store_judging_copy<R: Judge>(&mut self, r: &mut R, f: &Frame<'_>, prepared: &R::Prepared) {
        let Frame { ts_ns, linktype, snaplen, origlen, caplen, .. } = *f;
        let parts = f.parts();
        if self.quota.is_some_and(|q| q.take(1) == 0) {
            self.counts.dropped_shutdown += 1;
            return;
        }
        let Some(at) = self.stream.append_held(ts_ns, linktype, snaplen, origlen, caplen, parts) else {
            if let Some(q) = self.quota {
                q.give_back(1);
            }
            self.counts.dropped_arena_full += 1;
            return;
        };
        let verdict = {
            let stream = &*self.stream;
            let (a, b) = stream.copy_at(at, caplen);
            let copy = [a, b];
            // A stored copy is compared with this one, in the arena too.
            r.judge_copy(ts_ns, origlen, prepared, &copy, |old| stream.holds(old, caplen, origlen, &copy))
        };
        match verdict {
            Ok(pending) => {
                self.stream.keep();
                r.stored(pending, ts_ns, at);
                *self.remaining -= 1;
                self.counts.stored += 1;
                self.counts.stored_bytes += u64::from(caplen);
                self.counts.wire_bytes += origlen as u64;
            }
            Err(v) => {
                self.stream.retract(at);
                if let Some(q) = self.quota {
                    q.give_back(1);
                }
                match v {
                    Verdict::Duplicate => self.counts.deduplicated += 1,
                    _ => self.counts.cut += 1,
                }
            }
        }
    }
}

/// `-c N` shared by several workers, so that together they store N
/// packets exactly (each worker's own count stored N each): each takes
/// what it stores, a packet or a block of them at a time, with one atomic
/// operation. One worker keeps its count to itself (no atomics).
#[derive(Debug)]
pub struct Quota(AtomicU64);

impl Quota {
    pub fn new(n: u64) -> Quota {
        Quota(AtomicU64::new(n))
    }

    /// Takes up to `n` packets; returns how many were taken (0 once spent).
    #[inline]
    pub fn take(&self, n: u64) -> u64 {
        match self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| (left > 0).then(|| left - n.min(left))) {
            Ok(left) => n.min(left),
            Err(_) => 0,
        }
    }

    /// Returns packets taken but not stored.
    pub fn give_back(&self, n: u64) {
        self.0.fetch_add(n, Ordering::AcqRel);
    }

    /// True once every packet is taken.
    pub fn is_spent(&self) -> bool {
        self.0.load(Ordering::Acquire) == 0
    }
}

/// What stops a worker besides its source and what it stores per packet.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Stop after storing this many packets.
    pub max_packets: Option<u64>,
    /// Stop once the workers together stored this many (instead of `max_packets`).
    pub quota: Option<Arc<Quota>>,
    /// Cut packets to this many bytes (`-s`).
    pub snaplen: u32,
}

/// How often a busy worker publishes its counters, at least (status lines, `stats.json` and the
/// API read them): a publication comes at the first poll this long after the last one, so
/// with sparse traffic (a block per 40 ms retire timeout) up to ~90 ms apart.
const PUBLISH_NS: u64 = 50_000_000;

/// When a capture loop (the copy path's [`pump`], the zero-copy `run`) reads the kernel's
/// counters and publishes its own, from the wall clock it reads once per poll. By the clock,
/// not by a count of polls: sparse traffic comes one retired block per poll (every 40 ms), and
/// every 16th poll published the counters 0.64 s apart, so a one-second rate read 0.64 or 1.28
/// of the true one (test `console_shows_the_live_rate...`).
#[derive(Debug, Default)]
pub(crate) struct Cadence {
    kernel_read_ns: u64,
    published_ns: u64,
}

impl Cadence {
    /// True once a second: the kernel's counters (one getsockopt per socket).
    pub(crate) fn kernel_due(&mut self, now: u64) -> bool {
        let due = now.saturating_sub(self.kernel_read_ns) >= 1_000_000_000;
        if due {
            self.kernel_read_ns = now;
        }
        due
    }

    /// True when the counters (and the thread's CPU time, a system call) are to be published:
    /// after every poll that found nothing, and every [`PUBLISH_NS`] when busy.
    pub(crate) fn publish_due(&mut self, now: u64, idle: bool) -> bool {
        let due = idle || now.saturating_sub(self.published_ns) >= PUBLISH_NS;
        if due {
            self.published_ns = now;
        }
        due
    }
}

/// Wall clock in nanoseconds since the epoch.
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Drives `src` into `stream` until the source ends, `stop` is set, or
/// `max_packets` are stored; then stops the source's intake, drains it, and
/// closes the stream. Returns the final counts (also published to `shared`).
pub fn run<S: Source + ?Sized>(
    src: &mut S,
    stream: &mut StreamProducer,
    stop: &AtomicBool,
    shared: &SharedCounts,
    limits: Limits,
    mut reduce: Reduce,
) -> Result<Counts, CaptureError> {
    let cpu0 = wv_sys::cpu::thread_cpu_ns();
    let mut counts = Counts::default();
    let mut remaining = limits.max_packets.unwrap_or(u64::MAX);
    let quota = limits.quota.as_deref();
    // Stored frames stay in the arena until it wraps: dedup compares with them.
    if let Some(d) = reduce.dedup.as_mut() {
        d.compare_stored_copies();
    }
    let mut d = Delivery {
        out: Sink { stream, counts: &mut counts, remaining: &mut remaining, quota, snaplen: limits.snaplen },
        reduce: &mut reduce,
    };
    let result = pump(src, &mut d, stop, shared, cpu0);
    // Drain what the source already accepted, even after an error (a
    // failed kernel counter read, a poll that failed once), so nothing it
    // took in goes unstored or uncounted. A source that fails again ends
    // the drain; the first error is the one reported.
    let drained = src.stop_intake().and_then(|()| {
        loop {
            match src.poll(&mut d)? {
                Poll::Packets => continue,
                Poll::Idle if !src.drained_when_idle() => continue,
                _ => break,
            }
        }
        Ok(())
    });
    let kc: KernelCounts = src.kernel_counts().unwrap_or_default();
    d.kernel(kc);
    d.out.stream.finish();
    d.publish(shared, cpu0);
    result.and(drained).map(|()| counts)
}

fn pump<S: Source + ?Sized>(
    src: &mut S,
    d: &mut Delivery<'_>,
    stop: &AtomicBool,
    shared: &SharedCounts,
    cpu0: u64,
) -> Result<(), CaptureError> {
    let mut cadence = Cadence::default();
    loop {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        let p = src.poll(d)?;
        let done = d.limit_reached();
        // One clock read per poll (a vDSO call; a poll is a ring block, or 256 generated or
        // 512 read frames): time rotation, idle flushes and the counters' `Cadence`.
        let now = now_ns();
        d.out.stream.tick(now);
        if cadence.kernel_due(now) {
            let kc = src.kernel_counts()?;
            d.kernel(kc);
        }
        if cadence.publish_due(now, p != Poll::Packets) {
            d.publish(shared, cpu0);
        }
        if p == Poll::End || done {
            return Ok(());
        }
    }
}
