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
use wv_wire::packet::{self, ipproto, Addr};

/// Packets per block unless [`Builder::with_block_packets`] says otherwise.
pub const DEFAULT_BLOCK_PACKETS: u32 = 64;

/// (key, block) pairs per run unless [`Builder::with_run_pairs`] says
/// otherwise: 4 MiB of pairs (plus as much sort buffer), mostly within the
/// last-level cache, where the whole file's pairs were not.
pub const DEFAULT_RUN_PAIRS: usize = 1 << 19;

/// Runs of one key class handed out at once; the builder waits for one to
/// come back before handing out another (the other thread is behind).
const MAX_OUT: usize = 2;

/// The header and section table at the start of an index file.
const HEAD_LEN: usize = format::HEAD_LEN;

/// Work a builder hands to another thread: sorting and encoding one run.
pub type Work = Box<dyn FnOnce() + Send>;

/// Runs [`Work`] on another thread; see [`Builder::set_offload`].
pub type Offload = Box<dyn FnMut(Work) + Send>;

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
/// pair, removed when its run is encoded.
struct Seen<K: Copy + PartialEq + Default, const N: usize> {
    slots: Box<[(K, u32); N]>,
}

impl<K: Copy + PartialEq + Default, const N: usize> Seen<K, N> {
    fn new() -> Self {
        Seen { slots: Box::new([(K::default(), 0); N]) }
    }
    fn clear(&mut self) {
        self.slots.fill((K::default(), 0));
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
    seen_v4: Seen<u32, 1024>,
    seen_port: Seen<u16, 1024>,
    /// Where full runs are sorted (none: on the thread that adds).
    offload: Option<Offload>,
    /// The section being laid out (a class's directory, kept whole) and
    /// posting lists or block table on their way to the file, kept for the next file.
    dir: Vec<u8>,
    out: Vec<u8>,
    /// The capture file this index describes, when known (see [`Builder::set_capture_id`]).
    capture_id: Option<CaptureId>,
}

/// CRC-32C of each chunk of each section, gathered as the sections go to
/// the file (in file order, which is not their number order).
struct Summer {
    /// Per section number, its chunk sums.
    sums: [Vec<u32>; format::N_DATA_SECTIONS],
    /// The section being written, its bytes so far and the open chunk's CRC.
    cur: usize,
    done: u64,
    crc: u32,
}

impl Summer {
    fn new() -> Summer {
        Summer { sums: Default::default(), cur: 0, done: 0, crc: 0 }
    }
    fn start(&mut self, section: usize) {
        (self.cur, self.done, self.crc) = (section, 0, 0);
    }
    fn feed(&mut self, mut b: &[u8]) {
        let chunk = u64::from(format::CHUNK_LEN);
        while !b.is_empty() {
            let room = (chunk - self.done % chunk) as usize;
            let n = room.min(b.len());
            self.crc = crc32c::crc32c_append(self.crc, &b[..n]);
            self.done += n as u64;
            b = &b[n..];
            if self.done.is_multiple_of(chunk) {
                self.sums[self.cur].push(self.crc);
                self.crc = 0;
            }
        }
    }
    fn end(&mut self) {
        if !self.done.is_multiple_of(u64::from(format::CHUNK_LEN)) {
            self.sums[self.cur].push(self.crc);
        }
        self.done = 0;
    }
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
        }
    }

    /// Names the capture file the index describes (its size, mtime and
    /// fingerprint go into the index, so that a reader can tell when the
    /// file was replaced). Without it, [`Builder::write`] reads them from
    /// the file beside the index (the index path without `.idx`).
    pub fn set_capture_id(&mut self, id: CaptureId) {
        self.capture_id = Some(id);
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
    /// buffers beyond twice the last file's runs are freed.
    pub fn reset(&mut self, linktype: u32) {
        self.linktype = linktype;
        self.packets = 0;
        self.keys_complete = packet::parse(linktype, &[]).linktype_supported;
        trim(&mut self.dir);
        trim(&mut self.out);
        trim(&mut self.blocks);
        trim(&mut self.ipv6);
        self.ipv4.reset();
        self.ports.reset();
        for p in self.protos.iter_mut().chain(self.vlans.iter_mut()) {
            p.last = 0;
            p.bytes.clear();
        }
        self.seen_v4.clear();
        self.seen_port.clear();
        self.capture_id = None;
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
        if self.linktype != wv_wire::linktype::ETHERNET || f.len() < 34 || f[12..14] != [0x08, 0x00] {
            return false;
        }
        let proto = f[23];
        posting_at(&mut self.protos, proto as usize, 256).add(block);
        if matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP)
            && u16::from_be_bytes([f[20], f[21]]) & 0x1fff == 0
        {
            let l4 = 14 + 4 * usize::from(f[14] & 0x0f);
            if let Some(p) = f.get(l4..l4 + 4) {
                for p in [u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])] {
                    if self.seen_port.insert(p as usize, p, block) {
                        self.ports.push(u64::from(p) << 32 | u64::from(block), &mut self.offload);
                    }
                }
            }
        }
        for a in [u32::from_be_bytes([f[26], f[27], f[28], f[29]]), u32::from_be_bytes([f[30], f[31], f[32], f[33]])] {
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

    /// Writes the index to `path` (through `path.part`, fsynced, renamed).
    pub fn finish(mut self, path: &Path) -> Result<IndexSummary, IndexError> {
        self.write(path)
    }

    /// [`Builder::finish`] without giving up the builder: call
    /// [`Builder::reset`] before adding the next file's records.
    ///
    /// The posting lists go to the file as they are merged (through a
    /// buffer of about 1 MiB); only each class's directory is held whole.
    /// The file is created 0640 whatever the umask, never through a
    /// symlink; its checksums are computed here, as its bytes go out.
    pub fn write(&mut self, path: &Path) -> Result<IndexSummary, IndexError> {
        let io = |e| IndexError::Io { path: path.to_path_buf(), source: e };
        if self.capture_id.is_none() {
            // The capture beside the index (the recorder's index thread
            // runs once the file is closed and renamed).
            if let Some(cap) = wv_store::layout::capture_of_index(path) {
                self.capture_id = crate::ident::open_capture(cap, true).and_then(|f| CaptureId::of(&f)).ok();
            }
        }
        let len = wv_sys::fs::replace_durable(path, |f: &mut std::fs::File| {
            f.write_all(&[0; HEAD_LEN]).map_err(io)?;
            let mut written = HEAD_LEN as u64;
            let head = self.encode_into(&mut |bytes| {
                written += bytes.len() as u64;
                f.write_all(bytes).map_err(io)
            })?;
            std::os::unix::fs::FileExt::write_all_at(&*f, &head, 0).map_err(io)?;
            Ok::<_, WriteError>(written)
        })
        .map_err(|e| match e {
            WriteError::Index(e) => e,
            WriteError::Io(e) => io(e),
        })?;
        let (first_ns, last_ns) = self.time_range();
        Ok(IndexSummary {
            linktype: self.linktype,
            packets: self.packets,
            first_ns,
            last_ns,
            blocks: self.blocks.len() as u32,
            index_bytes: len,
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
        let mut file = vec![0u8; HEAD_LEN];
        let head = self.encode_into(&mut |bytes| {
            file.extend_from_slice(bytes);
            Ok(())
        })?;
        file[..head.len()].copy_from_slice(&head);
        Ok(file)
    }

    /// Hands the sections to `sink` in file order, right after the header
    /// and section table, and returns those (which name each section's
    /// place). File order: the block table, then per key class its posting
    /// lists and then its directory (the directory's end offsets are only
    /// known once the lists are out; readers go by the table).
    fn encode_into(
        &mut self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), IndexError>,
    ) -> Result<[u8; HEAD_LEN], IndexError> {
        let summer = RefCell::new(Summer::new());
        let sink = &mut |b: &[u8]| {
            summer.borrow_mut().feed(b);
            sink(b)
        };
        let mut table = [(0u64, 0u64); format::N_SECTIONS];
        let mut at = HEAD_LEN as u64;
        let (mut dir, mut out) = (std::mem::take(&mut self.dir), std::mem::take(&mut self.out));
        // Block table.
        out.clear();
        let (mut prev_off, mut prev_ts) = (0u64, 0u64);
        for b in &self.blocks {
            put_varint(&mut out, b.offset.wrapping_sub(prev_off));
            put_varint(&mut out, zigzag(b.min_ts.wrapping_sub(prev_ts) as i64));
            put_varint(&mut out, b.max_ts - b.min_ts);
            prev_off = b.offset;
            prev_ts = b.min_ts;
        }
        summer.borrow_mut().start(format::section::BLOCKS);
        sink(&out)?;
        summer.borrow_mut().end();
        table[format::section::BLOCKS] = (at, out.len() as u64);
        at += out.len() as u64;
        // The last runs are encoded here, on the finishing thread.
        self.ipv4.finish();
        self.ports.finish();
        if self.ipv4.lost || self.ports.lost {
            // Some pairs are missing: queries must not trust the posting lists.
            self.keys_complete = false;
        }
        self.ipv6.sort_unstable();
        for (class, pairs) in [
            (KeyClass::Ipv4, Pairs::Runs(&self.ipv4.runs)),
            (KeyClass::Ipv6, Pairs::Wide(&self.ipv6)),
            (KeyClass::Port, Pairs::Runs(&self.ports.runs)),
            (KeyClass::Proto, Pairs::Dense(&self.protos)),
            (KeyClass::Vlan, Pairs::Dense(&self.vlans)),
        ] {
            dir.clear();
            out.clear();
            summer.borrow_mut().start(class.dir_section() + 1);
            let post_len = encode_class(class, pairs, &mut dir, &mut out, sink)?;
            summer.borrow_mut().end();
            table[class.dir_section() + 1] = (at, post_len);
            at += post_len;
            summer.borrow_mut().start(class.dir_section());
            sink(&dir)?;
            summer.borrow_mut().end();
            table[class.dir_section()] = (at, dir.len() as u64);
            at += dir.len() as u64;
        }
        // The chunk sums, in section number order, as the last section.
        out.clear();
        for sums in &summer.borrow().sums {
            sums.iter().for_each(|c| out.extend_from_slice(&c.to_le_bytes()));
        }
        sink(&out)?;
        let sums_crc = crc32c::crc32c(&out);
        table[format::section::SUMS] = (at, out.len() as u64);
        (self.dir, self.out) = (dir, out);
        let (first_ns, last_ns) = self.time_range();
        let mut flags = if self.keys_complete { format::FLAG_KEYS_COMPLETE } else { 0 };
        if self.capture_id.is_some() {
            flags |= format::FLAG_CAPTURE_ID;
        }
        let id = self.capture_id.unwrap_or(CaptureId { bytes: 0, mtime_ns: 0, fingerprint: 0 });
        let head = format::Head {
            version: format::VERSION,
            flags,
            linktype: self.linktype,
            block_packets: (self.block_mask + 1) as u32,
            packets: self.packets,
            first_ns,
            last_ns,
            n_blocks: self.blocks.len() as u32,
            n_sections: format::N_SECTIONS as u32,
            capture_bytes: id.bytes,
            capture_mtime: id.mtime_ns,
            capture_sum: id.fingerprint,
            chunk_len: format::CHUNK_LEN,
            sums_crc,
            head_crc: 0,
            sections: table,
        }
        .seal();
        Ok(head)
    }
}

/// What can go wrong inside [`wv_sys::fs::replace_durable`] while an index
/// is written: the index's own error, or the helper's I/O.
enum WriteError {
    Index(IndexError),
    Io(std::io::Error),
}

impl From<IndexError> for WriteError {
    fn from(e: IndexError) -> Self {
        WriteError::Index(e)
    }
}

impl From<std::io::Error> for WriteError {
    fn from(e: std::io::Error) -> Self {
        WriteError::Io(e)
    }
}

/// Sorts `key << 32 | block` pairs by key with a stable LSD radix sort
/// (four 8-bit digits of the key, all counted in one read; a digit
/// every pair shares is skipped). Pairs are appended in block order, so
/// after a stable sort by key each key's blocks are increasing: the result
/// equals a full sort of the u64s, at a few ns per pair instead of a
/// comparison sort's ~25 (this runs once per run, for up to half a million pairs).
fn sort_pairs(v: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    if v.len() < 1 << 12 {
        v.sort_unstable();
        return;
    }
    const SHIFTS: [u32; 4] = [32, 40, 48, 56];
    // Every digit's histogram in one read of the pairs.
    let mut counts = vec![[0usize; 256]; SHIFTS.len()];
    for &x in v.iter() {
        for (c, shift) in counts.iter_mut().zip(SHIFTS) {
            c[((x >> shift) & 0xff) as usize] += 1;
        }
    }
    // Every slot is overwritten by each pass: only growth is zero-filled.
    if scratch.capacity() < v.len() {
        reserve_huge(scratch, v.len());
    }
    scratch.resize(v.len(), 0);
    let mut moved = false;
    for (c, shift) in counts.iter_mut().zip(SHIFTS) {
        if c.contains(&v.len()) {
            continue; // every pair has the same digit: the pass would not move anything
        }
        let mut sum = 0;
        for n in c.iter_mut() {
            let here = *n;
            *n = sum;
            sum += here;
        }
        for &x in v.iter() {
            let d = ((x >> shift) & 0xff) as usize;
            scratch[c[d]] = x;
            c[d] += 1;
        }
        std::mem::swap(v, scratch);
        moved = !moved;
    }
    if moved {
        // Give each vector its own allocation back: swapped buffers of
        // different capacities would make the next file's vectors grow
        // (fresh, zero-filled pages) although enough memory is held.
        scratch.copy_from_slice(v);
        std::mem::swap(v, scratch);
    }
}

/// Makes room for `cap` pairs in all (if the system grants the address
/// space; otherwise `v` grows as it is filled) and asks for huge pages behind them.
fn reserve_huge(v: &mut Vec<u64>, cap: usize) {
    if v.try_reserve_exact(cap.saturating_sub(v.len())).is_ok() {
        wv_sys::mem::advise_huge(v.as_ptr().cast(), v.capacity() * std::mem::size_of::<u64>());
    }
}

thread_local! {
    /// The radix sort's second buffer, one per thread that sorts runs.
    static SCRATCH: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// One key class's (key << 32 | block) pairs: the run being filled, and
/// the file's earlier runs, sorted and encoded.
///
/// An encoded run is the varint of its first pair's block (the smallest:
/// pairs come in block order), then per key in increasing order: the
/// varint key difference to the previous key, the key's first block minus
/// the run's first, the differences to its next blocks, and a 0 byte (no
/// difference is 0: repeats are dropped). Merging runs then copies the
/// difference bytes and only recomputes each run's first difference.
struct Runs {
    run_pairs: usize,
    /// The run being filled: allocated at its first pair, with `run_pairs` room.
    run: Vec<u64>,
    /// Empty run buffers, and how many runs are out being sorted.
    free: Vec<Vec<u64>>,
    out: usize,
    /// This file's encoded runs, by sequence number (empty until back).
    runs: Vec<Vec<u8>>,
    /// Runs handed out or encoded for this file.
    sent: usize,
    /// Empty buffers for encoded runs, kept from earlier files.
    spare: Vec<Vec<u8>>,
    /// A run of this file was lost (its sort panicked).
    lost: bool,
    tx: Sender<Done>,
    rx: Receiver<Done>,
}

/// A run back from sorting; `lost` when sorting it failed (a panic): the
/// file's posting lists then miss its pairs.
struct Done {
    seq: usize,
    pairs: Vec<u64>,
    encoded: Vec<u8>,
    lost: bool,
}

/// One full run to sort and encode. It does its work when run, or when
/// dropped unrun (a sort thread that went away). If the work panics, or the
/// job is dropped by a thread that is unwinding, it reports back as lost:
/// nobody waits for it, and nothing is lost silently.
struct RunJob {
    seq: usize,
    pairs: Option<Vec<u64>>,
    encoded: Vec<u8>,
    tx: Sender<Done>,
}

impl RunJob {
    fn work(&mut self) {
        let Some(mut pairs) = self.pairs.take() else { return };
        let mut encoded = std::mem::take(&mut self.encoded);
        encode_run(&mut pairs, &mut encoded);
        pairs.clear();
        // The builder holds the receiver unless it was dropped: then nobody wants the run.
        let _ = self.tx.send(Done { seq: self.seq, pairs, encoded, lost: false });
        self.seq = usize::MAX;
    }
}

impl Drop for RunJob {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if self.seq != usize::MAX {
                let _ = self.tx.send(Done { seq: self.seq, pairs: Vec::new(), encoded: Vec::new(), lost: true });
            }
        } else {
            self.work();
        }
    }
}

