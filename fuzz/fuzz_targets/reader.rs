//! The pcap/pcapng reader behind `record --read` and `index`: arbitrary file
//! bytes must give packets or an error, never a panic, a hang or unbounded memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Read;
use wv_wire::reader::Reader;

#[path = "common.rs"]
mod common;

fn drain<R: Read>(input: R, len: usize) {
    let Ok(mut r) = Reader::new(input) else {
        return;
    };
    let _ = r.format();
    // Every packet consumes at least one byte of input, so more packets
    // than input bytes means the reader is not making progress (a hang).
    let mut packets = 0usize;
    loop {
        match r.next_packet() {
            Ok(Some(p)) => {
                assert_eq!(p.caplen as usize, p.data.len(), "caplen != data.len()");
                packets += 1;
                assert!(packets <= len, "reader returns packets without consuming input");
            }
            Ok(None) => break,
            Err(e) => {
                let _ = e.offset();
                let _ = e.to_string();
                // A spent reader keeps returning Ok(None).
                assert!(matches!(r.next_packet(), Ok(None)));
                break;
            }
        }
    }
    let _ = r.offset();
}

fuzz_target!(|data: &[u8]| {
    drain(data, data.len());
    // Short reads: the same bytes in small pieces.
    let chunk = 1 + data.len() % 61;
    drain(common::Trickle { data, chunk }, data.len());
});
