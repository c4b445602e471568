//! What the recorder may choose not to store, on purpose, before a packet
//! reaches the arena: duplicated frames (`--dedup`, as the HPCAP driver
//! removes the second copy a SPAN port makes) and the tail of long
//! connections (`--flow-cutoff`, as the Time Machine keeps only the first
//! bytes of each connection). Both keep fixed-size tables allocated (and
//! touched) at start-up: no allocation, lock or system call per packet.
//! Both fail open: when a table is too small for the traffic, a duplicate
//! may be stored or a connection kept past its cutoff, never the reverse.
//!
//! HOT PATH: [`Judge`] (the capture worker's copy path) or [`Reduce::verdict`]
//! (zero-copy) runs once per packet when either is on.

mod hash;

use hash::{
    aes_key, flow_hash_v4, flow_hash_v6, frame_hash, mix, random_secret, sample_hash, FlowKeys, Xxh3, SECRET_LEN,
};

/// What to do with one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Store,
    /// Identical to a frame stored within the window.
    Duplicate,
    /// Its connection has passed the cutoff.
    Cut,
}

/// The reducers a worker runs, each optional.
#[derive(Default)]
pub struct Reduce {
    pub dedup: Option<Dedup>,
    pub cutoff: Option<Cutoff>,
    /// Where the dedup table remembers the last frame judged `Store`, once
    /// it is stored ([`Reduce::stored`]): a frame that was not stored (arena
    /// full) must not make its copy a "duplicate".
    pending: Option<Pending>,
}

/// What a frame's verdict needs that depends on the frame alone (its hashes
/// and TCP flags), computed by [`Reduce::prepare`] ahead of the verdict: a
/// batch of frames is prepared first, which starts the loads of all their
/// table buckets, then judged in order ([`Reduce::judge`]), when the buckets
/// are in the cache. Judging in order keeps every verdict what it would be
/// one frame at a time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prepared {
    /// The dedup hash of the frame (0 when dedup is off).
    frame: u64,
    /// The frame's connection for the cutoff ([`FlowHead::NONE`]: it
    /// belongs to none, or the cutoff is off).
    flow: FlowHead,
    /// The frame's original length.
    origlen: u32,
}

/// A frame's connection as the cutoff sees it, or none ([`FlowHead::NONE`]).
///
/// Two words, so that it travels in registers. As an `Option` of a key, a
/// flag and the TCP flags it was written to the stack field by field and
/// read back as one 16-byte load, which the CPU cannot serve from those
/// stores: it waits until they reach the cache, behind the arena copy's
/// stores. `perf` put 60% of the batch loop's samples at 1514 bytes on
/// that load; with two words none stands out (2026-11-28; the time per
/// packet moved less than the machine's noise).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowHead {
    /// The keyed hash of the connection, the same in both directions, its
    /// low [`STATE_BITS`] clear and bit 3 set; 0: no connection.
    key: u64,
    /// TCP flag bits (0 when not TCP or not captured) in bits 0-15; bit 16
    /// set when the frame comes from the connection's higher endpoint.
    meta: u64,
}

impl FlowHead {
    /// A frame that belongs to no connection.
    pub const NONE: FlowHead = FlowHead { key: 0, meta: 0 };
    const FROM_HIGH: u64 = 1 << 16;

    #[inline(always)]
    fn new(key: u64, from_high: bool, flags: u16) -> FlowHead {
        FlowHead { key, meta: u64::from(flags) | if from_high { Self::FROM_HIGH } else { 0 } }
    }

    /// True when the frame belongs to a connection.
    #[inline(always)]
    pub fn is_some(&self) -> bool {
        self.key != 0
    }

    #[inline(always)]
    fn flags(&self) -> u16 {
        self.meta as u16
    }

    #[inline(always)]
    fn is_from_high(&self) -> bool {
        self.meta & Self::FROM_HIGH != 0
    }
}

impl Reduce {
    pub fn new(dedup: Option<Dedup>, cutoff: Option<Cutoff>) -> Reduce {
        Reduce { dedup, cutoff, pending: None }
    }

    /// True when neither reducer is on.
    #[inline]
    pub fn is_off(&self) -> bool {
        self.dedup.is_none() && self.cutoff.is_none()
    }

    /// The verdict on one packet (its captured bytes are `parts` joined);
    /// `same` as for [`Reduce::judge`].
    #[inline]
    pub fn verdict(
        &mut self,
        ts_ns: u64,
        linktype: u32,
        origlen: u32,
        parts: &[&[u8]],
        same: impl FnMut(u64) -> bool,
    ) -> Verdict {
        let p = self.prepare(linktype, origlen, parts);
        self.judge(ts_ns, &p, same)
    }

    /// The part of a packet's verdict that reads only the packet; starts
    /// loading the table buckets [`Reduce::judge`] will read.
    #[inline(always)]
    pub fn prepare(&self, linktype: u32, origlen: u32, parts: &[&[u8]]) -> Prepared {
        let mut p = Prepared { origlen, ..Prepared::default() };
        if let Some(d) = &self.dedup {
            p.frame = d.prepare(linktype, origlen, parts);
        }
        if let Some(c) = &self.cutoff {
            p.flow = c.prepare(linktype, origlen, parts);
        }
        p
    }

    /// The verdict on a prepared packet, seen at `ts_ns`. Packets must be
    /// judged in the order they are stored. When dedup compares stored
    /// copies ([`Dedup::compare_stored_copies`]), `same(at)` says whether
    /// the packet stored at `at` (as given to [`Reduce::stored`]) is this
    /// one, byte for byte; otherwise it is not called.
    #[inline(always)]
    pub fn judge(&mut self, ts_ns: u64, p: &Prepared, same: impl FnMut(u64) -> bool) -> Verdict {
        self.pending = None;
        let mut pending = None;
        if let Some(d) = self.dedup.as_mut() {
            match d.judge(ts_ns, p.origlen, &p.frame, same) {
                Ok(p) => pending = Some(p),
                Err(v) => return v,
            }
        }
        if let Some(c) = self.cutoff.as_mut() {
            if let Err(v) = c.judge(ts_ns, p.origlen, &p.flow, |_| false) {
                return v;
            }
        }
        self.pending = pending;
        Verdict::Store
    }

    /// The packet last judged [`Verdict::Store`] was stored at `ts_ns`, at
    /// place `at` (its position in the arena when dedup compares stored
    /// copies; ignored otherwise).
    #[inline(always)]
    pub fn stored(&mut self, ts_ns: u64, at: u64) {
        if let (Some(d), Some(p)) = (self.dedup.as_mut(), self.pending.take()) {
            d.stored(p, ts_ns, at);
        }
    }
}

