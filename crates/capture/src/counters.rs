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
    /// Packets whose time the stored format cannot hold (pcap after
    /// 2106-02-07T06:28:15Z), not stored.
    pub dropped_timestamp_range: u64,
    /// Frames not stored because they equal one stored within `--dedup`'s window.
    pub deduplicated: u64,
    /// Frames not stored because their connection passed `--flow-cutoff`.
    pub cut: u64,
    /// Connections still active whose `--flow-cutoff` entry a new one took
    /// (the table was full): they may keep more than the cutoff.
    pub flows_evicted: u64,
    /// CPU time of the capture thread since it started capturing (ns),
    /// updated when the counters are published.
    pub cpu_ns: u64,
    /// Live frames stamped by the NIC (`--timestamps hw`).
    pub ts_hardware: u64,
    /// Live frames stamped by the kernel's clock.
    pub ts_software: u64,
    /// Packets an AF_XDP socket dropped because its fill ring had no free chunk.
    pub dropped_fill_ring: u64,
    /// Packets an AF_XDP socket dropped for another reason than a full RX ring or an empty
    /// fill ring.
    pub dropped_xsk_other: u64,
}

/// Number of fields of [`Counts`].
const FIELDS: usize = 18;

impl Counts {
    /// Every field, in one fixed order: the one list of the fields that
    /// summing, publishing and loading go through.
    fn fields_mut(&mut self) -> [&mut u64; FIELDS] {
        [
            &mut self.delivered,
            &mut self.filtered_user,
            &mut self.filtered_kernel,
            &mut self.dropped_kernel,
            &mut self.stored,
            &mut self.stored_bytes,
            &mut self.wire_bytes,
            &mut self.dropped_arena_full,
            &mut self.dropped_shutdown,
            &mut self.dropped_timestamp_range,
            &mut self.deduplicated,
            &mut self.cut,
            &mut self.flows_evicted,
            &mut self.cpu_ns,
            &mut self.ts_hardware,
            &mut self.ts_software,
            &mut self.dropped_fill_ring,
            &mut self.dropped_xsk_other,
        ]
    }

    fn to_array(mut self) -> [u64; FIELDS] {
        self.fields_mut().map(|f| *f)
    }

    fn from_array(v: [u64; FIELDS]) -> Counts {
        let mut c = Counts::default();
        for (f, x) in c.fields_mut().into_iter().zip(v) {
            *f = x;
        }
        c
    }
}

/// Sums the counts of several workers, field by field.
impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, rhs: Counts) {
        for (f, x) in self.fields_mut().into_iter().zip(rhs.to_array()) {
            *f += x;
        }
    }
}

/// The published copy of a worker's [`Counts`], plus its arena fill.
#[derive(Debug, Default)]
pub struct SharedCounts {
    counts: [AtomicU64; FIELDS],
    /// Arena fill in millionths.
    fill: AtomicU64,
}

impl SharedCounts {
    pub fn publish(&self, c: &Counts, arena_fill: f64) {
        for (a, x) in self.counts.iter().zip(c.to_array()) {
            a.store(x, Ordering::Relaxed);
        }
        self.fill.store((arena_fill * 1e6) as u64, Ordering::Relaxed);
    }

    pub fn load(&self) -> (Counts, f64) {
        let c = Counts::from_array(std::array::from_fn(|i| self.counts[i].load(Ordering::Relaxed)));
        (c, self.fill.load(Ordering::Relaxed) as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(k: u64) -> Counts {
        Counts {
            delivered: k,
            filtered_user: k + 1,
            filtered_kernel: k + 2,
            dropped_kernel: k + 3,
            stored: k + 4,
            stored_bytes: k + 5,
            wire_bytes: k + 6,
            dropped_arena_full: k + 7,
            dropped_shutdown: k + 8,
            dropped_timestamp_range: k + 9,
            deduplicated: k + 10,
            cut: k + 11,
            flows_evicted: k + 12,
            cpu_ns: k + 13,
            ts_hardware: k + 14,
            ts_software: k + 15,
            dropped_fill_ring: k + 16,
            dropped_xsk_other: k + 17,
        }
    }

    #[test]
    fn publish_then_load_gives_every_field_back() {
        let s = SharedCounts::default();
        s.publish(&sample(10), 0.25);
        assert_eq!(s.load(), (sample(10), 0.25));
    }

    #[test]
    fn add_assign_sums_every_field() {
        let mut a = sample(1);
        a += sample(100);
        assert_eq!(a.to_array(), std::array::from_fn(|i| 101 + 2 * i as u64));
    }
}
