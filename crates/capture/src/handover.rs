//! Capture at once: `record` goes live on a small ring, which the kernel makes in a few
//! milliseconds, and moves to its full rings (hundreds of MiB, zeroed by the kernel when they
//! are made: 0.75 s for 256 MiB on a VM whose fresh memory faults in at 350 MB/s, 3 s for
//! the zero-copy path's 1 GiB) once they are made (DESIGN.md, "Start-up").
//!
//! While both are open, both see every packet. The handover is by time: once the full rings
//! take packets, the main thread picks a moment `T` a little later; the small ring stores what
//! is stamped before `T`, the full rings what is stamped at `T` or after, and each leaves the
//! other's packets alone (neither stored nor counted). Both rings stamp a packet with the same
//! time (the kernel's receive stamp of the packet, `skb->tstamp`, which the recorder makes sure
//! is taken: `wv_sys::afpacket::receive_stamps`), so every packet is stored once. The small
//! ring is closed once its last packet before `T` has come.

use crate::worker::now_ns;
use crate::{CaptureError, Delivery, KernelCounts, Poll, Source};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

/// The stretch of time `[from, until)` a source stores while another ring sees the same
/// packets.
#[derive(Debug)]
pub struct Window {
    from: AtomicU64,
    until: AtomicU64,
}

impl Window {
    /// Packets stamped at `from` or later.
    pub fn from(from: u64) -> Arc<Window> {
        Arc::new(Window { from: AtomicU64::new(from), until: AtomicU64::new(u64::MAX) })
    }

    /// The bounds, read once per ring block.
    #[inline]
    pub fn bounds(&self) -> (u64, u64) {
        (self.from.load(Ordering::Relaxed), self.until.load(Ordering::Relaxed))
    }

    /// True once a source whose window opened at `from` (after 0, and stays open) may drop it: it
    /// received a packet stamped [`GRACE_NS`] after `from`, so the packets before `from`,
    /// which it must leave to the other ring, have all come (a ring hands packets over in
    /// the order they arrived). Spares the check per packet for the rest of the recording.
    pub fn settled_by(&self, ts_ns: u64) -> bool {
        let (from, until) = self.bounds();
        from > 0 && until == u64::MAX && ts_ns >= from.saturating_add(GRACE_NS)
    }

    fn until(&self) -> u64 {
        self.until.load(Ordering::Acquire)
    }

    /// From now on, the source stores only what is stamped before `t`.
    pub fn close_at(&self, t: u64) {
        self.until.store(t, Ordering::Release);
    }
}

/// How long after `T` the small ring stays open: a packet stamped before `T` may reach it a
/// little later (it is queued on another CPU's backlog), and the kernel hands over a partly
/// filled block after its retire timeout (40 ms) only.
pub const GRACE_NS: u64 = 200_000_000;

/// A source that reads a small ring until its successor takes over (see the module doc).
pub struct Handover {
    warm: Option<Box<dyn Source>>,
    window: Arc<Window>,
    main: Option<Box<dyn Source>>,
    next: Receiver<Box<dyn Source>>,
    retiring: bool,
    stopped: bool,
    /// No full ring comes to this source ([`Handover::alone`]): it ends once the small ring
    /// is drained.
    alone: bool,
    /// Set once the small ring was drained after its window closed (before any stop): from
    /// then on the full ring alone captures.
    handed: Arc<AtomicBool>,
    /// The small ring was drained after its window closed.
    drained: bool,
    /// The small ring's kernel counters once it is closed.
    base: KernelCounts,
}

/// The main thread's end of a [`Handover`].
pub struct HandoverTx {
    tx: Sender<Box<dyn Source>>,
    window: Arc<Window>,
}

impl HandoverTx {
    /// From `at_ns` on, the small ring stores nothing: called before `at_ns`, as soon as the
    /// full rings take packets (the main thread has `HANDOVER_AFTER` to do so).
    pub fn close_at(&self, at_ns: u64) {
        self.window.close_at(at_ns);
    }