/// One set of reducers, known when the code is compiled: [`Dedup`],
/// [`Cutoff`], or a pair judged in turn (the first's verdict first, as
/// [`Reduce::judge`] does: a duplicate never reaches the cutoff). The
/// capture worker's batch path is compiled for each set it may run
/// ([`crate::worker::Delivery::packets`]), so that no packet asks which
/// reducers are on, nor carries a [`Reduce`]'s `pending` place from its
/// verdict to its storing. [`Reduce`] judges with these too: the verdicts
/// are the same.
pub trait Judge {
    /// What a frame's verdict needs that depends on the frame alone.
    type Prepared: Copy + Default;
    /// What [`Judge::stored`] needs of a frame judged to be stored.
    type Pending: Copy;

    /// As [`Reduce::prepare`]: reads the frame and starts loading the
    /// table buckets [`Judge::judge`] will read.
    fn prepare(&self, linktype: u32, origlen: u32, parts: &[&[u8]]) -> Self::Prepared;

    /// As [`Reduce::judge`]: `Ok` to store the frame (then
    /// [`Judge::stored`] once it is stored, with what `Ok` holds), else
    /// `Err` of the verdict ([`Verdict::Duplicate`] or [`Verdict::Cut`]).
    fn judge(
        &mut self,
        ts_ns: u64,
        origlen: u32,
        p: &Self::Prepared,
        same: impl FnMut(u64) -> bool,
    ) -> Result<Self::Pending, Verdict>;

    /// As [`Reduce::stored`]: the frame judged `Ok(p)` was stored at `at`.
    fn stored(&mut self, p: Self::Pending, ts_ns: u64, at: u64);

    /// Asks again for the table buckets [`Judge::prepare`] asked for, a
    /// frame or two before the frame is judged: between the two, the copies
    /// of long frames pass more bytes through the core's first-level cache
    /// than it holds, and may have pushed the buckets out of it.
    #[inline(always)]
    fn touch(&self, _p: &Self::Prepared) {}
}

impl Judge for Dedup {
    /// The frame's [`Dedup::hash`].
    type Prepared = u64;
    type Pending = Pending;

    #[inline(always)]
    fn prepare(&self, _linktype: u32, origlen: u32, parts: &[&[u8]]) -> u64 {
        let h = self.hash(origlen, parts);
        self.prefetch(h);
        h
    }

    #[inline(always)]
    fn judge(
        &mut self,
        ts_ns: u64,
        _origlen: u32,
        hash: &u64,
        same: impl FnMut(u64) -> bool,
    ) -> Result<Pending, Verdict> {
        match self.lookup_hash(ts_ns, *hash, same) {
            Lookup::Duplicate => Err(Verdict::Duplicate),
            Lookup::New(p) => Ok(p),
        }
    }

    #[inline(always)]
    fn stored(&mut self, p: Pending, ts_ns: u64, at: u64) {
        self.remember(p, ts_ns, at);
    }

    #[inline(always)]
    fn touch(&self, hash: &u64) {
        self.prefetch(*hash);
    }
}

impl Judge for Cutoff {
    /// The frame's connection ([`Cutoff::head`]).
    type Prepared = FlowHead;
    type Pending = ();

    #[inline(always)]
    fn prepare(&self, linktype: u32, _origlen: u32, parts: &[&[u8]]) -> FlowHead {
        let h = self.head(linktype, parts);
        if h.is_some() {
            self.prefetch(h.key);
        }
        h
    }

    #[inline(always)]
    fn judge(
        &mut self,
        ts_ns: u64,
        origlen: u32,
        head: &FlowHead,
        _same: impl FnMut(u64) -> bool,
    ) -> Result<(), Verdict> {
        if self.keep_head(ts_ns, origlen, *head) {
            Ok(())
        } else {
            Err(Verdict::Cut)
        }
    }

    #[inline(always)]
    fn stored(&mut self, (): (), _ts_ns: u64, _at: u64) {}

    #[inline(always)]
    fn touch(&self, head: &FlowHead) {
        if head.is_some() {
            self.prefetch(head.key);
        }
    }
}

/// Both reducers of a pair, the first judging first.
impl<A: Judge, B: Judge> Judge for (A, B) {
    type Prepared = (A::Prepared, B::Prepared);
    type Pending = (A::Pending, B::Pending);

    #[inline(always)]
    fn prepare(&self, linktype: u32, origlen: u32, parts: &[&[u8]]) -> Self::Prepared {
        (self.0.prepare(linktype, origlen, parts), self.1.prepare(linktype, origlen, parts))
    }

    #[inline(always)]
    fn judge(
        &mut self,
        ts_ns: u64,
        origlen: u32,
        p: &Self::Prepared,
        mut same: impl FnMut(u64) -> bool,
    ) -> Result<Self::Pending, Verdict> {
        let a = self.0.judge(ts_ns, origlen, &p.0, &mut same)?;
        let b = self.1.judge(ts_ns, origlen, &p.1, &mut same)?;
        Ok((a, b))
    }

    #[inline(always)]
    fn stored(&mut self, p: Self::Pending, ts_ns: u64, at: u64) {
        self.0.stored(p.0, ts_ns, at);
        self.1.stored(p.1, ts_ns, at);
    }

    #[inline(always)]
    fn touch(&self, p: &Self::Prepared) {
        self.0.touch(&p.0);
        self.1.touch(&p.1);
    }
}

/// A reducer borrowed (the worker borrows them from its [`Reduce`]).
impl<J: Judge> Judge for &mut J {
    type Prepared = J::Prepared;
    type Pending = J::Pending;

    #[inline(always)]
    fn prepare(&self, linktype: u32, origlen: u32, parts: &[&[u8]]) -> Self::Prepared {
        (**self).prepare(linktype, origlen, parts)
    }

    #[inline(always)]
    fn judge(
        &mut self,
        ts_ns: u64,
        origlen: u32,
        p: &Self::Prepared,
        same: impl FnMut(u64) -> bool,
    ) -> Result<Self::Pending, Verdict> {
        (**self).judge(ts_ns, origlen, p, same)
    }

    #[inline(always)]
    fn stored(&mut self, p: Self::Pending, ts_ns: u64, at: u64) {
        (**self).stored(p, ts_ns, at);
    }

    #[inline(always)]
    fn touch(&self, p: &Self::Prepared) {
        (**self).touch(p);
    }
}

/// What the dedup table says of a frame.
#[derive(Debug, Clone, Copy)]
pub enum Lookup {
    /// Equal to a frame remembered within the window.
    Duplicate,
    /// Not seen: where to remember it once it is stored.
    New(Pending),
}

/// A place in the dedup table for a frame about to be stored.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    bucket: usize,
    way: usize,
    hash: u64,
}

/// Bytes of a frame the cutoff parses (every header the index's key
/// extraction reads fits: Ethernet, 4 VLAN tags, IPv6 and its extension headers).
const HEAD_LEN: usize = 256;

