//! Counts (`1000`, `10k`, `1M`, `2G`) and shares of a volume (`80%`).

/// The forms a count takes, for `--help` and messages.
pub const COUNT_FORMS: &str =
    "a whole number, with k, M or G for thousands, millions or billions if you like, such as 500, 250k or 1M";

/// Parses a count: digits and an optional decimal multiple `k`/`K`, `M` or
/// `G` (thousands, millions, billions), such as `1000`, `10k` or `1M`. No
/// fraction (a count is whole) and no small `m`/`g` (`m` reads as milli).
/// Counts past 64 bits are refused; 0 is a count (callers bound it).
pub fn parse_count(s: &str) -> Option<u64> {
    let (digits, scale) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1_000),
        (i, 'M') => (&s[..i], 1_000_000),
        (i, 'G') => (&s[..i], 1_000_000_000),
        _ => (s, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(scale)
}

/// Parses a packet rate (packets per second): digits with an optional
/// fraction and an optional `k`, `M` or `G` of either case, such as `20k`,
/// `14.88M` or `1mpps` less its `pps` (a rate, unlike a count, need not be
/// whole, and a millipacket rate means nothing). Past 64 bits is refused.
pub fn parse_packet_rate(s: &str) -> Option<f64> {
    let (num, scale) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1e3),
        (i, 'm' | 'M') => (&s[..i], 1e6),
        (i, 'g' | 'G') => (&s[..i], 1e9),
        _ => (s, 1.0),
    };
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let v = num.parse::<f64>().ok()? * scale;
    (v < 18_446_744_073_709_551_616.0).then_some(v)
}

/// The one sentence for a count `input` of option `name` that [`parse_count`]
/// refused (or that is 0 where the option needs one at least).
pub fn count_error(name: &str, input: &str) -> String {
    format!("{name} \"{input}\" is not a count above 0: give {COUNT_FORMS}")
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
        assert_eq!(parse_count("3K"), Some(3_000));
        assert_eq!(parse_count("0"), Some(0));
        for bad in [
            "",
            "k",
            "M",
            "x",
            "-1",
            "99999999999999999999",
            "99999999999G",
            "NaN",
            "1.5M",
            "1m",
            "1g",
            "1 M",
            "1e3",
            "+5",
        ] {
            assert_eq!(parse_count(bad), None, "{bad}");
        }
    }

    #[test]
    fn packet_rates() {
        assert_eq!(parse_packet_rate("20k"), Some(20e3));
        assert_eq!(parse_packet_rate("14.88M"), Some(14.88e6));
        assert_eq!(parse_packet_rate("14.88m"), Some(14.88e6));
        assert_eq!(parse_packet_rate("40000"), Some(40e3));
        for bad in ["", "k", "x", "-1", "1e3", "NaN", "inf", "1 M", "99999999999999999999G"] {
            assert_eq!(parse_packet_rate(bad), None, "{bad}");
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
