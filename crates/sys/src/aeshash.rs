//! A keyed hash of byte strings made of AES rounds, for hash tables whose
//! equal hashes are confirmed by comparing the bytes (the recorder's
//! `--dedup` on the copy path): it has to spread inputs over the table,
//! and without the key crafting two inputs of one hash must take far more
//! tries than a table's eviction is worth. It is no MAC and no checksum.
//!
//! Two lanes take 16 bytes each, XORed in, then two AES rounds; where the
//! length is no multiple of 32 the last 32 bytes are read again (the
//! length is in the first lane, so overlapped reads cannot make two
//! lengths collide by construction); three rounds join the lanes. Two
//! rounds per block, not one: after one round a difference in one byte is
//! a difference in one column that the lane's next block can cancel (a
//! guess in about 127 succeeds: a review found 3 full collisions among 765
//! crafted 64-byte frames, the unit test `crafted_differences_do_not_cancel`
//! replays them); after two it is spread over all 16 bytes through five
//! S-boxes. At 64 bytes: 8 rounds and 3 to finish. In the recorder's
//! dedup, 6 instructions fewer than XXH3 per 64-byte frame and 60 fewer
//! per 1514-byte one (its 192-byte sample; callgrind, bench/RESULTS.md).
//!
//! x86-64 CPUs with AES-NI only, checked at run time ([`Key::new`] gives
//! None elsewhere; the caller keeps its other hash).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Three round keys taken from a secret, on a CPU with AES instructions.
#[derive(Clone, Copy)]
pub struct Key {
    #[cfg(target_arch = "x86_64")]
    k: [__m128i; 3],
}

impl Key {
    /// Keys from the first 48 bytes of `secret`; None when the CPU has no
    /// AES instructions.
    #[cfg(target_arch = "x86_64")]
    pub fn new(secret: &[u8; 48]) -> Option<Key> {
        if !std::arch::is_x86_feature_detected!("aes") {
            return None;
        }
        // SAFETY: each load reads 16 bytes inside the 48-byte secret (SSE2, x86-64's baseline).
        let k = |i: usize| unsafe { _mm_loadu_si128(secret[16 * i..16 * i + 16].as_ptr().cast()) };
        Some(Key { k: [k(0), k(1), k(2)] })
    }

    #[cfg(not(target_arch = "x86_64"))]
    pub fn new(_secret: &[u8; 48]) -> Option<Key> {
        None
    }

    /// The hash of `data`.
    #[inline(always)]
    pub fn hash(&self, data: &[u8]) -> u64 {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a Key exists only where the CPU has AES (Key::new).
        return unsafe { hash(self, data) };
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no Key without AES: {}", data.len())
    }

    /// The hash of `a` and `b` joined, read where they lie: the value of
    /// [`Key::hash`] of the joined bytes.
    #[inline(always)]
    pub fn hash_joined<const A: usize, const B: usize>(&self, a: &[u8; A], b: &[u8; B]) -> u64 {
        const { assert!(A.is_multiple_of(32) && B.is_multiple_of(32) && A + B > 32) };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a Key exists only where the CPU has AES (Key::new).
        return unsafe { hash_joined(self, a, b) };
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("no Key without AES: {}", a.len() + b.len())
    }
}

/// 16 bytes of `d` from `at`; `at + 16 <= d.len()` (else it panics).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn load(d: &[u8], at: usize) -> __m128i {
    let b: &[u8; 16] = d[at..at + 16].try_into().unwrap_or(&[0; 16]);
    // SAFETY: reads the 16 bytes of `b` (SSE2, x86-64's baseline).
    unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
}