/// A hash table's buckets: a power of two of them, chosen by bits 32.. of a
/// hash; zeroed, on transparent huge pages where the kernel gives them (one
/// TLB entry per 2 MiB: a random lookup in a 32 MiB table otherwise misses
/// the TLB nearly every time, and in a VM a miss is a two-level walk), and
/// written at creation so that no page faults on the capture path.
struct Buckets<T> {
    b: Box<[T]>,
    mask: u64,
}

impl<T: Copy + Default> Buckets<T> {
    /// Buckets for `entries` entries, `ways` to a bucket (at least one bucket).
    fn new(entries: usize, ways: usize) -> Buckets<T> {
        let n = entries.div_ceil(ways).max(1).next_power_of_two();
        let mut v: Vec<T> = Vec::with_capacity(n);
        wv_sys::mem::advise_huge(v.as_ptr().cast(), n * std::mem::size_of::<T>());
        v.resize(n, T::default());
        Buckets { b: v.into_boxed_slice(), mask: n as u64 - 1 }
    }

    /// The bucket of a hash.
    #[inline]
    fn of(&self, hash: u64) -> usize {
        ((hash >> 32) & self.mask) as usize
    }

    /// Starts loading the bucket of a hash.
    #[inline]
    fn prefetch(&self, hash: u64) {
        // A bucket's address without a bounds check (`of` is below the
        // length, and a prefetch of any address is harmless).
        wv_sys::mem::prefetch(self.b.as_ptr().wrapping_add(self.of(hash)).cast());
    }
}

/// Ways of a bucket: one 64-byte cache line of (word, time) pairs.
const WAYS: usize = 4;
// The oldest way is found pairwise (`Dedup::lookup_hash`).
const _: () = assert!(WAYS == 4);

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct DedupBucket {
    /// The frame's hash; when stored copies are compared, the hash's top
    /// 64 - [`POS_BITS`] bits (a tag) above the low [`POS_BITS`] bits of the
    /// copy's place.
    word: [u64; WAYS],
    ts: [u64; WAYS],
}

/// Bits of a stored copy's place a table entry keeps.
const POS_BITS: u32 = wv_store::stream::StreamProducer::POS_BITS;
const POS_MASK: u64 = (1 << POS_BITS) - 1;
/// `--dedup WINDOW`: a frame whose bytes and original length equal those
/// of a frame stored less than WINDOW earlier is not stored. The table
/// keeps the most recent stored frames, 4 per bucket (the oldest of a
/// bucket is replaced), found by a keyed hash (XXH3 with a random secret).
/// Two ways to compare:
/// * by default, by a 64-bit hash of all their bytes (the zero-copy path,
///   whose stored frames go back to the kernel);
/// * with [`Dedup::compare_stored_copies`] (the copy path, whose stored
///   frames stay in the arena until it wraps), the hash reads only the
///   frame's first 128 and last 64 bytes and its lengths, and a frame
///   whose hash matches is compared byte for byte with the stored copy:
///   exact, and a long frame's middle is read only for a copy. A copy no
///   longer in the arena is not matched (fails open).
pub struct Dedup {
    buckets: Buckets<DedupBucket>,
    window_ns: u64,
    secret: Box<[u8; SECRET_LEN]>,
    compare: bool,
    /// AES rounds instead of XXH3 when stored copies are compared and the
    /// CPU has them ([`wv_sys::aeshash`]).
    aes: Option<wv_sys::aeshash::Key>,
}

impl Dedup {
    /// Frames remembered by default (1 MiB of table): at 14.9 Mpps (64-byte
    /// frames at 10 Gb/s) a 4 ms window, at 812 kpps (1514 bytes) 80 ms.
    pub const DEFAULT_ENTRIES: usize = 1 << 16;

    /// A table for `entries` frames (rounded up to a power of two, at least
    /// one bucket) and a window of `window_ns`.
    pub fn new(window_ns: u64, entries: usize) -> Dedup {
        Dedup { buckets: Buckets::new(entries, WAYS), window_ns, secret: random_secret(), compare: false, aes: None }
    }

    /// From now on, frames are compared with their stored copies (see
    /// [`Dedup`]); the caller gives [`Reduce::judge`] a comparison and
    /// [`Reduce::stored`] the copies' places.
    pub fn compare_stored_copies(&mut self) {
        self.compare = true;
        self.aes = aes_key(&self.secret);
    }

    /// The keyed hash of a frame (its captured bytes, `parts` joined, and
    /// its original length).
    #[inline(always)]
    pub fn hash(&self, origlen: u32, parts: &[&[u8]]) -> u64 {
        if self.compare {
            let (h, caplen) = match &self.aes {
                Some(k) => sample_hash(parts, k),
                None => sample_hash(parts, &Xxh3(&self.secret)),
            };
            return mix(h, u64::from(origlen) << 32 | caplen as u64);
        }
        mix(frame_hash(parts, &Xxh3(&self.secret)), u64::from(origlen))
    }

    /// Starts loading the bucket of a frame hash.
    #[inline]
    pub fn prefetch(&self, hash: u64) {
        self.buckets.prefetch(hash);
    }

    /// Whether `frame` (of original length `origlen`, seen at `ts_ns`)
    /// equals a frame remembered within the window; if not, the place to
    /// [`Dedup::remember`] it once it is stored.
    #[inline]
    pub fn lookup(&self, ts_ns: u64, origlen: u32, parts: &[&[u8]], same: impl FnMut(u64) -> bool) -> Lookup {
        self.lookup_hash(ts_ns, self.hash(origlen, parts), same)
    }

    /// [`Dedup::lookup`] of a frame by its [`Dedup::hash`]; `same` as for
    /// [`Reduce::judge`].
    #[inline(always)]
    pub fn lookup_hash(&self, ts_ns: u64, hash: u64, mut same: impl FnMut(u64) -> bool) -> Lookup {
        let bucket = self.buckets.of(hash);
        let b = &self.buckets.b[bucket];
        // The bits of a word that must equal the hash's: all of them, or the
        // tag above a stored copy's place.
        let key = if self.compare { !POS_MASK } else { u64::MAX };
        for i in 0..WAYS {
            // The cheap test first: most frames match no way. Stamps may step
            // back a little (several sources, clock steps): the distance
            // counts either way.
            if (b.word[i] ^ hash) & key == 0
                && ts_ns.abs_diff(b.ts[i]) < self.window_ns
                && (!self.compare || same(b.word[i] & POS_MASK))
            {
                return Lookup::Duplicate;
            }
        }
        // The oldest way (an empty one has time 0) gets the frame; of equal
        // times, the first. Pairwise, without branches.
        let t = &b.ts;
        let (w01, t01) = if t[1] < t[0] { (1, t[1]) } else { (0, t[0]) };
        let (w23, t23) = if t[3] < t[2] { (3, t[3]) } else { (2, t[2]) };
        let way = if t23 < t01 { w23 } else { w01 };
        Lookup::New(Pending { bucket, way, hash })
    }

