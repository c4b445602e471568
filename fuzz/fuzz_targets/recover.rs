//! Crash recovery's scan of a `.part` capture file: arbitrary file contents,
//! both formats, must give a prefix length within the file and never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wv_store::{recover, Format};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let path = common::scratch("part");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    for f in [Format::Pcap, Format::Pcapng] {
        for partial in [true, false] {
            if let Ok(v) = recover::valid_prefix(&path, f, partial) {
                assert!(v.len <= v.data_len, "valid prefix past the data");
                assert!(v.data_len <= data.len() as u64, "data longer than the file");
                assert!(v.packets <= data.len() as u64);
            }
        }
    }
    let _ = std::fs::remove_file(&path);
});
