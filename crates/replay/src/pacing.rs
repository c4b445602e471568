//! When each packet is due: a target time on `CLOCK_MONOTONIC` per packet,
//! computed from the sequence alone (no clock read), so that a late packet
//! never shifts the ones after it.
//!
//! * Recorded timing: `target = t0 + (ts - ts0) / speed`, where `ts - ts0`
//!   is the sum of the gaps between consecutive packets; a gap that goes
//!   backwards (files out of time order, a clock stepped back) counts as 0,
//!   and so does the gap between the last packet of one segment (file,
//!   loop) and the first of the next. A packet later than every one before
//!   is due by its distance from the latest of them, not from the packet
//!   just before: one packet stamped in 1970 amid today's is sent at once,
//!   and the next ones do not wait the 56 years back (tcpreplay, which
//!   times every packet from the first, sends them so too).
//! * `--pps N`: packet `i` is due at `t0 + i / N`.
//! * `--rate R`: a packet is due when the frames before it, at `R` bits per
//!   second, have taken their time: `t0 + bits_before * 1e9 / R` (frame
//!   bytes, without Ethernet's preamble, FCS or inter-frame gap).
//! * Top speed: no target.

/// How fast to send.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pacing {
    /// The recorded gaps, divided by `speed` (1.0: as recorded).
    Recorded { speed: f64 },
    /// A fixed number of packets per second.
    Pps(f64),
    /// A fixed number of frame bits per second.
    Rate(f64),
    /// As fast as the interface takes them.
    TopSpeed,
}

/// Targets for a sequence of packets. See the module documentation.
#[derive(Debug, Clone)]
pub struct Schedule {
    pacing: Pacing,
    t0: u64,
    /// Recorded timing: the sum of the gaps so far (ns of recorded time).
    recorded_ns: u64,
    prev_ts: Option<u64>,
    /// The latest stamp of the segment so far.
    max_ts: u64,
    /// Packets and frame bits scheduled so far (pps, rate).
    packets: u64,
    bits: u128,
}

impl Schedule {
    /// A schedule whose first packet is due at `t0` (monotonic ns).
    pub fn new(pacing: Pacing, t0: u64) -> Schedule {
        Schedule { pacing, t0, recorded_ns: 0, prev_ts: None, max_ts: 0, packets: 0, bits: 0 }
    }

    pub fn pacing(&self) -> Pacing {
        self.pacing
    }

    /// The next packet starts a new segment (file or loop): its gap to the
    /// previous one is 0 at recorded timing.
    pub fn new_segment(&mut self) {
        self.prev_ts = None;
        self.max_ts = 0;
    }

    /// When the next packet (recorded at `ts_ns`, `len` bytes) is due;
    /// `None` at top speed.
    pub fn target(&mut self, ts_ns: u64, len: usize) -> Option<u64> {
        match self.pacing {
            Pacing::TopSpeed => None,
            Pacing::Recorded { speed } => {
                if let Some(p) = self.prev_ts {
                    let from = if ts_ns > self.max_ts { self.max_ts } else { p };
                    self.recorded_ns += ts_ns.saturating_sub(from);
                }
                self.prev_ts = Some(ts_ns);
                self.max_ts = self.max_ts.max(ts_ns);
                Some(self.t0 + scale(self.recorded_ns as f64, speed))
            }
            Pacing::Pps(pps) => {
                let t = self.t0 + scale(self.packets as f64 * 1e9, pps);
                self.packets += 1;
                Some(t)
            }
            Pacing::Rate(bps) => {
                let t = self.t0 + scale(self.bits as f64 * 1e9, bps);
                self.bits += len as u128 * 8;
                Some(t)
            }
        }
    }
}

/// `x / by` in whole nanoseconds (saturating; `by` is positive and finite).
fn scale(x: f64, by: f64) -> u64 {
    let v = (x / by).round();
    if v >= u64::MAX as f64 / 2.0 {
        u64::MAX / 2
    } else {
        v as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_targets_follow_gaps_over_speed() {
        let mut s = Schedule::new(Pacing::Recorded { speed: 2.0 }, 1000);
        assert_eq!(s.target(5_000, 60), Some(1000));
        assert_eq!(s.target(7_000, 60), Some(2000));
        // Backwards: no gap; then forward past the latest (7,000): from it.
        assert_eq!(s.target(6_000, 60), Some(2000));
        assert_eq!(s.target(10_000, 60), Some(3500));
        s.new_segment();
        assert_eq!(s.target(1, 60), Some(3500));
        assert_eq!(s.target(2001, 60), Some(4500));
    }

    #[test]
    fn a_packet_far_back_costs_no_wait() {
        const T: u64 = 1_700_000_000_000_000_000;
        let mut s = Schedule::new(Pacing::Recorded { speed: 1.0 }, 0);
        let t: Vec<_> = [T, 1_000_000_000, T + 10_000_000, T + 20_000_000].iter().map(|&ts| s.target(ts, 60)).collect();
        assert_eq!(t, [Some(0), Some(0), Some(10_000_000), Some(20_000_000)]);
        // A clock stepped back an hour: the gaps after the step are kept.
        let mut s = Schedule::new(Pacing::Recorded { speed: 1.0 }, 0);
        let hour = 3_600_000_000_000;
        let t: Vec<_> = [T, T + 1_000, T - hour, T - hour + 5_000].iter().map(|&ts| s.target(ts, 60)).collect();
        assert_eq!(t, [Some(0), Some(1_000), Some(1_000), Some(6_000)]);
    }

    #[test]
    fn pps_and_rate_targets() {
        let mut s = Schedule::new(Pacing::Pps(1000.0), 0);
        let t: Vec<_> = (0..3).map(|_| s.target(0, 60).unwrap()).collect();
        assert_eq!(t, [0, 1_000_000, 2_000_000]);
        // 1500-byte frames at 12 Mbit/s: one per millisecond.
        let mut s = Schedule::new(Pacing::Rate(12e6), 10);
        let t: Vec<_> = (0..3).map(|_| s.target(0, 1500).unwrap()).collect();
        assert_eq!(t, [10, 1_000_010, 2_000_010]);
        assert_eq!(Schedule::new(Pacing::TopSpeed, 0).target(1, 1), None);
    }
}
