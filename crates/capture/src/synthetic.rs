//! The synthetic source: an in-memory generator of Ethernet/IPv4/UDP frames
//! that runs as fast as the pipeline takes them (or at a set rate). It is the
//! storage side's test bench, as the FPGA generator was for the papers.
//!
//! Spec: comma-separated `key=value`: `size=N` (captured frame length,
//! 60..=9000; `size=64` stores 64 bytes per frame) or `size=imix` (7×60,
//! 4×590, 1×1514: the simple IMIX of 64/594/1518-byte wire frames without
//! FCS), `count=N` (k/M/G suffixes), `duration=10s`, `rate=N` (packets per
//! second, with k/M/G; or `Ngbps`/`Nmbps` of frame bytes), `flows=N`
//! (distinct 5-tuples, default 1024). Frames carry a 64-bit sequence number
//! (big-endian) right after the UDP header.
//!
//! Each frame is handed over in one piece, as AF_PACKET hands a frame (the
//! reducers' hash and the arena's copy take one call, not one per part): the
//! generator keeps a slot per frame of a delivery batch, its payload written
//! once at start-up, and writes only a frame's 42 header bytes and its
//! sequence number into its slot.

use crate::worker::BATCH as DELIVERY_BATCH;
use crate::{CaptureError, Delivery, Frame, Poll, Source};
use std::time::{Duration, Instant};
use wv_filter::Filter;
use wv_units::{count_error, duration_error, parse_count, parse_duration, parse_packet_rate};
use wv_wire::views::ones_sum;

/// The classic simple IMIX, as captured lengths (no FCS).
pub use wv_wire::IMIX;
const HDR: usize = 14 + 20 + 8;
const BATCH: u64 = 256;

/// A parsed synthetic spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub sizes: Vec<u32>,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    pub rate_pps: Option<f64>,
    pub flows: u32,
}

/// Parses `size=64,count=1M`; errors are one sentence.
pub fn parse_spec(s: &str) -> Result<Spec, String> {
    let mut spec = Spec { sizes: vec![1514], count: None, duration: None, rate_pps: None, flows: 1024 };
    let mut rate_bps = None;
    if s.split(',').all(|x| x.trim().is_empty()) {
        return Err("the synthetic spec is empty: give e.g. size=64,count=1M".into());
    }
    let mut seen: Vec<&str> = Vec::new();
    for kv in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("synthetic spec item \"{kv}\" is not key=value"))?;
        if seen.contains(&k) {
            return Err(format!("synthetic spec key \"{k}\" is given twice: give it once"));
        }
        seen.push(k);
        match k {
            "size" if v.eq_ignore_ascii_case("imix") => spec.sizes = IMIX.to_vec(),
            "size" => {
                let n: u32 = v.parse().map_err(|_| format!("synthetic size \"{v}\" is not a number or imix"))?;
                if !(60..=9000).contains(&n) {
                    return Err(format!("synthetic size {n} is outside 60..=9000"));
                }
                spec.sizes = vec![n];
            }
            "count" => {
                spec.count = Some(parse_count(v).filter(|&n| n > 0).ok_or_else(|| count_error("synthetic count", v))?)
            }
            "duration" => {
                let d = parse_duration(v).map_err(|e| duration_error("synthetic duration", v, &e))?;
                if d.is_zero() {
                    return Err("synthetic duration must be longer than 0".into());
                }
                spec.duration = Some(d)
            }
            "rate" => {
                let l = v.to_ascii_lowercase();
                if let Some(x) = l.strip_suffix("gbps") {
                    rate_bps = Some(x.parse::<f64>().map_err(|_| format!("bad rate \"{v}\""))? * 1e9);
                } else if let Some(x) = l.strip_suffix("mbps") {
                    rate_bps = Some(x.parse::<f64>().map_err(|_| format!("bad rate \"{v}\""))? * 1e6);
                } else {
                    let l = l.trim_end_matches("pps");
                    spec.rate_pps = Some(
                        parse_packet_rate(l)
                            .ok_or_else(|| format!("bad rate \"{v}\": use e.g. 1M (packets/s) or 10gbps"))?,
                    );
                }
            }
            "flows" => {
                spec.flows = v
                    .parse()
                    .ok()
                    .filter(|&n: &u32| (1..=1 << 24).contains(&n))
                    .ok_or_else(|| format!("synthetic flows \"{v}\" must be 1..=16777216"))?
            }
            _ => return Err(format!("unknown synthetic spec key \"{k}\" (known: size, count, duration, rate, flows)")),
        }
    }
    if let Some(bps) = rate_bps {
        let mean = spec.sizes.iter().map(|&s| s as f64).sum::<f64>() / spec.sizes.len() as f64;
        spec.rate_pps = Some(bps / 8.0 / mean);
    }
    if spec.rate_pps.is_some_and(|r| r <= 0.0) {
        return Err("synthetic rate must be positive".into());
    }
    Ok(spec)
}

