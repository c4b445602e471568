//! Timestamp statistics of stored packets, per stream in recording order
//! (`wirevault timestamps`): the resolution the stamps really have, whether
//! they go backwards, how many packets share a stamp, and the gaps.
//!
//! Packets are read through [`crate::visit`] (catalog, indexes, damage
//! handling as for a query), one stream at a time in the order it was
//! recorded: a step back is only visible in that order, not after the
//! query's merge by time.

use crate::exec::{visit, Prepared, QueryError, Report};
use serde::Serialize;
use std::collections::BTreeMap;
use wv_wire::reader::TsResolution;

/// Gaps kept for the median before the sample is thinned (64 MiB of `u64`).
const MAX_GAPS: usize = 1 << 23;

/// Records with an out-of-range sub-second field listed by file and frame.
pub const MAX_LISTED: usize = 20;

/// One frame of one file.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FrameAt {
    pub file: String,
    pub frame: u64,
}

/// Statistics of one sequence of timestamps (ns since the epoch).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StampStats {
    pub packets: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    /// The largest power of ten (in ns, at most 10^9) that divides every
    /// stamp: 1000 for microsecond stamps even in a nanosecond file. `None`
    /// when a file declares a power-of-two resolution (pcapng `if_tsresol`
    /// 2^-n), whose stamps converted to ns have none: `declared_resolution`
    /// says it.
    pub resolution_ns: Option<u64>,
    /// The resolutions the files declare for these stamps (pcap µs or ns,
    /// pcapng `if_tsresol`), each once: `10^-6 s (1 us)`, `2^-20 s (~954 ns)`.
    pub declared_resolution: Vec<String>,
    /// pcap records whose sub-second field is out of range (µs ≥ 10^6, ns
    /// ≥ 10^9): their stamp carries it into the seconds (tshark flags such
    /// a field as invalid and the frame steps in time).
    pub fraction_out_of_range: u64,
    /// The first [`MAX_LISTED`] of them: file and frame number in it (1 is
    /// the file's first packet read: exact without `--from`/`--to`).
    pub fraction_out_of_range_at: Vec<FrameAt>,
    /// The smallest gap > 0 between a packet and the one before it.
    pub min_nonzero_gap_ns: Option<u64>,
    /// Packets whose stamp is earlier than the one before, and the largest such step back.
    pub backwards: u64,
    pub max_step_back_ns: u64,
    /// Packets whose stamp equals the one before, and the longest run of
    /// packets with one stamp (1 when no two are equal).
    pub same_as_previous: u64,
    pub longest_same_run: u64,
    /// Gaps between a packet and the one before it, over the packets that
    /// do not go back (0 included).
    pub min_gap_ns: Option<u64>,
    pub median_gap_ns: Option<u64>,
    pub max_gap_ns: Option<u64>,
    /// False when more than 8 Mi gaps were seen and the median is taken
    /// from an even sample of them.
    pub median_exact: bool,
    #[serde(skip)]
    declared: Vec<TsResolution>,
    #[serde(skip)]
    gaps: Vec<u64>,
    #[serde(skip)]
    stride: u64,
    #[serde(skip)]
    gap_count: u64,
    #[serde(skip)]
    run: u64,
}

impl Default for StampStats {
    fn default() -> Self {
        StampStats {
            packets: 0,
            first_ns: None,
            last_ns: None,
            resolution_ns: None,
            declared_resolution: Vec::new(),
            fraction_out_of_range: 0,
            fraction_out_of_range_at: Vec::new(),
            declared: Vec::new(),
            min_nonzero_gap_ns: None,
            backwards: 0,
            max_step_back_ns: 0,
            same_as_previous: 0,
            longest_same_run: 0,
            min_gap_ns: None,
            median_gap_ns: None,
            max_gap_ns: None,
            median_exact: true,
            gaps: Vec::new(),
            stride: 1,
            gap_count: 0,
            run: 0,
        }
    }
}

impl StampStats {
    /// Adds the next stamp of the sequence.
    pub fn add(&mut self, ts: u64) {
        let mut res = self.resolution_ns.unwrap_or(1_000_000_000);
        while res > 1 && !ts.is_multiple_of(res) {
            res /= 10;
        }
        self.resolution_ns = Some(res);
        self.packets += 1;
        self.first_ns.get_or_insert(ts);
        let Some(prev) = self.last_ns.replace(ts) else {
            self.run = 1;
            self.longest_same_run = 1;
            return;
        };
        if ts < prev {
            self.backwards += 1;
            self.max_step_back_ns = self.max_step_back_ns.max(prev - ts);
            self.run = 1;
            return;
        }
        let gap = ts - prev;
        if gap == 0 {
            self.same_as_previous += 1;
            self.run += 1;
            self.longest_same_run = self.longest_same_run.max(self.run);
        } else {
            self.run = 1;
            self.min_nonzero_gap_ns = Some(self.min_nonzero_gap_ns.map_or(gap, |m| m.min(gap)));
        }
        self.min_gap_ns = Some(self.min_gap_ns.map_or(gap, |m| m.min(gap)));
        self.max_gap_ns = Some(self.max_gap_ns.map_or(gap, |m| m.max(gap)));
        if self.gap_count.is_multiple_of(self.stride) {
            if self.gaps.len() == MAX_GAPS {
                // Keep every other one: an even sample at twice the stride.
                let mut i = 0;
                self.gaps.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
                self.median_exact = false;
            }
            if self.gap_count.is_multiple_of(self.stride) {
                self.gaps.push(gap);
            }
        }
        self.gap_count += 1;
    }

