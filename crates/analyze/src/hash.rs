//! The content hash that identifies a frame: for duplicates (same bytes
//! within a window) and for one-way delay (the same packet seen at two
//! points): XXH3's 128-bit hash of the bytes, seeded with the caller's
//! lengths and a seed drawn once per process (so that traffic crafted to
//! collide in the tables in one run does not in another; both capture
//! points of a delay measurement are hashed by the same process). Two
//! different frames of the same length share a hash with probability about
//! 2^-128, so a store of 10^12 frames sees no false match. Not
//! cryptographic: nobody gains by forging a duplicate in their own capture.
//! XXH3 reads 16 or more bytes a cycle where a word-at-a-time multiply chain
//! reads about 1.5: duplicates hash every byte of every frame.

use std::sync::OnceLock;

const P1: u64 = 0x9e37_79b9_7f4a_7c15;

fn fmix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The process's seed of [`frame_hash`].
fn seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        use std::hash::BuildHasher;
        std::collections::hash_map::RandomState::new().hash_one(0xf4a3_u64)
    })
}

/// The hash of `data` together with `extra` (the caller's lengths).
pub fn frame_hash(data: &[u8], extra: u64) -> u128 {
    xxhash_rust::xxh3::xxh3_128_with_seed(data, seed() ^ fmix(extra.wrapping_add(P1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differs_on_any_byte_length_or_extra() {
        let f: Vec<u8> = (0..61u8).collect();
        let h = frame_hash(&f, 7);
        assert_eq!(h, frame_hash(&f.clone(), 7));
        assert_ne!(h, frame_hash(&f, 8));
        assert_ne!(h, frame_hash(&f[..60], 7));
        for i in 0..f.len() {
            let mut g = f.clone();
            g[i] ^= 1;
            assert_ne!(h, frame_hash(&g, 7), "byte {i}");
        }
        // Trailing zeros are not the same as a shorter frame.
        assert_ne!(frame_hash(&[1, 0], 0), frame_hash(&[1], 0));
    }
}

/// The tables' hasher: a multiply-rotate hash (as rustc's FxHash) over
/// 8-byte words, several times faster than SipHash on the small keys of the
/// flow tables (addresses, ports). Seeded per table from std's random
/// keys, so that traffic crafted to collide in one run does not in another.
#[derive(Clone, Copy)]
pub struct FastState(u64);

impl Default for FastState {
    fn default() -> Self {
        use std::hash::BuildHasher;
        FastState(std::collections::hash_map::RandomState::new().hash_one(0x5eed_u64) | 1)
    }
}

impl std::hash::BuildHasher for FastState {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(self.0)
    }
}

pub struct FastHasher(u64);

impl FastHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(P1);
    }
}

impl std::hash::Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut c = bytes.chunks_exact(8);
        for w in &mut c {
            self.add(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
        }
        let r = c.remainder();
        if !r.is_empty() {
            let mut t = [0u8; 8];
            t[..r.len()].copy_from_slice(r);
            self.add(u64::from_le_bytes(t) ^ ((r.len() as u64) << 60));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        fmix(self.0)
    }
}

/// A `HashMap` with [`FastState`].
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastState>;

/// A map keyed by [`frame_hash`]es: they are uniform already (and seeded
/// per process), so the table takes their low 64 bits as they are.
pub type HashedMap<V> = std::collections::HashMap<u128, V, std::hash::BuildHasherDefault<Hashed>>;

/// The pass-through hasher of [`HashedMap`].
#[derive(Default)]
pub struct Hashed(u64);

impl std::hash::Hasher for Hashed {
    fn write(&mut self, bytes: &[u8]) {
        // Only u128 keys are hashed; anything else still gets a hash.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(P1);
        }
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.0 = i as u64;
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}
