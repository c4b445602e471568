//! `--dedup WINDOW`: frames identical to one stored within the window are
//! not stored again (as the HPCAP driver drops the second copy a SPAN port
//! makes). See [`Dedup`].

use super::hash::{aes_key, frame_hash, mix, random_secret, sample_hash, Xxh3, SECRET_LEN};
use super::{Buckets, Judge, Verdict};

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
    /// [`Dedup`]); the caller gives [`Reduce::judge`](super::Reduce::judge) a comparison and
    /// [`Reduce::stored`](super::Reduce::stored) the copies' places.
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
    /// [`Reduce::judge`](super::Reduce::judge).
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

    /// Remembers a frame stored at `at` (see [`Reduce::stored`](super::Reduce::stored)) in the
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

impl Judge for Dedup {
    /// The frame's [`Dedup::hash`].
    type Prepared = u64;
    type Pending = Pending;

    #[inline(always)]
    fn prepare(&self, _linktype: u32, origlen: u32, parts: &[&[u8]]) -> u64 {
        // Stored copies compared: the frame is hashed from its copy ([`Judge::judge_copy`]).
        if self.compare {
            return 0;
        }
        let h = self.hash(origlen, parts);
        self.prefetch(h);
        h
    }

    #[inline(always)]
    fn after_copy(&self) -> bool {
        self.compare
    }

    /// The frame's hash read from its copy in the arena, just written and in the cache (the
    /// frame itself lies in the kernel's ring, which the sender's core wrote: reading it
    /// again there cost a cache miss per line under load), and looked up.
    #[inline(always)]
    fn judge_copy(
        &mut self,
        ts_ns: u64,
        origlen: u32,
        _hash: &u64,
        copy: &[&[u8]],
        same: impl FnMut(u64) -> bool,
    ) -> Result<Pending, Verdict> {
        match self.lookup_hash(ts_ns, self.hash(origlen, copy), same) {
            Lookup::Duplicate => Err(Verdict::Duplicate),
            Lookup::New(p) => Ok(p),
        }
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
        if !self.compare {
            self.prefetch(*hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reduce::tests::{tcp, A, B};
    use wv_wire::views::tcp::flags::ACK;

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
}
