//! The index builder: fed every record of one capture file in file order,
//! it writes the immutable index file when the capture file closes.
//!
//! Hot file: `add` runs once per packet on the writer thread. It parses the
//! frame's headers, then appends to vectors only (no allocation, system call
//! or lock per packet; once per run of keys, a run is handed over, which may
//! wait for the sort thread when it is two runs behind).
//!
//! Addresses and ports, the key classes with many keys, are gathered as
//! (key, block) pairs in fixed-size runs. A full run is sorted and encoded
//! (delta + varint, as in the index) by another thread when the recorder
//! offers one ([`Builder::set_offload`]), so a file's pairs never wait in
//! memory raw: the builder holds a few run buffers plus the encoded runs,
//! about the size of the index. Writing the index merges the runs.

use crate::format::{self, get_varint, put_varint, zigzag, KeyClass};
use crate::ident::CaptureId;
use crate::IndexError;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::Write;
use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use wv_wire::packet::{self, ethertype, ipproto, Addr};
use wv_wire::views::{ethernet, ipv4, udp};

mod radix;
mod runs;
mod write;

use radix::*;
use runs::*;

/// Packets per block unless [`Builder::with_block_packets`] says otherwise.
pub const DEFAULT_BLOCK_PACKETS: u32 = 64;

/// (key, block) pairs per run unless [`Builder::with_run_pairs`] says
/// otherwise: 4 MiB of pairs (plus as much sort buffer), mostly within the
/// last-level cache, where the whole file's pairs were not.
pub const DEFAULT_RUN_PAIRS: usize = 1 << 19;

/// Blocks [`Builder::warm`] makes room for: 2^17 blocks of [`DEFAULT_BLOCK_PACKETS`] (8.4
/// million packets, a 1 GiB file of 128-byte frames; 3 MiB). A larger file's table grows as
/// before; [`Builder::reset`] gives back what a file much smaller than that did not use.
pub const WARM_BLOCKS: usize = 1 << 17;

/// Runs of one key class handed out at once; the builder waits for one to
/// come back before handing out another (the other thread is behind).
const MAX_OUT: usize = 2;

/// The header and section table at the start of an index file.
const HEAD_LEN: usize = format::HEAD_LEN;

/// Work a builder hands to another thread (sorting and encoding one run),
/// and where it hands it: the store's one index hand-off type.
pub use wv_store::{IndexOffload as Offload, IndexWork as Work};

/// What a finished index says about its capture file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSummary {
    pub linktype: u32,
    pub packets: u64,
    /// Smallest packet timestamp (0 when there are no packets).
    pub first_ns: u64,
    /// Largest packet timestamp.
    pub last_ns: u64,
    pub blocks: u32,
    /// Size of the index file written.
    pub index_bytes: u64,
    /// Whether the posting lists cover every packet.
    pub keys_complete: bool,
}

/// A posting list under construction, already delta + varint encoded.
#[derive(Default, Clone)]
struct Posting {
    /// Last block added, plus one (0: none yet).
    last: u32,
    bytes: Vec<u8>,
}

impl Posting {
    #[inline]
    fn add(&mut self, block: u32) {
        if self.last != block + 1 {
            self.append(block);
        }
    }

    /// The list's first packet in `block`: once per block, out of the per-packet path.
    #[cold]
    #[inline(never)]
    fn append(&mut self, block: u32) {
        let b1 = block + 1;
        put_varint(&mut self.bytes, u64::from(b1 - self.last));
        self.last = b1;
    }
}

/// Keys already recorded for the current block: a small direct-mapped
/// table (L1-resident) that drops most repeats of a key within a block
/// before they reach the pair list. A collision only costs a duplicate
/// pair, removed when its run is encoded. Each slot holds a key and its
/// block as one word (`key << 32 | block + 1`; 0 is no key), compared
/// and written at once.
struct Seen<const N: usize> {
    slots: Box<[u64; N]>,
}

impl<const N: usize> Seen<N> {
    fn new() -> Self {
        Seen { slots: Box::new([0; N]) }
    }
    fn clear(&mut self) {
        self.slots.fill(0);
    }
    /// True when (key, block) is new; records it.
    #[inline]
    fn insert(&mut self, slot: usize, key: u32, block: u32) -> bool {
        let e = &mut self.slots[slot & (N - 1)];
        let v = u64::from(key) << 32 | (u64::from(block) + 1);
        if *e == v {
            return false;
        }
        *e = v;
        true
    }
}