impl Runs {
    fn new(run_pairs: usize) -> Runs {
        let (tx, rx) = channel();
        Runs {
            run_pairs: run_pairs.max(1),
            run: Vec::new(),
            free: Vec::new(),
            out: 0,
            runs: Vec::new(),
            sent: 0,
            spare: Vec::new(),
            lost: false,
            tx,
            rx,
        }
    }

    /// Appends a pair; a full run goes to `offload` (or is encoded here).
    #[inline]
    fn push(&mut self, pair: u64, offload: &mut Option<Offload>) {
        if self.run.len() == self.run.capacity() {
            self.make_room(offload);
        }
        self.run.push(pair);
    }

    #[cold]
    #[inline(never)]
    fn make_room(&mut self, offload: &mut Option<Offload>) {
        if self.run.len() < self.run_pairs {
            reserve_huge(&mut self.run, self.run_pairs);
        } else {
            self.spill(offload);
        }
    }

    /// Hands the run being filled to `offload` (or encodes it here) and
    /// starts the next in an empty buffer.
    fn spill(&mut self, offload: &mut Option<Offload>) {
        self.collect(false);
        while self.free.is_empty() && self.out >= MAX_OUT {
            self.receive_one();
        }
        let next = self.free.pop().unwrap_or_else(|| {
            let mut v = Vec::new();
            reserve_huge(&mut v, self.run_pairs);
            v
        });
        let pairs = std::mem::replace(&mut self.run, next);
        let encoded = self.spare.pop().unwrap_or_default();
        let mut job = RunJob { seq: self.sent, pairs: Some(pairs), encoded, tx: self.tx.clone() };
        self.sent += 1;
        self.out += 1;
        match offload {
            Some(offload) => offload(Box::new(move || job.work())),
            None => job.work(),
        }
        self.collect(false);
    }

