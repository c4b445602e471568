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
