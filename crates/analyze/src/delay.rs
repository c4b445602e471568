//! One-way delay: the same packets seen at two points (two stores or two
//! files). The other point's packets are loaded first as (content hash,
//! time); each analysed packet whose content matches one of them gives a
//! delay `time at the other point - time here`. Identical frames (a TCP
//! retransmission, a repeated ACK, a duplicate) pair in order: the k-th
//! sighting here with the k-th at the other point.
//!
//! Content is the whole captured frame and its wire length: a device
//! between the two points that rewrites headers (a router's TTL and MAC
//! addresses) defeats the match; two taps on one link or a bridge do not.
//! Memory: at most `cap` reference packets (the rest are counted, not
//! matched).

use crate::hash::frame_hash;
use crate::hash::HashedMap;
use crate::{percentile, Seen};
use serde::Serialize;

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
}

#[derive(Debug, Clone, Serialize)]
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
                self.reference.insert(h, Sightings { first: ts_ns, more: 0, taken: 0 });
            }
            Some(s) if s.more == 0 => {
                self.more.push(vec![ts_ns]);
                s.more = self.more.len() as u32;
            }
            Some(s) => self.more[s.more as usize - 1].push(ts_ns),
        }
    }

    pub fn feed(&mut self, s: &Seen<'_>) {
        let h = frame_hash(s.f.data, u64::from(s.len));
        let t = self.reference.get_mut(&h).and_then(|r| {
            let k = r.taken as usize;
            let t = match k {
                0 => Some(r.first),
                _ if r.more == 0 => None,
                _ => self.more[r.more as usize - 1].get(k - 1).copied(),
            };
            r.taken += u32::from(t.is_some());
            t
        });
        match t {
            Some(t) => self.delays.push(t as i64 - s.f.ts_ns as i64),
            None => self.unmatched += 1,
        }
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