/// The generator.
pub struct Synthetic {
    spec: Spec,
    /// Per size in `spec.sizes` order: flow 0's 42 header bytes and the
    /// ones' complement sum of its IPv4 header without the addresses and
    /// the checksum; a flow's addresses, ports and checksum are written
    /// over them per frame ([`Synthetic::write`]).
    templates: Vec<([u8; HDR], u16)>,
    /// [`DELIVERY_BATCH`] slots of `slot` bytes, each a frame of the largest
    /// size: header and sequence number rewritten per frame, payload fixed.
    slots: Vec<u8>,
    slot: usize,
    filter: Option<Filter>,
    seq: u64,
    start: Option<Instant>,
    stopped: bool,
}

impl Synthetic {
    pub fn new(spec: Spec, filter: Option<Filter>) -> Synthetic {
        let templates = spec.sizes.iter().map(|&size| template(size)).collect();
        let slot = spec.sizes.iter().max().map_or(HDR + 8, |&m| m as usize).next_multiple_of(64);
        let payload: Vec<u8> = (0..slot - HDR - 8).map(|i| (i * 7 + 3) as u8).collect();
        let mut slots = vec![0u8; DELIVERY_BATCH * slot];
        for s in slots.chunks_exact_mut(slot) {
            s[HDR + 8..].copy_from_slice(&payload);
        }
        Synthetic { spec, templates, slots, slot, filter, seq: 0, start: None, stopped: false }
    }
}

/// The IPv4 addresses and UDP ports of flow `f`.
#[inline(always)]
fn flow_fields(f: u32) -> ([u8; 4], [u8; 4], u16, u16) {
    let src = [10, (f >> 16) as u8, (f >> 8) as u8, f as u8];
    let dst = [10, 200, (f >> 8) as u8 ^ 0x5a, f as u8 ^ 0xa5];
    (src, dst, 1024 + (f % 60000) as u16, 5000 + (f % 16) as u16)
}

/// Flow 0's header for `size` and the ones' complement sum of its IPv4
/// header without the addresses and the checksum.
fn template(size: u32) -> ([u8; HDR], u16) {
    let mut h = header(0, size);
    h[24..26].fill(0);
    h[26..34].fill(0);
    (h, ones_sum(0, &h[14..34]))
}