    /// Takes in the runs that are back; with `all`, waits for every one.
    fn collect(&mut self, all: bool) {
        while let Ok(d) = self.rx.try_recv() {
            self.take(d);
        }
        while all && self.out > 0 {
            self.receive_one();
        }
    }

    fn receive_one(&mut self) {
        // Cannot fail: `self.tx` keeps the channel open, and every job sends
        // once, whether it ran, was dropped or panicked.
        if let Ok(d) = self.rx.recv() {
            self.take(d);
        }
    }

    fn take(&mut self, d: Done) {
        self.out -= 1;
        self.lost |= d.lost;
        self.place(d.seq, d.encoded);
        if d.pairs.capacity() > 0 {
            self.free.push(d.pairs);
        }
    }

    /// Stores encoded run number `seq` (runs may come back in any order).
    fn place(&mut self, seq: usize, encoded: Vec<u8>) {
        if self.runs.len() <= seq {
            self.runs.resize_with(seq + 1, Vec::new);
        }
        self.runs[seq] = encoded;
    }

    /// Waits for the runs out, then encodes the last one here, in its own
    /// buffer: `runs` is then complete.
    fn finish(&mut self) {
        self.collect(true);
        if !self.run.is_empty() {
            let mut encoded = self.spare.pop().unwrap_or_default();
            encode_run(&mut self.run, &mut encoded);
            self.run.clear();
            self.place(self.sent, encoded);
            self.sent += 1;
        }
    }

