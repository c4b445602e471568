//! Sizes in bytes: `4096`, `64K`, `1.5G`, `2TiB`, `1GB`; and their one formatter.

/// The forms a size takes, for `--help` and messages.
pub const SIZE_FORMS: &str =
    "bytes, or a number with K, M, G or T (binary: 1K is 1024 bytes; KiB.. also) or KB, MB, GB or TB (decimal), such as 4096, 64K or 1.5G";

/// Parses `4096`, `64K`, `4M`, `1.5G`, `2T` (binary multiples; `KiB`.. and the
/// decimal `KB`.. accepted; the unit's case does not matter). Sizes past 64
/// bits are refused.
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

/// The one sentence for a size `input` of option `name` that [`parse_size`] refused.
pub fn size_error(name: &str, input: &str) -> String {
    format!("{name} \"{input}\" is not a size: give {SIZE_FORMS}")
}

/// Bytes in binary units with two decimals (`512 B`, `64.00 MiB`, `1.50 GiB`):
/// the one formatter of every report and message.
pub fn format_bytes(b: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = b as f64;
    let mut i = 0;
    // By the value as shown: 1,048,575 B is 1.00 MiB, not 1024.00 KiB.
    while (v * 100.0).round() / 100.0 >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
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
    fn the_sentence_names_the_option_and_the_forms() {
        assert_eq!(size_error("--buffer", "lots"), format!("--buffer \"lots\" is not a size: give {SIZE_FORMS}"));
    }

    #[test]
    fn one_formatter() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(1_048_575), "1.00 MiB");
        assert_eq!(format_bytes(1_048_570), "1023.99 KiB");
        assert_eq!(format_bytes(1024), "1.00 KiB");
        assert_eq!(format_bytes(64 << 20), "64.00 MiB");
        assert_eq!(format_bytes(1 << 30), "1.00 GiB");
        assert_eq!(format_bytes(2 << 30), "2.00 GiB");
        assert_eq!(format_bytes(1536 << 20), "1.50 GiB");
        assert_eq!(format_bytes(u64::MAX), "16.00 EiB");
    }
}
