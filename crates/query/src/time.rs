//! Times a user gives `--from`/`--to`: RFC 3339 (`2026-11-22T10:15:00.5Z`,
//! `2026-11-22 10:15:00+01:00`, a date alone means its midnight UTC),
//! epoch seconds with an optional fraction (`1763806500.123456789`), or a
//! time relative to now (`now`, `10m ago`, `2h ago`, `1.5d ago`: a duration
//! in the grammar of every duration option, [`wv_units::DURATION_FORMS`], then `ago`).

/// A time that could not be understood, or one outside what a store can
/// hold (1970 to 2554: nanoseconds since the epoch in a u64); the message is
/// one sentence.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub struct TimeError {
    pub input: String,
    pub reason: String,
    /// The form was understood but the time is before 1970 or after 2554.
    pub out_of_range: bool,
}

impl std::fmt::Display for TimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.out_of_range {
            write!(
                f,
                "time '{}' is out of range: {}; times go from 1970-01-01T00:00:00Z to 2554-07-21T23:34:33Z",
                self.input, self.reason
            )
        } else {
            write!(
                f,
                "cannot read time '{}': {}; use RFC 3339 (2026-11-22T10:15:00Z), epoch seconds (1763806500.25) or a relative time (10m ago)",
                self.input, self.reason
            )
        }
    }
}

const BEFORE_1970: &str = "it lies before 1970";
const AFTER_2554: &str = "it lies after 2554";

/// Whether `ts` lies before the end `to` of a time range `[from, to)`.
/// `u64::MAX`, the end of a range given no end, lets every time in, that
/// one too: a reader stores a timestamp past 2554-07-21 (the last
/// nanosecond a u64 holds) as `u64::MAX`, and such a packet must be
/// counted, not dropped without a word.
#[inline]
pub fn before_end(ts: u64, to: u64) -> bool {
    ts < to || to == u64::MAX
}

/// Whether things stamped from `first` to `last` (a file's, an index
/// block's span) may hold a time of the range `[from, to)` (see [`before_end`]).
#[inline]
pub fn overlaps(first: u64, last: u64, from: u64, to: u64) -> bool {
    last >= from && before_end(first, to)
}

/// Parses `s` into nanoseconds since the epoch; `now_ns` anchors relative times.
pub fn parse_time(s: &str, now_ns: u64) -> Result<u64, TimeError> {
    let err = |reason: &str| TimeError { input: s.to_string(), reason: reason.to_string(), out_of_range: false };
    let range = |reason: &str| TimeError { input: s.to_string(), reason: reason.to_string(), out_of_range: true };
    let t = s.trim();
    if t.is_empty() {
        return Err(err("it is empty"));
    }
    if t.eq_ignore_ascii_case("now") {
        return Ok(now_ns);
    }
    if let Some(rest) = t.strip_suffix("ago") {
        let d = match wv_units::parse_duration(rest.trim()) {
            Ok(d) => d.as_nanos() as u64,
            Err(wv_units::DurationError::TooLong) => {
                return Err(range("the duration is longer than the time since 1970"))
            }
            Err(wv_units::DurationError::Form) => {
                return Err(err(&format!("the relative time is not a duration ({})", wv_units::DURATION_FORMS)))
            }
        };
        return now_ns.checked_sub(d).ok_or_else(|| range(BEFORE_1970));
    }
    // A negative epoch (`-5`, `-1.5`) is a number, but before 1970.
    if let Some(neg) = t.strip_prefix('-') {
        if !neg.is_empty() && neg.bytes().all(|b| b.is_ascii_digit() || b == b'.') && neg.bytes().any(|b| b != b'.') {
            return Err(range(BEFORE_1970));
        }
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return match parse_epoch(t) {
            Some(Some(ns)) => Ok(ns),
            Some(None) => Err(range(AFTER_2554)),
            None => Err(err("the epoch seconds are not a number")),
        };
    }
    parse_rfc3339(t)
        .map_err(|reason| if reason == BEFORE_1970 || reason == AFTER_2554 { range(reason) } else { err(reason) })
}

