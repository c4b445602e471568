//! `wirevault analyze`'s engine on arbitrary frame sequences: no panic, no
//! unbounded memory (tiny table caps), totals that add up.
//!
//! Input: a link-type selector byte (as the `dissect` target), then frames,
//! each `[len_hi, len_lo, dt]` and `len` bytes (the rest when shorter); `dt`
//! moves the clock by `dt` ms, backwards when its high bit is set. Every frame
//! is fed twice (the second a duplicate 1 µs later, cut to half its length).
#![no_main]

#[path = "common.rs"]
mod common;

use libfuzzer_sys::fuzz_target;
use wv_analyze::{Analyzer, Config, Frame};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let linktype = common::linktype(sel);
    let cfg = Config {
        dup_frames: 4,
        max_flows: 4,
        max_intervals: 64,
        step_ns: 1_000_000,
        examples: 2,
        top: 3,
        ..Config::default()
    };
    let mut an = Analyzer::new(cfg).expect("valid config");
    let mut ts: u64 = 1_000_000_000;
    let mut fed = 0u64;
    while !rest.is_empty() {
        let (len, dt, body) = match rest {
            [a, b, dt, body @ ..] => (usize::from(u16::from_be_bytes([*a, *b])), *dt, body),
            _ => (rest.len(), 0, rest),
        };
        let n = len.min(body.len());
        let frame = &body[..n];
        rest = &body[n..];
        let step = u64::from(dt & 0x7f) * 1_000_000;
        ts = if dt & 0x80 != 0 { ts.saturating_sub(step) } else { ts.saturating_add(step) };
        an.feed(&Frame { ts_ns: ts, linktype, wire_len: n as u32, data: frame });
        an.feed(&Frame { ts_ns: ts + 1000, linktype, wire_len: n as u32, data: &frame[..n / 2] });
        fed += 2;
    }
    let r = an.finish();
    assert_eq!(r.frames, fed);
    let sizes: u64 = r.mix.sizes.iter().map(|b| b.packets).sum();
    // Every frame has a size, whatever its link type.
    assert_eq!(sizes, fed);
    assert!(r.unsupported_linktype <= fed);
    let io: u64 = r.throughput.intervals.iter().map(|i| i.packets).sum::<u64>() + r.throughput.beyond.packets;
    assert_eq!(io, fed);
    assert!(r.throughput.intervals.len() <= 64);
    assert!(r.conversations.udp.count <= 4 && r.tcp.conversations.count <= 4 * (1 + fed as usize));
    let _ = wv_analyze::report::table(&r, 3);
    let _ = serde_json::to_string(&r).expect("the report serializes");
});
