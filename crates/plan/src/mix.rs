//! What a link carries: frame sizes with weights. One size, a mix such as
//! IMIX, or the distribution of a capture file or store.
//!
//! Sizes are held as frames *without* FCS (pcap's lengths); the
//! [`SizeConvention`] of the command line is applied when they are parsed.

use crate::ethernet::{padded, SizeConvention};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use wv_query::{Query, QueryError, Report};

/// The simple IMIX (7:4:1 of IP packets of 40, 576 and 1500 bytes) as
/// Ethernet frames without FCS: 7 × 60 (40 + 14, padded), 4 × 590, 1 × 1514;
/// 64/594/1518 bytes with FCS. The same mix as `record --synthetic size=imix`.
pub fn imix() -> Mix {
    let mut counts: BTreeMap<u64, f64> = BTreeMap::new();
    for s in wv_wire::IMIX {
        *counts.entry(u64::from(s)).or_default() += 1.0;
    }
    Mix {
        label: "imix".into(),
        classes: counts.into_iter().map(|(f, w)| Class { frame: f, captured: f, weight: w }).collect(),
    }
}

/// Frames of one size, as a share of a mix.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Class {
    /// Length without FCS (a pcap record's original length), before padding.
    pub frame: u64,
    /// Bytes stored per frame (after a snapshot length).
    pub captured: u64,
    /// Relative weight (a count, or a share).
    pub weight: f64,
}

/// A weighted set of frame sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    /// How the mix is named in tables (`1514`, `imix`, a file name).
    pub label: String,
    pub classes: Vec<Class>,
}

impl Mix {
    /// One frame size (without FCS); a receiving capture stores it padded to 60 bytes.
    pub fn single(frame: u64, label: String) -> Mix {
        Mix { label, classes: vec![Class { frame, captured: padded(frame), weight: 1.0 }] }
    }

    /// Parses `64:7,576:4,1518:1` (size:weight; sizes in `conv`, weights
    /// positive numbers). Errors are one sentence.
    pub fn parse(s: &str, conv: SizeConvention) -> Result<Mix, String> {
        if s.trim().eq_ignore_ascii_case("imix") {
            return Ok(imix());
        }
        let mut classes = Vec::new();
        for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (size, weight) = item.split_once(':').ok_or_else(|| {
                format!("mix item \"{item}\" is not SIZE:WEIGHT (e.g. --mix 64:7,576:4,1518:1 or --mix imix)")
            })?;
            let size = parse_size(size.trim(), conv)?;
            let weight: f64 = weight
                .trim()
                .parse()
                .ok()
                .filter(|w: &f64| w.is_finite() && *w > 0.0)
                .ok_or_else(|| format!("mix weight \"{}\" is not a positive number", weight.trim()))?;
            classes.push(Class { frame: size, captured: padded(size), weight });
        }
        if classes.is_empty() {
            return Err("the mix is empty: give e.g. --mix 64:7,576:4,1518:1 or --mix imix".into());
        }
        let mix = Mix { label: s.trim().to_string(), classes };
        // Shares are relative: weights whose sum is not a finite number
        // (1e308 twice) would make every figure NaN.
        if !mix.total_weight().is_finite() {
            return Err("the mix's weights add up to more than a number holds: give smaller weights (they are relative, e.g. 7,4,1)".into());
        }
        Ok(mix)
    }

    /// The same mix with every frame cut to `snaplen` captured bytes.
    pub fn with_snaplen(mut self, snaplen: Option<u64>) -> Mix {
        if let Some(s) = snaplen {
            for c in &mut self.classes {
                c.captured = c.captured.min(s);
            }
        }
        self
    }

    /// Sum of the weights.
    pub fn total_weight(&self) -> f64 {
        self.classes.iter().map(|c| c.weight).sum()
    }

    /// The weighted mean of `f` over the classes.
    pub fn mean(&self, f: impl Fn(&Class) -> f64) -> f64 {
        let w = self.total_weight();
        if w > 0.0 {
            self.classes.iter().map(|c| c.weight * f(c)).sum::<f64>() / w
        } else {
            0.0
        }
    }
}

