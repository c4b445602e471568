//! The index really narrows: a host query over an indexed file reads only
//! some of its blocks, and finds the same packets as a full scan.

use crate::util::run_query;

fn run(store: &std::path::Path, expr: &str) -> (Vec<u8>, wv_query::Report) {
    run_query(store, expr, None, None)
}

#[test]
fn host_query_reads_few_blocks() {
    let Some(src) = wv_testkit::corpus_file("host_query_reads_few_blocks", "afs.pcap") else { return };
    let dir = wv_testkit::TempDir::new("query-narrow");
    let f = dir.join("afs.pcap");
    std::fs::copy(&src, &f).unwrap();
    // Without an index: a scan.
    let (scan, r0) = run(&f, "udp port 7001");
    assert_eq!(r0.files_scanned, 1);
    wv_index::index_file(&f).unwrap();
    let (idx, r1) = run(&f, "udp port 7001");
    eprintln!("{r1:?}");
    assert_eq!(r1.files_indexed, 1);
    assert!(r1.blocks_read < r1.blocks_total, "{r1:?}");
    assert_eq!(scan, idx);
    assert!(r1.matched > 0);
}