#[inline]
fn hash32(v: u32) -> usize {
    (v.wrapping_mul(0x9e37_79b1) >> 20) as usize
}

#[derive(Clone, Copy)]
struct Block {
    offset: u64,
    min_ts: u64,
    max_ts: u64,
}

/// Builds the index of one capture file.
pub struct Builder {
    linktype: u32,
    block_mask: u64,
    packets: u64,
    keys_complete: bool,
    blocks: Vec<Block>,
    /// (address << 32 | block) pairs, appended in packet order into runs
    /// that are sorted and encoded when full, and merged into posting lists
    /// when the index is written. Appending to one sequential vector keeps
    /// the per-packet cost free of cache misses however many distinct keys
    /// the traffic has.
    ipv4: Runs,
    ipv6: Vec<(u128, u32)>,
    /// (port << 32 | block) pairs.
    ports: Runs,
    /// Few keys: posting lists built directly.
    protos: Vec<Posting>,
    vlans: Vec<Posting>,
    seen_v4: Seen<1024>,
    seen_port: Seen<1024>,
    /// Where full runs are sorted (none: on the thread that adds).
    offload: Option<Offload>,
    /// The section being laid out (a class's directory, kept whole) and
    /// posting lists or block table on their way to the file, kept for the next file.
    dir: Vec<u8>,
    out: Vec<u8>,
    /// The capture file this index describes, when known (see [`Builder::set_capture_id`]).
    capture_id: Option<CaptureId>,
    /// See [`Builder::set_structure_after_packets`].
    late_structure: bool,
}

impl Builder {
    /// A builder for a file of the given link type.
    pub fn new(linktype: u32) -> Builder {
        Builder::with_block_packets(linktype, DEFAULT_BLOCK_PACKETS)
    }

    /// A builder with `block_packets` packets per block (rounded up to a power of two, at least 1).
    pub fn with_block_packets(linktype: u32, block_packets: u32) -> Builder {
        Builder::with_run_pairs(linktype, block_packets, DEFAULT_RUN_PAIRS)
    }

    /// A builder with `block_packets` packets per block and runs of
    /// `run_pairs` (key, block) pairs (at least 1): the index it writes is
    /// the same for every run size; only memory and speed differ.
    pub fn with_run_pairs(linktype: u32, block_packets: u32, run_pairs: usize) -> Builder {
        let bp = block_packets.max(1).next_power_of_two();
        let probe = packet::parse(linktype, &[]);
        Builder {
            linktype,
            block_mask: u64::from(bp) - 1,
            packets: 0,
            keys_complete: probe.linktype_supported,
            blocks: Vec::new(),
            ipv4: Runs::new(run_pairs),
            ipv6: Vec::new(),
            ports: Runs::new(run_pairs),
            protos: Vec::new(),
            vlans: Vec::new(),
            seen_v4: Seen::new(),
            seen_port: Seen::new(),
            offload: None,
            dir: Vec::new(),
            out: Vec::new(),
            capture_id: None,
            late_structure: false,
        }
    }

    /// Names the capture file the index describes (its size, mtime and
    /// fingerprint go into the index, so that a reader can tell when the
    /// file was replaced). Without it, [`Builder::write`] reads them from
    /// the file beside the index (the index path without `.idx`).
    pub fn set_capture_id(&mut self, id: CaptureId) {
        self.capture_id = Some(id);
    }

    /// Says that the pcapng file has section header or interface blocks
    /// after its first packet ([`wv_wire::reader::Reader::structure_after_packets`]):
    /// its blocks cannot be read apart, and readers read it whole.
    pub fn set_structure_after_packets(&mut self, late: bool) {
        self.late_structure = late;
    }

    /// Hands full runs to `offload`, which runs each [`Work`] on another
    /// thread: the thread that adds packets then only appends. `add`,
    /// `write`, `encode` and `reset` may wait for works handed out before, so
    /// the thread that runs them must never wait for this builder. A work
    /// dropped unrun does itself when dropped (unless the dropping thread is
    /// unwinding from a panic); one that panics or is dropped while unwinding
    /// is reported lost, and the index then says its keys are incomplete.
    pub fn set_offload(&mut self, offload: Offload) {
        self.offload = Some(offload);
    }

