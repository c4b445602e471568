//! The recorder's defaults: the flags' (`wirevault record` shows them in `--help`) and those
//! derived from the machine (the arena and the kernel rings from its memory). One statement
//! of each: `--help` words them from the numbers here ([`buffer_default`], [`ring_default`]).

/// `--workers`.
pub const WORKERS: usize = 1;
/// `--block-size`.
pub const BLOCK_SIZE: &str = "4M";
/// `--file-size`.
pub const FILE_SIZE: &str = "1G";
/// `--flow-idle`: a connection silent this long starts again (the
/// Time Machine's inactivity timeout is of this order).
pub const FLOW_IDLE: &str = "60s";

/// `--ring-size` when not given: 256 MiB of kernel ring in all, split
/// between the workers, at least 32 MiB each.
pub fn ring_size(workers: usize) -> u64 {
    (RING_TOTAL / workers.max(1) as u64).max(RING_MIN) / (4 << 20) * (4 << 20)
}

/// `--buffer` when not given and the store has no disk-bench result:
/// see [`buffer_for_memory`], and for the zero-copy path
/// [`zero_copy_buffer_for_memory`].
pub fn buffer(zero_copy: bool) -> u64 {
    let ram = wv_sys::cpu::usable_memory();
    if zero_copy {
        zero_copy_buffer_for_memory(ram)
    } else {
        buffer_for_memory(ram)
    }
}

/// The arena a machine with `ram` bytes (what the process's cgroup allows, if less) gets
/// by default: 1/8 of it, at least 64 MiB, at most 4 GiB. Buffered writers (tcpdump,
/// netsniff-ng) park a burst in the page cache, up to vm.dirty_ratio (20%) of memory;
/// the arena stays resident (and pinned, once registered with io_uring), so it takes a
/// smaller share. Its blocks are taken lowest first (`wv_sys::byte_ring`) and only its
/// first [`Tuning::arena_first`](crate::Tuning::arena_first) bytes (64 MiB) are faulted in before capture starts, the rest
/// ahead of the backlog by a background thread (`prefault`): on a disk that keeps up it
/// costs a few blocks, whatever its size (stats.json `arena_used_bytes`,
/// `arena_faulted_bytes`; fresh memory costs ~3 s of CPU per GiB here).
pub fn buffer_for_memory(ram: u64) -> u64 {
    (ram / ARENA_SHARE).clamp(ARENA_MIN, ARENA_MAX)
}

/// The zero-copy path's buffer (its ring, with [`ring_size`]) on a machine with `ram`
/// bytes, when no `--buffer` or disk-bench result sets it: 1/8 of it up to 1 GiB, beyond
/// 16 GiB 1/16 of it up to 4 GiB (the copy path's arena before it was faulted in behind
/// capture). The kernel zeroes the whole ring when it is made, all of it start-up cost.
pub fn zero_copy_buffer_for_memory(ram: u64) -> u64 {
    let small = ZERO_COPY_SMALL_MAX.min(ram / ARENA_SHARE);
    let large = (ram / ZERO_COPY_LARGE_SHARE).min(ARENA_MAX);
    small.max(large).max(ARENA_MIN)
}

// The numbers of the rules above, which `--help` states from them
// (`buffer_default`, `ring_default`): one statement of each default.

/// The copy path's arena takes 1/ARENA_SHARE of the memory...
pub const ARENA_SHARE: u64 = 8;
/// ... at least this much ...
pub const ARENA_MIN: u64 = 64 << 20;
/// ... and at most this much (so does the zero-copy ring).
pub const ARENA_MAX: u64 = 4 << 30;
/// The zero-copy buffer: 1/ARENA_SHARE up to this, beyond ...
pub const ZERO_COPY_SMALL_MAX: u64 = 1 << 30;
/// ... 1/ZERO_COPY_LARGE_SHARE of the memory.
pub const ZERO_COPY_LARGE_SHARE: u64 = 16;
/// The live workers' kernel rings together, when `--ring-size` is not given ...
pub const RING_TOTAL: u64 = 256 << 20;
/// ... at least this much each.
pub const RING_MIN: u64 = 32 << 20;
/// The zero-copy path's default ring (buffer share and ring) at most.
pub const RING_MAX: u64 = 4 << 30;

