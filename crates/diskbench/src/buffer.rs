//! How large the recorder's buffer must be for a volume to sustain a rate.
//!
//! The buffer is a reservoir filled at the capture rate `R` and drained by
//! the disk, which writes at most what it was measured to write in each
//! second (`w_i`). Its level after second `t` is Lindley's recursion
//! `L_t = max(0, L_{t-1} + R - w_t)`: it grows by the deficit while the disk
//! is slower than `R` and empties while it is faster. The smallest buffer that
//! never overflows is the largest level, `max_t L_t`, which is the largest
//! cumulative deficit over any run of seconds. If the disk's mean is below
//! `R` the level grows without bound: no finite buffer suffices.

/// The smallest buffer (bytes) that absorbs the dips of `per_second` (bytes
/// written in each second) at `rate` (bytes per second): `max_t L_t`.
pub fn needed(per_second: &[u64], rate: f64) -> f64 {
    let mut level = 0.0f64;
    let mut max = 0.0f64;
    for &w in per_second {
        level = (level + rate - w as f64).max(0.0);
        max = max.max(level);
    }
    max
}

/// Steps a recommended buffer is rounded up to: powers of two and 1.5 times
/// powers of two of a MiB (64M, 96M, 128M, 192M, 256M, ...), never below
/// `floor`.
pub fn round_up(bytes: f64, floor: u64) -> u64 {
    let mut step: u64 = 1 << 20;
    loop {
        for s in [step, step + step / 2] {
            if s as f64 >= bytes && s >= floor {
                return s;
            }
        }
        if step >= 1 << 62 {
            return u64::MAX;
        }
        step *= 2;
    }
}

/// A size as `record --buffer` takes it: `NG` when whole GiB, else `NM`
/// (whole MiB, rounded up).
pub fn size_arg(bytes: u64) -> String {
    const GIB: u64 = 1 << 30;
    if bytes > 0 && bytes.is_multiple_of(GIB) {
        format!("{}G", bytes / GIB)
    } else {
        format!("{}M", bytes.div_ceil(1 << 20))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: u64 = 1_243_750_000; // 9.95 Gb/s in bytes per second

    #[test]
    fn constant_series_at_the_rate_needs_no_buffer() {
        assert_eq!(needed(&[R; 60], R as f64), 0.0);
        assert_eq!(needed(&[2 * R; 60], R as f64), 0.0);
        assert_eq!(needed(&[], R as f64), 0.0);
    }

    #[test]
    fn one_two_second_dip_to_half_needs_rate_times_one_second() {
        let mut s = vec![R; 30];
        s[10] = R / 2;
        s[11] = R / 2;
        assert_eq!(needed(&s, R as f64), R as f64);
    }

    #[test]
    fn a_faster_disk_drains_between_dips() {
        // Disk at 2R; two 1-second stalls 3 s apart: the first deficit (R) is
        // drained after one fast second, so the need is R, not 2R.
        let s = [2 * R, 0, 2 * R, 2 * R, 0, 2 * R];
        assert_eq!(needed(&s, R as f64), R as f64);
        // Back to back the deficits add up.
        let s = [2 * R, 0, 0, 2 * R, 2 * R];
        assert_eq!(needed(&s, R as f64), 2.0 * R as f64);
    }

    #[test]
    fn a_partly_drained_reservoir_carries_over() {
        // Deficits 100, then +40 back, then 100 more: peak 160.
        let s = [900, 940, 900];
        assert_eq!(needed(&s, 1000.0), 100.0 + 60.0 + 100.0);
        let s = [900, 1040, 900];
        assert_eq!(needed(&s, 1000.0), 160.0);
    }

    #[test]
    fn a_slower_disk_grows_without_bound() {
        // Mean below the rate: the need grows with the length of the run.
        let short = needed(&[900; 10], 1000.0);
        let long = needed(&[900; 100], 1000.0);
        assert_eq!((short, long), (1000.0, 10_000.0));
    }

    #[test]
    fn rounding_and_the_record_argument() {
        assert_eq!(round_up(0.0, 64 << 20), 64 << 20);
        assert_eq!(round_up((64 << 20) as f64 + 1.0, 64 << 20), 96 << 20);
        assert_eq!(round_up((700u64 << 20) as f64 * 1.5, 64 << 20), 1536 << 20);
        assert_eq!(round_up((1u64 << 30) as f64, 0), 1 << 30);
        assert_eq!(size_arg(1 << 30), "1G");
        assert_eq!(size_arg(1536 << 20), "1536M");
        assert_eq!(size_arg(96 << 20), "96M");
        assert_eq!(size_arg(3 << 30), "3G");
    }
}
