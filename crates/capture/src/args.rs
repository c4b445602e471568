//! Parsers for the values of `record`'s options that are not the synthetic
//! spec: sizes (`--buffer`, `--file-size`, `--max-size`) and CPU lists
//! (`--cpus`). They live in a library so the `config` fuzz target reaches them.

/// The highest CPU number a list may name, plus one: the size of the kernel
/// affinity mask that `sched_setaffinity` is given (glibc's `CPU_SETSIZE`).
pub const MAX_CPUS: usize = 1024;

/// Parses `4096`, `64K`, `4M`, `1.5G`, `2T` (binary multiples; `KiB`.. and the
/// decimal `KB`.. accepted). Values beyond `u64::MAX` saturate.
pub fn parse_size(s: &str) -> Option<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num.parse().ok()?;
    let mul: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KIB" => 1 << 10,
        "M" | "MIB" => 1 << 20,
        "G" | "GIB" => 1 << 30,
        "T" | "TIB" => 1 << 40,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    // A size past what 64 bits hold is refused (`as` would saturate it
    // to u64::MAX and call that the size).
    let bytes = v * mul as f64;
    (v >= 0.0 && bytes < u64::MAX as f64).then_some(bytes as u64)
}

/// Parses a CPU list such as `0,1` or `2-5,7` (the kernel's cpulist format),
/// in the order given. Every CPU must be below [`MAX_CPUS`], so the list is
/// bounded whatever the input.
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let cpu = |p: &str| p.trim().parse::<usize>().ok().filter(|&c| c < MAX_CPUS);
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (cpu(a)?, cpu(b)?);
                if a > b {
                    return None;
                }
                v.extend(a..=b);
            }
            None => v.push(cpu(part)?),
        }
        if v.len() > MAX_CPUS {
            return None;
        }
    }
    (!v.is_empty()).then_some(v)
}

/// Parses a share of a volume such as `80%` or `12.5 %` into a fraction in
/// (0, 1]. `None` when `s` does not end in `%` or is out of range.
pub fn parse_percent(s: &str) -> Option<f64> {
    let p: f64 = s.trim().strip_suffix('%')?.trim().parse().ok()?;
    (p > 0.0 && p <= 100.0).then_some(p / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4M"), Some(4 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("1.5K"), Some(1536));
        assert_eq!(parse_size("1GB"), Some(1_000_000_000));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size(" 2TiB "), Some(2 << 40));
        // Past 64 bits: refused, not capped at u64::MAX.
        assert_eq!(parse_size("99999999999999999999T"), None);
        assert_eq!(parse_size("16383.99T"), Some((16383.99 * (1u64 << 40) as f64) as u64));
        for bad in ["x", "", "-1", "1e5", "4 MB", "1..2", "NaN", "inf"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0,2-4"), Some(vec![0, 2, 3, 4]));
        assert_eq!(parse_cpu_list(" 1 , 0 "), Some(vec![1, 0]));
        assert_eq!(parse_cpu_list("0-1023").map(|v| v.len()), Some(1024));
        for bad in ["3-1", "", ",", "a", "1-", "-1", "0-1024", "1024", "0-100000000000", "0-1023,5"] {
            assert_eq!(parse_cpu_list(bad), None, "{bad}");
        }
    }

    #[test]
    fn percents() {
        assert_eq!(parse_percent("80%"), Some(0.8));
        assert_eq!(parse_percent(" 100 % "), Some(1.0));
        for bad in ["0%", "101%", "80", "%", "-5%", "NaN%"] {
            assert_eq!(parse_percent(bad), None, "{bad}");
        }
    }
}