    /// Remembers a frame stored at `at` (see [`Reduce::stored`]) in the
    /// table's place [`Dedup::lookup`] gave.
    #[inline(always)]
    pub fn remember(&mut self, p: Pending, ts_ns: u64, at: u64) {
        let word = if self.compare { p.hash & !POS_MASK | at & POS_MASK } else { p.hash };
        let b = &mut self.buckets.b[p.bucket];
        (b.word[p.way], b.ts[p.way]) = (word, ts_ns);
    }

    /// [`Dedup::lookup`], and [`Dedup::remember`] what is not a duplicate
    /// (the tests' shorthand; the recorder remembers only what it stored).
    #[cfg(test)]
    fn is_duplicate(&mut self, ts_ns: u64, origlen: u32, frame: &[u8]) -> bool {
        match self.lookup(ts_ns, origlen, &[frame], |_| unreachable!("no stored copies")) {
            Lookup::Duplicate => true,
            Lookup::New(p) => {
                self.remember(p, ts_ns, 0);
                false
            }
        }
    }
}

/// Connections per bucket of the cutoff's table.
const FLOW_WAYS: usize = 3;
/// The most a connection's byte count holds (2^40 - 1: 1 TiB); it stays
/// there. A cutoff above it never cuts.
const BYTES_MAX: u64 = (1 << 40) - 1;
/// Bits of a connection's key that hold its state instead.
const STATE_BITS: u64 = 7;

/// Three connections in one cache line (one memory load per packet).
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct FlowBucket {
    /// The connection's key (its low 3 bits cleared) with its state in the
    /// low 3 bits: FIN seen from the lower (bit 0) and the higher (bit 1)
    /// endpoint, ended (bit 2). 0: an empty way.
    key: [u64; FLOW_WAYS],
    last_ns: [u64; FLOW_WAYS],
    /// Original bytes of the connection so far (both directions), 40 bits
    /// little-endian, saturating at [`BYTES_MAX`].
    bytes: [[u8; 5]; FLOW_WAYS],
}

impl FlowBucket {
    #[inline]
    fn bytes(&self, i: usize) -> u64 {
        let b = self.bytes[i];
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], 0, 0, 0])
    }

    #[inline]
    fn set_bytes(&mut self, i: usize, n: u64) {
        self.bytes[i].copy_from_slice(&n.min(BYTES_MAX).to_le_bytes()[..5]);
    }

    #[inline]
    fn state(&self, i: usize) -> u8 {
        (self.key[i] & STATE_BITS) as u8
    }

    #[inline]
    fn add_state(&mut self, i: usize, bits: u8) {
        self.key[i] |= u64::from(bits);
    }
}

const FIN_LOW: u8 = 1;
const FIN_HIGH: u8 = 2;
const ENDED: u8 = 4;

/// `--flow-cutoff BYTES`: of each TCP, UDP or SCTP connection (both
/// directions, told apart by VLAN ids, addresses, protocol and ports), only
/// the frames that start before its first BYTES original bytes are stored.
/// A connection starts again (from zero) with a SYN without ACK, and after
/// `idle` without packets. Frames without ports (not TCP/UDP/SCTP, later
/// IP fragments, truncated headers) are always stored. The table is a fixed
/// number of entries, 3 per bucket (one cache line); a new connection whose bucket is full
/// takes the place of its least recently seen one, which, if it comes back,
/// starts from zero again (it keeps more than BYTES: counted in
/// [`Cutoff::evicted`]).
pub struct Cutoff {
    buckets: Buckets<FlowBucket>,
    limit: u64,
    idle_ns: u64,
    keys: FlowKeys,
    /// Connections still active that lost their entry to a new one.
    pub evicted: u64,
}

impl Cutoff {
    /// Connections tracked by default (at least; 64 B a bucket of 3,
    /// rounded up to a power of two: 1.5 M in 32 MiB).
    pub const DEFAULT_ENTRIES: usize = 1 << 20;

    pub fn new(limit: u64, idle_ns: u64, entries: usize) -> Cutoff {
        Cutoff {
            buckets: Buckets::new(entries, FLOW_WAYS),
            limit,
            idle_ns,
            keys: FlowKeys::new(&random_secret()),
            evicted: 0,
        }
    }

    /// Starts loading the bucket of a connection.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        self.buckets.prefetch(key);
    }

    /// The connection of a frame given in parts ([`FlowHead::NONE`]: it
    /// belongs to none).
    /// Ethernet frames with at most 4 VLAN tags and IPv4, or IPv6 directly
    /// followed by TCP/UDP/SCTP, whose headers are in the first part, are
    /// read at fixed offsets ([`fast_head`]); every other frame goes through
    /// the index's key extraction ([`wv_wire::packet::parse`]). Both give the
    /// same answer where the first applies (a unit test compares them).
    #[inline(always)]
    pub fn head(&self, linktype: u32, parts: &[&[u8]]) -> FlowHead {
        let first = parts.first().copied().unwrap_or(&[]);
        if linktype == wv_wire::linktype::ETHERNET {
            if let Some(h) = fast_head(first, &self.keys) {
                return h;
            }
        }
        // The headers only: the first bytes of the parts, joined on the
        // stack when the frame comes in several (a re-inserted VLAN tag).
        let mut head = [0u8; HEAD_LEN];
        let frame: &[u8] = match parts {
            [one] => one,
            _ => {
                let mut n = 0;
                for p in parts {
                    let k = p.len().min(HEAD_LEN - n);
                    head[n..n + k].copy_from_slice(&p[..k]);
                    n += k;
                }
                &head[..n]
            }
        };
        slow_head(linktype, frame, &self.keys)
    }

    /// True when the frame is stored: its connection's bytes before it are
    /// fewer than the cutoff (or it belongs to no connection).
    #[inline]
    pub fn keep(&mut self, ts_ns: u64, linktype: u32, origlen: u32, frame: &[u8]) -> bool {
        let h = self.head(linktype, &[frame]);
        self.keep_head(ts_ns, origlen, h)
    }

    /// [`Cutoff::keep`] of a frame by its [`Cutoff::head`].
    #[inline]
    pub fn keep_head(&mut self, ts_ns: u64, origlen: u32, head: FlowHead) -> bool {
        if !head.is_some() {
            return true;
        }
        let (key, from_high, flags) = (head.key, head.is_from_high(), head.flags());
        let bucket = self.buckets.of(key);
        let b = &mut self.buckets.b[bucket];
        let new_conn = flags & wv_wire::views::tcp::flags::SYN != 0 && flags & wv_wire::views::tcp::flags::ACK == 0;
        let slot = match (0..FLOW_WAYS).find(|&i| b.key[i] & !STATE_BITS == key) {
            Some(i) => {
                if new_conn || ts_ns.saturating_sub(b.last_ns[i]) >= self.idle_ns {
                    (b.key[i], b.bytes[i]) = (key, [0; 5]);
                }
                i
            }
            None => {
                // An empty way, else the least recently seen one.
                let mut v = 0;
                for i in 1..FLOW_WAYS {
                    if b.last_ns[i] < b.last_ns[v] {
                        v = i;
                    }
                }
                let live =
                    b.key[v] != 0 && b.state(v) & ENDED == 0 && ts_ns.saturating_sub(b.last_ns[v]) < self.idle_ns;
                self.evicted += u64::from(live);
                (b.key[v], b.bytes[v]) = (key, [0; 5]);
                v
            }
        };
        let bytes = b.bytes(slot);
        let keep = bytes < self.limit;
        b.set_bytes(slot, bytes.saturating_add(u64::from(origlen)));
        b.last_ns[slot] = b.last_ns[slot].max(ts_ns);
        if flags & wv_wire::views::tcp::flags::RST != 0 {
            b.add_state(slot, ENDED);
        } else if flags & wv_wire::views::tcp::flags::FIN != 0 {
            b.add_state(slot, if from_high { FIN_HIGH } else { FIN_LOW });
            if b.state(slot) & (FIN_LOW | FIN_HIGH) == FIN_LOW | FIN_HIGH {
                b.add_state(slot, ENDED);
            }
        }
        keep
    }
}