/// Parses one frame size in `conv` into a frame without FCS.
pub fn parse_size(s: &str, conv: SizeConvention) -> Result<u64, String> {
    let (lo, hi) = conv.range();
    let n: u64 = s.parse().map_err(|_| format!("frame size \"{s}\" is not a number of bytes"))?;
    conv.frame_len(n).ok_or_else(|| {
        format!(
            "frame size {n} is outside {lo}..={hi} bytes ({} FCS)",
            if conv == SizeConvention::WithFcs { "with" } else { "without" }
        )
    })
}

/// Parses a list of sizes: `1514` or `60,64,128` (each in `conv`).
pub fn parse_sizes(s: &str, conv: SizeConvention) -> Result<Vec<u64>, String> {
    let v: Vec<u64> =
        s.split(',').map(str::trim).filter(|x| !x.is_empty()).map(|x| parse_size(x, conv)).collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err("--size is empty: give e.g. --size 1514 or --size 60,64,128,1514".into());
    }
    Ok(v)
}

/// The lengths of the packets of a capture file or store.
#[derive(Debug, Clone, Default)]
pub struct Distribution {
    /// (original length as an Ethernet frame without FCS, captured length) → packets.
    pub counts: BTreeMap<(u64, u64), u64>,
    pub packets: u64,
    /// Smallest and largest timestamp seen (ns).
    pub first_ns: u64,
    pub last_ns: u64,
    /// Link types whose lengths are not Ethernet frames (counted as if they were).
    pub other_linktypes: BTreeSet<u32>,
    /// Bytes of the wirevault indexes of the files read, and the packets
    /// those indexes cover (files without an index are left out of both).
    pub index_bytes: u64,
    pub index_packets: u64,
}

impl Distribution {
    /// Reads the packets `query` selects (a store through its catalog and
    /// indexes, or one capture file) through the query layer.
    pub fn read(query: Query) -> Result<(Distribution, Report), QueryError> {
        let prepared = wv_query::prepare(query)?;
        let mut d = Distribution { first_ns: u64::MAX, ..Default::default() };
        let mut files: BTreeSet<PathBuf> = BTreeSet::new();
        let report = wv_query::visit(prepared, |file, p| {
            if !files.contains(file.path) {
                files.insert(file.path.to_path_buf());
            }
            d.add(p.linktype, u64::from(p.origlen), u64::from(p.caplen), p.ts_ns);
            true
        })?;
        if d.packets == 0 {
            d.first_ns = 0;
        }
        for f in &files {
            d.add_index_of(f);
        }
        Ok((d, report))
    }

    /// Counts one packet. Raw-IP link types get the 14-byte Ethernet header
    /// they would have had on an Ethernet link.
    pub fn add(&mut self, linktype: u32, origlen: u64, caplen: u64, ts_ns: u64) {
        use wv_wire::linktype as lt;
        let eth_extra = match linktype {
            lt::ETHERNET => 0,
            lt::RAW | lt::IPV4 | lt::IPV6 => 14,
            other => {
                self.other_linktypes.insert(other);
                0
            }
        };
        *self.counts.entry((origlen + eth_extra, caplen)).or_default() += 1;
        self.packets += 1;
        self.first_ns = self.first_ns.min(ts_ns);
        self.last_ns = self.last_ns.max(ts_ns);
    }