/// Epoch seconds with an optional fraction: `None` if not a number,
/// `Some(None)` if past what a u64 of nanoseconds holds.
fn parse_epoch(t: &str) -> Option<Option<u64>> {
    let (int, frac) = match t.split_once('.') {
        Some((i, f)) => (i, f),
        None => (t, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let frac = parse_frac(frac)?;
    let secs: u64 = if int.is_empty() {
        0
    } else {
        match int.parse() {
            Ok(v) => v,
            Err(_) => return Some(None), // all digits: too many of them
        }
    };
    Some(secs.checked_mul(1_000_000_000).and_then(|ns| ns.checked_add(frac)))
}

/// Parses decimal fraction digits into nanoseconds (digits past the ninth are dropped).
fn parse_frac(f: &str) -> Option<u64> {
    if !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut ns = 0u64;
    for i in 0..9 {
        ns = ns * 10 + f.as_bytes().get(i).map_or(0, |b| u64::from(b - b'0'));
    }
    Some(ns)
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(y: u32, m: u32) -> u32 {
    match m {
        2 if y.is_multiple_of(4) && (!y.is_multiple_of(100) || y.is_multiple_of(400)) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Why a day does not exist, per month (the date would otherwise roll over:
/// February 30 into March 2).
const NO_SUCH_DAY: [&str; 12] = [
    "January has 31 days",
    "February has 28 days (29 in leap years)",
    "March has 31 days",
    "April has 30 days",
    "May has 31 days",
    "June has 30 days",
    "July has 31 days",
    "August has 31 days",
    "September has 30 days",
    "October has 31 days",
    "November has 30 days",
    "December has 31 days",
];

fn num(s: &str, len: usize) -> Option<u32> {
    (s.len() == len && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
}

fn parse_rfc3339(t: &str) -> Result<u64, &'static str> {
    let bad = "it is not RFC 3339";
    let date = t.get(..10).ok_or(bad)?;
    let (y, m, d) = (
        num(date.get(0..4).ok_or(bad)?, 4).ok_or(bad)?,
        num(date.get(5..7).ok_or(bad)?, 2).ok_or(bad)?,
        num(date.get(8..10).ok_or(bad)?, 2).ok_or(bad)?,
    );
    if &date[4..5] != "-" || &date[7..8] != "-" {
        return Err(bad);
    }
    if !(1..=12).contains(&m) {
        return Err("the month is not 01 to 12");
    }
    if d == 0 || d > days_in_month(y, m) {
        return Err(NO_SUCH_DAY[m as usize - 1]);
    }
    let days = days_from_civil(i64::from(y), m, d);
    let mut secs = days * 86_400;
    let mut frac_ns = 0u64;
    let rest = &t[10..];
    if !rest.is_empty() {
        let rest = rest.strip_prefix(['T', 't', ' ']).ok_or(bad)?;
        let (h, mi, s) = (
            num(rest.get(0..2).ok_or(bad)?, 2).ok_or(bad)?,
            num(rest.get(3..5).ok_or(bad)?, 2).ok_or(bad)?,
            num(rest.get(6..8).ok_or(bad)?, 2).ok_or(bad)?,
        );
        if &rest[2..3] != ":" || &rest[5..6] != ":" {
            return Err(bad);
        }
        if h > 23 || mi > 59 || s > 60 {
            return Err("the time of day is out of range");
        }
        secs += i64::from(h * 3600 + mi * 60 + s);
        let mut tz = &rest[8..];
        if let Some(f) = tz.strip_prefix('.') {
            let end = f.find(|c: char| !c.is_ascii_digit()).unwrap_or(f.len());
            if end == 0 {
                return Err(bad);
            }
            frac_ns = parse_frac(&f[..end]).ok_or(bad)?;
            tz = &f[end..];
        }
        match tz {
            "Z" | "z" => {}
            _ => {
                let sign = match tz.get(..1) {
                    Some("+") => 1,
                    Some("-") => -1,
                    _ => return Err("the time zone is missing (add Z or +HH:MM)"),
                };
                let (oh, om) =
                    (num(tz.get(1..3).ok_or(bad)?, 2).ok_or(bad)?, num(tz.get(4..6).ok_or(bad)?, 2).ok_or(bad)?);
                if tz.len() != 6 || &tz[3..4] != ":" {
                    return Err(bad);
                }
                if oh > 23 || om > 59 {
                    return Err("the time zone offset is out of range (-23:59 to +23:59)");
                }
                secs -= sign * i64::from(oh * 3600 + om * 60);
            }
        }
    }
    if secs < 0 {
        return Err(BEFORE_1970);
    }
    (secs as u64).checked_mul(1_000_000_000).and_then(|ns| ns.checked_add(frac_ns)).ok_or(AFTER_2554)
}

#[cfg(test)]
mod tests {
    use super::*;
    const NOW: u64 = 1_763_806_500_000_000_000; // 2025-11-22T10:15:00Z

    #[test]
    fn rfc3339() {
        assert_eq!(parse_time("2025-11-22T10:15:00Z", 0), Ok(NOW));
        assert_eq!(parse_time("2025-11-22T11:15:00+01:00", 0), Ok(NOW));
        assert_eq!(parse_time("2025-11-22 10:15:00.5z", 0), Ok(NOW + 500_000_000));
        assert_eq!(parse_time("2025-11-22T10:15:00.123456789123Z", 0), Ok(NOW + 123_456_789));
        assert_eq!(parse_time("1970-01-01", 0), Ok(0));
        assert_eq!(parse_time("2000-02-29T00:00:00Z", 0), Ok(951_782_400_000_000_000));
        assert!(parse_time("2025-11-22T10:15:00", 0).is_err());
        assert_eq!(parse_time("2025-11-23T10:14:00+23:59", 0), Ok(NOW));
        for tz in ["+99:99", "+00:60", "-24:00"] {
            assert!(parse_time(&format!("2025-11-22T10:15:00{tz}"), 0).is_err(), "{tz}");
        }
        assert!(parse_time("2025-13-01T00:00:00Z", 0).is_err());
        assert!(parse_time("yesterday", 0).is_err());
    }

    #[test]
    fn epoch_and_relative() {
        assert_eq!(parse_time("1763806500", 0), Ok(NOW));
        assert_eq!(parse_time("1763806500.25", 0), Ok(NOW + 250_000_000));
        assert_eq!(parse_time("now", NOW), Ok(NOW));
        assert_eq!(parse_time("10m ago", NOW), Ok(NOW - 600_000_000_000));
        assert_eq!(parse_time("2h ago", NOW), Ok(NOW - 7_200_000_000_000));
        assert_eq!(parse_time("1.5 s ago", NOW), Ok(NOW - 1_500_000_000));
        assert!(parse_time("10 parsecs ago", NOW).is_err());
        let e = parse_time("1.2.3", NOW).unwrap_err();
        assert!(e.to_string().starts_with("cannot read time '1.2.3'"));
    }

    #[test]
    fn fuzz_regressions() {
        // Nanoseconds past u64 (year > 2554) overflowed.
        assert!(parse_time("9999-12-31T23:59:59.999999999Z", 0).is_err());
        assert!(parse_time("2554-07-21T23:34:33.709551615Z", 0).is_ok());
        assert!(parse_time("2554-07-21T23:34:33.709551616Z", 0).is_err());
        // A multi-byte character across the year's end sliced mid-character.
        assert!(parse_time("202\u{20ac}-11-22", 0).is_err());
        assert!(parse_time("2\u{e9}\u{e9}\u{e9}\u{e9}", 0).is_err());
    }

    #[test]
    fn days_that_do_not_exist_are_refused() {
        // February 30 became March 2.
        for d in [
            "2025-02-30",
            "2025-02-29T00:00:00Z",
            "2024-02-30",
            "2100-02-29",
            "2024-04-31",
            "2023-06-31T01:00:00Z",
            "2023-11-31",
        ] {
            let e = parse_time(d, 0).unwrap_err();
            assert!(!e.out_of_range && e.reason.contains(" has "), "{d}: {e}");
        }
        assert!(parse_time("2025-02-30", 0).unwrap_err().to_string().contains("February has 28 days"));
        for d in ["2024-02-29", "2000-02-29", "2023-12-31", "2023-01-31", "2023-04-30"] {
            assert!(parse_time(d, 0).is_ok(), "{d}");
        }
    }

    #[test]
    fn absurd_times_are_range_errors() {
        for t in [
            "99999999999999999999",
            "18446744073.709551616",
            "-5",
            "-1.5",
            "3000-01-01",
            "1000000 weeks ago",
            "1969-12-31T23:59:59Z",
        ] {
            let e = parse_time(t, NOW).unwrap_err();
            assert!(e.out_of_range, "{t}: {e}");
            assert!(e.to_string().starts_with(&format!("time '{t}' is out of range")), "{e}");
            assert!(!e.to_string().contains("18446744073709"), "{e}");
        }
        assert!(!parse_time("-", NOW).unwrap_err().out_of_range);
        assert!(!parse_time("1.2.3", NOW).unwrap_err().out_of_range);
        assert_eq!(parse_time("18446744073.709551615", NOW), Ok(u64::MAX));
    }
}
