//! Synthetic flow records for bench/flow_lookup.sh (issue 47: "`flows` over a day of records,
//! 100 M flows, in ClickHouse and in the local Parquet files: one host's flows in < 1 s").
//!
//!     gen_flows STORE N [--per-file M] [--jobs J] [--clickhouse URL] [--quiet K] [--seed S]
//!
//! Writes N records that end over one day (2026-12-01 UTC) as a store's flow files,
//! `STORE/flows/stream-000/<pcap file>.parquet` of M records each (default 500,000), through
//! the recorder's own writer (`parquet::write_in`). Files rotate by size as a recorder's do, so
//! they are shorter in the busy afternoon than at night. Clients are the 65,536 hosts of
//! 10.1.0.0/16, each with a log-normal share of the flows (some hosts make millions, some a
//! handful); most flows go to 20 hot servers in 10.2.0.0/24, the rest to other internal hosts,
//! to the Internet and (4%) over IPv6. With `--clickhouse URL` each file is also inserted, as
//! the recorder's spool inserts it (one `Target::insert` of the file's records, batch
//! `ID/FILE`), and `flows/clickhouse.cursor` names them all at the end.
//!
//! Standard output: one JSON line: records, files, and a "quiet" host of 10.1.0.0/16 with the
//! number of records it is in (client or server), the one whose count is nearest K (default
//! 10): the host bench/flow_lookup.sh asks for.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use wv_flows::record::{Direction, EndReason, FlowRecord, IpAddr16};

const DAY_NS: u64 = 86_400_000_000_000;
/// 2026-12-01T00:00:00Z.
const START_NS: u64 = 1_796_083_200_000_000_000;
const HOSTS: usize = 65_536;
const HOT: usize = 20;

/// splitmix64: fast, and each file's records depend on the seed and the file's number only.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn f(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
    /// Exponential with this mean.
    fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f()).ln()
    }
    fn gauss(&mut self) -> f64 {
        let (u, v) = (1.0 - self.f(), self.f());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }
}

/// What every file's generator shares: the hosts' shares of the flows and the files' times.
struct World {
    /// Cumulative log-normal weights of the 65,536 clients.
    cum: Vec<f64>,
    /// Cumulative weights of the hot servers (a few take most).
    hot_cum: Vec<f64>,
    /// File i holds the records that ended in [bounds[i], bounds[i + 1]).
    bounds: Vec<u64>,
    names: Vec<String>,
    per_file: usize,
    total: u64,
    seed: u64,
}

impl World {
    fn new(total: u64, per_file: usize, seed: u64) -> World {
        let mut r = Rng(seed ^ 0x5eed);
        let mut acc = 0.0;
        let cum = (0..HOSTS)
            .map(|_| {
                acc += (2.0 * r.gauss()).exp();
                acc
            })
            .collect();
        let mut acc = 0.0;
        let hot_cum = (0..HOT)
            .map(|i| {
                acc += 1.0 / (i + 1) as f64;
                acc
            })
            .collect();
        // A day's traffic: a third of the peak at night, the peak at 15:00 (rate by minute).
        let rate = |m: f64| 0.35 + 0.65 * (std::f64::consts::PI * (m - 180.0) / 1440.0).sin().powi(2);
        let mut cum_min = vec![0.0];
        for m in 0..1440 {
            let last = *cum_min.last().unwrap();
            cum_min.push(last + rate(m as f64 + 0.5));
        }
        let files = total.div_ceil(per_file as u64).max(1) as usize;
        let day = cum_min[1440];
        let at = |frac: f64| -> u64 {
            let want = frac * day;
            let m = cum_min.partition_point(|&c| c < want).clamp(1, 1440) - 1;
            let within = (want - cum_min[m]) / (cum_min[m + 1] - cum_min[m]);
            START_NS + ((m as f64 + within.clamp(0.0, 1.0)) * 60e9) as u64
        };
        let bounds: Vec<u64> = (0..=files)
            .map(|i| if i == files { START_NS + DAY_NS } else { at(i as f64 * per_file as f64 / total as f64) })
            .collect();
        let names = (0..files)
            .map(|i| format!("stream-000/{}", wv_store::layout::file_name(bounds[i], i as u64 + 1, "pcap")))
            .collect();
        World { cum, hot_cum, bounds, names, per_file, total, seed }
    }

    fn records_in(&self, i: usize) -> usize {
        let before = (i * self.per_file) as u64;
        (self.total - before).min(self.per_file as u64) as usize
    }

    fn pick(cum: &[f64], r: &mut Rng) -> usize {
        let x = r.f() * cum[cum.len() - 1];
        cum.partition_point(|&c| c <= x).min(cum.len() - 1)
    }