/// Up to 16 bytes as one block: two overlapping reads of 8 or 4 bytes, or
/// three single bytes (the length, in the lane, tells overlaps apart).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn short(d: &[u8]) -> __m128i {
    let n = d.len();
    let le64 = |at: usize| u64::from_le_bytes(d[at..at + 8].try_into().unwrap_or_default());
    let le32 = |at: usize| u64::from(u32::from_le_bytes(d[at..at + 4].try_into().unwrap_or_default()));
    let (lo, hi) = match n {
        8.. => (le64(0), le64(n - 8)),
        4.. => (le32(0), le32(n - 4)),
        1.. => (u64::from(d[0]) | u64::from(d[n / 2]) << 8 | u64::from(d[n - 1]) << 16, 0),
        0 => (0, 0),
    };
    // SAFETY: SSE2, x86-64's baseline; no memory is read.
    unsafe { _mm_set_epi64x(hi as i64, lo as i64) }
}

/// `block` into the lane: XORed in, then two rounds.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "aes")]
#[inline]
fn absorb(lane: __m128i, block: __m128i, key: __m128i, key2: __m128i) -> __m128i {
    _mm_aesenc_si128(_mm_aesenc_si128(_mm_xor_si128(lane, block), key), key2)
}

/// The lanes' start for `n` bytes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn start(k: &Key, n: usize) -> (__m128i, __m128i) {
    // SAFETY: SSE2, x86-64's baseline; no memory is read.
    unsafe { (_mm_xor_si128(k.k[0], _mm_set_epi64x(0, n as i64)), k.k[1]) }
}

/// The two lanes joined into 64 bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "aes")]
#[inline]
fn finish(k: &Key, a: __m128i, b: __m128i) -> u64 {
    let x = _mm_aesenc_si128(a, b);
    let x = _mm_aesenc_si128(x, k.k[2]);
    let x = _mm_aesenc_si128(x, k.k[0]);
    (_mm_cvtsi128_si64(x) ^ _mm_cvtsi128_si64(_mm_unpackhi_epi64(x, x))) as u64
}

/// [`Key::hash`]; the CPU must have AES.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "aes")]
fn hash(k: &Key, d: &[u8]) -> u64 {
    let n = d.len();
    let (mut a, mut b) = start(k, n);
    if n <= 16 {
        a = absorb(a, short(d), k.k[1], k.k[2]);
    } else if n <= 32 {
        a = absorb(a, load(d, 0), k.k[1], k.k[2]);
        b = absorb(b, load(d, n - 16), k.k[0], k.k[2]);
    } else if n <= 64 {
        // Frames of 33 to 64 bytes (the minimum Ethernet frame is 60) without a loop.
        a = absorb(a, load(d, 0), k.k[1], k.k[2]);
        b = absorb(b, load(d, 16), k.k[0], k.k[2]);
        a = absorb(a, load(d, n - 32), k.k[1], k.k[2]);
        b = absorb(b, load(d, n - 16), k.k[0], k.k[2]);
    } else {
        let mut i = 0;
        while i + 32 < n {
            a = absorb(a, load(d, i), k.k[1], k.k[2]);
            b = absorb(b, load(d, i + 16), k.k[0], k.k[2]);
            i += 32;
        }
        a = absorb(a, load(d, n - 32), k.k[1], k.k[2]);
        b = absorb(b, load(d, n - 16), k.k[0], k.k[2]);
    }
    finish(k, a, b)
}

/// [`Key::hash_joined`]; the CPU must have AES. The same rounds as
/// [`hash`] of the joined bytes: their length is a multiple of 32 above 32.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "aes")]
fn hash_joined<const A: usize, const B: usize>(k: &Key, x: &[u8; A], y: &[u8; B]) -> u64 {
    let (mut a, mut b) = start(k, A + B);
    for part in [&x[..], &y[..]] {
        for i in (0..part.len()).step_by(32) {
            a = absorb(a, load(part, i), k.k[1], k.k[2]);
            b = absorb(b, load(part, i + 16), k.k[0], k.k[2]);
        }
    }
    finish(k, a, b)
}

#[cfg(test)]
mod tests {
    use super::Key;