/// The connection of a frame by the index's key extraction.
#[inline]
fn slow_head(linktype: u32, frame: &[u8], keys: &FlowKeys) -> FlowHead {
    use wv_wire::packet::Addr;
    let k = wv_wire::packet::parse(linktype, frame);
    let Some((sport, dport)) = k.ports else {
        return FlowHead::NONE;
    };
    let (src, dst, v6) = match (k.src, k.dst) {
        (Addr::V4(s), Addr::V4(d)) => (u32::from_be_bytes(s).into(), u32::from_be_bytes(d).into(), false),
        (Addr::V6(s), Addr::V6(d)) => (u128::from_be_bytes(s), u128::from_be_bytes(d), true),
        _ => return FlowHead::NONE,
    };
    let proto = k.protos().last().copied().unwrap_or(0);
    flow_head(k.vlans(), proto, v6, (src, sport), (dst, dport), k.tcp_flags.unwrap_or(0), keys)
}

/// The connection of an Ethernet frame read at fixed offsets, when its
/// headers are simple and inside `b`: Some(answer) as [`slow_head`] would
/// give it ([`FlowHead::NONE`] included), None to ask [`slow_head`]. The same leniency as the index's
/// parse (IPv4 header length from the IHL nibble, unchecked).
#[inline(always)]
fn fast_head(b: &[u8], keys: &FlowKeys) -> Option<FlowHead> {
    use wv_wire::packet::{ethertype, ipproto, MAX_VLANS};
    use wv_wire::views::{get16, get_arr, ipv4, ipv6, tcp, udp, vlan};
    let be16 = |at: usize| get16(b, at);
    let mut vlans = [0u16; MAX_VLANS];
    let mut n = 0;
    let mut off = 12;
    let mut et = be16(off)?;
    while vlan::is_tpid(et) {
        if n == MAX_VLANS {
            return None;
        }
        vlans[n] = be16(off + 2)? & vlan::VID_MASK;
        n += 1;
        off += 4;
        et = be16(off)?;
    }
    let l3 = off + 2;
    // The ports and TCP flags of a transport header at `l4`.
    let ports = |l4: usize, proto: u8| {
        let ports: [u8; 4] = get_arr(b, l4 + udp::field::SRC_PORT.start)?;
        let flags = if proto == ipproto::TCP { be16(l4 + tcp::field::FLAGS.start)? & 0x01ff } else { 0 };
        Some((u16::from_be_bytes([ports[0], ports[1]]), u16::from_be_bytes([ports[2], ports[3]]), flags))
    };
    let (proto, l4, src, dst) = match et {
        ethertype::IPV4 => {
            let h: [u8; 20] = get_arr(b, l3)?;
            let proto = h[ipv4::field::PROTOCOL];
            let frag = u16::from_be_bytes([h[ipv4::field::FLG_OFF.start], h[ipv4::field::FLG_OFF.start + 1]]);
            if !matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP) || frag & ipv4::FRAG_OFFSET_MASK != 0 {
                return Some(FlowHead::NONE);
            }
            let l4 = l3 + 4 * (h[ipv4::field::VER_IHL] & 0x0f) as usize;
            let addr = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
            let (sport, dport, flags) = ports(l4, proto)?;
            let (src, dst) = (addr(ipv4::field::SRC_ADDR.start), addr(ipv4::field::DST_ADDR.start));
            return Some(flow_head_v4(&vlans[..n], proto, (src, sport), (dst, dport), flags, keys));
        }
        ethertype::IPV6 => {
            let h: [u8; ipv6::HEADER_LEN] = get_arr(b, l3)?;
            let proto = h[ipv6::field::NXT_HDR];
            if !matches!(proto, ipproto::TCP | ipproto::UDP | ipproto::SCTP) {
                return None;
            }
            let addr = |at: usize| u128::from_be_bytes(get_arr(&h, at).unwrap_or_default());
            (proto, l3 + ipv6::HEADER_LEN, addr(ipv6::field::SRC_ADDR.start), addr(ipv6::field::DST_ADDR.start))
        }
        // ARP and the rest: no ports.
        _ => return Some(FlowHead::NONE),
    };
    let (sport, dport, flags) = ports(l4, proto)?;
    Some(flow_head(&vlans[..n], proto, true, (src, sport), (dst, dport), flags, keys))
}

/// The connection's keyed hash, the same for both directions, and whether
/// the frame comes from the higher endpoint (by address, then port; an IPv4
/// address is given as a number below 2^32, and hashes as
/// [`flow_head_v4`]).
#[inline(always)]
fn flow_head(
    vlans: &[u16],
    proto: u8,
    v6: bool,
    src: (u128, u16),
    dst: (u128, u16),
    flags: u16,
    keys: &FlowKeys,
) -> FlowHead {
    if !v6 {
        return flow_head_v4(vlans, proto, (src.0 as u32, src.1), (dst.0 as u32, dst.1), flags, keys);
    }
    let from_high = src > dst;
    let ((lo, lp), (hi, hp)) = if from_high { (dst, src) } else { (src, dst) };
    let h = flow_hash_v6(keys, flow_word(vlans, proto), ports_word(lp, hp, true), lo, hi);
    flow_key(h, from_high, flags)
}

