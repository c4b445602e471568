//! The capture thread's CPU per packet with and without `--dedup` and
//! `--flow-cutoff`, on the synthetic source, without the disk: the worker
//! loop (`worker::run`) stores into a real arena (`StreamProducer`) whose
//! committed bytes one other thread only releases. No writer, index or
//! sort thread shares the two cores, so the figures vary by a few percent
//! from run to run, where `record --synthetic` (bench/reduce.sh's
//! end-to-end runs) varies by tens. Every frame is distinct (nothing
//! deduplicated) and the cutoff is above every connection (nothing cut):
//! each packet pays the full lookup.
//!
//!   cargo bench -p wv-capture --bench pipeline [-- N ROUNDS FLOWS SIZES...]
//!
//! Defaults: N = 4,000,000 packets per run, the best of ROUNDS = 3, FLOWS =
//! 1024, sizes 64 and 1514. `ONLY=dedup` (or `plain`, `cutoff`, `both`)
//! runs that configuration alone and prints its figure (to profile it);
//! `FLOW_TABLE=N` sizes the cutoff's table as `record --flow-table N` does.

use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use wv_capture::reduce::{Cutoff, Dedup, Reduce};
use wv_capture::worker::{run, Limits};
use wv_capture::SharedCounts;
use wv_store::stream::{Msg, StreamConfig, StreamProducer};

/// The capture thread's CPU ns per stored packet of one run.
fn one(spec: &str, dedup: bool, cutoff: bool) -> f64 {
    let (p, mut c) = wv_sys::byte_ring::byte_ring(wv_sys::mem::AlignedBuf::new(256 << 20, false).expect("arena"));
    let cfg = StreamConfig {
        format: wv_store::Format::Pcap,
        file_size: 1 << 40,
        file_time_ns: None,
        block_size: 1 << 20,
        flush_after_ns: u64::MAX,
        clock_close_grace_ns: None,
    };
    let q = Arc::new(ArrayQueue::new(1 << 12));
    let mut s = StreamProducer::new(p, q.clone(), cfg);
    let done = Arc::new(AtomicBool::new(false));
    // The writer's stand-in: releases what is committed, writes nothing.
    let d = done.clone();
    let drain = std::thread::spawn(move || loop {
        let mut end = None;
        while let Some(m) = q.pop() {
            if let Msg::Commit { end: e, .. } | Msg::Close { end: e, .. } = m {
                end = Some(e);
            }
        }
        if let Some(e) = end {
            c.release(e);
        }
        if d.load(Ordering::Relaxed) && q.is_empty() {
            break;
        }
        std::thread::yield_now();
    });
    let spec = wv_capture::synthetic::parse_spec(spec).expect("spec");
    let mut src = wv_capture::synthetic::Synthetic::new(spec, None);
    let reduce = Reduce::new(
        dedup.then(|| Dedup::new(1_000_000, Dedup::DEFAULT_ENTRIES)),
        cutoff.then(|| Cutoff::new(1 << 40, u64::MAX, flow_table())),
    );
    let stop = AtomicBool::new(false);
    let limits = Limits { max_packets: None, quota: None, snaplen: 65535 };
    let counts = run(&mut src, &mut s, &stop, &SharedCounts::default(), limits, reduce).expect("run");
    done.store(true, Ordering::Relaxed);
    drain.join().expect("drain thread");
    assert_eq!(counts.stored, counts.delivered, "every frame stored: {counts:?}");
    counts.cpu_ns as f64 / counts.stored as f64
}

/// The cutoff's table entries: `FLOW_TABLE` (as `record --flow-table`), else the default.
fn flow_table() -> usize {
    std::env::var("FLOW_TABLE").ok().and_then(|v| v.parse().ok()).unwrap_or(Cutoff::DEFAULT_ENTRIES)
}

fn main() {
    // `cargo bench` passes "--bench"; the numbers are ours.
    let args: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let n: u64 = args.first().and_then(|a| a.parse().ok()).unwrap_or(4_000_000);
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let flows: u32 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let sizes: Vec<String> = if args.len() > 3 { args[3..].to_vec() } else { vec!["64".into(), "1514".into()] };
    if let Ok(only) = std::env::var("ONLY") {
        let (d, c) = match only.as_str() {
            "plain" => (false, false),
            "dedup" => (true, false),
            "cutoff" => (false, true),
            "both" => (true, true),
            _ => panic!("ONLY must be plain, dedup, cutoff or both, not {only}"),
        };
        for size in &sizes {
            for _ in 0..rounds {
                println!(
                    "{size} {only}: {:.1} ns per packet",
                    one(&format!("size={size},count={n},flows={flows}"), d, c)
                );
            }
        }
        return;
    }
    println!("pipeline: {n} packets per run, best of {rounds}, {flows} flows; capture thread CPU ns per packet");
    println!();
    println!("| frames | plain | --dedup | dedup cost | --flow-cutoff | cutoff cost | both | both cost |");
    println!("|---|---|---|---|---|---|---|---|");
    for size in sizes {
        let spec = format!("size={size},count={n},flows={flows}");
        let mut best = [f64::MAX; 4];
        for _ in 0..rounds {
            for (i, (d, c)) in [(false, false), (true, false), (false, true), (true, true)].into_iter().enumerate() {
                best[i] = best[i].min(one(&spec, d, c));
            }
        }
        let [plain, dedup, cutoff, both] = best;
        println!(
            "| {size} | {plain:.1} | {dedup:.1} | {:.1} | {cutoff:.1} | {:.1} | {both:.1} | {:.1} |",
            dedup - plain,
            cutoff - plain,
            both - plain
        );
    }
}
