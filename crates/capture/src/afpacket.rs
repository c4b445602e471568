//! The live source: an AF_PACKET TPACKET_V3 ring (one per worker, joined in a
//! fanout group), with the capture filter running in the kernel.
//!
//! Frames are stored as libpcap stores them for `tcpdump -i IF -w`: a VLAN
//! tag the kernel stripped is put back after the MAC addresses (caplen and
//! origlen grow by 4), then the snapshot length is applied.

use crate::handover::Window;
use crate::worker::BATCH;
use crate::{CaptureError, Delivery, Frame, KernelCounts, Poll, Source};
use std::sync::Arc;
use wv_sys::afpacket::{Drain, FilteredCounter, Ring};

/// How long one poll waits for a block.
const POLL_MS: i32 = 50;

/// One worker's ring.
pub struct AfPacketSource {
    ring: Ring,
    linktype: u32,
    snaplen: u32,
    /// The stream that owns the filtered-packet counter reads it; others have `None`.
    counter: Option<Arc<FilteredCounter>>,
    kernel: KernelCounts,
    drain: Drain,
    /// While another ring sees the same packets (record's start-up, [`crate::handover`]):
    /// the stretch of time this one stores.
    window: Option<Arc<Window>>,
}

impl AfPacketSource {
    pub fn new(ring: Ring, linktype: u32, snaplen: u32, counter: Option<Arc<FilteredCounter>>) -> AfPacketSource {
        AfPacketSource {
            ring,
            linktype,
            snaplen,
            counter,
            kernel: KernelCounts::default(),
            drain: Drain::default(),
            window: None,
        }
    }

    /// Stores only the packets stamped inside `window` (the others are another ring's, and
    /// neither stored nor counted here).
    pub fn within(mut self, window: Arc<Window>) -> AfPacketSource {
        self.window = Some(window);
        self
    }
}

impl Source for AfPacketSource {
    fn poll(&mut self, out: &mut Delivery<'_>) -> Result<Poll, CaptureError> {
        let linktype = self.linktype;
        let Some(block) = self.ring.next_block(POLL_MS)? else {
            self.drain.empty_wait();
            return Ok(Poll::Idle);
        };
        self.drain.block();
        if self.window.as_ref().is_some_and(|w| block.frames().next().is_some_and(|f| w.settled_by(f.ts_ns))) {
            self.window = None;
        }
        // Read once a block; with no window every frame is inside.
        let (from, until) = self.window.as_ref().map_or((0, u64::MAX), |w| w.bounds());
        let inside = |f: &wv_sys::afpacket::Frame<'_>| (from..until).contains(&f.ts_ns);
        if !out.batches() {
            // No reducer: frame by frame, straight from the ring (building a
            // batch costs more than it saves when no table is looked up).
            for f in block.frames() {
                if !inside(&f) {
                    continue;
                }
                self.kernel.count_stamp(f.hw_stamp);
                let tag = tag_of(&f);
                let fr = stored(&f, &tag, linktype, self.snaplen);
                out.packet(fr.ts_ns, fr.linktype, fr.snaplen, fr.origlen, fr.parts());
            }
            return Ok(Poll::Packets);
        }
        // In batches: the reducers start their table lookups for a whole
        // batch before judging it (see Delivery::packets).
        let mut frames = block.frames();
        loop {
            let mut raw = [None; BATCH];
            let mut m = 0;
            for f in frames.by_ref().filter(inside).take(BATCH) {
                raw[m] = Some(f);
                m += 1;
            }
            if m == 0 {
                break;
            }
            let mut tags = [[0u8; 4]; BATCH];
            for (tag, f) in tags.iter_mut().zip(raw.iter().flatten()) {
                self.kernel.count_stamp(f.hw_stamp);
                *tag = tag_of(f);
            }
            let mut batch = [Frame::EMPTY; BATCH];
            for ((slot, f), tag) in batch.iter_mut().zip(raw.iter().flatten()).zip(&tags) {
                *slot = stored(f, tag, linktype, self.snaplen);
            }
            out.packets(&batch[..m]);
        }
        Ok(Poll::Packets)
    }

    fn stop_intake(&mut self) -> Result<(), CaptureError> {
        self.drain.stopped();
        self.ring.stop_intake()?;
        if let Some(c) = &self.counter {
            c.stop_intake()?;
        }
        Ok(())
    }

    fn retire(&mut self) -> Result<(), CaptureError> {
        self.drain.stopped();
        self.ring.stop_intake()?;
        Ok(())
    }

    fn drained_when_idle(&self) -> bool {
        self.drain.done(&self.ring)
    }

    fn kernel_counts(&mut self) -> Result<KernelCounts, CaptureError> {
        let s = self.ring.take_stats()?;
        self.kernel.dropped += s.drops;
        if let Some(c) = &self.counter {
            self.kernel.filtered += c.take_count()?;
        }
        Ok(self.kernel)
    }
}

/// The 4 bytes of the VLAN tag the kernel stripped from `f` (zeros when none).
#[inline]
fn tag_of(f: &wv_sys::afpacket::Frame<'_>) -> [u8; 4] {
    let mut tag = [0u8; 4];
    if let Some(v) = f.vlan {
        tag[..2].copy_from_slice(&v.tpid.to_be_bytes());
        tag[2..].copy_from_slice(&v.tci.to_be_bytes());
    }
    tag
}

/// `f` as libpcap stores it: on Ethernet its stripped VLAN tag (`tag`, from
/// [`tag_of`]) put back after the MAC addresses, then cut at `snaplen`.
#[inline]
fn stored<'a>(f: &wv_sys::afpacket::Frame<'a>, tag: &'a [u8; 4], linktype: u32, snaplen: u32) -> Frame<'a> {
    let (d, cap) = (f.data, snaplen as usize);
    match f.vlan {
        Some(_) if linktype == wv_wire::linktype::ETHERNET && d.len() >= 12 => {
            let total = (d.len() + 4).min(cap);
            let mac = 12.min(total);
            let tag_len = 4.min(total - mac);
            let rest = total - mac - tag_len;
            Frame::new(f.ts_ns, linktype, snaplen, f.wire_len + 4, &[&d[..mac], &tag[..tag_len], &d[12..12 + rest]])
        }
        _ => Frame::one(f.ts_ns, linktype, snaplen, f.wire_len, &d[..d.len().min(cap)]),
    }
}
