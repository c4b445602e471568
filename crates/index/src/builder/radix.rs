//! The radix sort of (key, block) pairs and the huge-page run buffers.

use std::cell::RefCell;

/// Sorts `key << 32 | block` pairs by key with a stable LSD radix sort
/// (four 8-bit digits of the key, all counted in one read; a digit
/// every pair shares is skipped). Pairs are appended in block order, so
/// after a stable sort by key each key's blocks are increasing: the result
/// equals a full sort of the u64s, at a few ns per pair instead of a
/// comparison sort's ~25 (this runs once per run, for up to half a million pairs).
pub(super) fn sort_pairs(v: &mut Vec<u64>, scratch: &mut Vec<u64>) {
    if v.len() < 1 << 12 {
        v.sort_unstable();
        return;
    }
    pub(super) const SHIFTS: [u32; 4] = [32, 40, 48, 56];
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
pub(super) fn reserve_huge(v: &mut Vec<u64>, cap: usize) {
    if v.try_reserve_exact(cap.saturating_sub(v.len())).is_ok() {
        wv_sys::mem::advise_huge(v.as_ptr().cast(), v.capacity() * std::mem::size_of::<u64>());
    }
}

thread_local! {
    /// The radix sort's second buffer, one per thread that sorts runs.
    pub(super) static SCRATCH: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}