    /// Empties the runs for the next file, keeping the buffers (encoded
    /// ones up to twice as many as this file used).
    fn reset(&mut self) {
        self.collect(true);
        self.run.clear();
        let used = self.runs.len();
        self.spare.extend(self.runs.drain(..).map(|mut v| {
            v.clear();
            v
        }));
        self.spare.truncate(2 * used.max(1));
        self.sent = 0;
        self.lost = false;
    }
}

/// Sorts a run and encodes it into `out` (see [`Runs`]).
fn encode_run(pairs: &mut Vec<u64>, out: &mut Vec<u8>) {
    out.clear();
    let Some(&first) = pairs.first() else { return };
    let base = first as u32;
    SCRATCH.with(|s| sort_pairs(pairs, &mut s.borrow_mut()));
    put_varint(out, u64::from(base));
    let (mut key, mut last) = (None, 0u32);
    for &p in pairs.iter() {
        let (k, b) = (p >> 32, p as u32);
        match key {
            Some(prev) if prev == k => {
                if b != last {
                    put_varint(out, u64::from(b - last));
                    last = b;
                }
            }
            _ => {
                if let Some(prev) = key {
                    out.push(0);
                    put_varint(out, k - prev);
                } else {
                    put_varint(out, k);
                }
                put_varint(out, u64::from(b - base));
                key = Some(k);
                last = b;
            }
        }
    }
    out.push(0);
}