    /// Empties the builder for a new file of `linktype` (same block size),
    /// keeping its allocations: a recorder reuses one builder per file
    /// instead of faulting in fresh, zeroed memory for each.
    ///
    /// Memory a burst left behind is given back, so the builder follows the
    /// traffic down again: vectors holding more than four times what the
    /// last file used (and over 1 MiB) shrink to twice that, and encoded run
    /// buffers beyond twice the last file's runs are freed. A file without
    /// packets (or a builder not used yet, as after [`Builder::warm`]) gives
    /// nothing back.
    pub fn reset(&mut self, linktype: u32) {
        // A builder that described no packet (just made or warmed, or an empty file) keeps
        // the room it holds: trimming follows the traffic down only from a file with packets.
        if self.packets > 0 {
            trim(&mut self.dir);
            trim(&mut self.out);
            trim(&mut self.blocks);
            trim(&mut self.ipv6);
        } else {
            self.dir.clear();
            self.out.clear();
            self.blocks.clear();
            self.ipv6.clear();
        }
        self.linktype = linktype;
        self.packets = 0;
        self.keys_complete = packet::parse(linktype, &[]).linktype_supported;
        self.ipv4.reset();
        self.ports.reset();
        for p in self.protos.iter_mut().chain(self.vlans.iter_mut()) {
            p.last = 0;
            p.bytes.clear();
        }
        self.seen_v4.clear();
        self.seen_port.clear();
        self.capture_id = None;
        self.late_structure = false;
    }

    /// Allocates and faults in the buffers the first packets' keys go to (each key class's
    /// run, 4 MiB by default) and the block table for `WARM_BLOCKS` blocks, so that a
    /// recorder pays for them at start-up: a new builder otherwise faults them in on its first
    /// packets, on the writer's time (the block table, growing by doubling, was 4% of the
    /// zero-copy capture thread's samples at 64-byte frames, 2026-11-28: a fault per 4 KiB of
    /// fresh memory on this virtual machine costs microseconds).
    pub fn warm(&mut self) {
        self.ipv4.warm();
        self.ports.warm();
        if self.blocks.capacity() < WARM_BLOCKS {
            self.blocks.reserve_exact(WARM_BLOCKS - self.blocks.len());
        }
        let room = self.blocks.spare_capacity_mut();
        let per_page = (4096 / std::mem::size_of::<Block>()).max(1);
        for b in room.iter_mut().step_by(per_page) {
            b.write(Block { offset: 0, min_ts: 0, max_ts: 0 });
        }
        // Never read: keeps the writes (and so the page faults) from being optimised away.
        std::hint::black_box(room);
    }

    /// The link type this builder parses frames with.
    pub fn linktype(&self) -> u32 {
        self.linktype
    }

    /// Packets added so far.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Adds the time and place of one record and returns its block.
    #[inline]
    fn add_position(&mut self, ts_ns: u64, record_offset: u64) -> u32 {
        if self.packets & self.block_mask == 0 {
            self.blocks.push(Block { offset: record_offset, min_ts: ts_ns, max_ts: ts_ns });
        } else if let Some(b) = self.blocks.last_mut() {
            b.min_ts = b.min_ts.min(ts_ns);
            b.max_ts = b.max_ts.max(ts_ns);
        }
        self.packets += 1;
        (self.blocks.len() - 1) as u32
    }

    /// Adds one record, in file order. `record_offset` is the byte offset of
    /// the record header (pcap) or block (pcapng) in the capture file;
    /// `frame` the captured bytes; `origlen` the length on the wire.
    #[inline]
    pub fn add(&mut self, ts_ns: u64, record_offset: u64, frame: &[u8], origlen: u32) {
        let _ = origlen; // length primitives (`less`, `greater`) are decided by the filter
        let block = self.add_position(ts_ns, record_offset);
        if !self.keys_complete || self.add_eth_ipv4(block, frame) {
            return;
        }
        self.add_parsed(block, frame);
    }

