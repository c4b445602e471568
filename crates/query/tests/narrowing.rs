//! The index really narrows: a host query over an indexed file reads only
//! some of its blocks, and finds the same packets as a full scan.

use std::path::PathBuf;

fn corpus_file(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/corpus/tcpdump-tests")).join(name);
    p.is_file().then_some(p)
}

fn run(store: &std::path::Path, expr: &str) -> (Vec<u8>, wv_query::Report) {
    let q = wv_query::Query { store: store.to_path_buf(), expr: expr.into(), ..Default::default() };
    let mut out = Vec::new();
    let r = wv_query::run(wv_query::prepare(q).unwrap(), wv_query::Sink::Pcap(&mut out)).unwrap();
    (out, r)
}

#[test]
fn host_query_reads_few_blocks() {
    let Some(src) = corpus_file("afs.pcap") else {
        eprintln!("skipped: corpus missing");
        return;
    };
    let dir = std::env::temp_dir().join(format!("wv-narrow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
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
    let _ = std::fs::remove_dir_all(&dir);
}