/// Reads encoded runs key by key.
struct RunCursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    base: u64,
    key: u64,
}

impl<'a> RunCursor<'a> {
    fn new(bytes: &'a [u8]) -> RunCursor<'a> {
        let mut pos = 0;
        let base = get_varint(bytes, &mut pos).unwrap_or(0);
        RunCursor { bytes, pos, base, key: 0 }
    }

    /// The next key and its first block; the cursor is then at its differences.
    fn next_key(&mut self) -> Option<(u64, u64)> {
        if self.pos >= self.bytes.len() {
            return None;
        }
        let dk = get_varint(self.bytes, &mut self.pos)?;
        self.key += dk; // the first key of a run is its difference to 0
        let b = get_varint(self.bytes, &mut self.pos)?;
        Some((self.key, self.base + b))
    }

    /// The current key's block differences (encoded) and their sum; the
    /// cursor is then past the key's 0 byte.
    fn differences(&mut self) -> (&'a [u8], u64) {
        let start = self.pos;
        let mut sum = 0;
        loop {
            match get_varint(self.bytes, &mut self.pos) {
                Some(0) | None => break,
                Some(d) => sum += d,
            }
        }
        let end = self.pos.saturating_sub(1).max(start);
        (&self.bytes[start..end], sum)
    }
}

/// Empties `v`; shrinks it to twice the elements it held when it holds more
/// than four times that and more than 1 MiB.
fn trim<T>(v: &mut Vec<T>) {
    let used = v.len();
    v.clear();
    let size = std::mem::size_of::<T>().max(1);
    if v.capacity() * size > 1 << 20 && v.capacity() > 4 * used {
        v.shrink_to(2 * used);
    }
}

#[inline]
fn posting_at(v: &mut Vec<Posting>, i: usize, size: usize) -> &mut Posting {
    if v.is_empty() {
        v.resize(size, Posting::default());
    }
    &mut v[i]
}

/// One key class's (key, block) pairs, sorted, possibly with repeats; or
/// its posting lists built directly, indexed by key.
enum Pairs<'a> {
    /// Encoded runs of `key << 32 | block` pairs, in block order.
    Runs(&'a [Vec<u8>]),
    Wide(&'a [(u128, u32)]),
    Dense(&'a [Posting]),
}

/// Lays out one key class into its two sections: the directory (each key,
/// then the end offset of its posting list) into `dir`, and the posting
/// lists (block + 1, delta + varint) through `post` to `sink`, about 1 MiB
/// at a time. Returns the length of the posting lists.
fn encode_class(
    class: KeyClass,
    pairs: Pairs,
    dir: &mut Vec<u8>,
    post: &mut Vec<u8>,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), IndexError>,
) -> Result<u64, IndexError> {
    let mut enc = ClassEncoder { class, dir, post, sink, sent: 0, key: 0, last: 0 };
    match pairs {
        Pairs::Runs(runs) => {
            // Merge the runs by key; runs of the same key come in run
            // (block) order, and a block split between two runs is kept once.
            let mut cursors: Vec<RunCursor> = runs.iter().map(|r| RunCursor::new(r)).collect();
            let mut heap = BinaryHeap::with_capacity(cursors.len());
            for (i, c) in cursors.iter_mut().enumerate() {
                if let Some((key, block)) = c.next_key() {
                    heap.push(Reverse((key, i, block)));
                }
            }
            while let Some(Reverse((key, i, block))) = heap.pop() {
                enc.push(u128::from(key), block as u32)?;
                let c = &mut cursors[i];
                let (diffs, sum) = c.differences();
                enc.post.extend_from_slice(diffs);
                enc.last += sum as u32;
                if let Some((key, block)) = c.next_key() {
                    heap.push(Reverse((key, i, block)));
                }
            }
        }
        Pairs::Wide(v) => v.iter().try_for_each(|&(k, b)| enc.push(k, b))?,
        Pairs::Dense(v) => {
            for (k, p) in v.iter().enumerate().filter(|(_, p)| p.last != 0) {
                enc.post.extend_from_slice(&p.bytes);
                enc.end_key(k as u128)?;
            }
        }
    }
    if enc.last != 0 {
        enc.end_key(enc.key)?;
    }
    let len = enc.sent + enc.post.len() as u64;
    (enc.sink)(enc.post)?;
    Ok(len)
}

/// Posting bytes held before they go to the sink (small in tests, so they
/// pass through the chunked path).
const POST_CHUNK: usize = if cfg!(test) { 64 } else { 1 << 20 };

struct ClassEncoder<'a> {
    class: KeyClass,
    dir: &'a mut Vec<u8>,
    post: &'a mut Vec<u8>,
    sink: &'a mut dyn FnMut(&[u8]) -> Result<(), IndexError>,
    /// Posting bytes already handed to the sink.
    sent: u64,
    /// The key being written and its last block + 1 (0: no key yet).
    key: u128,
    last: u32,
}

impl ClassEncoder<'_> {
    #[inline]
    fn push(&mut self, key: u128, block: u32) -> Result<(), IndexError> {
        if self.last != 0 && key != self.key {
            self.end_key(self.key)?;
            self.last = 0;
        }
        self.key = key;
        let b1 = block + 1;
        if b1 != self.last {
            put_varint(self.post, u64::from(b1 - self.last));
            self.last = b1;
        }
        Ok(())
    }

    /// Closes `key`'s posting list: its directory entry. Hands the posting
    /// bytes on once they pass [`POST_CHUNK`].
    fn end_key(&mut self, key: u128) -> Result<(), IndexError> {
        let end = u32::try_from(self.sent + self.post.len() as u64).map_err(|_| IndexError::TooLarge)?;
        self.class.emit_entry(key, end, self.dir);
        if self.post.len() >= POST_CHUNK {
            (self.sink)(self.post)?;
            self.sent += self.post.len() as u64;
            self.post.clear();
        }
        Ok(())
    }
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
