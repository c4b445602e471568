//! The index builder: fed every record of one capture file in file order,
//! it writes the immutable index file when the capture file closes.
//!
//! Hot file: `add` runs once per packet on the writer thread. It parses the
//! frame's headers, then appends to growing vectors only (amortised
//! allocation, no system call, no lock). Posting lists are built already
//! encoded (delta + varint), so `finish` only lays out the sections.

use crate::format::{self, put_varint, zigzag, KeyClass};
use crate::IndexError;
use std::io::Write;
use std::path::{Path, PathBuf};
use wv_wire::packet::{self, Addr};

/// Packets per block unless [`Builder::with_block_packets`] says otherwise.
pub const DEFAULT_BLOCK_PACKETS: u32 = 64;

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
        let b1 = block + 1;
        if self.last != b1 {
            put_varint(&mut self.bytes, u64::from(b1 - self.last));
            self.last = b1;
        }
    }
}

/// Keys already recorded for the current block: a small direct-mapped
/// table (L1-resident) that drops most repeats of a key within a block
/// before they reach the pair list. A collision only costs a duplicate
/// pair, removed when the index is written.
struct Seen<K: Copy + PartialEq + Default, const N: usize> {
    slots: Box<[(K, u32); N]>,
}

impl<K: Copy + PartialEq + Default, const N: usize> Seen<K, N> {
    fn new() -> Self {
        Seen { slots: Box::new([(K::default(), 0); N]) }
    }
    /// True when (key, block) is new; records it.
    #[inline]
    fn insert(&mut self, slot: usize, key: K, block: u32) -> bool {
        let e = &mut self.slots[slot & (N - 1)];
        if *e == (key, block + 1) {
            return false;
        }
        *e = (key, block + 1);
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
    /// (address << 32 | block) pairs, appended in packet order; sorted
    /// and grouped into posting lists when the index is written. Appending
    /// to one sequential vector keeps the per-packet cost free of cache
    /// misses however many distinct keys the traffic has.
    ipv4: Vec<u64>,
    ipv6: Vec<(u128, u32)>,
    /// (port << 32 | block) pairs.
    ports: Vec<u64>,
    /// Few keys: posting lists built directly.
    protos: Vec<Posting>,
    vlans: Vec<Posting>,
    seen_v4: Seen<u32, 1024>,
    seen_port: Seen<u16, 1024>,
}

impl Builder {
    /// A builder for a file of the given link type.
    pub fn new(linktype: u32) -> Builder {
        Builder::with_block_packets(linktype, DEFAULT_BLOCK_PACKETS)
    }

