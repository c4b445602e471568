//! Per-worker counters: plain integers on the capture thread, published to
//! atomics once per batch for the status line (never per packet).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters a worker keeps on its own thread.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Packets that reached user space from the source.
    pub delivered: u64,
    /// Packets rejected by the user-space filter.
    pub filtered_user: u64,
    /// Packets rejected by the kernel filter.
    pub filtered_kernel: u64,
    /// Packets the kernel dropped (ring full).
    pub dropped_kernel: u64,
    /// Packets laid into the arena.
    pub stored: u64,
    /// Captured bytes of those packets.
    pub stored_bytes: u64,
    /// Original (wire) bytes of those packets.
    pub wire_bytes: u64,
    /// Packets dropped because the arena was full.
    pub dropped_arena_full: u64,
    /// Packets the source had accepted but could not hand over at shutdown.
    pub dropped_shutdown: u64,
}

/// The published copy of a worker's [`Counts`], plus its arena fill.
#[derive(Debug, Default)]
pub struct SharedCounts {
    fields: [AtomicU64; 10],
}

impl SharedCounts {
    pub fn publish(&self, c: &Counts, arena_fill: f64) {
        let v = [
            c.delivered,
            c.filtered_user,
            c.filtered_kernel,
            c.dropped_kernel,
            c.stored,
            c.stored_bytes,
            c.wire_bytes,
            c.dropped_arena_full,
            c.dropped_shutdown,
            (arena_fill * 1e6) as u64,
        ];
        for (a, x) in self.fields.iter().zip(v) {
            a.store(x, Ordering::Relaxed);
        }
    }

    pub fn load(&self) -> (Counts, f64) {
        let v: Vec<u64> = self.fields.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        (
            Counts {
                delivered: v[0],
                filtered_user: v[1],
                filtered_kernel: v[2],
                dropped_kernel: v[3],
                stored: v[4],
                stored_bytes: v[5],
                wire_bytes: v[6],
                dropped_arena_full: v[7],
                dropped_shutdown: v[8],
            },
            v[9] as f64 / 1e6,
        )
    }
}