    fn internal(i: usize) -> IpAddr16 {
        IpAddr16::v4([10, 1, (i >> 8) as u8, i as u8])
    }

    /// File `i`'s records, in the order they ended; `seen[h]` counts the records of 10.1.h.
    fn file(&self, i: usize, seen: &[AtomicU64]) -> Vec<FlowRecord> {
        let mut r = Rng(self.seed.wrapping_mul(0x1000_0000_01b3) ^ (i as u64).wrapping_mul(0x9e37_79b9));
        let n = self.records_in(i);
        let (t0, t1) = (self.bounds[i], self.bounds[i + 1]);
        let mut out = Vec::with_capacity(n);
        for j in 0..n {
            let last_ns = t0 + ((t1 - t0) as u128 * j as u128 / n as u128) as u64 + r.below(1_000);
            let c = Self::pick(&self.cum, &mut r);
            let roll = r.f();
            let v6 = roll < 0.04;
            let (protocol, server_port) = match r.below(100) {
                0..=79 => {
                    (6u8, *pick_of(&mut r, &[443, 443, 443, 443, 443, 443, 80, 80, 22, 445, 3389, 8080, 25, 993]))
                }
                80..=96 => (17, *pick_of(&mut r, &[53, 53, 53, 53, 53, 53, 53, 123, 443, 5353, 514])),
                _ => (1, 0),
            };
            let mut peer = None;
            let (client, server) = if v6 {
                let mut a = [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                a[14..].copy_from_slice(&(c as u16).to_be_bytes());
                let mut s = [0x26, 0x06, 0x47, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                s[15] = 1 + r.below(HOT as u64) as u8;
                (IpAddr16(a), IpAddr16(s))
            } else if roll < 0.74 {
                let h = Self::pick(&self.hot_cum, &mut r);
                (Self::internal(c), IpAddr16::v4([10, 2, 0, 1 + h as u8]))
            } else if roll < 0.84 {
                let p = Self::pick(&self.cum, &mut r);
                peer = Some(p);
                (Self::internal(c), Self::internal(p))
            } else {
                // An Internet address: anything in 1.0.0.0-223.255.255.255 but 10/8.
                let mut a = (r.next() as u32 % 0xdf00_0000 + 0x0100_0000).to_be_bytes();
                if a[0] == 10 {
                    a[0] = 11;
                }
                (Self::internal(c), IpAddr16::v4(a))
            };
            if !v6 {
                seen[c].fetch_add(1, Ordering::Relaxed);
                if let Some(p) = peer.filter(|&p| p != c) {
                    seen[p].fetch_add(1, Ordering::Relaxed);
                }
            }
            // Most flows are short; some end idle after a minute or so; a few run into the
            // active timeout (5 min).
            let (dur, end) = match (protocol, r.below(100)) {
                (6, 0..=69) => (r.exp(0.4e9), EndReason::Fin),
                (6, 70..=79) => (r.exp(2e9), EndReason::Rst),
                (6, 80..=97) => (r.exp(20e9), EndReason::Idle),
                (_, 98..=99) => (300e9, EndReason::Active),
                (_, 0..=1) => (r.exp(1e9), EndReason::Evicted),
                _ => (r.exp(0.05e9), EndReason::Idle),
            };
            let first_ns = last_ns.saturating_sub(dur as u64).max(START_NS - 300_000_000_000);
            let pk_s = 1 + r.exp(if protocol == 6 { 12.0 } else { 1.5 }) as u64;
            let pk_c = if protocol == 6 || r.f() < 0.9 { 1 + r.exp(16.0) as u64 } else { 0 };
            let dir = |p: u64, size: u64, flags: u16| Direction {
                packets: p,
                frame_bytes: p * size,
                ip_bytes: p * (size - 14),
                tcp_flags: flags,
            };
            let (fs, fc) = match (protocol, end) {
                (6, EndReason::Fin) => (0x1b, 0x1b),
                (6, EndReason::Rst) => (0x16, 0x12),
                (6, _) => (0x1a, 0x12),
                _ => (0, 0),
            };
            // The pcap files holding its packets: this one and those its first packet precedes.
            let first_file = self.bounds[..=i].partition_point(|&b| b <= first_ns).saturating_sub(1);
            out.push(FlowRecord {
                vlans: if c.is_multiple_of(10) { vec![100 + (c % 7) as u16] } else { Vec::new() },
                client,
                server,
                protocol,
                client_port: if protocol == 1 { 0 } else { 32768 + r.below(28231) as u16 },
                server_port,
                icmp_type: if protocol == 1 { 8 } else { 0 },
                icmp_code: 0,
                first_ns,
                last_ns: last_ns.max(first_ns),
                to_server: dir(pk_s, 60 + r.below(500), fs),
                to_client: dir(pk_c, 60 + r.below(1400), fc),
                end,
                node: "bench-node".into(),
                stream: 0,
                files: self.names[first_file..=i].to_vec(),
            });
        }
        out
    }
}

fn pick_of<'a, T>(r: &mut Rng, of: &'a [T]) -> &'a T {
    &of[r.below(of.len() as u64) as usize]
}

