//! The indexer against outside files: every file of tcpdump's test corpus
//! (many malformed) is indexed without a panic, and the index it writes
//! reads back with one block-table entry per block of packets.

use wv_index::{Builder, IndexReader, KeyClass};

#[test]
fn every_corpus_file_indexes_without_panic() {
    let Some(corpus) = wv_testkit::corpus_dir("every_corpus_file_indexes_without_panic") else { return };
    let dir = wv_testkit::TempDir::new("index-corpus");
    let (mut ok, mut unreadable, mut packets) = (0, 0, 0);
    for e in std::fs::read_dir(&corpus).unwrap().flatten() {
        let dst = dir.join(e.file_name());
        std::fs::copy(e.path(), &dst).unwrap();
        match wv_index::index_file(&dst) {
            Ok(fi) => {
                let r = IndexReader::open(&fi.index_path).unwrap();
                assert_eq!(r.packets, fi.summary.packets);
                assert_eq!(r.blocks.len() as u64, fi.summary.packets.div_ceil(64));
                packets += r.packets;
                ok += 1;
                std::fs::remove_file(&fi.index_path).unwrap();
            }
            Err(_) => unreadable += 1,
        }
        std::fs::remove_file(&dst).unwrap();
    }
    eprintln!("indexed {ok} files ({packets} packets); {unreadable} have no readable file header");
    assert!(ok > 800);
}

fn eth_ipv4_udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, vlan: Option<u16>) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    if let Some(v) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&v.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0, 8, 0, 0]);
    f
}

#[test]
fn posting_lists_round_trip() {
    let dir = wv_testkit::TempDir::new("index-rt");
    let path = dir.join("x.pcap.idx");
    let mut b = Builder::with_block_packets(1, 4);
    let mut off = 24;
    for i in 0..1000u32 {
        let host = [10, 0, (i % 7) as u8, 1];
        let vlan = (i % 100 == 0).then_some(42);
        let f = eth_ipv4_udp(host, [192, 168, 0, 1], 1000 + (i % 3) as u16, 53, vlan);
        // Timestamps go backwards now and then, as in merged captures.
        let ts = 1_700_000_000_000_000_000 + u64::from(i) * 1000 - u64::from(i % 5 == 4) * 3500;
        b.add(ts, off, &f, f.len() as u32);
        off += 16 + f.len() as u64;
    }
    let s = b.finish(&path).unwrap();
    assert_eq!((s.packets, s.blocks), (1000, 250));
    assert!(s.keys_complete);
    let r = IndexReader::open(&path).unwrap();
    assert_eq!(r.blocks[0].offset, 24);
    assert_eq!(r.first_ns, 1_700_000_000_000_000_000);
    assert!(r.blocks.windows(2).all(|w| w[0].offset < w[1].offset));
    // 10.0.3.1 occurs in packets i % 7 == 3: blocks i / 4.
    let want: Vec<u32> = {
        let mut v: Vec<u32> = (0..1000).filter(|i| i % 7 == 3).map(|i| i / 4).collect();
        v.dedup();
        v
    };
    assert_eq!(r.lookup_range(KeyClass::Ipv4, 0x0a00_0301, 0x0a00_0301).unwrap(), want);
    // A /16 covers all of them.
    assert_eq!(r.lookup_range(KeyClass::Ipv4, 0x0a00_0000, 0x0a00_ffff).unwrap().len(), 250);
    assert_eq!(r.lookup_range(KeyClass::Port, 53, 53).unwrap().len(), 250);
    assert_eq!(r.lookup_range(KeyClass::Port, 1002, 1002).unwrap().len(), 250);
    assert!(r.lookup_range(KeyClass::Port, 54, 999).unwrap().is_empty());
    assert_eq!(r.lookup_range(KeyClass::Vlan, 42, 42).unwrap(), (0..10).map(|i| i * 25).collect::<Vec<_>>());
    assert_eq!(r.lookup_range(KeyClass::Proto, 17, 17).unwrap().len(), 250);
    assert!(r.lookup_range(KeyClass::Ipv6, 0, u128::MAX).unwrap().is_empty());
    // Block time bounds hold every packet of the block.
    for (bi, blk) in r.blocks.iter().enumerate() {
        for i in bi as u64 * 4..bi as u64 * 4 + 4 {
            let ts = 1_700_000_000_000_000_000 + i * 1000 - u64::from(i % 5 == 4) * 3500;
            assert!(blk.min_ts <= ts && ts <= blk.max_ts);
        }
    }
    // A damaged file is refused, never misread.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(IndexReader::open(&path).is_err());
}

/// A builder reset and reused for another file writes exactly what a fresh
/// builder writes (the recorder recycles builders across files).
#[test]
fn reset_builder_equals_fresh() {
    let feed = |b: &mut Builder, seed: u32, n: u32| {
        let mut off = 24;
        for i in 0..n {
            let x = i.wrapping_mul(seed);
            let vlan = (x % 11 == 0).then_some((x % 4000) as u16);
            let f = eth_ipv4_udp(x.to_be_bytes(), [192, 168, 0, (x % 5) as u8], x as u16, 53, vlan);
            b.add(1_700_000_000_000_000_000 + u64::from(i), off, &f, f.len() as u32);
            off += 16 + f.len() as u64;
        }
    };
    let mut reused = Builder::new(1);
    feed(&mut reused, 2_654_435_761, 50_000);
    let _ = reused.encode().unwrap();
    // The same traffic, shorter: stale state would hide keys of the next file's early blocks.
    reused.reset(1);
    feed(&mut reused, 40_503, 3);
    let _ = reused.encode().unwrap();
    // A different link type in between must not leak into the next file either.
    reused.reset(147);
    reused.add(5, 24, &[1, 2, 3], 3);
    let _ = reused.encode().unwrap();
    reused.reset(1);
    feed(&mut reused, 40_503, 20_000);
    let mut fresh = Builder::new(1);
    feed(&mut fresh, 40_503, 20_000);
    assert_eq!(reused.encode().unwrap(), fresh.encode().unwrap());
}
