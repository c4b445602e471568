//! Measures the index builder on synthetic traffic: ns per packet of
//! `Builder::add` (one core) and index size as a share of the pcap bytes,
//! for 64-byte, 1514-byte and IMIX (7:4:1 of 64/594/1514) frames.
//!
//! `cargo run --release -p wv-index --example index_bench [PACKETS] [FLOWS]`
//!
//! Traffic: FLOWS concurrent IPv4 TCP/UDP flows between 5000 clients and
//! 200 servers; each packet belongs to a flow drawn at random, with
//! a 50% chance of repeating one of the last 8 flows (bursts).

use std::time::Instant;
use wv_index::Builder;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn frame(len: usize, flow: u64, out: &mut Vec<u8>) {
    out.clear();
    out.resize(len, 0);
    out[12] = 0x08;
    out[14] = 0x45;
    out[23] = if flow % 4 == 0 { 17 } else { 6 };
    let client = 0x0a00_0000 | (flow % 5000) as u32;
    let server = 0xc0a8_0000 | ((flow / 5000) % 200) as u32;
    let (s, d) = if flow % 2 == 0 { (client, server) } else { (server, client) };
    out[26..30].copy_from_slice(&s.to_be_bytes());
    out[30..34].copy_from_slice(&d.to_be_bytes());
    let cport = 1024 + (flow * 7919 % 60000) as u16;
    let sport = [80u16, 443, 53, 22, 8080][(flow % 5) as usize];
    out[34..36].copy_from_slice(&cport.to_be_bytes());
    out[36..38].copy_from_slice(&sport.to_be_bytes());
}

fn run(name: &str, sizes: &[usize], packets: u64, flows: u64) {
    // The flow of every packet, drawn up front; frames are written into one
    // reused buffer per packet (as the writer hands over frames one at a
    // time), and the same loop without the builder is timed and subtracted.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut recent = [0u64; 8];
    let mut seq = Vec::with_capacity(packets as usize);
    for i in 0..packets {
        let r = rng.next();
        let flow = if r & 1 == 0 { recent[(r >> 1) as usize % 8] } else { (r >> 8) % flows };
        recent[i as usize % 8] = flow;
        seq.push(flow);
    }
    let mut buf = Vec::with_capacity(2048);
    let t0 = Instant::now();
    let mut sink = 0u64;
    for (i, &flow) in seq.iter().enumerate() {
        frame(sizes[i % sizes.len()], flow, &mut buf);
        sink = sink.wrapping_add(u64::from(buf[37]));
    }
    let gen = t0.elapsed();
    std::hint::black_box(sink);
    let mut b = Builder::new(1);
    let mut off = 24u64;
    let t = Instant::now();
    for (i, &flow) in seq.iter().enumerate() {
        frame(sizes[i % sizes.len()], flow, &mut buf);
        b.add(1_700_000_000_000_000_000 + i as u64 * 1000, off, &buf, buf.len() as u32);
        off += 16 + buf.len() as u64;
    }
    let el = t.elapsed().saturating_sub(gen);
    let t = Instant::now();
    let idx = b.encode().unwrap();
    let enc = t.elapsed();
    println!(
        "{name:>6} {flows:>9} flows  add {:>6.1} + encode {:>5.1} = {:>6.1} ns/packet  index {:>10} B  pcap {:>12} B  ratio {:>6.3}%",
        el.as_nanos() as f64 / packets as f64,
        enc.as_nanos() as f64 / packets as f64,
        (el + enc).as_nanos() as f64 / packets as f64,
        idx.len(),
        off,
        100.0 * idx.len() as f64 / off as f64
    );
}

fn main() {
    let args: Vec<u64> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let packets = args.first().copied().unwrap_or(2_000_000);
    let flow_counts: Vec<u64> = match args.get(1) {
        Some(f) => vec![*f],
        None => vec![100, 10_000, 1_000_000],
    };
    let imix: Vec<usize> = [64; 7].into_iter().chain([594; 4]).chain([1514]).collect();
    for flows in flow_counts {
        run("64", &[64], packets, flows);
        run("1514", &[1514], packets, flows);
        run("IMIX", &imix, packets, flows);
    }
}
