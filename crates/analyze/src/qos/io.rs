//! Throughput over time: frames and bytes per `step`, intervals counted
//! from the first frame's time (as `tshark -q -z io,stat,STEP`), with bits/s
//! and packets/s derived. A frame earlier than one before it (files out of
//! time order, merged captures) counts in the interval of the latest frame
//! so far, as tshark counts it; a frame's time since the first is rounded to
//! whole µs first, as tshark rounds it.
//!
//! The step is at least 1 µs ([`MIN_STEP_NS`]): frame times count in whole
//! microseconds, and tshark refuses a shorter interval; a shorter `--step`
//! is raised to it (the report keeps the step asked for).
//!
//! At most `max_intervals` intervals are kept (memory and output stay
//! bounded: a capture spanning three weeks is 1.8 million 1 s intervals,
//! which tshark prints one by one). A frame past the last one doubles the
//! step, as often as needed, merging the intervals pairwise: the counts are
//! exactly those of a run with the wider step from the start (intervals
//! start at whole multiples of the step from the first frame). The report
//! gives both steps; the binary says when it widened.
//!
//! Unlike tshark: a last frame exactly on an interval's start (its time
//! since the first a whole number of steps) gets a row of its own. tshark
//! ends its table at the capture's duration, whose last row then ends
//! where that frame's would start, and leaves the frame out of every row.

use crate::{Config, Count, Seen};
use serde::{Deserialize, Serialize};

/// The shortest step: frame times count in whole µs, as tshark's
/// (`-z io,stat` refuses an interval under 0.000001 s).
pub const MIN_STEP_NS: u64 = 1_000;

