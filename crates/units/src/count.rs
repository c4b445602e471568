//! Counts (`1000`, `10k`, `1M`, `2G`) and shares of a volume (`80%`).

/// Parses a count: a number with an optional decimal multiple `k`, `M` or
/// `G` (either case: thousands, millions, billions), such as `1000`, `10k`
/// or `1.5M`. Counts past 64 bits are refused.
pub fn parse_count(s: &str) -> Option<u64> {
    let (num, mul) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1_000),
        'm' | 'M' => (&s[..s.len() - 1], 1_000_000),
        'g' | 'G' => (&s[..s.len() - 1], 1_000_000_000),
        _ => (s, 1),
    };
    let f: f64 = num.parse().ok()?;
    let n = f * mul as f64;
    // 2^64 and above (or infinite) would saturate: no such count.
    (f >= 0.0 && n < 18_446_744_073_709_551_616.0).then_some(n as u64)
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
    fn counts() {
        assert_eq!(parse_count("1000"), Some(1000));
        assert_eq!(parse_count("10k"), Some(10_000));
        assert_eq!(parse_count("1M"), Some(1_000_000));
        assert_eq!(parse_count("2G"), Some(2_000_000_000));
        assert_eq!(parse_count("1.5m"), Some(1_500_000));
        for bad in ["", "k", "x", "-1", "99999999999999999999", "NaN"] {
            assert_eq!(parse_count(bad), None, "{bad}");
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
