//! The L2-L4 header parser used for indexing, the index builder fed with it,
//! and the index reader on both the builder's output and arbitrary bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wv_index::{Builder, IndexReader, KeyClass};

#[path = "common.rs"]
mod common;

const CLASSES: [KeyClass; 5] = [KeyClass::Ipv4, KeyClass::Ipv6, KeyClass::Port, KeyClass::Proto, KeyClass::Vlan];

/// Opens `bytes` as an index file and reads everything through its API.
fn read_index(bytes: &[u8]) {
    let path = common::scratch("idx");
    if std::fs::write(&path, bytes).is_err() {
        return;
    }
    if let Ok(r) = IndexReader::open(&path) {
        let _ = r.path();
        let _ = (r.verify(), r.capture_id());
        if let Ok(f) = std::fs::File::open(&path) {
            let _ = (r.check_capture(&f), r.check_capture_with(&f, true));
        }
        let _ = (r.linktype, r.packets, r.first_ns, r.last_ns, r.keys_complete, r.blocks.len());
        for c in CLASSES {
            let _ = r.lookup_range(c, 0, u128::MAX);
            let _ = r.lookup_range(c, 1, 0);
            if let Ok(keys) = r.keys(c) {
                for k in keys.iter().take(8) {
                    let _ = r.lookup_range(c, *k, *k);
                    let _ = r.lookup_range(c, k.saturating_sub(1), k.saturating_add(1));
                }
            }
        }
    }
    let _ = std::fs::remove_file(&path);
}

fuzz_target!(|data: &[u8]| {
    // The raw bytes as an index file (seeds include real indexes): as they
    // are (the checksums must refuse nearly all of them), and with their
    // checksums recomputed, so that the parsing behind them is fuzzed too.
    if data.starts_with(&wv_index::format::MAGIC) {
        read_index(data);
        let mut sealed = data.to_vec();
        wv_index::format::reseal(&mut sealed);
        if sealed != data {
            read_index(&sealed);
        }
        return;
    }
    // The first byte selects the builder's link type (seeds are written
    // that way by examples/mkseeds.rs); the rest is the frame.
    let Some((&sel, frame)) = data.split_first() else {
        return;
    };
    let lt = common::linktype(sel);
    for l in [1u32, 113, 101, 228, 229, u32::from(sel)] {
        let k = wv_wire::packet::parse(l, frame);
        let _ = (k.vlans(), k.protos(), format!("{k:?}"));
    }
    // The whole frame, then truncated pieces of it (a snap length cuts
    // anywhere), through builders with small blocks: one with runs of
    // 1 to 8 keys (the frame's length picks), one with a single run. Both
    // must write the same index.
    let block_packets = 1 + u32::from(frame.len() as u8 & 3);
    let run_pairs = 1 + (frame.len() >> 2) % 8;
    let mut b = Builder::with_run_pairs(lt, block_packets, run_pairs);
    let mut one = Builder::with_run_pairs(lt, block_packets, usize::MAX);
    for b in [&mut b, &mut one] {
        let mut off = 24u64;
        let mut ts = u64::from_le_bytes(frame.get(..8).and_then(|s| s.try_into().ok()).unwrap_or([0; 8]));
        b.add(ts, off, frame, frame.len() as u32);
        for cut in [1usize, 2, 13, 14, 17, 20, 33, 34, 40, 54, 60, 64] {
            if cut >= frame.len() {
                break;
            }
            off = off.wrapping_add(16 + cut as u64);
            ts = ts.wrapping_sub(u64::from(sel)).wrapping_mul(3);
            b.add(ts, off, &frame[..cut], frame.len() as u32);
            b.add(ts, off, &frame[cut..], frame.len() as u32);
        }
        if sel == 0xff {
            b.add_opaque(ts, off);
        }
    }
    let single = one.encode().ok();
    let _ = (b.linktype(), b.packets());
    let runs = b.encode().ok();
    assert_eq!(runs, single, "runs of {run_pairs} keys and a single run give the same index");
    if let Some(bytes) = runs {
        read_index(&bytes);
    }
});
