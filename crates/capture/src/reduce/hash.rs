//! The keyed hashes of the reducers: of a frame (dedup) and of a
//! connection (the cutoff), with a random secret per process.

use std::hash::{BuildHasher, Hasher};
use xxhash_rust::xxh3::xxh3_64_with_secret;

/// Bytes of the XXH3 secret (its default secret's size).
pub(super) const SECRET_LEN: usize = 192;

/// A random secret for this process: frame and flow hashes cannot be
/// predicted from outside, so no one can craft a frame that collides with
/// another one to have it dropped as its duplicate.
pub(super) fn random_secret() -> Box<[u8; SECRET_LEN]> {
    let state = std::collections::hash_map::RandomState::new();
    let mut s = Box::new([0u8; SECRET_LEN]);
    for (i, chunk) in s.chunks_exact_mut(8).enumerate() {
        let mut h = state.build_hasher();
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    s
}

/// Mixes a length into a hash (frames of equal bytes but different
/// original lengths are different frames).
#[inline]
pub(super) fn mix(h: u64, x: u64) -> u64 {
    (h ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15)).rotate_left(29).wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1
}

/// The keyed hash of a frame given in parts: one part is hashed whole; a
/// frame in several parts (the same frame always comes in the same parts
/// from the same source) hashes each part and folds them, which saves
/// joining them.
#[inline]
pub(super) fn frame_hash(parts: &[&[u8]], hasher: &impl PieceHash) -> u64 {
    match parts {
        [one] => hasher.one(one),
        _ => parts.iter().fold(0u64, |h, p| h.rotate_left(23) ^ hasher.one(p)),
    }
}

/// XXH3-64 with `secret`. Inputs of more than 240 bytes take XXH3's striped
/// loop, which twox-hash runs with AVX2 when the CPU has it (chosen at run
/// time; xxhash-rust's lanes are fixed at compile time, SSE2 for generic
/// x86-64): 1514 bytes hash in ~0.6 of the time. Inputs of 129 to 240 bytes
/// hash in ~0.4 of xxhash-rust's time with twox-hash too (17 against 43 ns
/// for 240 bytes, measured 2026-11-26). Shorter ones stay with xxhash-rust,
/// whose short paths are as fast or faster. Both are XXH3: the same value.
#[inline(always)]
fn xxh3(data: &[u8], secret: &[u8]) -> u64 {
    if data.len() > 128 {
        if let Ok(h) = twox_hash::XxHash3_64::oneshot_with_secret(secret, data) {
            return h;
        }
    }
    xxh3_64_with_secret(data, secret)
}

/// A keyed hash of byte strings for [`sample_hash`]: XXH3 ([`Xxh3`]) or
/// AES rounds ([`wv_sys::aeshash::Key`]).
pub(super) trait PieceHash {
    /// The hash of `data`.
    fn one(&self, data: &[u8]) -> u64;
    /// The hash of `head` and `tail` joined (192 bytes), read where they lie.
    fn head_tail(&self, head: &[u8; SAMPLE_HEAD], tail: &[u8; SAMPLE_TAIL]) -> u64;
}

/// XXH3 with a secret.
pub(super) struct Xxh3<'a>(pub &'a [u8; SECRET_LEN]);

impl PieceHash for Xxh3<'_> {
    #[inline(always)]
    fn one(&self, data: &[u8]) -> u64 {
        xxh3(data, &self.0[..])
    }

    #[inline(always)]
    fn head_tail(&self, head: &[u8; SAMPLE_HEAD], tail: &[u8; SAMPLE_TAIL]) -> u64 {
        xxh3_head_tail(head, tail, self.0)
    }
}

/// The keyed hash [`Dedup::hash`](super::Dedup::hash) takes when stored copies are compared
/// (with `hasher`: AES rounds or XXH3), and the frame's length: of all its
/// bytes up to 192, else of its first 128 and last 64. A frame in one part
/// is hashed in one call ([`PieceHash::head_tail`] reads the two pieces
/// where they lie: the value of the two joined); a frame in several parts hashes each
/// part's piece of those ranges and folds them, as [`frame_hash`] does
/// (the same frame comes in the same parts from the same source; joining
/// them took more than hashing them apart).
#[inline(always)]
pub(super) fn sample_hash(parts: &[&[u8]], hasher: &impl PieceHash) -> (u64, usize) {
    const N: usize = SAMPLE_HEAD + SAMPLE_TAIL;
    if let [one] = parts {
        let len = one.len();
        if len <= N {
            return (hasher.one(one), len);
        }
        let (Ok(head), Ok(tail)) = (one[..SAMPLE_HEAD].try_into(), one[len - SAMPLE_TAIL..].try_into()) else {
            unreachable!("fixed lengths")
        };
        return (hasher.head_tail(head, tail), len);
    }
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len <= N {
        return (frame_hash(parts, hasher), len);
    }
    let (mut h, mut at) = (0u64, 0);
    for p in parts {
        // The part's bytes in [0, SAMPLE_HEAD) and in [len - SAMPLE_TAIL, len).
        let head = &p[..p.len().min(SAMPLE_HEAD.saturating_sub(at))];
        let tail = &p[(len - SAMPLE_TAIL).saturating_sub(at).min(p.len())..];
        for piece in [head, tail] {
            if !piece.is_empty() {
                h = h.rotate_left(23) ^ hasher.one(piece);
            }
        }
        at += p.len();
    }
    (h, len)
}

