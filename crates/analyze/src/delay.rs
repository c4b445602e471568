//! One-way delay: the same packets seen at two points (two stores or two
//! files). The other point's packets are loaded first as (content hash,
//! time); each analysed packet whose content matches one of them gives a
//! delay `time at the other point - time here`. Identical frames (a TCP
//! retransmission, a repeated ACK, a duplicate) pair in order: the k-th
//! sighting here with the k-th at the other point. One more sighting here
//! than there (an original lost between the points and its byte-identical
//! retransmission, which got through) is settled when it comes: the other
//! point's last sighting goes to whichever of its last two sightings here
//! gives a delay nearer the smallest delay seen so far, so the lost one is
//! the original, and the retransmission timeout is not taken for a delay.
//!
//! Content is the whole captured frame and its wire length: a device
//! between the two points that rewrites headers (a router's TTL and MAC
//! addresses) defeats the match; two taps on one link or a bridge do not.
//! Memory: at most `cap` reference packets (the rest are counted, not
//! matched).

use crate::hash::frame_hash;
use crate::hash::HashedMap;
use crate::{percentile, Seen};
use serde::{Deserialize, Serialize};

pub struct Delay {
    reference: HashedMap<Sightings>,
    /// The second and later sightings of frames seen more than once at the
    /// other point, in time order (`Sightings::more`).
    more: Vec<Vec<u64>>,
    /// Reference sightings kept (at most `cap`).
    tracked: usize,
    cap: usize,
    reference_packets: u64,
    reference_untracked: u64,
    delays: Vec<i64>,
    /// The smallest delay so far (the path's own, without queueing), and
    /// the index in `delays` of the pairing that gave it.
    least: Option<(i64, usize)>,
    unmatched: u64,
}

/// The sightings of one frame at the other point.
#[derive(Clone, Copy)]
struct Sightings {
    first: u64,
    /// 1 + the index of its later sightings in `Delay::more` (0: none).
    more: u32,
    /// Sightings already paired with packets here.
    taken: u32,
    /// The index in `Delay::delays` of the last pairing.
    last: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DelayReport {
    pub reference_packets: u64,
    /// Reference packets beyond the table's capacity (never matched).
    pub reference_untracked: u64,
    pub matched: u64,
    /// Packets analysed here without a match at the other point (lost between them).
    pub unmatched: u64,
    pub min_ns: i64,
    pub p50_ns: i64,
    pub p90_ns: i64,
    pub p99_ns: i64,
    pub max_ns: i64,
    pub mean_ns: f64,
}

impl Delay {
    pub fn new(cap: usize) -> Delay {
        Delay {
            reference: HashedMap::default(),
            more: Vec::new(),
            tracked: 0,
            cap,
            reference_packets: 0,
            reference_untracked: 0,
            delays: Vec::new(),
            least: None,
            unmatched: 0,
        }
    }

    /// A packet seen at the other point.
    pub fn reference(&mut self, ts_ns: u64, wire_len: u32, data: &[u8]) {
        self.reference_packets += 1;
        let h = frame_hash(data, u64::from(wire_len.max(data.len() as u32)));
        if self.tracked >= self.cap {
            self.reference_untracked += 1;
            return;
        }
        self.tracked += 1;
        match self.reference.get_mut(&h) {
            None => {
                self.reference.insert(h, Sightings { first: ts_ns, more: 0, taken: 0, last: 0 });
            }
            Some(s) if s.more == 0 => {
                self.more.push(vec![ts_ns]);
                s.more = self.more.len() as u32;
            }
            Some(s) => self.more[s.more as usize - 1].push(ts_ns),
        }
    }

    pub fn feed(&mut self, s: &Seen<'_>) {
        self.pair(frame_hash(s.frame.data, u64::from(s.len)), s.frame.ts_ns);
    }

    /// Pairs a packet seen here at `ts_ns`, of content hash `h`.
    fn pair(&mut self, h: u128, ts_ns: u64) {
        let Some(r) = self.reference.get_mut(&h) else {
            self.unmatched += 1;
            return;
        };
        let k = r.taken as usize;
        let at = |k: usize| match k {
            0 => Some(r.first),
            _ if r.more == 0 => None,
            _ => self.more[r.more as usize - 1].get(k - 1).copied(),
        };
        let Some(t) = at(k) else {
            // Every sighting there is taken: this one or the one paired
            // last with the last sighting there was lost on the way.
            self.unmatched += 1;
            if let (Some((least, from)), Some(t)) = (self.least, k.checked_sub(1).and_then(at)) {
                let (now, before) = (t as i64 - ts_ns as i64, self.delays[r.last]);
                // Nearer the smallest delay; or, when that smallest is this
                // very pairing's (the first frame paired was a lost
                // original), the smaller of the two that is not negative.
                let better = if from == r.last {
                    (0..before).contains(&now)
                } else {
                    now.abs_diff(least) < before.abs_diff(least)
                };
                if better {
                    self.delays[r.last] = now;
                    if now < least || from == r.last {
                        self.least = Some((now, r.last));
                    }
                }
            }
            return;
        };
        r.taken += 1;
        r.last = self.delays.len();
        let d = t as i64 - ts_ns as i64;
        if self.least.is_none_or(|(l, _)| d < l) {
            self.least = Some((d, self.delays.len()));
        }
        self.delays.push(d);
    }

