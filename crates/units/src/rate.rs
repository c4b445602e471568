//! Rates: `10gbps`, `9.95Gb/s`, `100Mbit/s`, `40GbE`, `25g` (bits per
//! second) and `1.2GB/s`, `800MiB/s` (bytes per second). A unit is
//! required: a bare number could be bits, bytes or a link's Gbit/s.

/// The forms a rate in bits takes (`plan --link`, `replay --rate`), for `--help` and messages.
pub const RATE_FORMS: &str = "bits per second from 1 bps to 10 Tbit/s, a number and a unit such as 10gbps, \
     10Gb/s, 100Mbit/s, 40GbE or 25g (a bare number is refused: bits or bytes must be said)";

/// The forms of a rate that may also be in bytes (`disk-bench --rate`).
pub const BYTE_RATE_FORMS: &str = "bits per second from 1 bps to 10 Tbit/s, a number and a unit such as 10gbps, \
     10Gb/s, 100Mbit/s, 40GbE or 25g, or bytes per second such as 1.2GB/s or 800MiB/s \
     (a bare number is refused: bits or bytes must be said)";

/// The highest rate: 10 Tbit/s (anything above is a typo).
const MAX_BPS: f64 = 1e13;

/// A parsed rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Bits per second.
    pub bits_per_s: f64,
    /// The unit said bytes (`B/s`, `Bps`): an option whose rate is a link's refuses it.
    pub in_bytes: bool,
}

impl Rate {
    /// Bytes per second.
    pub fn bytes_per_s(self) -> f64 {
        self.bits_per_s / 8.0
    }
}

/// Why a rate was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateError {
    /// Not a number and a unit of [`BYTE_RATE_FORMS`].
    Form,
    /// A number without a unit.
    NoUnit,
    /// Below 1 bit/s or above 10 Tbit/s.
    Range,
    /// In bytes where the option takes bits only (see [`parse_bit_rate`]).
    Bytes,
}

/// A decimal prefix, of either case (nobody means millibits): k, M, G, T.
fn decimal(p: &str) -> Option<f64> {
    match p.to_ascii_lowercase().as_str() {
        "" => Some(1.0),
        "k" => Some(1e3),
        "m" => Some(1e6),
        "g" => Some(1e9),
        "t" => Some(1e12),
        _ => None,
    }
}

/// Parses a rate: digits with an optional fraction, blanks allowed before
/// the unit. Bits: a decimal prefix of either case and `bps`, `bit/s`,
/// `bits/s`, `bit`, `b/s` or `b` (a small b), `GbE` after G, or the prefix
/// alone (`25g`). Bytes: a decimal (`GB`) or binary (`GiB`) prefix and `B/s`
/// or `Bps` (a capital B). Case matters only for b against B.
pub fn parse_rate(s: &str) -> Result<Rate, RateError> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim_start();
    if num.is_empty() || num.matches('.').count() > 1 || num == "." {
        return Err(RateError::Form);
    }
    let v: f64 = num.parse().map_err(|_| RateError::Form)?;
    if unit.is_empty() {
        return Err(RateError::NoUnit);
    }
    let bytes = unit.strip_suffix("B/s").or_else(|| unit.strip_suffix("Bps")).and_then(|p| match p {
        "Ki" => Some(1024.0),
        "Mi" => Some(1024.0 * 1024.0),
        "Gi" => Some(1024.0f64.powi(3)),
        "Ti" => Some(1024.0f64.powi(4)),
        p => decimal(p),
    });
    let lower = unit.to_ascii_lowercase();
    let bits = || {
        // `Bps`/`B/s` are bytes, handled above; the rest by their lower-case letters.
        if lower.ends_with("be") {
            // Ethernet: 10GbE, 10GBE, 100MbE.
            return decimal(&lower[..lower.len() - 2]).filter(|&m| m > 1.0);
        }
        if unit.ends_with('B') {
            return None;
        }
        let p = ["bits/s", "bit/s", "bps", "bits", "bit", "b/s", "b"]
            .iter()
            .find_map(|u| lower.strip_suffix(u))
            .unwrap_or(&lower);
        decimal(p).filter(|&m| m > 1.0 || p.len() < lower.len())
    };
    let (bps, in_bytes) = match bytes {
        Some(m) => (v * m * 8.0, true),
        None => (v * bits().ok_or(RateError::Form)?, false),
    };
    if !bps.is_finite() || !(1.0..=MAX_BPS).contains(&bps) {
        return Err(RateError::Range);
    }
    Ok(Rate { bits_per_s: bps, in_bytes })
}

/// [`parse_rate`] for an option whose rate is in bits (a link's, a sending
/// rate): a rate in bytes is refused with [`RateError::Bytes`]. Bits per second.
pub fn parse_bit_rate(s: &str) -> Result<f64, RateError> {
    match parse_rate(s)? {
        Rate { in_bytes: true, .. } => Err(RateError::Bytes),
        r => Ok(r.bits_per_s),
    }
}