/// Ethernet + IPv4 + UDP header of flow `f` for a frame of `size` bytes
/// (what [`Synthetic::write`] writes, built the plain way).
fn header(f: u32, size: u32) -> [u8; HDR] {
    let mut h = [0u8; HDR];
    h[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    h[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut h[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((size - 14) as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 17;
    let (src, dst, sport, dport) = flow_fields(f);
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let c = !ones_sum(0, ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut h[34..42];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&((size - 34) as u16).to_be_bytes());
    h
}

impl Synthetic {
    /// Writes packet number `seq` into slot `j`; returns its length.
    /// Always inlined: left to the compiler, it was inlined in some builds
    /// and not in others, which moved the generator's own cost by 8 ns a
    /// frame and hid what a change to the recorder did (benches/pipeline.rs).
    #[inline(always)]
    fn write(&mut self, j: usize, seq: u64) -> usize {
        // No division where it can be helped (tens of cycles each, twice a
        // frame before): one size needs none, and the flow's number is a
        // multiply-shift of the hash's top 24 bits into 0..flows.
        let n = self.spec.sizes.len();
        let si = if n == 1 { 0 } else { (seq % n as u64) as usize };
        let size = self.spec.sizes[si] as usize;
        // Spread consecutive packets over flows with a multiplicative hash.
        let flow = ((seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) * u64::from(self.spec.flows)) >> 24;
        // The flow's fields are computed, not read from a table of every
        // flow's header: at 65,536 flows such a table (2.7 MiB a size) no
        // longer fits the core's caches, and each frame's header was a
        // random miss that a capture ring, written in order, does not have.
        let (src, dst, sport, dport) = flow_fields(flow as u32);
        let (template, sum) = &self.templates[si];
        let s = &mut self.slots[j * self.slot..];
        s[..HDR].copy_from_slice(template);
        s[26..30].copy_from_slice(&src);
        s[30..34].copy_from_slice(&dst);
        let c = !ones_sum(u32::from(*sum), &s[26..34]);
        s[24..26].copy_from_slice(&c.to_be_bytes());
        s[34..36].copy_from_slice(&sport.to_be_bytes());
        s[36..38].copy_from_slice(&dport.to_be_bytes());
        s[HDR..HDR + 8].copy_from_slice(&seq.to_be_bytes());
        size
    }

    /// Writes packets `first..first + m` into slots `0..m` (headers first,
    /// before any is handed over: see `poll`); returns their lengths.
    #[inline(always)]
    fn write_batch(&mut self, first: u64, m: usize) -> [usize; DELIVERY_BATCH] {
        let mut lens = [0usize; DELIVERY_BATCH];
        for (j, len) in lens[..m].iter_mut().enumerate() {
            *len = self.write(j, first + j as u64);
        }
        lens
    }

    /// The frame of `len` bytes in slot `j`.
    #[inline]
    fn frame(&self, j: usize, len: usize) -> &[u8] {
        &self.slots[j * self.slot..j * self.slot + len]
    }
}

impl Source for Synthetic {
    fn stop_intake(&mut self) -> Result<(), CaptureError> {
        self.stopped = true;
        Ok(())
    }

    fn poll(&mut self, out: &mut Delivery<'_>) -> Result<Poll, CaptureError> {
        if self.stopped {
            return Ok(Poll::End);
        }
        let start = *self.start.get_or_insert_with(Instant::now);
        let elapsed = start.elapsed();
        if self.spec.duration.is_some_and(|d| elapsed >= d) {
            return Ok(Poll::End);
        }
        let mut n = BATCH;
        if let Some(c) = self.spec.count {
            if self.seq >= c {
                return Ok(Poll::End);
            }
            n = n.min(c - self.seq);
        }
        if let Some(rate) = self.spec.rate_pps {
            let due = (elapsed.as_secs_f64() * rate) as u64;
            if due <= self.seq {
                let wait = ((self.seq + 1) as f64 / rate) - elapsed.as_secs_f64();
                std::thread::sleep(Duration::from_secs_f64(wait.clamp(0.0, 0.001)));
                return Ok(Poll::Idle);
            }
            n = n.min(due - self.seq);
        }
        // Unpaced, the generator runs as fast as the store takes packets and
        // never drops; paced, it keeps its rate and the store counts drops.
        if self.spec.rate_pps.is_none() && !out.has_room(9000 * BATCH as u32) {
            std::thread::sleep(Duration::from_micros(50));
            return Ok(Poll::Idle);
        }
        let now = crate::worker::now_ns();
        if !out.batches() && self.filter.is_none() {
            // One by one: nothing to gain from batches. The frames are
            // written as in batches, a batch's headers first and into the
            // same slots, so that a frame's bytes are as far from the core's
            // first-level cache with and without batches (32 slots of
            // 1514-byte frames fill 48 KiB: the copy reads them from the
            // second level; a header written just before its copy was read
            // from the first): what a reducer costs is not mixed up with
            // where and when the generator wrote its frames.
            let mut i = 0;
            while i < n {
                let m = (n - i).min(DELIVERY_BATCH as u64) as usize;
                let lens = self.write_batch(self.seq + i, m);
                for (j, &len) in lens[..m].iter().enumerate() {
                    out.packet(
                        now + i + j as u64,
                        wv_wire::linktype::ETHERNET,
                        wv_wire::MAX_SNAPLEN,
                        len as u32,
                        &[self.frame(j, len)],
                    );
                }
                i += m as u64;
            }
            self.seq += n;
            return Ok(Poll::Packets);
        }
        // With --dedup or --flow-cutoff, in batches: the reducers start their
        // table lookups for a whole batch before judging it (Delivery::packets).
        let mut i = 0;
        while i < n {
            let m = (n - i).min(DELIVERY_BATCH as u64) as usize;
            let lens = self.write_batch(self.seq + i, m);
            let mut batch = [Frame::EMPTY; DELIVERY_BATCH];
            let mut k = 0;
            for (j, &len) in lens[..m].iter().enumerate() {
                let frame = self.frame(j, len);
                if let Some(filter) = &self.filter {
                    if !filter.matches(frame, len as u32) {
                        out.filtered();
                        continue;
                    }
                }
                let ts = now + i + j as u64;
                batch[k] = Frame::one(ts, wv_wire::linktype::ETHERNET, wv_wire::MAX_SNAPLEN, len as u32, frame);
                k += 1;
            }
            out.packets(&batch[..k]);
            i += m as u64;
        }
        self.seq += n;
        Ok(Poll::Packets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grammar of every duration option (`wv_units`), as these checks read it.
    fn parse_duration(s: &str) -> Option<Duration> {
        wv_units::parse_duration(s).ok()
    }

    #[test]
    fn spec_parsing() {
        let s = parse_spec("size=64,count=1M,flows=10").unwrap();
        assert_eq!((s.sizes.clone(), s.count, s.flows), (vec![64], Some(1_000_000), 10));
        assert_eq!(parse_spec("size=imix,duration=2s").unwrap().sizes.len(), 12);
        let r = parse_spec("size=1514,rate=10gbps").unwrap().rate_pps.unwrap();
        assert!((r - 10e9 / 8.0 / 1514.0).abs() < 1.0);
        assert!(parse_spec("size=59").unwrap_err().contains("60..=9000"));
        assert!(parse_spec("bogus=1").unwrap_err().contains("unknown"));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1000ns"), Some(Duration::from_micros(1)));
        for bad in ["count=0", "duration=0s", "count=99999999999999999999", "count=inf", "count=10,count=20"] {
            assert!(parse_spec(bad).is_err(), "{bad}");
        }
        assert!(parse_spec("count=10,count=20").unwrap_err().contains("given twice"));
    }

    #[test]
    fn empty_spec_is_an_error() {
        for s in ["", ",", " , "] {
            assert!(parse_spec(s).unwrap_err().contains("empty"), "{s:?}");
        }
    }

    #[test]
    fn duration_beyond_range_is_an_error() {
        // Found by fuzz/config: Duration::from_secs_f64 panicked past u64 seconds.
        assert_eq!(parse_duration("99999999999999999999999d"), None);
        assert!(parse_spec("duration=99999999999999999999999d").unwrap_err().contains("duration"));
        assert_eq!(parse_duration("1d"), Some(Duration::from_secs(86_400)));
    }

    #[test]
    fn frames_carry_each_flows_header() {
        let spec = parse_spec("size=imix,flows=70000").unwrap();
        let mut g = Synthetic::new(spec.clone(), None);
        for seq in (0..200_000u64).step_by(7) {
            let len = g.write(3, seq);
            let n = spec.sizes.len() as u64;
            let size = spec.sizes[(seq % n) as usize];
            let flow = ((seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) * 70000) >> 24;
            assert_eq!(len, size as usize);
            assert_eq!(g.frame(3, len)[..HDR], header(flow as u32, size), "seq {seq}");
            assert_eq!(g.frame(3, len)[HDR..HDR + 8], seq.to_be_bytes());
        }
    }

    #[test]
    fn header_checksum_valid() {
        let h = header(77, 1514);
        let sum: u32 = h[14..34].chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        assert_eq!(folded as u16, 0xffff);
    }
}