    fn key(seed: u8) -> Option<Key> {
        let s: [u8; 48] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(seed));
        Key::new(&s)
    }

    /// Every byte and the length count: changing one bit of any byte, or
    /// adding a zero byte, changes the hash, for every length to 200.
    #[test]
    fn every_byte_and_the_length_count() {
        let Some(k) = key(1) else {
            eprintln!("no AES on this CPU: nothing to test");
            return;
        };
        let mut seen = std::collections::HashSet::new();
        for n in 0..=200usize {
            let d: Vec<u8> = (0..n).map(|i| (i * 131 + 7) as u8).collect();
            let h = k.hash(&d);
            assert!(seen.insert(h), "length {n}: its hash equals another length's");
            for i in 0..n {
                for bit in [0, 7] {
                    let mut e = d.clone();
                    e[i] ^= 1 << bit;
                    assert_ne!(k.hash(&e), h, "length {n}, byte {i}, bit {bit}");
                }
            }
            let zeros = vec![0u8; n];
            let mut longer = zeros.clone();
            longer.push(0);
            assert_ne!(k.hash(&zeros), k.hash(&longer), "{n} zeros");
        }
    }

    /// A one-byte difference in a lane's block, and in its next block the
    /// difference one AES round would make of it (the column MixColumns
    /// makes of an S-box output difference `g`: 2g, g, g, 3g), for every
    /// `g`: with one round per block, about one guess in 127 cancelled out
    /// and the two frames had one hash (3 of these 765 with a random key);
    /// with two, none may.
    #[test]
    fn crafted_differences_do_not_cancel() {
        fn xtime(b: u8) -> u8 {
            (b << 1) ^ if b & 0x80 != 0 { 0x1b } else { 0 }
        }
        for seed in [5u8, 6, 7] {
            let Some(k) = key(seed) else { return };
            let f: Vec<u8> = (0..64).map(|i| (i * 31 + 3) as u8).collect();
            let h = k.hash(&f);
            for delta in [1u8, 2, 0x80] {
                for g in 1..=255u8 {
                    let mut e = f.clone();
                    e[0] ^= delta;
                    // Bytes 32.. are the first lane's next block at 64 bytes.
                    for (i, m) in [xtime(g), g, g, xtime(g) ^ g].into_iter().enumerate() {
                        e[32 + i] ^= m;
                    }
                    assert_ne!(k.hash(&e), h, "key {seed}, delta {delta:#x}, g {g:#x}");
                }
            }
        }
    }

    #[test]
    fn joined_equals_the_hash_of_the_joined_bytes() {
        let Some(k) = key(2) else { return };
        let d: Vec<u8> = (0..192u32).map(|i| (i * 97 + 5) as u8).collect();
        let (a, b) = d.split_at(128);
        assert_eq!(k.hash_joined::<128, 64>(a.try_into().unwrap(), b.try_into().unwrap()), k.hash(&d));
        let (a, b) = d[..64].split_at(32);
        assert_eq!(k.hash_joined::<32, 32>(a.try_into().unwrap(), b.try_into().unwrap()), k.hash(&d[..64]));
    }

    /// Another key, another hash; and the hashes of distinct inputs spread
    /// evenly over buckets (a chi-square test over 1,024 buckets).
    #[test]
    fn keys_differ_and_buckets_fill_evenly() {
        let (Some(k1), Some(k2)) = (key(3), key(4)) else { return };
        let frame = |i: u32| -> Vec<u8> {
            let mut f = vec![0u8; 64];
            f[30..34].copy_from_slice(&i.to_be_bytes());
            f
        };
        assert_ne!(k1.hash(&frame(1)), k2.hash(&frame(1)));
        const BUCKETS: usize = 1024;
        const N: u32 = 1 << 18;
        let mut counts = [0u32; BUCKETS];
        for i in 0..N {
            counts[((k1.hash(&frame(i)) >> 32) as usize) % BUCKETS] += 1;
        }
        let expected = f64::from(N) / BUCKETS as f64;
        let chi2: f64 = counts.iter().map(|&c| (f64::from(c) - expected).powi(2) / expected).sum();
        // 1,023 degrees of freedom: mean 1,023, standard deviation ~45.
        assert!(chi2 < 1023.0 + 6.0 * 45.0, "chi-square {chi2:.0}");
    }
}