/// The one sentence for a rate `input` of option `name` that [`parse_rate`]
/// or [`parse_bit_rate`] refused; `bytes_too` when the option takes bytes.
pub fn rate_error(name: &str, input: &str, e: RateError, bytes_too: bool) -> String {
    let forms = if bytes_too { BYTE_RATE_FORMS } else { RATE_FORMS };
    let why = match e {
        RateError::Form => "it is not a rate",
        RateError::NoUnit => "it has no unit",
        RateError::Range => "it is out of range",
        RateError::Bytes => "it is in bytes (capital B) and this rate is in bits",
    };
    format!("{name}: invalid rate '{input}': {why}; give {forms}")
}

/// Bits per second in decimal units (`999 bit/s`, `1.00 kbit/s`, `2.50 Mbit/s`), each in the
/// next unit up once it would show 1000 of its own: 999,995 bit/s is 1.00 Mbit/s, not
/// 1000.00 kbit/s.
pub fn format_bit_rate(bits: f64) -> String {
    if bits.round() < 1000.0 {
        return format!("{bits:.0} bit/s");
    }
    let units = [(1e3, "kbit/s"), (1e6, "Mbit/s"), (1e9, "Gbit/s")];
    let mut at = 0;
    while at + 1 < units.len() && (bits / units[at].0 * 100.0).round() >= 100_000.0 {
        at += 1;
    }
    format!("{:.2} {}", bits / units[at].0, units[at].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(s: &str) -> Option<f64> {
        parse_rate(s).ok().map(|r| r.bits_per_s)
    }

    #[test]
    fn bits_as_written() {
        for (s, bps) in [
            ("10g", 10e9),
            ("10G", 10e9),
            ("40G", 40e9),
            ("2.5g", 2.5e9),
            ("100m", 100e6),
            ("100M", 100e6),
            ("1t", 1e12),
            ("5gbps", 5e9),
            ("5Gbps", 5e9),
            ("10gbps", 10e9),
            ("9.95gbps", 9.95e9),
            ("9.95 Gb/s", 9.95e9),
            ("10Gb/s", 10e9),
            ("10mb/s", 10e6),
            ("10Gbit/s", 10e9),
            ("10 GBit/s", 10e9),
            ("10gbit/s", 10e9),
            ("100Mbit/s", 100e6),
            ("100mbit", 100e6),
            ("1.5gbit", 1.5e9),
            ("800kbit/s", 8e5),
            ("40kbps", 40e3),
            ("10Gb", 10e9),
            ("10mb", 10e6),
            ("10GbE", 10e9),
            ("10GBE", 10e9),
            ("40GbE", 40e9),
            ("10gbe", 10e9),
            ("64000bps", 64e3),
            ("1000000000bps", 1e9),
        ] {
            assert_eq!(bits(s), Some(bps), "{s}");
            assert_eq!(parse_bit_rate(s), Ok(bps), "{s}");
        }
    }

    #[test]
    fn bytes_as_written() {
        let close =
            |s: &str, b: f64| parse_rate(s).is_ok_and(|r| r.in_bytes && (r.bytes_per_s() - b).abs() <= 1e-9 * b);
        assert!(close("1.2GB/s", 1.2e9));
        assert!(close("1GiB/s", 1073741824.0));
        assert!(close("800MiB/s", 800.0 * 1048576.0));
        assert!(close("500MBps", 5e8));
        assert_eq!(parse_bit_rate("10GB/s"), Err(RateError::Bytes));
    }

    #[test]
    fn refused_forms() {
        for bad in [
            "", "gbps", "g", "fast", "10x", "5 gigs", "10 gigs", "5gigs", "5xbps", "5gbpss", "1e3", "1e3gbps", ".",
            "nan", "NaNgbps", "-1gbps", "-5gbps", "1.2GB", "10 MB", "1..2gbps",
        ] {
            assert_eq!(parse_rate(bad), Err(RateError::Form), "{bad:?}");
        }
        for bare in ["10", "64000", "1000000000", "2.5", "0"] {
            assert_eq!(parse_rate(bare), Err(RateError::NoUnit), "{bare}");
        }
        for out in ["0g", "0.1bps", "99tbps", "100000tbps", "0gbps"] {
            assert_eq!(parse_rate(out), Err(RateError::Range), "{out}");
        }
    }

    #[test]
    fn the_sentence_names_the_option_the_input_and_the_forms() {
        let m = rate_error("--rate", "5gigs", RateError::Form, false);
        assert_eq!(m, format!("--rate: invalid rate '5gigs': it is not a rate; give {RATE_FORMS}"));
        let m = rate_error("--link", "10", RateError::NoUnit, false);
        assert!(m.contains("no unit") && m.contains("bits per second") && m.contains("10gbps") && m.contains("bytes"));
        assert!(rate_error("--rate", "1", RateError::NoUnit, true).contains("1.2GB/s"));
        assert!(RATE_FORMS.contains("from 1 bps to 10 Tbit/s"));
    }
}