    /// [`Builder::add`] of every frame but untagged IPv4 on Ethernet: keys from
    /// [`packet::parse`]. Out of line, so that the common frame's path keeps to
    /// few registers and a small frame.
    #[inline(never)]
    fn add_parsed(&mut self, block: u32, frame: &[u8]) {
        let k = packet::parse(self.linktype, frame);
        for &v in k.vlans() {
            posting_at(&mut self.vlans, v as usize, 4096).add(block);
        }
        for &p in k.protos() {
            posting_at(&mut self.protos, p as usize, 256).add(block);
        }
        if let Some((s, d)) = k.ports {
            for p in [s, d] {
                if self.seen_port.insert(p as usize, u32::from(p), block) {
                    self.ports.push(u64::from(p) << 32 | u64::from(block), &mut self.offload);
                }
            }
        }
        for a in [k.src, k.dst] {
            match a {
                Addr::V4(a) => {
                    let a = u32::from_be_bytes(a);
                    if self.seen_v4.insert(hash32(a), a, block) {
                        self.ipv4.push(u64::from(a) << 32 | u64::from(block), &mut self.offload);
                    }
                }
                Addr::V6(a) => {
                    let a = u128::from_be_bytes(a);
                    if self.ipv6.last() != Some(&(a, block)) {
                        self.ipv6.push((a, block));
                    }
                }
                Addr::None => {}
            }
        }
    }

    /// The keys of the most common frame, untagged IPv4 on Ethernet with
    /// both addresses captured, read straight from the bytes: the same keys
    /// as [`packet::parse`] (see its rules: IHL unchecked, ports of the first
    /// fragment only), without building and copying a whole `FlowKey`.
    /// False (nothing added) for every other frame.
    #[inline]
    fn add_eth_ipv4(&mut self, block: u32, f: &[u8]) -> bool {
        // Offsets from the views' layouts: constants, so this compiles to
        // the same loads as literal offsets.
        const L3: usize = ethernet::HEADER_LEN;
        const MIN_LEN: usize = L3 + ipv4::field::DST_ADDR.end;
        const ET: core::ops::Range<usize> = ethernet::field::ETHERTYPE;
        const FLG_OFF: usize = L3 + ipv4::field::FLG_OFF.start;
        const SRC: usize = L3 + ipv4::field::SRC_ADDR.start;
        const DST: usize = L3 + ipv4::field::DST_ADDR.start;
        if self.linktype != wv_wire::linktype::ETHERNET || f.len() < MIN_LEN || f[ET] != ethertype::IPV4.to_be_bytes() {
            return false;
        }
        let proto = f[L3 + ipv4::field::PROTOCOL];
        posting_at(&mut self.protos, proto as usize, 256).add(block);
        if matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP)
            && u16::from_be_bytes([f[FLG_OFF], f[FLG_OFF + 1]]) & ipv4::FRAG_OFFSET_MASK == 0
        {
            let l4 = L3 + 4 * usize::from(f[L3 + ipv4::field::VER_IHL] & 0x0f);
            // TCP, UDP and SCTP keep their ports where UDP does.
            if let Some(p) = f.get(l4 + udp::field::SRC_PORT.start..l4 + udp::field::DST_PORT.end) {
                for p in [u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])] {
                    if self.seen_port.insert(p as usize, u32::from(p), block) {
                        self.ports.push(u64::from(p) << 32 | u64::from(block), &mut self.offload);
                    }
                }
            }
        }
        for a in [
            u32::from_be_bytes([f[SRC], f[SRC + 1], f[SRC + 2], f[SRC + 3]]),
            u32::from_be_bytes([f[DST], f[DST + 1], f[DST + 2], f[DST + 3]]),
        ] {
            if self.seen_v4.insert(hash32(a), a, block) {
                self.ipv4.push(u64::from(a) << 32 | u64::from(block), &mut self.offload);
            }
        }
        true
    }

    /// Adds a record whose frame is not parsed (for example a pcapng packet
    /// of an interface with another link type). Its keys are unknown, so the
    /// index's posting lists no longer cover every packet and queries of
    /// this file use its block table only.
    pub fn add_opaque(&mut self, ts_ns: u64, record_offset: u64) {
        self.add_position(ts_ns, record_offset);
        self.keys_complete = false;
    }
}

/// The builder is the recorder's indexer: the store's writer is generic
/// over [`wv_store::FileIndexer`], so this `add` is inlined into its walk.
impl wv_store::FileIndexer for Builder {
    fn new(linktype: u32, offload: Offload) -> Builder {
        let mut b = Builder::new(linktype);
        b.set_offload(offload);
        b
    }

    #[inline]
    fn add(&mut self, ts_ns: u64, offset: u64, frame: &[u8], origlen: u32) {
        Builder::add(self, ts_ns, offset, frame, origlen);
    }

    fn finish(&mut self, dir: &wv_sys::fs::Dir, rel: &str) -> std::io::Result<()> {
        self.write_in(dir, rel).map(drop).map_err(std::io::Error::other)
    }