pub struct IoStat {
    requested_step_ns: u64,
    step_ns: u64,
    max: usize,
    first_ns: Option<u64>,
    /// The latest frame time so far.
    latest_ns: u64,
    intervals: Vec<Count>,
    beyond: Count,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Interval {
    /// Start, relative to the first frame (ns).
    pub start_ns: u64,
    pub packets: u64,
    pub bytes: u64,
    pub bits_per_second: f64,
    pub packets_per_second: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IoReport {
    /// The step of the intervals: `requested_step_ns` (at least
    /// [`MIN_STEP_NS`]) doubled as often as needed to fit the capture into
    /// `max_intervals`.
    pub step_ns: u64,
    /// The step asked for (`--step`).
    pub requested_step_ns: u64,
    pub first_ns: u64,
    pub intervals: Vec<Interval>,
    /// Frames past the last interval kept: only with `max_intervals` 1 and
    /// a span of 2^63 ns or more, which no step fits into one interval.
    pub beyond: Count,
    /// The most intervals kept.
    pub max_intervals: usize,
    pub peak_bits_per_second: f64,
    pub peak_packets_per_second: f64,
}

impl IoStat {
    pub fn new(cfg: &Config) -> IoStat {
        IoStat {
            requested_step_ns: cfg.step_ns,
            step_ns: cfg.step_ns.max(MIN_STEP_NS),
            max: cfg.max_intervals,
            first_ns: None,
            latest_ns: 0,
            intervals: Vec::new(),
            beyond: Count::default(),
        }
    }

    pub fn feed(&mut self, s: &Seen<'_>) {
        let first = *self.first_ns.get_or_insert(s.frame.ts_ns);
        self.latest_ns = self.latest_ns.max(s.frame.ts_ns);
        // tshark rounds a frame's time since the first to whole µs before
        // it finds its interval: within 500 ns of an interval's end, a frame
        // counts in the next.
        let rel = self.latest_ns.saturating_sub(first).saturating_add(500) / 1000 * 1000;
        let mut i = rel / self.step_ns;
        while i >= self.max as u64 {
            if !self.widen() {
                return self.beyond.add(s.len);
            }
            i = rel / self.step_ns;
        }
        let i = i as usize;
        if i >= self.intervals.len() {
            self.intervals.resize(i + 1, Count::default());
        }
        self.intervals[i].add(s.len);
    }

    /// Doubles the step, merging the intervals pairwise; false when the
    /// step cannot double.
    fn widen(&mut self) -> bool {
        let Some(step) = self.step_ns.checked_mul(2) else {
            return false;
        };
        self.step_ns = step;
        let n = self.intervals.len().div_ceil(2);
        for j in 0..n {
            let mut c = self.intervals[2 * j];
            if let Some(odd) = self.intervals.get(2 * j + 1) {
                c.packets += odd.packets;
                c.bytes += odd.bytes;
            }
            self.intervals[j] = c;
        }
        self.intervals.truncate(n);
        true
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
            requested_step_ns: self.requested_step_ns,
            first_ns: self.first_ns.unwrap_or(0),
            peak_bits_per_second: intervals.iter().map(|i| i.bits_per_second).fold(0.0, f64::max),
            peak_packets_per_second: intervals.iter().map(|i| i.packets_per_second).fold(0.0, f64::max),
            intervals,
            beyond: self.beyond,
            max_intervals: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Analyzer, Config, Frame};

    /// (packets, bytes) per interval of 100-byte frames at `ts` with `step_ns`.
    fn intervals(ts: &[u64], step_ns: u64) -> (super::IoReport, Vec<(u64, u64)>) {
        let mut a = Analyzer::new(Config { step_ns, ..Config::default() }).unwrap();
        for &ts_ns in ts {
            a.feed(&Frame { ts_ns, linktype: 1, wire_len: 100, data: &[0; 100] });
        }
        let r = a.finish().throughput;
        let rows = r.intervals.iter().map(|i| (i.packets, i.bytes)).collect();
        (r, rows)
    }

    #[test]
    fn times_round_to_whole_microseconds_before_their_interval() {
        let s = 1_000_000_000;
        // 999_999_500 ns rounds up to 1 s (the next interval), 999_999_499 down.
        assert_eq!(intervals(&[0, 999_999_499], s).1, [(2, 200)]);
        assert_eq!(intervals(&[0, 999_999_500], s).1, [(1, 100), (1, 100)]);
    }

    #[test]
    fn a_frame_earlier_than_one_before_counts_in_the_latest_ones_interval() {
        let s = 1_000_000_000;
        let (r, rows) = intervals(&[10, 2_500_000_010, 500_000_010], s);
        assert_eq!(rows, [(1, 100), (0, 0), (2, 200)]);
        assert_eq!((r.first_ns, r.intervals[2].start_ns), (10, 2 * s));
    }

    #[test]
    fn rates_are_per_second_of_the_step() {
        // Two 100-byte frames in a 0.5 s interval, one in the next.
        let (r, _) = intervals(&[0, 100_000_000, 600_000_000], 500_000_000);
        assert_eq!((r.intervals[0].bits_per_second, r.intervals[0].packets_per_second), (3200.0, 4.0));
        assert_eq!((r.intervals[1].bits_per_second, r.intervals[1].packets_per_second), (1600.0, 2.0));
        assert_eq!((r.peak_bits_per_second, r.peak_packets_per_second), (3200.0, 4.0));
    }

    #[test]
    fn a_step_under_a_microsecond_is_raised_and_the_asked_one_kept() {
        let (r, rows) = intervals(&[0, 999, 1_500], 1);
        assert_eq!((r.requested_step_ns, r.step_ns), (1, super::MIN_STEP_NS));
        // 999 ns rounds to 1 µs, 1500 ns to 2 µs.
        assert_eq!(rows, [(1, 100), (1, 100), (1, 100)]);
    }

    #[test]
    fn a_last_frame_on_an_interval_start_gets_its_own_row() {
        assert_eq!(intervals(&[0, 2_000_000_000], 1_000_000_000).1, [(1, 100), (0, 0), (1, 100)]);
    }
}