/// [`flow_head`] of an IPv4 connection: endpoints compared and hashed as
/// 48-bit words (address, port) instead of 144-bit ones.
#[inline(always)]
fn flow_head_v4(vlans: &[u16], proto: u8, src: (u32, u16), dst: (u32, u16), flags: u16, keys: &FlowKeys) -> FlowHead {
    let (s, d) = (u64::from(src.0) << 16 | u64::from(src.1), u64::from(dst.0) << 16 | u64::from(dst.1));
    let from_high = s > d;
    let (lo, hi) = if from_high { (d, s) } else { (s, d) };
    let addrs = (lo >> 16) << 32 | hi >> 16;
    let h = flow_hash_v4(keys, flow_word(vlans, proto), ports_word(lo as u16, hi as u16, false), addrs);
    flow_key(h, from_high, flags)
}

/// VLAN ids (12 bits each, at most 4) and their number, and the transport
/// protocol, as one word of a connection's hash.
#[inline(always)]
fn flow_word(vlans: &[u16], proto: u8) -> u64 {
    let tags = vlans.iter().fold(0u64, |t, &v| t << 12 | u64::from(v & 0x0fff));
    tags | (vlans.len() as u64) << 48 | u64::from(proto) << 56
}

/// The ports of the lower and the higher endpoint and the family, as one
/// word of a connection's hash.
#[inline(always)]
fn ports_word(lp: u16, hp: u16, v6: bool) -> u64 {
    u64::from(lp) << 16 | u64::from(hp) | u64::from(v6) << 32
}