    pub fn finish(self) -> DelayReport {
        let mut v = self.delays;
        v.sort_unstable();
        let n = v.len();
        // Percentiles on the order of the signed values, through an offset.
        let off: Vec<u64> = v.iter().map(|&d| (d as i128 - i64::MIN as i128) as u64).collect();
        let back = |x: u64| (x as i128 + i64::MIN as i128) as i64;
        DelayReport {
            reference_packets: self.reference_packets,
            reference_untracked: self.reference_untracked,
            matched: n as u64,
            unmatched: self.unmatched,
            min_ns: v.first().copied().unwrap_or(0),
            p50_ns: if n > 0 { back(percentile(&off, 0.5)) } else { 0 },
            p90_ns: if n > 0 { back(percentile(&off, 0.9)) } else { 0 },
            p99_ns: if n > 0 { back(percentile(&off, 0.99)) } else { 0 },
            max_ns: v.last().copied().unwrap_or(0),
            mean_ns: if n > 0 { v.iter().map(|&d| d as f64).sum::<f64>() / n as f64 } else { 0.0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_original_is_not_paired_with_its_retransmission() {
        let mut d = Delay::new(100);
        let (x, y, z) = (b"retransmitted segment".as_slice(), b"another frame".as_slice(), b"a third".as_slice());
        let h = |b: &[u8]| frame_hash(b, b.len() as u64);
        // There: y, then only the retransmission of x (the original was
        // lost), then z; 100 ns after they were sent here.
        d.reference(110, y.len() as u32, y);
        d.reference(1000, x.len() as u32, x);
        d.reference(1200, z.len() as u32, z);
        // Here: x at 0 (lost), y at 10, x again at 900 (its retransmission), z at 1100.
        for (b, t) in [(x, 0), (y, 10), (x, 900), (z, 1100)] {
            d.pair(h(b), t);
        }
        let r = d.finish();
        assert_eq!((r.matched, r.unmatched), (3, 1));
        assert_eq!((r.min_ns, r.max_ns), (100, 100), "{r:?}");
    }

    #[test]
    fn a_lost_original_first_of_all_is_not_paired_either() {
        let mut d = Delay::new(100);
        let (x, y) = (b"the very first frame".as_slice(), b"the next one".as_slice());
        let h = |b: &[u8]| frame_hash(b, b.len() as u64);
        d.reference(1000, x.len() as u32, x);
        d.reference(1110, y.len() as u32, y);
        for (b, t) in [(x, 0), (x, 900), (y, 1010)] {
            d.pair(h(b), t);
        }
        let r = d.finish();
        assert_eq!((r.matched, r.unmatched, r.min_ns, r.max_ns), (2, 1, 100, 100), "{r:?}");
    }

    #[test]
    fn copies_that_all_got_through_pair_in_order() {
        let mut d = Delay::new(100);
        let a = b"a repeated ack".as_slice();
        let h = frame_hash(a, a.len() as u64);
        for t in [150, 250, 350] {
            d.reference(t, a.len() as u32, a);
        }
        for t in [100, 200, 300] {
            d.pair(h, t);
        }
        // One more here than there: the last one was lost (its delay would
        // be 50, the same as the others').
        d.pair(h, 400);
        let r = d.finish();
        assert_eq!((r.matched, r.unmatched, r.min_ns, r.max_ns), (3, 1, 50, 50));
    }

    #[test]
    fn packets_without_a_reference_are_unmatched_and_the_table_is_bounded() {
        let mut d = Delay::new(1);
        let (x, y) = (b"kept".as_slice(), b"beyond the cap".as_slice());
        d.reference(100, x.len() as u32, x);
        d.reference(200, y.len() as u32, y);
        let h = |b: &[u8]| frame_hash(b, b.len() as u64);
        d.pair(h(y), 150);
        d.pair(h(x), 40);
        let r = d.finish();
        assert_eq!((r.reference_packets, r.reference_untracked, r.matched, r.unmatched), (2, 1, 1, 1));
        assert_eq!((r.min_ns, r.max_ns, r.mean_ns), (60, 60, 60.0));
    }

    #[test]
    fn the_wire_length_is_part_of_the_content() {
        let mut d = Delay::new(10);
        let x = b"same bytes".as_slice();
        d.reference(100, 1500, x);
        d.pair(frame_hash(x, x.len() as u64), 0);
        d.pair(frame_hash(x, 1500), 10);
        let r = d.finish();
        assert_eq!((r.matched, r.unmatched, r.min_ns), (1, 1, 90));
    }

    #[test]
    fn negative_delays_order_below_positive_ones() {
        let mut d = Delay::new(10);
        let frames = [b"one".as_slice(), b"two", b"three", b"four"];
        // Delays -50, 10, 20, 40 (the clocks of the two points differ).
        for (f, (there, here)) in frames.iter().zip([(50, 100), (210, 200), (320, 300), (440, 400)]) {
            d.reference(there, f.len() as u32, f);
            d.pair(frame_hash(f, f.len() as u64), here);
        }
        let r = d.finish();
        assert_eq!((r.min_ns, r.p50_ns, r.p90_ns, r.max_ns, r.mean_ns), (-50, 10, 40, 40, 5.0));
    }

    #[test]
    fn nothing_matched_reports_zeros() {
        let r = Delay::new(10).finish();
        assert_eq!((r.matched, r.min_ns, r.p50_ns, r.max_ns, r.mean_ns), (0, 0, 0, 0, 0.0));
    }
}