    /// A builder with `block_packets` packets per block (rounded up to a power of two, at least 1).
    pub fn with_block_packets(linktype: u32, block_packets: u32) -> Builder {
        let bp = block_packets.max(1).next_power_of_two();
        let probe = packet::parse(linktype, &[]);
        Builder {
            linktype,
            block_mask: u64::from(bp) - 1,
            packets: 0,
            keys_complete: probe.linktype_supported,
            blocks: Vec::new(),
            ipv4: Vec::new(),
            ipv6: Vec::new(),
            ports: Vec::new(),
            protos: Vec::new(),
            vlans: Vec::new(),
            seen_v4: Seen::new(),
            seen_port: Seen::new(),
        }
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
        if !self.keys_complete {
            return;
        }
        let k = packet::parse(self.linktype, frame);
        for &v in k.vlans() {
            posting_at(&mut self.vlans, v as usize, 4096).add(block);
        }
        for &p in k.protos() {
            posting_at(&mut self.protos, p as usize, 256).add(block);
        }
        if let Some((s, d)) = k.ports {
            for p in [s, d] {
                if self.seen_port.insert(p as usize, p, block) {
                    self.ports.push(u64::from(p) << 32 | u64::from(block));
                }
            }
        }
        for a in [k.src, k.dst] {
            match a {
                Addr::V4(a) => {
                    let a = u32::from_be_bytes(a);
                    if self.seen_v4.insert(hash32(a), a, block) {
                        self.ipv4.push(u64::from(a) << 32 | u64::from(block));
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

    /// Adds a record whose frame is not parsed (for example a pcapng packet
    /// of an interface with another link type). Its keys are unknown, so the
    /// index's posting lists no longer cover every packet and queries of
    /// this file use its block table only.
    pub fn add_opaque(&mut self, ts_ns: u64, record_offset: u64) {
        self.add_position(ts_ns, record_offset);
        self.keys_complete = false;
    }

    /// Writes the index to `path` (through `path.part`, fsynced, renamed).
    pub fn finish(mut self, path: &Path) -> Result<IndexSummary, IndexError> {
        let bytes = self.encode()?;
        let mut part = PathBuf::from(path);
        part.as_mut_os_string().push(".part");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&part)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&part, path)
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&part);
            return Err(IndexError::Io { path: path.to_path_buf(), source: e });
        }
        let (first_ns, last_ns) = self.time_range();
        Ok(IndexSummary {
            linktype: self.linktype,
            packets: self.packets,
            first_ns,
            last_ns,
            blocks: self.blocks.len() as u32,
            index_bytes: bytes.len() as u64,
            keys_complete: self.keys_complete,
        })
    }

    fn time_range(&self) -> (u64, u64) {
        let first = self.blocks.iter().map(|b| b.min_ts).min().unwrap_or(0);
        let last = self.blocks.iter().map(|b| b.max_ts).max().unwrap_or(0);
        (first, last)
    }

    /// Lays out the whole index file in memory.
    pub fn encode(&mut self) -> Result<Vec<u8>, IndexError> {
        let mut sections: Vec<Vec<u8>> = Vec::with_capacity(format::N_SECTIONS);
        // Block table.
        let mut blocks = Vec::with_capacity(self.blocks.len() * 6);
        let (mut prev_off, mut prev_ts) = (0u64, 0u64);
        for b in &self.blocks {
            put_varint(&mut blocks, b.offset.wrapping_sub(prev_off));
            put_varint(&mut blocks, zigzag(b.min_ts.wrapping_sub(prev_ts) as i64));
            put_varint(&mut blocks, b.max_ts - b.min_ts);
            prev_off = b.offset;
            prev_ts = b.min_ts;
        }
        sections.push(blocks);
        let mut scratch = Vec::new();
        sort_pairs(&mut self.ipv4, &mut scratch);
        self.ipv4.dedup();
        sort_pairs(&mut self.ports, &mut scratch);
        self.ports.dedup();
        drop(scratch);
        self.ipv6.sort_unstable();
        self.ipv6.dedup();
        let v4 = group(self.ipv4.iter().map(|p| (u128::from(p >> 32), *p as u32)));
        let ports = group(self.ports.iter().map(|p| (u128::from(p >> 32), *p as u32)));
        let v6 = group(self.ipv6.iter().copied());
        let v4: Vec<(u128, &Posting)> = v4.iter().map(|(k, p)| (*k, p)).collect();
        let v6: Vec<(u128, &Posting)> = v6.iter().map(|(k, p)| (*k, p)).collect();
        let ports: Vec<(u128, &Posting)> = ports.iter().map(|(k, p)| (*k, p)).collect();
        for (class, entries) in [
            (KeyClass::Ipv4, v4),
            (KeyClass::Ipv6, v6),
            (KeyClass::Port, ports),
            (KeyClass::Proto, dense(&self.protos)),
            (KeyClass::Vlan, dense(&self.vlans)),
        ] {
            let (dir, post) = encode_class(class, &entries)?;
            sections.push(dir);
            sections.push(post);
        }
        let (first_ns, last_ns) = self.time_range();
        let mut out = Vec::with_capacity(
            format::HEADER_LEN + format::SECTION_TABLE_LEN + sections.iter().map(Vec::len).sum::<usize>(),
        );
        out.extend_from_slice(&format::MAGIC);
        out.extend_from_slice(&format::VERSION.to_le_bytes());
        let flags = if self.keys_complete { format::FLAG_KEYS_COMPLETE } else { 0 };
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&self.linktype.to_le_bytes());
        out.extend_from_slice(&((self.block_mask + 1) as u32).to_le_bytes());
        out.extend_from_slice(&self.packets.to_le_bytes());
        out.extend_from_slice(&first_ns.to_le_bytes());
        out.extend_from_slice(&last_ns.to_le_bytes());
        out.extend_from_slice(&(self.blocks.len() as u32).to_le_bytes());
        out.extend_from_slice(&(format::N_SECTIONS as u32).to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        debug_assert_eq!(out.len(), format::HEADER_LEN);
        let mut off = (format::HEADER_LEN + format::SECTION_TABLE_LEN) as u64;
        for s in &sections {
            out.extend_from_slice(&off.to_le_bytes());
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            off += s.len() as u64;
        }
        for s in &sections {
            out.extend_from_slice(s);
        }
        Ok(out)
    }
}

/// Sorts `key << 32 | block` pairs by key with a stable LSD radix sort
/// (three 11-bit digits of the key). Pairs are appended in block order, so
/// after a stable sort by key each key's blocks are increasing: the result
/// equals a full sort of the u64s, at a few ns per pair instead of a
/// comparison sort's ~25 (this runs once per file, for millions of pairs).
fn sort_pairs(v: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    if v.len() < 1 << 12 {
        v.sort_unstable();
        return;
    }
    scratch.clear();
    scratch.resize(v.len(), 0);
    for shift in [32u32, 43, 54] {
        let mut counts = [0usize; 2048];
        for &x in v.iter() {
            counts[((x >> shift) & 0x7ff) as usize] += 1;
        }
        if counts.contains(&v.len()) {
            continue; // every pair has the same digit: the pass would not move anything
        }
        let mut sum = 0;
        for c in counts.iter_mut() {
            let n = *c;
            *c = sum;
            sum += n;
        }
        for &x in v.iter() {
            let d = ((x >> shift) & 0x7ff) as usize;
            scratch[counts[d]] = x;
            counts[d] += 1;
        }
        std::mem::swap(v, scratch);
    }
}

#[inline]
fn posting_at(v: &mut Vec<Posting>, i: usize, size: usize) -> &mut Posting {
    if v.is_empty() {
        v.resize(size, Posting::default());
    }
    &mut v[i]
}

/// Groups sorted, deduplicated (key, block) pairs into posting lists.
fn group(pairs: impl Iterator<Item = (u128, u32)>) -> Vec<(u128, Posting)> {
    let mut out: Vec<(u128, Posting)> = Vec::new();
    for (k, b) in pairs {
        match out.last_mut() {
            Some((lk, p)) if *lk == k => p.add(b),
            _ => {
                let mut p = Posting::default();
                p.add(b);
                out.push((k, p));
            }
        }
    }
    out
}

fn dense(v: &[Posting]) -> Vec<(u128, &Posting)> {
    v.iter().enumerate().filter(|(_, p)| p.last != 0).map(|(k, p)| (k as u128, p)).collect()
}

fn encode_class(class: KeyClass, entries: &[(u128, &Posting)]) -> Result<(Vec<u8>, Vec<u8>), IndexError> {
    let mut dir = Vec::with_capacity(entries.len() * (class.key_len() + 4));
    let mut post = Vec::new();
    let mut key = [0u8; 16];
    for (k, p) in entries {
        post.extend_from_slice(&p.bytes);
        let end = u32::try_from(post.len()).map_err(|_| IndexError::TooLarge)?;
        let n = class.encode_key(*k, &mut key);
        dir.extend_from_slice(&key[..n]);
        dir.extend_from_slice(&end.to_le_bytes());
    }
    Ok((dir, post))
}