    /// The full ring that stores from the moment given to [`HandoverTx::close_at`] on (it must
    /// store only what is stamped then or later: an `AfPacketSource::within(Window::from(at))`).
    pub fn hand_over(self, main: Box<dyn Source>) {
        // A recording that already stopped has dropped the receiver: nothing to hand over.
        let _ = self.tx.send(main);
    }
}

impl Handover {
    /// A handover from `warm`, which must store only inside `window`.
    pub fn new(warm: Box<dyn Source>, window: Arc<Window>) -> (Handover, HandoverTx) {
        let (tx, next) = std::sync::mpsc::channel();
        let h = Handover {
            warm: Some(warm),
            window: window.clone(),
            main: None,
            next,
            retiring: false,
            stopped: false,
            alone: false,
            handed: Arc::new(AtomicBool::new(false)),
            drained: false,
            base: KernelCounts::default(),
        };
        (h, HandoverTx { tx, window })
    }

    /// A small ring that ends (`Poll::End`) once its window is closed and it is drained: the
    /// full ring goes elsewhere (the zero-copy path, whose stream goes on with it on the same
    /// thread, see [`Handover::handed_over`]).
    pub fn alone(warm: Box<dyn Source>, window: Arc<Window>) -> Handover {
        let (mut h, _) = Handover::new(warm, window);
        h.alone = true;
        h
    }

    /// The small ring's window closed and the ring was drained (not stopped first).
    pub fn handed_over(&self) -> bool {
        self.drained
    }

    /// Set once the full ring alone captures (by this source, or on the zero-copy path by
    /// the thread that goes on with it), for the status reports.
    pub fn handed_flag(&self) -> Arc<AtomicBool> {
        self.handed.clone()
    }
}

impl Source for Handover {
    fn poll(&mut self, out: &mut Delivery<'_>) -> Result<Poll, CaptureError> {
        if self.main.is_none() && !self.stopped {
            self.main = self.next.try_recv().ok();
        }
        let Some(warm) = self.warm.as_mut() else {
            return match self.main.as_mut() {
                Some(m) => m.poll(out),
                None if self.alone => Ok(Poll::End),
                None => Ok(Poll::Idle),
            };
        };
        let until = self.window.until();
        if !self.retiring && until != u64::MAX && now_ns() >= until.saturating_add(GRACE_NS) {
            warm.retire()?;
            self.retiring = true;
        }
        let p = warm.poll(out)?;
        if self.retiring && !self.stopped && p == Poll::Idle && warm.drained_when_idle() {
            self.base = sum(self.base, warm.kernel_counts()?);
            self.warm = None;
            self.drained = true;
            // The zero-copy path (`alone`) says so itself once its full ring captures.
            if !self.alone {
                self.handed.store(true, Ordering::Release);
            }
        }
        // While the small ring drains, the full one is read too (what is stamped from `T` on
        // would otherwise wait the grace in it, past a time-rotated file's close).
        match self.main.as_mut() {
            Some(m) if self.retiring && p == Poll::Idle => m.poll(out),
            _ => Ok(p),
        }
    }

    fn stop_intake(&mut self) -> Result<(), CaptureError> {
        self.stopped = true;
        for s in self.warm.iter_mut().chain(self.main.iter_mut()) {
            s.stop_intake()?;
        }
        Ok(())
    }

    fn drained_when_idle(&self) -> bool {
        self.warm.iter().chain(self.main.iter()).all(|s| s.drained_when_idle())
    }

    fn kernel_counts(&mut self) -> Result<KernelCounts, CaptureError> {
        let mut k = self.base;
        for s in self.warm.iter_mut().chain(self.main.iter_mut()) {
            k = sum(k, s.kernel_counts()?);
        }
        Ok(k)
    }
}

fn sum(a: KernelCounts, b: KernelCounts) -> KernelCounts {
    KernelCounts {
        filtered: a.filtered + b.filtered,
        dropped: a.dropped + b.dropped,
        dropped_fill_ring: a.dropped_fill_ring + b.dropped_fill_ring,
        dropped_xsk_other: a.dropped_xsk_other + b.dropped_xsk_other,
        stamped_hardware: a.stamped_hardware + b.stamped_hardware,
        stamped_software: a.stamped_software + b.stamped_software,
    }
}