fn usage() -> ! {
    eprintln!("usage: gen_flows STORE N [--per-file M] [--jobs J] [--clickhouse URL] [--quiet K] [--seed S]");
    std::process::exit(2)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(store), Some(total)) = (args.next(), args.next().and_then(|n| n.replace('_', "").parse::<u64>().ok()))
    else {
        usage()
    };
    let (mut per_file, mut jobs, mut url, mut quiet, mut seed) = (500_000usize, 2usize, None, 10u64, 47u64);
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--per-file" => per_file = v().parse().unwrap_or_else(|_| usage()),
            "--jobs" => jobs = v().parse().unwrap_or_else(|_| usage()),
            "--clickhouse" => url = Some(v()),
            "--quiet" => quiet = v().parse().unwrap_or_else(|_| usage()),
            "--seed" => seed = v().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    let store = std::path::PathBuf::from(store);
    std::fs::create_dir_all(&store).expect("make the store directory");
    let dir = Arc::new(wv_sys::fs::Dir::open(&store).expect("open the store directory"));
    let world = Arc::new(World::new(total, per_file.max(1), seed));
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..HOSTS).map(|_| AtomicU64::new(0)).collect());
    let target = url.map(|u| {
        let t = wv_flows::clickhouse::Target::parse(&u, None).unwrap_or_else(|e| panic!("{e}"));
        t.ensure_table().unwrap_or_else(|e| panic!("ClickHouse at {u}: {e}"));
        t
    });
    let id = {
        let mut r = Rng(seed ^ 0x1d);
        format!("{:016x}{:016x}", r.next(), r.next())
    };
    // The inserter takes each file's records after its Parquet file is written (one at a
    // time, as the spool sends them); two files wait at most, bounding the memory.
    let (tx, rx) = mpsc::sync_channel::<(String, Vec<FlowRecord>)>(1);
    let sent = Arc::new(Mutex::new(Vec::new()));
    let inserter = target.map(|t| {
        let (id, sent) = (id.clone(), sent.clone());
        std::thread::spawn(move || {
            for (rel, recs) in rx {
                let f = rel.strip_prefix("flows/").unwrap_or(&rel).to_string();
                let batch = format!("{id}/{f}");
                let date = wv_flows::clickhouse::batch_date(&recs);
                t.insert(&batch, date, &recs).unwrap_or_else(|e| panic!("insert {batch}: {e}"));
                sent.lock().unwrap().push(f);
            }
        })
    });
    let tx = inserter.as_ref().map(|_| tx);
    let next = Arc::new(AtomicUsize::new(0));
    let files = world.names.len();
    let t0 = std::time::Instant::now();
    let workers: Vec<_> = (0..jobs.max(1))
        .map(|_| {
            let (world, seen, next, dir, tx) = (world.clone(), seen.clone(), next.clone(), dir.clone(), tx.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= files {
                    return;
                }
                let recs = world.file(i, &seen);
                let rel = wv_flows::parquet::write_in(&dir, &world.names[i], &recs).expect("write a flow file");
                if let Some(tx) = &tx {
                    tx.send((rel, recs)).expect("the inserter ended");
                }
                if i % 20 == 19 {
                    eprintln!("gen_flows: {} of {files} files, {:.0} s", i + 1, t0.elapsed().as_secs_f64());
                }
            })
        })
        .collect();
    drop(tx);
    for w in workers {
        w.join().expect("a writer thread panicked");
    }
    if let Some(i) = inserter {
        i.join().expect("the inserter panicked");
        let mut s = format!("spool {id}\n");
        for f in sent.lock().unwrap().iter() {
            s.push_str(f);
            s.push('\n');
        }
        std::fs::write(wv_flows::clickhouse::spool::cursor_path(&store), s).expect("write the cursor");
    }
    let counts: Vec<u64> = seen.iter().map(|c| c.load(Ordering::Relaxed)).collect();
    let (host, flows) = counts
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .min_by_key(|(i, &n)| (n.abs_diff(quiet), *i))
        .map_or((0, 0), |(i, &n)| (i, n));
    let q = World::internal(host).to_std();
    let busiest = counts.iter().max().copied().unwrap_or(0);
    println!(
        "{{\"records\": {total}, \"files\": {files}, \"quiet_host\": \"{q}\", \"quiet_flows\": {flows}, \"busiest_host_flows\": {busiest}, \"seconds\": {:.1}}}",
        t0.elapsed().as_secs_f64()
    );
}
