//! The AF_XDP live source (`record --source xdp`): one XSK socket per receive queue and worker,
//! fed by the XDP program of [`wv_sys::xdp`].
//!
//! Frames reach user space as they were on the wire (XDP runs before the kernel takes a VLAN
//! tag out of the frame), so they are stored as they come. Each frame is stamped by the XDP
//! program as the driver hands it over (`bpf_ktime_get_ns`, `CLOCK_MONOTONIC`, in the metadata
//! in front of the frame), not when user space reads it; each poll turns those stamps into wall
//! clock time with the offset between the two clocks read at that poll. It is a software
//! stamp, not the NIC's. A frame without one (a driver without room for metadata) takes the
//! stamp of the frame before it in the same read when that one had its own, else the wall
//! clock of the read. After a small batch the worker sleeps a little
//! (at most 1 ms, less for a small ring) so that the next poll reads many frames at once instead
//! of one system call per few frames: the stamps keep each frame's own time. The capture
//! filter runs here, in user space ([`wv_filter::Filter`], libpcap's program), and counts
//! what it rejects as filtered.

use crate::worker::now_ns;
use crate::{CaptureError, Delivery, KernelCounts, Poll, Source};
use std::sync::Arc;
use wv_filter::Filter;
use wv_sys::afpacket::tx::monotonic_ns;
use wv_sys::xdp::{XdpProgram, XskSocket};

/// How long one poll waits for frames.
const POLL_MS: i32 = 50;
/// A batch smaller than this is followed by a short sleep (see the module documentation).
const COALESCE_BELOW: u32 = 256;
/// How far apart two monotonic clock reads around a wall clock read may be for the pair to
/// give the offset between the clocks (the reads take tens of nanoseconds when not preempted):
/// the offset is then known within half of it.
const CLOCKS_SLACK_NS: u64 = 2_000;
/// A stamp earlier than the previous frame's by less than this is raised to it: the offset
/// between the clocks, read anew at each poll, may move by up to [`CLOCKS_SLACK_NS`] between
/// two polls (and by the clock's slew), which could put a batch's first frames before the
/// previous batch's last when they came microseconds apart. A larger step back is the wall
/// clock's own (set back by hand or by NTP) and is kept, as AF_PACKET's stamps keep it.
const CLOCKS_JITTER_NS: u64 = 10 * CLOCKS_SLACK_NS;
/// The highest rate the sleep is sized for: 10 GbE's 64-byte frames.
const MAX_PPS: u64 = 15_000_000;

/// One worker's socket.
pub struct XdpSource {
    sock: XskSocket,
    /// Shared by every worker; the last one dropped detaches the program.
    prog: Arc<XdpProgram>,
    linktype: u32,
    snaplen: u32,
    filter: Option<Filter>,
    /// A frame of more than four descriptors, or a multi-part one the filter must see whole, is
    /// copied here.
    scratch: Vec<u8>,
    kernel: KernelCounts,
    stopping: bool,
    idle_after_stop: u32,
    /// The sleep after a small batch: a quarter of the ring's frames at [`MAX_PPS`], at most 1 ms.
    coalesce: std::time::Duration,
    /// The offset from `CLOCK_MONOTONIC` to the wall clock ([`XdpSource::clocks`]), and the
    /// monotonic time it was read at (0: none yet).
    to_wall: u64,
    to_wall_at: u64,
    /// The last frame's stamp.
    last_ts: u64,
}

impl XdpSource {
    pub fn new(sock: XskSocket, prog: Arc<XdpProgram>, linktype: u32, snaplen: u32, filter: Option<Filter>) -> Self {
        let ns = (u64::from(sock.frames()) * 1_000_000_000 / 4 / MAX_PPS).min(1_000_000);
        XdpSource {
            coalesce: std::time::Duration::from_nanos(ns),
            sock,
            prog,
            linktype,
            snaplen,
            filter,
            scratch: Vec::with_capacity(64 * 1024),
            kernel: KernelCounts::default(),
            stopping: false,
            idle_after_stop: 0,
            to_wall: 0,
            to_wall_at: 0,
            last_ts: 0,
        }
    }