    /// Adds the size and packet count of `capture`'s index, if it has a
    /// readable one (a regular file, not a link) built from this capture.
    fn add_index_of(&mut self, capture: &std::path::Path) {
        let idx = wv_index::index_path_for(capture);
        let Ok(meta) = std::fs::symlink_metadata(&idx) else { return };
        if !meta.is_file() {
            return;
        }
        // An index built from another file (stale) does not count.
        let Ok(cap) = std::fs::File::open(capture) else { return };
        if let Ok(r) = wv_index::IndexReader::open(&idx) {
            if r.check_capture(&cap).is_ok() {
                self.index_bytes += meta.len();
                self.index_packets += r.packets;
            }
        }
    }

    /// Index bytes per packet measured on these files, if any had an index.
    pub fn index_bytes_per_packet(&self) -> Option<f64> {
        (self.index_packets > 0).then(|| self.index_bytes as f64 / self.index_packets as f64)
    }

    /// The distribution as a mix, labelled `label`. Empty when no packet was read.
    pub fn to_mix(&self, label: String) -> Mix {
        Mix {
            label,
            classes: self
                .counts
                .iter()
                .map(|(&(frame, captured), &n)| Class { frame, captured, weight: n as f64 })
                .collect(),
        }
    }

    /// Packets per original length (for tests and summaries).
    pub fn by_origlen(&self) -> BTreeMap<u64, u64> {
        let mut m = BTreeMap::new();
        for (&(o, _), &n) in &self.counts {
            *m.entry(o).or_default() += n;
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imix_is_the_synthetic_one() {
        let m = imix();
        assert_eq!(
            m.classes.iter().map(|c| (c.frame, c.weight)).collect::<Vec<_>>(),
            vec![(60, 7.0), (590, 4.0), (1514, 1.0)]
        );
        // (7*60 + 4*590 + 1514) / 12
        assert!((m.mean(|c| c.frame as f64) - 4294.0 / 12.0).abs() < 1e-9);
    }

    #[test]
    fn custom_mix_and_sizes() {
        let m = Mix::parse("64:7,576:4,1518:1", SizeConvention::WithFcs).unwrap();
        assert_eq!(m.classes.iter().map(|c| c.frame).collect::<Vec<_>>(), vec![60, 572, 1514]);
        let m = Mix::parse("IMIX", SizeConvention::WithFcs).unwrap();
        assert_eq!(m.label, "imix");
        for bad in ["", "64", "64:0", "64:-1", "x:1", "10:1", "64:nan", "64:1e308,128:1e308"] {
            assert!(Mix::parse(bad, SizeConvention::WithoutFcs).is_err(), "{bad}");
        }
        assert_eq!(parse_sizes("60, 64,1514", SizeConvention::WithoutFcs).unwrap(), vec![60, 64, 1514]);
        assert!(parse_sizes(",", SizeConvention::WithoutFcs).is_err());
        assert!(parse_sizes("65536", SizeConvention::WithoutFcs).is_err());
        assert_eq!(parse_sizes("65539", SizeConvention::WithFcs).unwrap(), vec![65535]);
    }

    #[test]
    fn snaplen_cuts_what_is_stored_only() {
        let m = Mix::single(1514, "1514".into()).with_snaplen(Some(96));
        assert_eq!(m.classes[0], Class { frame: 1514, captured: 96, weight: 1.0 });
    }

    #[test]
    fn distribution_counts_and_raw_ip() {
        let mut d = Distribution { first_ns: u64::MAX, ..Default::default() };
        d.add(wv_wire::linktype::ETHERNET, 1514, 1514, 5);
        d.add(wv_wire::linktype::ETHERNET, 1514, 96, 3);
        d.add(wv_wire::linktype::RAW, 40, 40, 9);
        d.add(113, 100, 100, 7);
        assert_eq!(d.packets, 4);
        assert_eq!((d.first_ns, d.last_ns), (3, 9));
        assert_eq!(d.by_origlen(), BTreeMap::from([(54, 1), (100, 1), (1514, 2)]));
        assert_eq!(d.other_linktypes, BTreeSet::from([113]));
        let m = d.to_mix("x".into());
        assert_eq!(m.total_weight(), 4.0);
    }
}