/// `--buffer`'s default, as its help says it.
pub fn buffer_default() -> String {
    format!(
        "what the store's {} asks for (disk-bench --rate R --json), else 1/{ARENA_SHARE} of the memory this \
         process may use (its cgroup's limit if lower), {} to {}; with --zero-copy 1/{ARENA_SHARE} of it up \
         to {}, beyond {} of memory 1/{ZERO_COPY_LARGE_SHARE} of it up to {}",
        wv_store::layout::DISK_BENCH,
        size(ARENA_MIN),
        size(ARENA_MAX),
        size(ZERO_COPY_SMALL_MAX),
        size(ZERO_COPY_SMALL_MAX * ZERO_COPY_LARGE_SHARE),
        size(ARENA_MAX),
    )
}

/// `--ring-size`'s default, as its help says it.
pub fn ring_default() -> String {
    format!(
        "{} for one worker, {} split between more, at least {} each; with --zero-copy that plus the \
         worker's share of --buffer, up to {}",
        size(RING_TOTAL),
        size(RING_TOTAL),
        size(RING_MIN),
        size(RING_MAX),
    )
}

/// `n` bytes with the largest binary suffix that divides them (64M, 4G).
fn size(n: u64) -> String {
    let (v, unit) = [(40, "T"), (30, "G"), (20, "M"), (10, "K")]
        .into_iter()
        .find(|(s, _)| n >= 1 << s && n.is_multiple_of(1 << s))
        .map_or((n, ""), |(s, u)| (n >> s, u));
    format!("{v}{unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_buffer_grows_with_memory_up_to_4g() {
        const G: u64 = 1 << 30;
        for (ram, want, zc) in [
            (256 << 20, 64 << 20, 64 << 20),
            (4 * G, 512 << 20, 512 << 20),
            (8 * G, G, G),
            (16 * G, 2 * G, G),
            (24 * G, 3 * G, 1536 << 20),
            (64 * G, 4 * G, 4 * G),
            (512 * G, 4 * G, 4 * G),
        ] {
            assert_eq!(buffer_for_memory(ram), want, "{ram}");
            assert_eq!(zero_copy_buffer_for_memory(ram), zc, "{ram}");
        }
    }

    /// The rules `--help` states from the named numbers are the rules the
    /// functions compute: at each bound and in between.
    #[test]
    fn the_stated_defaults_are_the_computed_ones() {
        use super::*;
        const G: u64 = 1 << 30;
        assert_eq!(buffer_for_memory(0), ARENA_MIN);
        assert_eq!(buffer_for_memory(ARENA_MIN * ARENA_SHARE * 3), ARENA_MIN * 3);
        assert_eq!(buffer_for_memory(1 << 50), ARENA_MAX);
        assert_eq!(zero_copy_buffer_for_memory(0), ARENA_MIN);
        assert_eq!(zero_copy_buffer_for_memory(4 * G), 4 * G / ARENA_SHARE);
        assert_eq!(zero_copy_buffer_for_memory(ZERO_COPY_SMALL_MAX * ZERO_COPY_LARGE_SHARE), ZERO_COPY_SMALL_MAX);
        assert_eq!(zero_copy_buffer_for_memory(48 * G), 48 * G / ZERO_COPY_LARGE_SHARE);
        assert_eq!(zero_copy_buffer_for_memory(1 << 50), ARENA_MAX);
        assert_eq!((ring_size(1), ring_size(2), ring_size(64)), (RING_TOTAL, RING_TOTAL / 2, RING_MIN));
        assert!(buffer_default()
            .contains("1/8 of the memory this process may use (its cgroup's limit if lower), 64M to 4G"));
        assert!(ring_default().starts_with("256M for one worker, 256M split between more, at least 32M each"));
    }
}
