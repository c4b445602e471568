//! Throughput over time: frames and bytes per `step`, intervals counted
//! from the first frame's time (as `tshark -q -z io,stat,STEP`), with bits/s
//! and packets/s derived. A frame earlier than one before it (files out of
//! time order, merged captures) counts in the interval of the latest frame
//! so far, as tshark counts it; a frame's time since the first is rounded to
//! whole µs first, as tshark rounds it. At most `max_intervals` intervals
//! are kept, later frames are counted as beyond.
//!
//! Unlike tshark: a last frame exactly on an interval's start (its time
//! since the first a whole number of steps) gets a row of its own. tshark
//! ends its table at the capture's duration, whose last row then ends
//! where that frame's would start, and leaves the frame out of every row.

use crate::{Config, Count, Seen};
use serde::Serialize;

pub struct IoStat {
    step_ns: u64,
    max: usize,
    first_ns: Option<u64>,
    /// The latest frame time so far.
    latest_ns: u64,
    intervals: Vec<Count>,
    beyond: Count,
}

#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// Start, relative to the first frame (ns).
    pub start_ns: u64,
    pub packets: u64,
    pub bytes: u64,
    pub bits_per_second: f64,
    pub packets_per_second: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct IoReport {
    pub step_ns: u64,
    pub first_ns: u64,
    pub intervals: Vec<Interval>,
    /// Frames past the last interval kept (`max_intervals`).
    pub beyond: Count,
    /// The most intervals kept.
    pub max_intervals: usize,
    pub peak_bits_per_second: f64,
    pub peak_packets_per_second: f64,
}

impl IoStat {
    pub fn new(cfg: &Config) -> IoStat {
        IoStat {
            step_ns: cfg.step_ns,
            max: cfg.max_intervals,
            first_ns: None,
            latest_ns: 0,
            intervals: Vec::new(),
            beyond: Count::default(),
        }
    }

    pub fn feed(&mut self, s: &Seen<'_>) {
        let first = *self.first_ns.get_or_insert(s.f.ts_ns);
        self.latest_ns = self.latest_ns.max(s.f.ts_ns);
        // tshark rounds a frame's time since the first to whole µs before
        // it finds its interval: within 500 ns of an interval's end, a frame
        // counts in the next.
        let rel = self.latest_ns.saturating_sub(first).saturating_add(500) / 1000 * 1000;
        let i = rel / self.step_ns;
        let Ok(i) = usize::try_from(i) else {
            return self.beyond.add(s.len);
        };
        if i >= self.max {
            return self.beyond.add(s.len);
        }
        if i >= self.intervals.len() {
            self.intervals.resize(i + 1, Count::default());
        }
        self.intervals[i].add(s.len);
    }

    pub fn finish(self) -> IoReport {
        let secs = self.step_ns as f64 / 1e9;
        let intervals: Vec<Interval> = self
            .intervals
            .iter()
            .enumerate()
            .map(|(i, c)| Interval {
                start_ns: i as u64 * self.step_ns,
                packets: c.packets,
                bytes: c.bytes,
                bits_per_second: c.bytes as f64 * 8.0 / secs,
                packets_per_second: c.packets as f64 / secs,
            })
            .collect();
        IoReport {
            step_ns: self.step_ns,
            first_ns: self.first_ns.unwrap_or(0),
            peak_bits_per_second: intervals.iter().map(|i| i.bits_per_second).fold(0.0, f64::max),
            peak_packets_per_second: intervals.iter().map(|i| i.packets_per_second).fold(0.0, f64::max),
            intervals,
            beyond: self.beyond,
            max_intervals: self.max,
        }
    }
}
