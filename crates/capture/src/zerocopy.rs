//! The zero-copy live loop (`record --zero-copy`): one thread per ring takes
//! the kernel's blocks, has each rewritten in place into pcapng records
//! ([`wv_sys::afpacket::Block::rewrite_pcapng`]), writes it with the
//! [`ZcWriter`] straight from the ring (an io_uring write queued on the
//! [`BlockWriter`], several in flight), and the `BlockWriter` hands each block
//! back to the kernel once its write completed, in ring order. No frame is
//! copied; the per-packet work is reading the kernel's header, writing the
//! EPB header and trailer, the counters and the index builder's key.
//!
//! The kernel filter works as on the copy path. The count limit (`-c`),
//! `--dedup` and `--flow-cutoff` turn the records they leave out into skip
//! blocks (an EPB and a skip block differ only in their type word), counted
//! as on the copy path (`shutdown`, `deduplicated`, `cut`).

use crate::handover::Window;
use crate::reduce::{Reduce, Verdict};
use crate::worker::{now_ns, Cadence, Limits};
use crate::{CaptureError, Counts, SharedCounts};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wv_store::writer::zerocopy::ZcWriter;
use wv_store::FileIndexer;
use wv_sys::afpacket::{BlockWriter, Drain, FilteredCounter, Next, Ring, ZcRecord};

/// How long one poll waits for a block.
const POLL_MS: i32 = 50;

/// One worker's ring (opened with `Ring::open_zero_copy`) with its writes in flight, the
/// filtered-packet counter if this worker reads it, and the interface's link type.
pub struct ZcRing {
    pub ring: BlockWriter,
    pub counter: Option<Arc<FilteredCounter>>,
    pub linktype: u32,
    /// While another ring sees the same packets (record's start-up, [`crate::handover`]):
    /// the stretch of time this one stores; records stamped outside it become skip blocks,
    /// neither stored nor counted.
    pub window: Option<Arc<Window>>,
}

/// Records `src` into `w` until `stop` is set or the count limit is reached, then stops the
/// ring's intake, drains it and closes the writer's file. The counts go on from `start` (what
/// this thread counted before: record's start-up stores on the copy path first). Returns the
/// final counts (also published to `shared`).
pub fn run<I: FileIndexer>(
    src: &mut ZcRing,
    w: &mut ZcWriter<I>,
    stop: &AtomicBool,
    shared: &SharedCounts,
    (limits, mut reduce): (Limits, Reduce),
    start: Counts,
) -> Result<Counts, CaptureError> {
    let ZcRing { ring: bw, counter, linktype, window } = src;
    let linktype = *linktype;
    // This thread's CPU time counts from where `start` left it.
    let cpu0 = wv_sys::cpu::thread_cpu_ns().saturating_sub(start.cpu_ns);
    let mut c = start;
    let mut remaining = limits.max_packets.unwrap_or(u64::MAX);
    let mut recs: Vec<ZcRecord> = Vec::with_capacity(1 << 14);
    let reinsert_vlan = linktype == wv_wire::linktype::ETHERNET;
    let (mut drain, mut cadence) = (Drain::default(), Cadence::default());
    let result = loop {
        let spent = remaining == 0 || limits.quota.as_ref().is_some_and(|q| q.is_spent());
        if !drain.is_stopped() && (stop.load(Ordering::Relaxed) || spent) {
            drain.stopped();
            if let Err(e) = bw.ring().stop_intake() {
                break Err(e.into());
            }
            if let Some(ctr) = &counter {
                let _ = ctr.stop_intake();
            }
        }
        w.reap(bw, false);
        let idle = match bw.take(POLL_MS) {
            Err(e) => break Err(e.into()),
            Ok(Next::Idle) => true,
            Ok(Next::Completed) => false,
            Ok(Next::Block(id)) => {
                drain.block();
                let Some(mut block) = bw.block(id) else {
                    break Err(CaptureError::Other("a ring block taken is not held".into()));
                };
                // Every record stays (no reduction, no count limit that this block could reach):
                // the writer indexes each record as the rewrite writes it, while its lines are
                // in the cache, instead of walking the 4 MiB block again after it.
                if window.as_ref().is_some_and(|w| block.frames().next().is_some_and(|f| w.settled_by(f.ts_ns))) {
                    *window = None;
                }
                let bounds = window.as_ref().map(|w| w.bounds());
                let all_stay = reduce.is_off()
                    && limits.quota.is_none()
                    && bounds.is_none()
                    && remaining >= u64::from(block.num_frames());
                let rw = match if all_stay { w.index_ahead() } else { None } {
                    Some(mut ix) => {
                        block.rewrite_pcapng_each(limits.snaplen, reinsert_vlan, &mut recs, |b, r| ix.add(b, r))
                    }
                    None => block.rewrite_pcapng(limits.snaplen, reinsert_vlan, &mut recs),
                };
                c.delivered += recs.len() as u64 + u64::from(rw.misplaced);
                // Frames that could not become records where they lie (never for Ethernet).
                c.dropped_arena_full += u64::from(rw.misplaced);
                let n = recs.len() as u64;
                c.ts_hardware += u64::from(rw.hw_stamps);
                c.ts_software += n - u64::from(rw.hw_stamps);
                // A count shared with other workers: this block's share taken
                // from it, what is not stored given back.
                let granted = limits.quota.as_ref().map(|q| q.take(n));
                if let Some(g) = granted {
                    remaining = g;
                }
                let keep = if reduce.is_off() && remaining >= n && bounds.is_none() {
                    // The common case: every record stays (no per-record verdict).
                    remaining -= n;
                    c.stored_bytes += rw.stored_bytes;
                    c.wire_bytes += rw.wire_bytes;
                    recs.len()
                } else {
                    let bounds = bounds.unwrap_or((0, u64::MAX));
                    verdicts(&mut block, &mut recs, (&mut reduce, bounds), &mut remaining, &mut c, linktype)
                };
                c.stored += keep as u64;
                if let (Some(q), Some(g)) = (&limits.quota, granted) {
                    q.give_back(g - keep as u64);
                    remaining = u64::MAX;
                }
                drop(block);
                if keep > 0 {
                    w.write_block(bw, id, &recs[..keep], rw.len);
                } else {
                    w.index_ahead_unwritten();
                }
                // It goes back to the kernel once its write completed.
                bw.seal(id);
                false
            }
        };
        if idle {
            drain.empty_wait();
        }
        // As the copy path's worker (`worker::pump`): the clock every turn, the counters by
        // its `Cadence`.
        let now = now_ns();
        w.tick(bw, now);
        if cadence.kernel_due(now) {
            if let Err(e) = kernel(bw.ring(), counter.as_deref(), &mut c) {
                break Err(e);
            }
        }
        if cadence.publish_due(now, idle) {
            c.cpu_ns = wv_sys::cpu::thread_cpu_ns().saturating_sub(cpu0);
            c.flows_evicted = reduce.cutoff.as_ref().map_or(0, |t| t.evicted);
            shared.publish(&c, 0.0);
        }
        // Every block the kernel held at the stop has come (`Drain`: by the time since the
        // stop and the last block, as a turn may wait less than the retire timeout while
        // writes are in flight).
        if drain.done(bw.ring()) {
            break Ok(());
        }
    };
    let _ = kernel(bw.ring(), counter.as_deref(), &mut c);
    // Every write completes and every file is finished before the counts are final.
    w.drain(bw);
    c.flows_evicted = reduce.cutoff.as_ref().map_or(0, |t| t.evicted);
    c.cpu_ns = wv_sys::cpu::thread_cpu_ns().saturating_sub(cpu0);
    shared.publish(&c, 0.0);
    result.map(|()| c)
}

