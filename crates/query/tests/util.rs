//! Helpers of wv-query's integration tests: run a query, run tcpdump on the
//! same file, and compare what they write frame by frame.

use std::path::Path;
use std::process::Command;
use wv_wire::reader::Reader;

/// One packet as both sides write it: ns timestamp, caplen, origlen, bytes.
pub type Frame = (u64, u32, u32, Vec<u8>);

/// The frames of a pcap stream (none if it has no readable header).
pub fn frames(bytes: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let Ok(mut r) = Reader::new(bytes) else {
        return out;
    };
    while let Ok(Some(p)) = r.next_packet() {
        out.push((p.ts_ns, p.caplen, p.origlen, p.data.to_vec()));
    }
    out
}

/// What tcpdump selects, as frames (an empty list when it writes nothing).
pub fn tcpdump(file: &Path, expr: &str) -> Vec<Frame> {
    let out = Command::new("tcpdump")
        .args(["-n", "--time-stamp-precision=nano", "-r"])
        .arg(file)
        .args(["-w", "-"])
        .arg(expr)
        .output()
        .unwrap();
    frames(&out.stdout)
}

/// Runs a query over `store` (a store or one capture file): the pcap it
/// writes and its report.
pub fn run_query(store: &Path, expr: &str, from: Option<u64>, to: Option<u64>) -> (Vec<u8>, wv_query::Report) {
    let q = wv_query::Query { store: store.to_path_buf(), from_ns: from, to_ns: to, expr: expr.into(), limit: None };
    let p = wv_query::prepare(q).unwrap_or_else(|e| panic!("{}: {expr}: {e}", store.display()));
    let mut out = Vec::new();
    let r = wv_query::run(p, wv_query::Sink::Pcap(&mut out)).unwrap();
    (out, r)
}
