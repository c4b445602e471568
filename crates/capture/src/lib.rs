//! Packet sources and the capture worker.
//!
//! A [`Source`] delivers packets in batches to a [`Delivery`], which applies
//! the user-space filter (where the kernel cannot filter), counts, and hands
//! each packet to the stream's producer. [`worker::run`] drives one source
//! until it ends or is stopped, then drains it so that every packet it
//! accepted is either stored or counted.
#![deny(unsafe_code)]

pub mod afpacket;
pub mod counters;
pub mod file;
pub mod handover;
pub mod reduce;
pub mod synthetic;
pub mod worker;
pub mod xdp;
pub mod zerocopy;

pub use counters::{Counts, SharedCounts};
pub use worker::{Delivery, Frame};

/// What one poll of a source produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// Some packets were delivered (possibly zero after filtering).
    Packets,
    /// Nothing arrived within the source's wait time.
    Idle,
    /// The source is exhausted (end of files, count reached).
    End,
}

/// Kernel-side counters of a source, cumulative since it opened.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KernelCounts {
    /// Packets the kernel filter rejected.
    pub filtered: u64,
    /// Packets accepted by the filter that the kernel dropped (ring full).
    pub dropped: u64,
    /// Packets an AF_XDP socket dropped because its fill ring had no free chunk.
    pub dropped_fill_ring: u64,
    /// Packets an AF_XDP socket dropped for another reason than a full RX ring (that is
    /// `dropped`) or an empty fill ring (a frame too large for its chunks, say).
    pub dropped_xsk_other: u64,
    /// Frames that reached user space with the NIC's hardware stamp.
    pub stamped_hardware: u64,
    /// Frames that reached user space with a software stamp.
    pub stamped_software: u64,
}

impl KernelCounts {
    /// Counts one frame's stamp as the NIC's or the kernel's.
    #[inline]
    pub fn count_stamp(&mut self, hardware: bool) {
        if hardware {
            self.stamped_hardware += 1;
        } else {
            self.stamped_software += 1;
        }
    }
}

/// Errors of a source while it runs.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(transparent)]
    AfPacket(#[from] wv_sys::afpacket::Error),
    #[error(transparent)]
    Xdp(#[from] wv_sys::xdp::Error),
    #[error("{0}")]
    Other(String),
}

/// A packet source. Implementations deliver packets through `out` and must
/// not allocate, lock or make a system call per packet.
pub trait Source: Send {
    /// Delivers the next batch of packets.
    fn poll(&mut self, out: &mut Delivery<'_>) -> Result<Poll, CaptureError>;
    /// Stops new packets from entering the source (live capture); what is
    /// already inside is still delivered by later polls until `Idle`/`End`.
    fn stop_intake(&mut self) -> Result<(), CaptureError> {
        Ok(())
    }
    /// Stops new packets from entering the source as `stop_intake` does, but only its own
    /// (a live ring that another takes over from, [`handover`]): counters it shares with that
    /// other source go on.
    fn retire(&mut self) -> Result<(), CaptureError> {
        self.stop_intake()
    }
    /// True if, after `stop_intake` (or `retire`), a poll returning `Idle` means the
    /// source is drained.
    fn drained_when_idle(&self) -> bool {
        true
    }
    /// Input problems met so far (damaged files), one sentence each.
    fn problems(&self) -> Vec<String> {
        Vec::new()
    }
    /// What of a finite input (files) was left unread because the
    /// recording was stopped before its end, in one sentence.
    fn unread(&self) -> Option<String> {
        None
    }
    /// Kernel counters so far.
    fn kernel_counts(&mut self) -> Result<KernelCounts, CaptureError> {
        Ok(KernelCounts::default())
    }
}