/// The records of a block one by one: past the count limit, or left out by
/// --dedup/--flow-cutoff, a record becomes a skip block (nothing moves); the
/// others stay, compacted at the front of `recs`. Returns how many stay.
fn verdicts(
    block: &mut wv_sys::afpacket::Block<'_>,
    recs: &mut [ZcRecord],
    (reduce, (from, until)): (&mut Reduce, (u64, u64)),
    remaining: &mut u64,
    c: &mut Counts,
    linktype: u32,
) -> usize {
    let mut keep = 0;
    for k in 0..recs.len() {
        let r = recs[k];
        if !(from..until).contains(&r.ts_ns) {
            // Another ring's packet (see `ZcRing::window`): not this stream's to count. (A
            // handover runs on software stamps only: both rings stamp a packet alike.)
            block.set_skipped(&r, true);
            c.delivered -= 1;
            c.ts_software -= 1;
            continue;
        }
        let verdict = if *remaining == 0 {
            None
        } else if reduce.is_off() {
            Some(Verdict::Store)
        } else {
            let d = r.data();
            // Frames are compared by their whole hash (see `Dedup`): the
            // blocks they were stored from go back to the kernel, so there
            // are no stored copies to compare (`same` is never asked).
            let same = |_| false;
            Some(reduce.verdict(r.ts_ns, linktype, r.origlen, &[&block.bytes()[d..d + r.caplen as usize]], same))
        };
        match verdict {
            Some(Verdict::Store) => {
                if !reduce.is_off() {
                    reduce.stored(r.ts_ns, 0);
                }
                *remaining -= 1;
                c.stored_bytes += u64::from(r.caplen);
                c.wire_bytes += u64::from(r.origlen);
                recs[keep] = r;
                keep += 1;
            }
            other => {
                block.set_skipped(&r, true);
                match other {
                    Some(Verdict::Duplicate) => c.deduplicated += 1,
                    Some(Verdict::Cut) => c.cut += 1,
                    _ => c.dropped_shutdown += 1,
                }
            }
        }
    }
    keep
}

/// Adds the kernel's counters since the last read: ring drops and filtered packets.
fn kernel(ring: &Ring, counter: Option<&FilteredCounter>, c: &mut Counts) -> Result<(), CaptureError> {
    c.dropped_kernel += ring.take_stats()?.drops;
    if let Some(ctr) = counter {
        c.filtered_kernel += ctr.take_count()?;
    }
    Ok(())
}
