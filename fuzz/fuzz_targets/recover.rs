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
        if let Ok(v) = recover::valid_prefix(&path, f) {
            assert!(v.len <= data.len() as u64, "valid prefix longer than the file");
            assert!(v.packets <= data.len() as u64);
        }
    }
    let _ = std::fs::remove_file(&path);
});