    /// The wall clock now, and the offset that turns a `CLOCK_MONOTONIC` stamp into it: the wall
    /// clock is read between two monotonic reads and paired with their midpoint, the narrowest
    /// of up to three such reads. It replaces the kept offset when it is at most
    /// [`CLOCKS_SLACK_NS`] wide, else only when the kept one is more than a second old (or
    /// there is none yet): a read across a preemption must not shift a batch's stamps (by
    /// milliseconds on a loaded machine, found in a test whose stored stamps went backwards),
    /// and a step of the wall clock must still reach the stamps where every read is wide (a
    /// slow clock source).
    fn clocks(&mut self) -> (u64, u64) {
        let (mut wall, mut offset, mut width, mut at) = (0, 0, u64::MAX, 0);
        for _ in 0..3 {
            let m1 = monotonic_ns();
            let w = now_ns();
            let m2 = monotonic_ns();
            let d = m2.saturating_sub(m1);
            if d < width {
                (wall, offset, width, at) = (w, w.wrapping_sub(m1 + d / 2), d, m2);
            }
            if d <= CLOCKS_SLACK_NS {
                break;
            }
        }
        if width <= CLOCKS_SLACK_NS || self.to_wall_at == 0 || at.saturating_sub(self.to_wall_at) > 1_000_000_000 {
            (self.to_wall, self.to_wall_at) = (offset, at);
        }
        (wall, self.to_wall)
    }
}

impl Source for XdpSource {
    fn poll(&mut self, out: &mut Delivery<'_>) -> Result<Poll, CaptureError> {
        let n = self.sock.peek(POLL_MS)?;
        if n == 0 {
            if self.stopping {
                self.idle_after_stop += 1;
            }
            return Ok(Poll::Idle);
        }
        // Two clock reads per batch: the wall clock, and the offset that turns the program's
        // monotonic stamps into it.
        let (wall, to_wall) = self.clocks();
        let (sock, scratch) = (&self.sock, &mut self.scratch);
        let spill_multi = self.filter.is_some();
        let mut stamped = None;
        let mut i = 0;
        while i < n {
            // Up to four descriptors are handed over as parts; a longer frame, or a multi-part
            // one the filter must see whole, is gathered in `scratch`.
            let mut parts: [&[u8]; 4] = [&[]; 4];
            let (mut k, mut wire, mut spilled) = (0, 0usize, false);
            // A frame without a stamp (a driver that had no room for metadata) takes the
            // previous frame's when that one had its own, else the wall clock of this read.
            let stamp = sock.take_stamp(i).map(|mono| mono.wrapping_add(to_wall));
            let mut ts = stamp.or(stamped).unwrap_or(wall);
            stamped = stamp;
            if ts < self.last_ts && self.last_ts - ts < CLOCKS_JITTER_NS {
                ts = self.last_ts;
            }
            self.last_ts = ts;
            loop {
                let d = sock.desc(i);
                i += 1;
                wire += d.data.len();
                if !spilled && (k == 4 || (k == 1 && spill_multi)) {
                    scratch.clear();
                    for p in &parts[..k] {
                        scratch.extend_from_slice(p);
                    }
                    spilled = true;
                }
                if spilled {
                    scratch.extend_from_slice(d.data);
                } else {
                    parts[k] = d.data;
                    k += 1;
                }
                if !d.more || i >= n {
                    break;
                }
            }
            self.kernel.stamped_software += 1;
            let parts: &[&[u8]] = if spilled { &[&scratch[..]] } else { &parts[..k] };
            if let Some(f) = &self.filter {
                if !f.matches(parts[0], wire as u32) {
                    out.filtered();
                    continue;
                }
            }
            out.packet(ts, self.linktype, self.snaplen, wire as u32, parts);
        }
        self.sock.release(n);
        if n < COALESCE_BELOW && !self.stopping {
            std::thread::sleep(self.coalesce);
        }
        Ok(Poll::Packets)
    }

    fn stop_intake(&mut self) -> Result<(), CaptureError> {
        self.stopping = true;
        // The queue's frames go to the host again; what is in the ring is still read.
        self.prog.remove(self.sock.queue())?;
        Ok(())
    }

    fn drained_when_idle(&self) -> bool {
        // A frame the kernel was copying when the socket left the map may land after one empty
        // poll; two mean none is left to come.
        self.idle_after_stop >= 2
    }

    fn kernel_counts(&mut self) -> Result<KernelCounts, CaptureError> {
        let s = self.sock.stats()?;
        // Each dropped frame counts once, in rx_ring_full or in rx_dropped; of the latter, those
        // the fill ring had no chunk for are the fill-ring cause (at most one per frame), the
        // rest another cause of their own. A full RX ring is `kernel`, as AF_PACKET's full ring.
        let fill = s.rx_fill_ring_empty.min(s.rx_dropped);
        self.kernel.dropped = s.rx_ring_full;
        self.kernel.dropped_fill_ring = fill;
        self.kernel.dropped_xsk_other = s.rx_dropped - fill;
        Ok(self.kernel)
    }
}