/// XXH3-64 with `secret` of `head` and `tail` joined (192 bytes), read
/// where they lie: the same value as [`xxh3`] of the joined bytes (a unit
/// test compares them), without joining them first. XXH3's 129-to-240-byte
/// path (the specification's `XXH3_len_129to240_64b`, seed 0): 16-byte
/// pieces, each XORed with 16 bytes of the secret, multiplied 64 × 64 to
/// 128 bits and folded, summed; an avalanche after the first eight.
#[inline(always)]
fn xxh3_head_tail(head: &[u8; SAMPLE_HEAD], tail: &[u8; SAMPLE_TAIL], secret: &[u8; SECRET_LEN]) -> u64 {
    const PRIME64_1: u64 = 0x9e37_79b1_85eb_ca87;
    /// XXH3's secret offsets of the pieces after the eighth and of the last one.
    const MIDSIZE_STARTOFFSET: usize = 3;
    const MIDSIZE_LASTOFFSET: usize = 136 - 17;
    fn le64(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
    }
    let mix16 = |input: &[u8], at: usize, s: usize| {
        let p = u128::from(le64(input, at) ^ le64(secret, s)) * u128::from(le64(input, at + 8) ^ le64(secret, s + 8));
        p as u64 ^ (p >> 64) as u64
    };
    let avalanche = |h: u64| {
        let h = (h ^ (h >> 37)).wrapping_mul(0x1656_6791_9e37_79f9);
        h ^ (h >> 32)
    };
    const LEN: usize = SAMPLE_HEAD + SAMPLE_TAIL;
    let mut acc = (LEN as u64).wrapping_mul(PRIME64_1);
    for i in 0..SAMPLE_HEAD / 16 {
        acc = acc.wrapping_add(mix16(head, 16 * i, 16 * i));
    }
    acc = avalanche(acc);
    // Of the tail, the pieces 8 to 11 (XXH3 reads len / 16 pieces), then
    // the last 16 bytes again with the last round's secret.
    for i in 0..SAMPLE_TAIL / 16 {
        acc = acc.wrapping_add(mix16(tail, 16 * i, MIDSIZE_STARTOFFSET + 16 * i));
    }
    acc = acc.wrapping_add(mix16(tail, SAMPLE_TAIL - 16, MIDSIZE_LASTOFFSET));
    avalanche(acc)
}

/// The keys of [`flow_hash_v4`] and [`flow_hash_v6`]: eight words of the
/// process's random secret.
#[derive(Clone, Copy)]
pub(super) struct FlowKeys([u64; 8]);

impl FlowKeys {
    pub(super) fn new(secret: &[u8; SECRET_LEN]) -> FlowKeys {
        FlowKeys(std::array::from_fn(|i| u64::from_le_bytes(secret[8 * i..8 * i + 8].try_into().unwrap_or_default())))
    }
}

/// The 128-bit product of two words, its halves XORed: every bit of the
/// result depends on most bits of both (the mixing step of wyhash and
/// foldhash). Each operand is a word XORed with a secret key, so no one who
/// does not know the key can make one of them 0 (which would make the
/// product 0 whatever the other).
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    p as u64 ^ (p >> 64) as u64
}

/// The keyed hash of an IPv4 connection's words (the cutoff's `flow_head_v4`):
/// two multiplications, where XXH3 of the same 24 bytes took three and a
/// dispatch on the length (with IPv4 endpoints compared as 48-bit words,
/// 24 instructions fewer per packet for the cutoff, ~2 ns; callgrind and
/// the pipeline bench, bench/RESULTS.md).
#[inline(always)]
pub(super) fn flow_hash_v4(k: &FlowKeys, w0: u64, w1: u64, addrs: u64) -> u64 {
    let k = &k.0;
    fold(fold(w0 ^ k[0], w1 ^ k[1]) ^ k[2], addrs ^ k[3])
}

