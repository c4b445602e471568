//! Durations: `30s`, `1.5h`, `100ms`, `2 weeks`; a bare number is seconds.

use std::time::Duration;

/// The forms a duration takes, for `--help` and messages (one sentence's tail).
pub const DURATION_FORMS: &str =
    "a number and a unit (ns, us, ms, s, m, h, d or w; a bare number is seconds), such as 30s, 1.5h or 100ms";

/// The longest duration: what a u64 of nanoseconds holds (about 584 years).
pub const MAX_DURATION_NS: u64 = u64::MAX;

/// Why a duration was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Not a number and a unit of [`DURATION_FORMS`].
    Form,
    /// Longer than [`MAX_DURATION_NS`].
    TooLong,
}

/// Nanoseconds in one unit, by every name the unit goes by. Units are
/// case-sensitive: `m` is minutes and `M` would be months to some.
fn unit_ns(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "" | "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
        "h" | "hour" | "hours" => 3_600_000_000_000,
        "d" | "day" | "days" => 86_400_000_000_000,
        "w" | "week" | "weeks" => 604_800_000_000_000,
        _ => return None,
    })
}

/// Parses a duration: digits with an optional fraction (`1.5`, `.5`), blanks
/// allowed before the unit, the unit one of [`DURATION_FORMS`]. Exact (no
/// floating point): `0.1s` is 100,000,000 ns; fraction digits below a
/// nanosecond are dropped.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult = unit_ns(unit.trim_start()).ok_or(DurationError::Form)?;
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(DurationError::Form);
    }
    // Past 39 digits u128 overflows; such a number is too long anyway.
    let int: u128 = if int.is_empty() { 0 } else { int.parse().map_err(|_| DurationError::TooLong)? };
    let mut frac_ns = 0u128;
    let mut scale = 1u128;
    for b in frac.bytes().take(18) {
        frac_ns = frac_ns * 10 + u128::from(b - b'0');
        scale *= 10;
    }
    let ns = int.checked_mul(mult).ok_or(DurationError::TooLong)? + frac_ns * mult / scale;
    let ns = u64::try_from(ns).map_err(|_| DurationError::TooLong)?;
    Ok(Duration::from_nanos(ns))
}

/// The one sentence for a duration `input` of option `name` that
/// [`parse_duration`] refused.
pub fn duration_error(name: &str, input: &str, e: &DurationError) -> String {
    match e {
        DurationError::Form => format!("{name} \"{input}\" is not a duration: give {DURATION_FORMS}"),
        DurationError::TooLong => {
            format!("{name} \"{input}\" is too long: a duration is at most 213503d (584 years)")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(s: &str) -> Result<u64, DurationError> {
        parse_duration(s).map(|d| d.as_nanos() as u64)
    }

    #[test]
    fn every_unit() {
        for (s, want) in [
            ("1ns", 1),
            ("1us", 1_000),
            ("1µs", 1_000),
            ("1ms", 1_000_000),
            ("1s", 1_000_000_000),
            ("1m", 60_000_000_000),
            ("1min", 60_000_000_000),
            ("1h", 3_600_000_000_000),
            ("1d", 86_400_000_000_000),
            ("1w", 604_800_000_000_000),
            ("2 weeks", 1_209_600_000_000_000),
            ("1.5 s", 1_500_000_000),
            ("30 seconds", 30_000_000_000),
        ] {
            assert_eq!(ns(s), Ok(want), "{s}");
        }
    }

    #[test]
    fn a_bare_number_is_seconds() {
        assert_eq!(ns("5"), Ok(5_000_000_000));
        assert_eq!(ns("0.25"), Ok(250_000_000));
        assert_eq!(ns("0"), Ok(0));
    }

    #[test]
    fn fractions_are_exact() {
        assert_eq!(ns("0.1s"), Ok(100_000_000));
        assert_eq!(ns(".5ms"), Ok(500_000));
        assert_eq!(ns("1.0000000001s"), Ok(1_000_000_000));
        assert_eq!(ns("1000ns"), Ok(1_000));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn refused_forms() {
        for bad in
            ["", "s", ".", "1..2s", "1.2.3", "-1s", "1e3", "1e3s", "1 fortnight", "1H", "NaN", "inf", "10 parsecs"]
        {
            assert_eq!(parse_duration(bad), Err(DurationError::Form), "{bad}");
        }
    }

    #[test]
    fn too_long_is_its_own_error() {
        assert_eq!(ns("18446744073.709551615"), Ok(u64::MAX));
        for long in ["18446744074", "213504d", "99999999999999999999999d", &"9".repeat(60)] {
            assert_eq!(parse_duration(long), Err(DurationError::TooLong), "{long}");
        }
    }

    #[test]
    fn the_sentence_names_the_option_and_the_forms() {
        let m = duration_error("--step", "1 fortnight", &DurationError::Form);
        assert_eq!(m, format!("--step \"1 fortnight\" is not a duration: give {DURATION_FORMS}"));
        assert!(duration_error("--step", "9999999d", &DurationError::TooLong).contains("at most 213503d"));
    }
}
