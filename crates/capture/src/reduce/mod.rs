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
//!
//! Each reducer has its module (`dedup`, `cutoff`; their keyed hashes in
//! `hash`); this one holds what they share: the verdict, the batch
//! interface ([`Judge`]) and the tables' buckets.

mod cutoff;
mod dedup;
mod hash;

pub use cutoff::{Cutoff, FlowHead};
pub use dedup::{Dedup, Lookup, Pending};

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
            // The frame's own bytes (the zero-copy path's, whose stored frames go back to the
            // kernel); the copy path's worker hashes the copy it laid out ([`Judge::judge_copy`]).
            p.frame = d.hash(origlen, parts);
            d.prefetch(p.frame);
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

    /// Whether this judge reads the frame's copy in the arena ([`Judge::judge_copy`]): the
    /// copy path then lays each frame out first and takes it back if it is not to be stored.
    #[inline(always)]
    fn after_copy(&self) -> bool {
        false
    }

    /// [`Judge::judge`] of a frame already copied into the arena, its bytes `copy` (one or
    /// two slices), where they are in the cache: `--dedup` hashes them there instead of
    /// reading the frame again from the kernel's ring, which another core wrote.
    #[inline(always)]
    fn judge_copy(
        &mut self,
        ts_ns: u64,
        origlen: u32,
        p: &Self::Prepared,
        _copy: &[&[u8]],
        same: impl FnMut(u64) -> bool,
    ) -> Result<Self::Pending, Verdict> {
        self.judge(ts_ns, origlen, p, same)
    }

    /// Asks again for the table buckets [`Judge::prepare`] asked for, a
    /// frame or two before the frame is judged: between the two, the copies
    /// of long frames pass more bytes through the core's first-level cache
    /// than it holds, and may have pushed the buckets out of it.
    #[inline(always)]
    fn touch(&self, _p: &Self::Prepared) {}
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
    fn after_copy(&self) -> bool {
        self.0.after_copy() || self.1.after_copy()
    }

    #[inline(always)]
    fn judge_copy(
        &mut self,
        ts_ns: u64,
        origlen: u32,
        p: &Self::Prepared,
        copy: &[&[u8]],
        mut same: impl FnMut(u64) -> bool,
    ) -> Result<Self::Pending, Verdict> {
        let a = self.0.judge_copy(ts_ns, origlen, &p.0, copy, &mut same)?;
        let b = self.1.judge_copy(ts_ns, origlen, &p.1, copy, &mut same)?;
        Ok((a, b))
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
    fn after_copy(&self) -> bool {
        (**self).after_copy()
    }

    #[inline(always)]
    fn judge_copy(
        &mut self,
        ts_ns: u64,
        origlen: u32,
        p: &Self::Prepared,
        copy: &[&[u8]],
        same: impl FnMut(u64) -> bool,
    ) -> Result<Self::Pending, Verdict> {
        (**self).judge_copy(ts_ns, origlen, p, copy, same)
    }

    #[inline(always)]
    fn touch(&self, p: &Self::Prepared) {
        (**self).touch(p);
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use wv_wire::views::tcp::flags::ACK;

    /// An Ethernet/IPv4/TCP frame a->b with the given flags and size.
    pub(super) fn tcp(a: ([u8; 4], u16), b: ([u8; 4], u16), flags: u16, len: usize) -> Vec<u8> {
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

    pub(super) const A: ([u8; 4], u16) = ([10, 0, 0, 1], 40000);
    pub(super) const B: ([u8; 4], u16) = ([10, 0, 0, 2], 80);

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
