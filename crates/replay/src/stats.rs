//! Counters of a replay and the lateness histogram. Nothing here allocates
//! per packet: the histogram is a fixed array of log-linear buckets (exact
//! below 64 ns, then 32 buckets per power of two: a quantile is within 3%
//! of the true value); causes of failure other than the known ones are kept
//! by errno in a short list.

use serde::Serialize;
use std::collections::BTreeMap;

/// Why a packet was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Cause {
    /// Longer than the interface's MTU plus its link-layer header (checked
    /// before sending, or refused by the kernel with EMSGSIZE).
    TooLong,
    /// The packet's link type is not the interface's.
    LinkType,
    /// The driver had no room (ENOBUFS/EAGAIN) even after retries.
    NoBuffers,
    /// Any other error of the send call (errno).
    Os(i32),
}

impl Cause {
    /// The name used in the summary and its JSON.
    pub fn name(&self) -> String {
        match self {
            Cause::TooLong => "too long".into(),
            Cause::LinkType => "wrong link type".into(),
            Cause::NoBuffers => "no buffer space".into(),
            Cause::Os(e) => std::io::Error::from_raw_os_error(*e).to_string(),
        }
    }
}

const EXACT: usize = 64;
const SUB_BITS: u32 = 5;
const BUCKETS: usize = EXACT + (64 - 6) * (1 << SUB_BITS);

/// Log-linear histogram of nanosecond values.
#[derive(Clone)]
pub struct Histogram {
    counts: Box<[u64; BUCKETS]>,
    n: u64,
    max: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram").field("n", &self.n).field("max", &self.max).finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: Box::new([0; BUCKETS]), n: 0, max: 0 }
    }
}

fn bucket(v: u64) -> usize {
    if v < EXACT as u64 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= 6
    let sub = (v >> (e - SUB_BITS)) as usize & ((1 << SUB_BITS) - 1);
    EXACT + (e as usize - 6) * (1 << SUB_BITS) + sub
}

/// The largest value of bucket `i`.
fn bucket_high(i: usize) -> u64 {
    if i < EXACT {
        return i as u64;
    }
    let e = ((i - EXACT) >> SUB_BITS) as u32 + 6;
    let sub = ((i - EXACT) & ((1 << SUB_BITS) - 1)) as u64;
    let low = (1u64 << e) + (sub << (e - SUB_BITS));
    low.saturating_add((1u64 << (e - SUB_BITS)) - 1)
}

impl Histogram {
    #[inline]
    pub fn add(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.max = self.max.max(v);
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn max(&self) -> u64 {
        self.max
    }

    /// The value below or at which a fraction `q` of the values lie (the
    /// upper end of its bucket, never above the maximum); 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(i).min(self.max);
            }
        }
        self.max
    }
}

/// Counters of a replay, updated by the send loop.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub sent: u64,
    /// Frame bytes sent.
    pub bytes: u64,
    pub failed: u64,
    /// Failures by cause (few distinct causes: a short list).
    pub causes: Vec<(Cause, u64)>,
    /// Packets sent more than the late threshold after their target.
    pub late: u64,
    /// Send calls repeated because the driver had no room (ENOBUFS/EAGAIN).
    pub retries: u64,
    /// Lateness (actual send time minus target) of every paced packet sent.
    pub lateness: Histogram,
}

impl Stats {
    pub fn fail(&mut self, cause: Cause) {
        self.failed += 1;
        match self.causes.iter_mut().find(|(c, _)| *c == cause) {
            Some((_, n)) => *n += 1,
            None => self.causes.push((cause, 1)),
        }
    }

    /// Failures of one cause.
    pub fn failed_by(&self, cause: Cause) -> u64 {
        self.causes.iter().find(|(c, _)| *c == cause).map_or(0, |(_, n)| *n)
    }
}

/// Lateness percentiles, nanoseconds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub struct Lateness {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

/// What a replay did, for the summary line and `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub sent: u64,
    pub bytes: u64,
    pub failed: u64,
    /// Failures by cause name.
    pub failures: BTreeMap<String, u64>,
    pub late: u64,
    /// A packet is late when it went out more than this after its target.
    pub late_threshold_ns: u64,
    /// `None` at top speed (no targets).
    pub lateness_ns: Option<Lateness>,
    pub retries: u64,
    /// From the first target (or first send) to the last send.
    pub elapsed_ns: u64,
}

impl Summary {
    pub fn from_stats(s: &Stats, late_threshold_ns: u64, paced: bool, elapsed_ns: u64) -> Summary {
        let mut failures = BTreeMap::new();
        for (c, n) in &s.causes {
            *failures.entry(c.name()).or_insert(0) += n;
        }
        let lateness = (paced && s.lateness.count() > 0).then(|| Lateness {
            p50: s.lateness.quantile(0.50),
            p99: s.lateness.quantile(0.99),
            max: s.lateness.max(),
        });
        Summary {
            sent: s.sent,
            bytes: s.bytes,
            failed: s.failed,
            failures,
            late: s.late,
            late_threshold_ns,
            lateness_ns: lateness,
            retries: s.retries,
            elapsed_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_their_values() {
        for v in [0u64, 1, 63, 64, 65, 100, 1000, 12345, 1 << 20, (1 << 40) + 7, u64::MAX] {
            let i = bucket(v);
            assert!(i < BUCKETS);
            assert!(bucket_high(i) >= v, "{v}: bucket {i} ends at {}", bucket_high(i));
            if i > 0 {
                assert!(bucket_high(i - 1) < v, "{v}: bucket {i} starts too late");
            }
        }
    }

    #[test]
    fn quantiles_within_three_percent() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.add(v * 100);
        }
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((p50 / 500_000.0 - 1.0).abs() < 0.03, "p50 {p50}");
        assert!((p99 / 990_000.0 - 1.0).abs() < 0.03, "p99 {p99}");
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert_eq!(Histogram::default().quantile(0.5), 0);
    }

    #[test]
    fn causes_counted_apart() {
        let mut s = Stats::default();
        s.fail(Cause::TooLong);
        s.fail(Cause::Os(libc_eperm()));
        s.fail(Cause::TooLong);
        assert_eq!((s.failed, s.failed_by(Cause::TooLong)), (3, 2));
        let sum = Summary::from_stats(&s, 100, false, 0);
        assert_eq!(sum.failures["too long"], 2);
        assert!(sum.lateness_ns.is_none());
    }

    fn libc_eperm() -> i32 {
        1
    }
}