/// [`flow_hash_v4`] of an IPv6 connection: its two addresses take two more
/// products.
#[inline(always)]
pub(super) fn flow_hash_v6(k: &FlowKeys, w0: u64, w1: u64, lo: u128, hi: u128) -> u64 {
    let k = &k.0;
    let h = fold(w0 ^ k[0], w1 ^ k[1]);
    let a = fold(lo as u64 ^ k[2], (lo >> 64) as u64 ^ k[3]);
    let b = fold(hi as u64 ^ k[4], (hi >> 64) as u64 ^ k[5]);
    fold(h ^ a ^ k[6], b ^ k[7])
}

/// The AES hash's keys from the process's secret; None when the CPU has
/// no AES instructions.
pub(super) fn aes_key(secret: &[u8; SECRET_LEN]) -> Option<wv_sys::aeshash::Key> {
    secret[..48].try_into().ok().and_then(wv_sys::aeshash::Key::new)
}

/// AES rounds ([`wv_sys::aeshash`]) where the CPU has them: for the copy
/// path's dedup, whose equal hashes are confirmed byte for byte against
/// the stored copy, so a collision costs a comparison (or a table entry
/// pushed out: the rule fails open), never a wrong verdict. 60
/// instructions fewer than XXH3 per 1514-byte frame, 6 per 64-byte one.
impl PieceHash for wv_sys::aeshash::Key {
    #[inline(always)]
    fn one(&self, data: &[u8]) -> u64 {
        self.hash(data)
    }

    #[inline(always)]
    fn head_tail(&self, head: &[u8; SAMPLE_HEAD], tail: &[u8; SAMPLE_TAIL]) -> u64 {
        self.hash_joined(head, tail)
    }
}

/// Bytes of a frame's start (every header: Ethernet, 4 VLAN tags, IPv6,
/// TCP with options) and end the hash reads when stored copies are compared.
const SAMPLE_HEAD: usize = 128;
const SAMPLE_TAIL: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_xxh3_implementations_agree() {
        let secret = super::random_secret();
        for len in [0usize, 17, 128, 129, 176, 192, 240, 241, 590, 1514, 9000] {
            let d: Vec<u8> = (0..len).map(|i| (i * 131 + 7) as u8).collect();
            assert_eq!(super::xxh3(&d, &secret[..]), xxhash_rust::xxh3::xxh3_64_with_secret(&d, &secret[..]), "{len}");
        }
    }

    #[test]
    fn xxh3_of_head_and_tail_is_xxh3_of_them_joined() {
        for k in 0..64u64 {
            let secret = super::random_secret();
            let bytes: Vec<u8> =
                (0..192u64).map(|i| (i * 131 + k * k * 7 + 11).to_le_bytes()[0] ^ secret[i as usize]).collect();
            let (head, tail) = bytes.split_at(128);
            let want = xxhash_rust::xxh3::xxh3_64_with_secret(&bytes, &secret[..]);
            assert_eq!(super::xxh3_head_tail(head.try_into().unwrap(), tail.try_into().unwrap(), &secret), want, "{k}");
        }
    }

    #[test]
    fn the_sample_hash_reads_the_first_and_last_bytes_only() {
        let secret = random_secret();
        sample_reads_the_first_and_last_bytes_only(&Xxh3(&secret));
        match aes_key(&secret) {
            Some(k) => sample_reads_the_first_and_last_bytes_only(&k),
            None => eprintln!("no AES on this CPU: the AES hasher is not tested"),
        }
    }

    /// [`sample_hash`] with `hasher`: of the whole frame up to 192 bytes,
    /// else of its first 128 and last 64 joined; in parts, every byte of
    /// those read and no other.
    fn sample_reads_the_first_and_last_bytes_only(hasher: &impl PieceHash) {
        for len in [0usize, 1, 59, 128, 129, 191, 192, 193, 300, 1514] {
            let f: Vec<u8> = (0..len).map(|i| (i * 31 + 3) as u8).collect();
            let (h, n) = sample_hash(&[&f], hasher);
            assert_eq!(n, len);
            let read = if len > 192 { [&f[..128], &f[len - 64..]].concat() } else { f.clone() };
            assert_eq!(h, hasher.one(&read), "{len}");
            for (i, j) in [(0, 0), (1, 2), (12, 100), (127, 129), (128, 128), (len - len.min(64), len), (len / 2, len)]
            {
                let (i, j) = (i.min(len), j.min(len));
                let split = [&f[..i], &f[i..j], &f[j..]];
                let (h, n) = sample_hash(&split, hasher);
                assert_eq!(n, len);
                // Every byte read, none other: change each byte in turn.
                for k in 0..len {
                    let mut g = f.clone();
                    g[k] ^= 1;
                    let (h2, _) = sample_hash(&[&g[..i], &g[i..j], &g[j..]], hasher);
                    assert_eq!(h2 != h, len <= 192 || k < 128 || k >= len - 64, "{len} split {i} {j}, byte {k}");
                }
            }
        }
    }
}