/// A connection's table key from its hash: the low bits hold the
/// connection's state in the table; never 0 (an empty way has key 0).
#[inline(always)]
fn flow_key(h: u64, from_high: bool, flags: u16) -> FlowHead {
    FlowHead::new((h & !STATE_BITS) | 8, from_high, flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wv_wire::views::tcp::flags::{ACK, FIN, RST, SYN};

    /// An Ethernet/IPv4/TCP frame a->b with the given flags and size.
    fn tcp(a: ([u8; 4], u16), b: ([u8; 4], u16), flags: u16, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len.max(54)];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 6;
        f[26..30].copy_from_slice(&a.0);
        f[30..34].copy_from_slice(&b.0);
        f[34..36].copy_from_slice(&a.1.to_be_bytes());
        f[36..38].copy_from_slice(&b.1.to_be_bytes());
        f[46] = 0x50;
        f[47] = flags as u8;
        f
    }

    /// `same` where dedup compares no stored copies.
    fn never(_: u64) -> bool {
        unreachable!("no stored copies")
    }

    const A: ([u8; 4], u16) = ([10, 0, 0, 1], 40000);
    const B: ([u8; 4], u16) = ([10, 0, 0, 2], 80);

    #[test]
    fn dedup_drops_copies_within_the_window_only() {
        let mut d = Dedup::new(1_000, 64);
        let f = tcp(A, B, ACK, 100);
        assert!(!d.is_duplicate(10_000, 100, &f));
        assert!(d.is_duplicate(10_500, 100, &f), "copy 500 ns later");
        assert!(d.is_duplicate(10_999, 100, &f), "a copy does not move the window");
        assert!(!d.is_duplicate(11_000, 100, &f), "at the window's end: stored again");
        assert!(d.is_duplicate(11_200, 100, &f));
        // Same bytes, another original length: another frame.
        assert!(!d.is_duplicate(11_300, 1500, &f));
        // One byte different: another frame.
        let mut g = f.clone();
        g[99] ^= 1;
        assert!(!d.is_duplicate(11_400, 100, &g));
    }

    #[test]
    fn dedup_table_full_fails_open() {
        // One bucket of 4: a fifth frame evicts the oldest, whose copy is
        // then stored (never a frame dropped that was not a copy).
        let mut d = Dedup::new(1_000_000, 1);
        let frames: Vec<Vec<u8>> = (0..5).map(|i| tcp(A, B, ACK, 60 + i)).collect();
        for (i, f) in frames.iter().enumerate() {
            assert!(!d.is_duplicate(i as u64 + 1, f.len() as u32, f));
        }
        assert!(!d.is_duplicate(10, frames[0].len() as u32, &frames[0]), "evicted: stored");
        assert!(d.is_duplicate(11, frames[4].len() as u32, &frames[4]));
    }

    #[test]
    fn dedup_replaces_the_oldest_way_the_first_of_equals() {
        // Every order of four stamps (with ties): the new frame goes to the
        // way holding the smallest, the first of them when several do.
        let stamps = [1u64, 2, 2, 3, 5];
        for a in stamps {
            for b in stamps {
                for c in stamps {
                    for e in stamps {
                        let ts = [a, b, c, e];
                        let mut d = Dedup::new(u64::MAX, 1);
                        for (way, &t) in ts.iter().enumerate() {
                            let p = Pending { bucket: 0, way, hash: 100 + way as u64 };
                            d.remember(p, t, 0);
                        }
                        let want = (0..4).min_by_key(|&i| (ts[i], i)).unwrap();
                        match d.lookup_hash(9, 7, |_| unreachable!()) {
                            Lookup::New(p) => assert_eq!(p.way, want, "{ts:?}"),
                            Lookup::Duplicate => panic!("{ts:?}: no way holds hash 7"),
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn cutoff_keeps_frames_that_start_before_the_limit_both_directions() {
        let mut c = Cutoff::new(1000, 60_000_000_000, 1024);
        let mut t = 0;
        let mut keep = |c: &mut Cutoff, f: &[u8]| {
            t += 1;
            c.keep(t, 1, f.len() as u32, f)
        };
        assert!(keep(&mut c, &tcp(A, B, SYN, 60)));
        assert!(keep(&mut c, &tcp(B, A, SYN | ACK, 60)));
        assert!(keep(&mut c, &tcp(A, B, ACK, 500))); // 120 before
        assert!(keep(&mut c, &tcp(B, A, ACK, 500))); // 620 before
        assert!(!keep(&mut c, &tcp(A, B, ACK, 60)), "1120 before: cut");
        assert!(!keep(&mut c, &tcp(B, A, FIN | ACK, 60)));
        // Another connection is its own.
        let other = ([10, 0, 0, 3], 5000);
        assert!(keep(&mut c, &tcp(other, B, ACK, 1500)));
        assert!(!keep(&mut c, &tcp(other, B, ACK, 60)));
        // A new SYN on the same ports starts from zero.
        assert!(keep(&mut c, &tcp(A, B, SYN, 60)));
        assert!(keep(&mut c, &tcp(A, B, ACK, 60)));
        assert_eq!(c.evicted, 0);
    }

    #[test]
    fn cutoff_restarts_after_idle_and_rst_is_counted_as_end() {
        let mut c = Cutoff::new(100, 1_000, 1024);
        assert!(c.keep(0, 1, 200, &tcp(A, B, ACK, 200)));
        assert!(!c.keep(10, 1, 60, &tcp(A, B, ACK, 60)));
        assert!(c.keep(2_000, 1, 60, &tcp(A, B, ACK, 60)), "idle past 1 us: a new connection");
        assert!(c.keep(2_001, 1, 60, &tcp(A, B, RST, 60)));
        assert!(!c.keep(2_002, 1, 60, &tcp(A, B, ACK, 60)), "after RST, stragglers still count");
    }

    #[test]
    fn cutoff_table_full_fails_open_and_counts() {
        // One bucket: one connection more than it holds.
        let mut c = Cutoff::new(100, u64::MAX, 1);
        for p in 0..=FLOW_WAYS as u16 {
            assert!(c.keep(u64::from(p) + 1, 1, 200, &tcp(([10, 0, 0, 9], p), B, ACK, 200)));
        }
        assert_eq!(c.evicted, 1, "the last connection evicted the least recently seen");
        // The evicted one (port 0) comes back: starts from zero, stored.
        assert!(c.keep(10, 1, 200, &tcp(([10, 0, 0, 9], 0), B, ACK, 200)));
    }

    #[test]
    fn byte_counts_saturate_at_one_tib() {
        let big = u32::MAX; // 4 GiB frames (as origlen)
        let run = |limit: u64| {
            let mut c = Cutoff::new(limit, u64::MAX, 64);
            (1..=300u64).filter(|&t| c.keep(t, 1, big, &tcp(A, B, ACK, 60))).count()
        };
        // 256 frames reach 2^40 - 256 bytes: under the largest count, then cut.
        assert_eq!(run(BYTES_MAX), 257);
        // Above the largest count, nothing is ever cut (fails open).
        assert_eq!(run(BYTES_MAX + 1), 300);
        assert_eq!(run(10_000), 1);
    }

    #[test]
    fn frames_without_ports_are_never_cut() {
        let mut c = Cutoff::new(0, u64::MAX, 64);
        let mut f = tcp(A, B, ACK, 60);
        f[23] = 1; // ICMP
        assert!(c.keep(1, 1, 60, &f));
        assert!(c.keep(2, 1, 60, &[0u8; 10]));
        assert!(!c.keep(3, 1, 60, &tcp(A, B, ACK, 60)), "limit 0 cuts every TCP frame");
    }

    /// The fixed-offset reading of a frame's connection gives what the
    /// index's parse gives, on every shape it takes and on the ones it
    /// leaves to the parse (VLAN stacks, IPv6, fragments, truncations).
    #[test]
    fn fast_head_agrees_with_the_parse() {
        let keys = FlowKeys::new(&random_secret());
        let fast_answers = std::cell::Cell::new(0);
        let same = |f: &[u8]| {
            let slow = slow_head(wv_wire::linktype::ETHERNET, f, &keys);
            if let Some(fast) = fast_head(f, &keys) {
                assert_eq!(fast, slow, "{f:02x?}");
                fast_answers.set(fast_answers.get() + 1);
            }
            slow
        };
        let base = tcp(A, B, SYN | ACK, 60);
        let mut frames = vec![base.clone(), tcp(B, A, FIN, 80)];
        // UDP, SCTP, ICMP, ARP, a later fragment, a first fragment, IHL 6 and 3.
        for (at, v) in [(23, 17u8), (23, 132), (23, 1), (12, 0x08)] {
            let mut f = base.clone();
            f[at] = v;
            if v == 0x08 {
                f[13] = 0x06;
            }
            frames.push(f);
        }
        for (b20, b21, ihl) in [(0x00, 0x10, 0x45), (0x20, 0x00, 0x45), (0x40, 0x00, 0x46), (0x00, 0x00, 0x43)] {
            let mut f = base.clone();
            (f[20], f[21], f[14]) = (b20, b21, ihl);
            frames.push(f);
        }
        // VLAN stacks of 1 to 6 tags (802.1Q, 802.1ad, 0x9100).
        for n in 1..=6 {
            let mut f = base[..12].to_vec();
            for i in 0..n {
                let tpid: u16 = [0x8100, 0x88a8, 0x9100][i % 3];
                f.extend_from_slice(&tpid.to_be_bytes());
                f.extend_from_slice(&(0xe000u16 | (100 + i as u16)).to_be_bytes());
            }
            f.extend_from_slice(&base[12..]);
            frames.push(f);
        }
        // IPv6/TCP, IPv6/UDP, IPv6 with a hop-by-hop header.
        for nh in [6u8, 17, 0] {
            let mut f = base[..12].to_vec();
            f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 20, nh, 64]);
            f.extend((0..32).map(|i| i as u8 * 7));
            if nh == 0 {
                f.extend_from_slice(&[6, 0, 0, 0, 0, 0, 0, 0]);
            }
            f.extend_from_slice(&base[34..54]);
            frames.push(f);
        }
        // Every truncation of each frame.
        let cuts: Vec<Vec<u8>> = frames.iter().flat_map(|f| (0..f.len()).map(|len| f[..len].to_vec())).collect();
        frames.extend(cuts);
        let with_flow = frames.iter().filter(|f| same(f).is_some()).count();
        assert!(with_flow > 20, "the cases must include connections: {with_flow}");
        assert!(fast_answers.get() > 200, "the fixed offsets must answer many: {}", fast_answers.get());
        // Both directions of a connection are one connection, IPv4 and IPv6.
        let (ab, ba) = (same(&tcp(A, B, ACK, 60)), same(&tcp(B, A, ACK, 60)));
        assert!(ab.is_some() && ab.key == ba.key);
        assert_ne!(ab.is_from_high(), ba.is_from_high());
        let v6 = |a: u128, b: u128, ports: (u16, u16)| flow_head(&[], 6, true, (a, ports.0), (b, ports.1), 0, &keys);
        let (ab, ba) = (v6(1 << 100, 7, (1, 2)), v6(7, 1 << 100, (2, 1)));
        assert!(ab.is_some() && ab.key == ba.key);
        assert_ne!(ab.is_from_high(), ba.is_from_high());
    }

    /// Connections that differ in any one part (an address, a port, which
    /// end has which port, the protocol, the family, a VLAN id) have
    /// different keys, and many connections spread evenly over buckets.
    #[test]
    fn flow_keys_tell_connections_apart_and_spread() {
        let keys = FlowKeys::new(&random_secret());
        let v4 =
            |vlans: &[u16], proto: u8, a: (u32, u16), b: (u32, u16)| flow_head_v4(vlans, proto, a, b, 0, &keys).key;
        let base = v4(&[], 6, (0x0a00_0001, 40000), (0x0a00_0002, 80));
        for other in [
            v4(&[], 6, (0x0a00_0003, 40000), (0x0a00_0002, 80)),
            v4(&[], 6, (0x0a00_0001, 40001), (0x0a00_0002, 80)),
            v4(&[], 6, (0x0a00_0001, 80), (0x0a00_0002, 40000)),
            v4(&[], 17, (0x0a00_0001, 40000), (0x0a00_0002, 80)),
            v4(&[5], 6, (0x0a00_0001, 40000), (0x0a00_0002, 80)),
            flow_head(&[], 6, true, (0x0a00_0001, 40000), (0x0a00_0002, 80), 0, &keys).key,
        ] {
            assert_ne!(base, other);
        }
        // 2^18 connections (one host to many, ports counting up, as a scan
        // or the benchmark's flows): no two keys equal, and no bucket of
        // 4096 holds more than twice its share.
        let mut seen = std::collections::HashSet::new();
        let mut load = vec![0u32; 4096];
        for i in 0..1u32 << 18 {
            let k = v4(&[], 17, (0xc0a8_0001, i as u16), (0x0a00_0000 | i >> 16, 53));
            assert!(seen.insert(k), "connection {i}: key {k:x} seen before");
            load[((k >> 32) & 4095) as usize] += 1;
        }
        let max = load.iter().max().copied().unwrap_or(0);
        assert!(max < 2 * (1 << 18) / 4096, "fullest bucket {max} of an average {}", (1 << 18) / 4096);
    }

    #[test]
    fn frames_in_parts_are_judged_like_whole_ones() {
        let f = tcp(A, B, ACK, 300);
        let split = |f: &[u8]| -> [Vec<u8>; 3] { [f[..12].to_vec(), f[12..100].to_vec(), f[100..].to_vec()] };
        let mut r = Reduce::new(Some(Dedup::new(1_000_000, 64)), Some(Cutoff::new(400, u64::MAX, 64)));
        let p = split(&f);
        assert_eq!(r.verdict(1, 1, 300, &[&p[0], &p[1], &p[2]], never), Verdict::Store);
        r.stored(1, 0);
        // The same frame in the same parts: a duplicate.
        assert_eq!(r.verdict(2, 1, 300, &[&p[0], &p[1], &p[2]], never), Verdict::Duplicate);
        // Another frame of the connection in parts: the cutoff parses the joined head.
        let g = tcp(B, A, ACK, 200);
        let q = split(&g);
        assert_eq!(r.verdict(3, 1, 200, &[&q[0], &q[1], &q[2]], never), Verdict::Store, "300 bytes before: kept");
        r.stored(3, 0);
        let h = tcp(A, B, ACK, 120);
        let q = split(&h);
        assert_eq!(r.verdict(4, 1, 120, &[&q[0], &q[1], &q[2]], never), Verdict::Cut, "500 bytes before: cut");
    }

    #[test]
    fn a_frame_not_stored_does_not_make_its_copy_a_duplicate() {
        let f = tcp(A, B, ACK, 300);
        let mut r = Reduce::new(Some(Dedup::new(1_000_000, 64)), Some(Cutoff::new(100, u64::MAX, 64)));
        // Judged Store, then lost (arena full): not remembered.
        assert_eq!(r.verdict(1, 1, 300, &[&f], never), Verdict::Store);
        // Its copy: not a duplicate, but cut (the connection is past 100 bytes).
        assert_eq!(r.verdict(2, 1, 300, &[&f], never), Verdict::Cut);
        // A cut frame is not remembered either.
        let g = tcp(B, A, ACK, 70);
        assert_eq!(r.verdict(3, 1, 70, &[&g], never), Verdict::Cut);
        let mut r2 = Reduce::new(Some(Dedup::new(1_000_000, 64)), None);
        assert_eq!(r2.verdict(4, 1, 70, &[&g], never), Verdict::Store);
        r2.stored(4, 0);
        assert_eq!(r2.verdict(5, 1, 70, &[&g], never), Verdict::Duplicate);
    }

    /// Stored copies, by place (a stand-in for the arena).
    #[derive(Default)]
    struct Copies(Vec<(u32, Vec<u8>)>);

    impl Copies {
        /// Runs one frame through `r` as the worker does.
        fn offer(&mut self, r: &mut Reduce, ts: u64, origlen: u32, parts: &[&[u8]]) -> Verdict {
            let joined = parts.concat();
            let same = |at: u64| self.0.get(at as usize).is_some_and(|(o, f)| *o == origlen && *f == joined);
            let v = r.verdict(ts, 1, origlen, parts, same);
            if v == Verdict::Store {
                r.stored(ts, self.0.len() as u64);
                self.0.push((origlen, joined));
            }
            v
        }
    }

    fn comparing(window_ns: u64, entries: usize) -> Reduce {
        let mut d = Dedup::new(window_ns, entries);
        d.compare_stored_copies();
        Reduce::new(Some(d), None)
    }

    #[test]
    fn comparing_stored_copies_is_exact_where_the_hash_reads_part_of_a_frame() {
        let mut r = comparing(1_000_000, 64);
        let mut c = Copies::default();
        let f = tcp(A, B, ACK, 1514);
        // Another frame, different only where the hash does not read.
        let mut g = f.clone();
        g[700] ^= 0x40;
        assert_eq!(r.dedup.as_ref().unwrap().hash(1514, &[&f]), r.dedup.as_ref().unwrap().hash(1514, &[&g]));
        assert_eq!(c.offer(&mut r, 1, 1514, &[&f]), Verdict::Store);
        assert_eq!(c.offer(&mut r, 2, 1514, &[&g]), Verdict::Store, "same hash, other bytes");
        assert_eq!(c.offer(&mut r, 3, 1514, &[&g]), Verdict::Duplicate);
        assert_eq!(c.offer(&mut r, 4, 1514, &[&f[..10], &f[10..]]), Verdict::Store, "in parts: another hash");
        assert_eq!(c.offer(&mut r, 5, 1514, &[&f[..10], &f[10..]]), Verdict::Duplicate, "in the same parts");
        assert_eq!(c.offer(&mut r, 5, 1600, &[&f]), Verdict::Store, "another original length");
        assert_eq!(c.offer(&mut r, 5, 1514, &[&f]), Verdict::Duplicate);
        assert_eq!(c.offer(&mut r, 6, 1514, &[&f[..1513]]), Verdict::Store, "another captured length");
        // A copy no longer held (the arena wrapped) matches nothing.
        c.0[0].1.clear();
        c.0[1].1.clear();
        assert_eq!(c.offer(&mut r, 7, 1514, &[&f]), Verdict::Store);
        assert_eq!(c.offer(&mut r, 8, 1514, &[&f]), Verdict::Duplicate, "the new copy");
        // The window still holds.
        assert_eq!(c.offer(&mut r, 2_000_000, 1514, &[&f]), Verdict::Store);
        // Short frames are read whole.
        let h = tcp(B, A, ACK, 60);
        assert_eq!(c.offer(&mut r, 2_000_001, 60, &[&h]), Verdict::Store);
        assert_eq!(c.offer(&mut r, 2_000_002, 60, &[&h]), Verdict::Duplicate);
    }
}
