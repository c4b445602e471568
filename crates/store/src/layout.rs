//! Names of things inside a store directory (see DESIGN.md, "Store layout").

use std::path::{Path, PathBuf};

/// The catalog file of a store.
pub const CATALOG: &str = "catalog.jsonl";
/// The latest counters of a recording.
pub const STATS: &str = "stats.json";
/// A `wirevault disk-bench --rate R --json` result kept in the store: `record`
/// takes its default arena size from it (`rate.buffer_with_margin_bytes`).
pub const DISK_BENCH: &str = "disk-bench.json";
/// Suffix of a file still being written.
pub const PART: &str = wv_sys::fs::PART;
/// Suffix of an index file, after the capture file's name.
pub const INDEX: &str = ".idx";

/// Directory of stream `id` relative to the store.
pub fn stream_dir(id: usize) -> String {
    format!("stream-{id:03}")
}

/// File name for a capture file whose first packet has timestamp `first_ns`.
pub fn file_name(first_ns: u64, seq: u64, ext: &str) -> String {
    format!("{}-{seq:06}.{ext}", utc_compact(first_ns))
}

/// The sequence number in a file name made by [`file_name`] (also with `.part`).
pub fn seq_of(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(PART).unwrap_or(name);
    let stem = stem.rsplit_once('.')?.0;
    stem.rsplit_once('-')?.1.parse().ok()
}

/// The highest sequence number used in a stream directory (0 if none), so a
/// new recording into an existing store never reuses a file name.
pub fn max_seq(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().filter_map(|e| seq_of(e.file_name().to_str()?)).max().unwrap_or(0))
        .unwrap_or(0)
}

/// Path of the index beside a capture file: `FILE.idx`. The one rule for
/// an index's name; [`index_rel`] is the same for a store-relative name and
/// [`capture_of_index`] its inverse.
pub fn index_path(capture: &Path) -> PathBuf {
    let mut s = capture.as_os_str().to_owned();
    s.push(INDEX);
    PathBuf::from(s)
}

/// [`index_path`] of a store-relative capture name (a catalog `file`).
pub fn index_rel(capture: &str) -> String {
    format!("{capture}{INDEX}")
}

/// The flow records of the catalogued file `capture` (a catalog path), beneath the store's
/// root whatever volume the file is on: `flows/<capture>.parquet` (docs/flows.md).
pub fn flows_rel(capture: &str) -> String {
    format!("{FLOWS}/{capture}{FLOWS_EXT}")
}

/// The directory of the flow files, and their extension after the capture file's name.
pub const FLOWS: &str = "flows";
pub const FLOWS_EXT: &str = ".parquet";

/// The capture file an index path belongs to, if `index` is named by [`index_path`].
pub fn capture_of_index(index: &Path) -> Option<&Path> {
    use std::os::unix::ffi::OsStrExt;
    let cap = index.as_os_str().as_bytes().strip_suffix(INDEX.as_bytes())?;
    Some(Path::new(std::ffi::OsStr::from_bytes(cap)))
}

pub use wv_wire::time::{utc_compact, utc_rfc3339};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        // 2026-11-22T10:15:00Z = 1795342500
        let ns = 1_795_342_500_000_000_000 + 123_456_789;
        assert_eq!(file_name(ns, 7, "pcap"), "20261122T101500.123456789Z-000007.pcap");
        assert_eq!(stream_dir(3), "stream-003");
        assert_eq!(seq_of("20261122T101500.123456789Z-000007.pcap"), Some(7));
        assert_eq!(seq_of("20261122T101500.123456789Z-000012.pcapng.part"), Some(12));
        assert_eq!(seq_of("20261122T101500.123456789Z-000007.pcap.idx"), None);
    }
}