    /// Notes the resolution a file declares for the last stamp added.
    pub fn declared(&mut self, r: TsResolution) {
        if !self.declared.contains(&r) {
            self.declared.push(r);
        }
    }

    /// Notes that frame `frame` of `file` had an out-of-range sub-second field.
    pub fn fraction_out_of_range(&mut self, file: &std::path::Path, frame: u64) {
        self.fraction_out_of_range += 1;
        if self.fraction_out_of_range_at.len() < MAX_LISTED {
            self.fraction_out_of_range_at.push(FrameAt { file: file.display().to_string(), frame });
        }
    }

    /// Computes the median; call once after the last [`add`](Self::add).
    pub fn finish(&mut self) {
        self.declared.sort_unstable();
        self.declared_resolution = self.declared.iter().map(ToString::to_string).collect();
        // A power of ten says nothing about stamps taken in 2^-n s.
        if self.declared.iter().any(|r| matches!(r, TsResolution::Binary(_))) {
            self.resolution_ns = None;
        }
        if self.gaps.is_empty() {
            return;
        }
        // The lower median: a stamp gap that occurred.
        let mid = (self.gaps.len() - 1) / 2;
        let (_, m, _) = self.gaps.select_nth_unstable(mid);
        self.median_gap_ns = Some(*m);
        self.gaps = Vec::new();
    }
}

/// The statistics of each stream of a prepared query (a store's streams, or
/// stream 0 of a single capture file), with the query's report (damage, warnings).
pub fn per_stream(p: Prepared) -> Result<(BTreeMap<usize, StampStats>, Report), QueryError> {
    let mut streams: BTreeMap<usize, StampStats> = BTreeMap::new();
    // The file being read and its packets so far (frame numbers).
    let mut at: (std::path::PathBuf, u64) = Default::default();
    let report = visit(p, |file, pk| {
        let s = streams.entry(file.stream).or_default();
        s.add(pk.ts_ns);
        s.declared(pk.resolution);
        if at.0 != file.path {
            at = (file.path.to_path_buf(), 0);
        }
        at.1 += 1;
        if pk.fraction_out_of_range {
            s.fraction_out_of_range(file.path, at.1);
        }
        true
    })?;
    for s in streams.values_mut() {
        s.finish();
    }
    Ok((streams, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(ts: &[u64]) -> StampStats {
        let mut s = StampStats::default();
        for &t in ts {
            s.add(t);
        }
        s.finish();
        s
    }

    #[test]
    fn known_sequence() {
        let s = stats(&[1_000_000, 1_003_000, 1_003_000, 1_003_000, 1_001_000, 1_010_000, 1_010_000]);
        assert_eq!(s.packets, 7);
        assert_eq!(s.resolution_ns, Some(1000));
        assert_eq!(s.backwards, 1);
        assert_eq!(s.max_step_back_ns, 2000);
        assert_eq!(s.same_as_previous, 3);
        assert_eq!(s.longest_same_run, 3);
        // Gaps without the step back: 3000, 0, 0, 9000, 0.
        assert_eq!(s.min_gap_ns, Some(0));
        assert_eq!(s.max_gap_ns, Some(9000));
        assert_eq!(s.median_gap_ns, Some(0));
        assert_eq!(s.min_nonzero_gap_ns, Some(3000));
        assert!(s.median_exact);
    }

    #[test]
    fn resolution_and_edges() {
        assert_eq!(stats(&[]).resolution_ns, None);
        assert_eq!(stats(&[5]).resolution_ns, Some(1));
        assert_eq!(stats(&[2_000_000_000, 3_000_000_000]).resolution_ns, Some(1_000_000_000));
        assert_eq!(stats(&[2_000_000_000, 3_000_000_010]).resolution_ns, Some(10));
        assert_eq!(stats(&[0]).resolution_ns, Some(1_000_000_000));
        let one = stats(&[7]);
        assert_eq!((one.longest_same_run, one.median_gap_ns, one.min_nonzero_gap_ns), (1, None, None));
        assert_eq!(stats(&[1, 2, 3, 10]).median_gap_ns, Some(1));
    }

    #[test]
    fn median_is_sampled_beyond_the_cap() {
        let mut s = StampStats::default();
        for i in 0..(MAX_GAPS as u64 + 10) {
            s.add(i * 10 + (i % 2) * 5);
        }
        s.finish();
        assert!(!s.median_exact);
        assert!(matches!(s.median_gap_ns, Some(5) | Some(15)));
        assert_eq!(s.min_gap_ns, Some(5));
        assert_eq!(s.max_gap_ns, Some(15));
    }
}
