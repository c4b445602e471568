//! Duplicated frames: a frame is a duplicate when a frame with the same
//! captured bytes and the same length on the wire was among the previous
//! `dup_frames` frames and at most `dup_window_ns` before it (both limits
//! hold; `editcap -D N+1` is the same rule by count, `editcap -w` by time).
//! A SPAN port that copies both directions of a link produces them.
//!
//! Memory: a ring of the last `dup_frames` frames' hashes and a map from
//! hash to the latest frame that had it; both bounded by `dup_frames`.

use crate::hash::{frame_hash, HashedMap};
use crate::{Config, Count, Example, Seen};
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::collections::VecDeque;

pub struct Dups {
    window_ns: u64,
    frames: u64,
    /// (hash, time, frame number) of the frames in the window, oldest first.
    ring: VecDeque<(u128, u64, u64)>,
    /// hash -> (time, frame number) of the latest frame with it.
    last: HashedMap<(u64, u64)>,
    count: Count,
    examples: Vec<Example>,
    max_examples: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DupReport {
    pub window_ns: u64,
    pub window_frames: u64,
    pub packets: u64,
    pub bytes: u64,
    pub first: Vec<Example>,
}

impl Dups {
    pub fn new(cfg: &Config) -> Dups {
        Dups {
            window_ns: cfg.dup_window_ns,
            frames: cfg.dup_frames as u64,
            ring: VecDeque::with_capacity(cfg.dup_frames.min(1 << 16)),
            last: HashedMap::with_capacity_and_hasher(cfg.dup_frames.min(1 << 16), Default::default()),
            count: Count::default(),
            examples: Vec::new(),
            max_examples: cfg.examples,
        }
    }

    pub fn feed(&mut self, s: &Seen<'_>) {
        let (ts, no) = (s.frame.ts_ns, s.no);
        // Forget frames out of the window (by count, or by time).
        while let Some(&(h, t, n)) = self.ring.front() {
            if n + self.frames >= no && ts.saturating_sub(t) <= self.window_ns {
                break;
            }
            self.ring.pop_front();
            if let Entry::Occupied(e) = self.last.entry(h) {
                if e.get().1 == n {
                    e.remove();
                }
            }
        }
        let h = frame_hash(s.frame.data, u64::from(s.len));
        match self.last.entry(h) {
            Entry::Occupied(mut e) => {
                let (t, n) = e.insert((ts, no));
                // Frames out of time order (several files): the distance either way.
                if ts.abs_diff(t) <= self.window_ns {
                    self.count.add(s.len);
                    if self.examples.len() < self.max_examples {
                        self.examples.push(Example::of(s, format!("same as frame {n}")));
                    }
                }
            }
            Entry::Vacant(e) => {
                e.insert((ts, no));
            }
        }
        self.ring.push_back((h, ts, no));
    }

    pub fn finish(self) -> DupReport {
        DupReport {
            window_ns: self.window_ns,
            window_frames: self.frames,
            packets: self.count.packets,
            bytes: self.count.bytes,
            first: self.examples,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Analyzer, Config, Frame};

    /// The duplicates among frames (time, content, wire length) with a
    /// window of `window_ns` and `frames`.
    fn dups(window_ns: u64, frames: usize, fed: &[(u64, &[u8], u32)]) -> super::DupReport {
        let cfg = Config { dup_window_ns: window_ns, dup_frames: frames, ..Config::default() };
        let mut a = Analyzer::new(cfg).unwrap();
        for &(ts_ns, data, wire_len) in fed {
            a.feed(&Frame { ts_ns, linktype: 1, wire_len, data });
        }
        a.finish().duplicates
    }

    const A: &[u8] = &[1; 60];
    const B: &[u8] = &[2; 60];
    const C: &[u8] = &[3; 60];

    #[test]
    fn a_copy_within_the_time_window_is_a_duplicate_up_to_its_edge() {
        let r = dups(1000, 100, &[(0, A, 60), (1000, A, 60)]);
        assert_eq!((r.packets, r.bytes), (1, 60));
        assert_eq!((r.first[0].frame, r.first[0].detail.as_str()), (2, "same as frame 1"));
        assert_eq!(dups(1000, 100, &[(0, A, 60), (1001, A, 60)]).packets, 0);
    }

    #[test]
    fn a_copy_beyond_the_frame_window_is_not_a_duplicate() {
        // Window of 2 frames: frame 3 still sees frame 1, frame 4 no longer does.
        assert_eq!(dups(1 << 40, 2, &[(0, A, 60), (1, B, 60), (2, A, 60)]).packets, 1);
        assert_eq!(dups(1 << 40, 2, &[(0, A, 60), (1, B, 60), (2, C, 60), (3, A, 60)]).packets, 0);
    }

    #[test]
    fn the_same_bytes_of_another_wire_length_are_not_a_duplicate() {
        assert_eq!(dups(1000, 100, &[(0, A, 60), (1, A, 1500)]).packets, 0);
    }

    #[test]
    fn copies_out_of_time_order_count_by_the_distance_either_way() {
        let r = dups(1000, 100, &[(5000, A, 60), (4500, A, 60), (3000, A, 60)]);
        // 500 ns back is within the window; the third is 1500 ns before the second.
        assert_eq!(r.packets, 1);
        // A run of copies: each is compared with the latest before it.
        let r = dups(1000, 100, &[(0, A, 60), (900, A, 60), (1800, A, 60)]);
        assert_eq!((r.packets, r.first[1].detail.as_str()), (2, "same as frame 2"));
    }
}