    fn reset(&mut self, linktype: u32) {
        Builder::reset(self, linktype);
    }

    fn warm(&mut self) {
        Builder::warm(self);
    }
}

#[inline]
fn posting_at(v: &mut Vec<Posting>, i: usize, size: usize) -> &mut Posting {
    if v.is_empty() {
        postings_new(v, size);
    }
    &mut v[i]
}

#[cold]
#[inline(never)]
fn postings_new(v: &mut Vec<Posting>, size: usize) {
    v.resize(size, Posting::default());
}

#[cfg(test)]
mod tests {
    use super::{sort_pairs, Builder};

    /// A 60-byte UDP frame between addresses and ports taken from `i`.
    fn frame(i: u32) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&i.to_be_bytes());
        f[30..34].copy_from_slice(&(!i % 5000).to_be_bytes());
        f[34..38].copy_from_slice(&[(i >> 8) as u8, i as u8, (i >> 16) as u8, 7]);
        f
    }

    /// Adds `n` frames of `keys` distinct flows and encodes the index.
    fn fill(b: &mut Builder, n: u32, keys: u32) -> Vec<u8> {
        for i in 0..n {
            b.add(u64::from(i), u64::from(i) * 76, &frame(i.wrapping_mul(2_654_435_761) % keys), 60);
        }
        b.encode().unwrap()
    }

    /// The index is the same for every run size, whether runs are sorted
    /// here or on another thread, with keys repeating within runs or not,
    /// and with blocks split between two runs.
    #[test]
    fn runs_of_any_size_give_the_same_index() {
        for keys in [3, 1000, u32::MAX] {
            let want = fill(&mut Builder::with_run_pairs(1, 4, 1 << 30), 20_000, keys);
            for run_pairs in [1, 7, 4096, 5000] {
                let mut b = Builder::with_run_pairs(1, 4, run_pairs);
                assert_eq!(fill(&mut b, 20_000, keys), want, "keys {keys}, runs of {run_pairs}");
                // Offloaded to a thread, as the recorder does.
                let (tx, rx) = std::sync::mpsc::channel::<super::Work>();
                let t = std::thread::spawn(move || rx.into_iter().for_each(|w| w()));
                b.reset(1);
                b.set_offload(Box::new(move |w| tx.send(w).unwrap()));
                assert_eq!(fill(&mut b, 20_000, keys), want, "offloaded, keys {keys}, runs of {run_pairs}");
                drop(b);
                t.join().unwrap();
                // A work dropped unrun (its thread is gone) does itself.
                let mut b = Builder::with_run_pairs(1, 4, run_pairs);
                b.set_offload(Box::new(drop));
                assert_eq!(fill(&mut b, 20_000, keys), want, "dropped works, keys {keys}, runs of {run_pairs}");
            }
        }
    }

    /// A run whose sort panics (here: dropped while its thread unwinds) is
    /// reported: the index is still written, without the keys-complete flag.
    #[test]
    fn a_lost_run_clears_keys_complete() {
        let mut b = Builder::with_run_pairs(1, 4, 100);
        b.set_offload(Box::new(|w| {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _w = w;
                panic!("a sort thread failing");
            }));
        }));
        let idx = fill(&mut b, 5_000, 1000);
        let flags = u32::from_le_bytes(idx[12..16].try_into().unwrap());
        assert_eq!(flags & crate::format::FLAG_KEYS_COMPLETE, 0);
        let mut ok = Builder::with_run_pairs(1, 4, 100);
        let good = fill(&mut ok, 5_000, 1000);
        assert_ne!(u32::from_le_bytes(good[12..16].try_into().unwrap()) & crate::format::FLAG_KEYS_COMPLETE, 0);
    }

    /// The file `write` streams equals `encode`'s bytes, and reads back.
    #[test]
    fn write_streams_the_encoded_bytes() {
        let dir = std::env::temp_dir().join(format!("wv-builder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.pcap.idx");
        let mut b = Builder::with_run_pairs(1, 4, 333);
        let want = fill(&mut b, 20_000, 5_000);
        b.reset(1);
        fill(&mut b, 20_000, 5_000);
        b.reset(1);
        for i in 0..20_000u32 {
            b.add(u64::from(i), u64::from(i) * 76, &frame(i.wrapping_mul(2_654_435_761) % 5_000), 60);
        }
        let summary = b.write(&path).unwrap();
        let got = std::fs::read(&path).unwrap();
        assert_eq!(got, want);
        assert_eq!(summary.index_bytes, got.len() as u64);
        let r = crate::IndexReader::open(&path).unwrap();
        assert!(!r.keys(crate::KeyClass::Ipv4).unwrap().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A recycled builder writes the same index as a fresh one and keeps
    /// its buffers: a few run buffers, and encoded ones up to twice the
    /// runs of the last file.
    #[test]
    fn reset_keeps_buffers() {
        let mut b = Builder::with_run_pairs(1, 64, 4096);
        let want = fill(&mut b, 200_000, u32::MAX);
        let runs = b.ipv4.runs.len();
        assert!(runs > 50, "{runs} runs");
        b.reset(1);
        assert!(b.ipv4.free.len() <= super::MAX_OUT + 1, "a few run buffers");
        assert_eq!(b.ipv4.spare.len(), runs, "encoded buffers kept for the next file");
        assert_eq!(fill(&mut b, 200_000, u32::MAX), want);
        // After a small file (one run), the spare encoded buffers go down to two.
        b.reset(1);
        fill(&mut b, 1_000, u32::MAX);
        b.reset(1);
        assert!(b.ipv4.spare.len() <= 2, "{} spare buffers", b.ipv4.spare.len());
        assert_eq!(fill(&mut b, 200_000, u32::MAX), want);
    }

    /// A warmed builder keeps its block table through the reset before its first file, and
    /// gives it back after a small file.
    #[test]
    fn warm_block_table_survives_the_first_reset() {
        let mut b = Builder::with_run_pairs(1, 64, 4096);
        b.warm();
        b.reset(1);
        assert!(b.blocks.capacity() >= super::WARM_BLOCKS, "{}", b.blocks.capacity());
        let ptr = b.blocks.as_ptr();
        let want = fill(&mut b, 200_000, u32::MAX);
        assert_eq!(b.blocks.as_ptr(), ptr, "the warmed table, not a new one");
        b.reset(1);
        assert!(b.blocks.capacity() < super::WARM_BLOCKS, "a small file's table shrinks: {}", b.blocks.capacity());
        assert_eq!(fill(&mut b, 200_000, u32::MAX), want);
    }

    /// What [`FileIndexer::add`](wv_store::FileIndexer::add) costs per 60-byte UDP frame, the
    /// recorder's hot call: run under callgrind (`valgrind --tool=callgrind
    /// --toggle-collect='*builder*add_each*' TEST_BINARY --ignored add_cost`) and divide by the
    /// frames. `KEYS` distinct flows (default 1: one flow, as bench/live.sh's generator sends).
    #[test]
    #[ignore]
    fn add_cost() {
        let keys: u32 = std::env::var("KEYS").ok().and_then(|v| v.parse().ok()).unwrap_or(1).max(1);
        let frames: Vec<Vec<u8>> = (0..30_000u32).map(|i| frame(i.wrapping_mul(2_654_435_761) % keys)).collect();
        let mut b = Builder::new(1);
        add_each(&mut b, &frames);
        assert_eq!(b.packets, 30_000);
    }

    #[inline(never)]
    fn add_each(b: &mut Builder, frames: &[Vec<u8>]) {
        for (i, f) in frames.iter().enumerate() {
            wv_store::FileIndexer::add(b, i as u64, i as u64 * 96, std::hint::black_box(f), 60);
        }
    }

    /// The radix sort equals a full sort of the u64s for pairs appended in
    /// block order, with odd and even numbers of passes, and every vector
    /// keeps its own allocation.
    #[test]
    fn sort_pairs_equals_full_sort_and_keeps_buffers() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut scratch = Vec::new();
        // Key masks: all four digits differ, three, one (skip passes).
        for (n, mask) in [(10_000usize, u32::MAX), (50_000, 0x00ff_ffff), (5_000, 0x0000_00ff), (100, u32::MAX)] {
            let mut v: Vec<u64> = (0..n).map(|i| u64::from(rnd() as u32 & mask) << 32 | (i / 64) as u64).collect();
            let mut want = v.clone();
            want.sort_unstable();
            let ptr = v.as_ptr();
            sort_pairs(&mut v, &mut scratch);
            assert_eq!(v, want, "n={n} mask={mask:x}");
            assert_eq!(v.as_ptr(), ptr, "the sorted pairs stay in their own buffer");
        }
    }
}
