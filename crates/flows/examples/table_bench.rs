//! The flow table's cost per packet, without capture or disk: what `record --flows` adds to a
//! stored packet on the writer thread (bench/live.sh measures the whole recorder).
//!
//!     cargo run --release -p wv-flows --example table_bench -- [FRAMES] [FLOWS] [SIZE]
//!
//! FRAMES (default 4,000,000) Ethernet/IPv4/UDP frames of SIZE bytes (default 64), their UDP
//! source port counting through FLOWS ports (default 64,512: bench/live.sh's VARY=1 traffic),
//! 1 µs apart. Each line is one way of feeding the table, best of three passes: `prepare` alone
//! (parse and hash), `add` (prepare and apply at once) and the stream tap's pipeline (prepare,
//! prefetch 8 frames later, apply 16 frames later).

use std::collections::VecDeque;
use std::time::Instant;
use wv_flows::table::{FlowConfig, FlowTable, Prepared};
use wv_wire::linktype::ETHERNET;

fn frame(size: usize, sport: u16) -> Vec<u8> {
    let mut f = vec![0u8; size.max(42)];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (f.len() - 14) as u16;
    f[14..26].copy_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f[26..34].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&(total - 20).to_be_bytes());
    f
}

fn main() {
    let arg = |i: usize, d: usize| std::env::args().nth(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (n, flows, size) = (arg(1, 4_000_000), arg(2, 64_512).clamp(1, 64_512), arg(3, 64));
    let frames: Vec<Vec<u8>> = (0..flows).map(|i| frame(size, 1024 + i as u16)).collect();
    let each = |t: &mut dyn FnMut(usize, &[u8])| {
        let start = Instant::now();
        let mut k = 0;
        for i in 0..n {
            t(i, &frames[k]);
            k = if k + 1 == flows { 0 } else { k + 1 };
        }
        start.elapsed().as_nanos() as f64 / n as f64
    };
    let best = |name: &str, run: &mut dyn FnMut() -> f64| {
        let ns = (0..3).map(|_| run()).fold(f64::INFINITY, f64::min);
        println!("{size:>5} B {flows:>6} flows  {name:<9} {ns:6.1} ns/packet");
    };
    let origlen = size as u32;
    best("prepare", &mut || {
        let t = FlowTable::new(FlowConfig::default());
        each(&mut |i, f| {
            std::hint::black_box(t.prepare(ETHERNET, i as u64 * 1000, f, origlen));
        })
    });
    best("add", &mut || {
        let mut t = FlowTable::new(FlowConfig::default());
        each(&mut |i, f| t.add(ETHERNET, i as u64 * 1000, f, origlen))
    });
    best("pipeline", &mut || {
        let mut t = FlowTable::new(FlowConfig::default());
        let mut ahead: VecDeque<Prepared> = VecDeque::with_capacity(17);
        let ns = each(&mut |i, f| {
            ahead.push_back(t.prepare(ETHERNET, i as u64 * 1000, f, origlen));
            if let Some(p) = ahead.len().checked_sub(9).and_then(|i| ahead.get(i)) {
                t.prefetch(p);
            }
            if ahead.len() > 16 {
                let p = ahead.pop_front().expect("more than 16");
                t.apply(p);
            }
        });
        std::hint::black_box(t.live());
        ns
    });
}
