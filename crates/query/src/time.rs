//! Times a user gives `--from`/`--to`: RFC 3339 (`2026-11-22T10:15:00.5Z`,
//! `2026-11-22 10:15:00+01:00`, a date alone means its midnight UTC),
//! epoch seconds with an optional fraction (`1763806500.123456789`), or a
//! time relative to now (`now`, `10m ago`, `2h ago`, `1.5d ago`; units
//! `ns us ms s m h d w`).

/// A time that could not be understood; the message is one sentence.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("cannot read time '{input}': {reason}; use RFC 3339 (2026-11-22T10:15:00Z), epoch seconds (1763806500.25) or a relative time (10m ago)")]
pub struct TimeError {
    pub input: String,
    pub reason: &'static str,
}

/// Parses `s` into nanoseconds since the epoch; `now_ns` anchors relative times.
pub fn parse_time(s: &str, now_ns: u64) -> Result<u64, TimeError> {
    let err = |reason| TimeError { input: s.to_string(), reason };
    let t = s.trim();
    if t.is_empty() {
        return Err(err("it is empty"));
    }
    if t.eq_ignore_ascii_case("now") {
        return Ok(now_ns);
    }
    if let Some(rest) = t.strip_suffix("ago") {
        let d = parse_duration(rest.trim()).ok_or_else(|| err("the relative time is not a number and a unit"))?;
        return now_ns.checked_sub(d).ok_or_else(|| err("it lies before 1970"));
    }
    if t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return parse_epoch(t).ok_or_else(|| err("the epoch seconds are not a number"));
    }
    parse_rfc3339(t).map_err(err)
}

fn parse_epoch(t: &str) -> Option<u64> {
    let (int, frac) = match t.split_once('.') {
        Some((i, f)) => (i, f),
        None => (t, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    let secs: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    secs.checked_mul(1_000_000_000)?.checked_add(parse_frac(frac)?)
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

/// `10m`, `1.5h`, `30 s`, `250ms` → nanoseconds.
fn parse_duration(s: &str) -> Option<u64> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = s.split_at(split);
    let unit = unit.trim();
    let mult: f64 = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" | "sec" | "secs" | "second" | "seconds" => 1e9,
        "m" | "min" | "mins" | "minute" | "minutes" => 60e9,
        "h" | "hour" | "hours" => 3600e9,
        "d" | "day" | "days" => 86400e9,
        "w" | "week" | "weeks" => 7.0 * 86400e9,
        _ => return None,
    };
    let n: f64 = num.parse().ok()?;
    let v = n * mult;
    (0.0..1.8e19).contains(&v).then_some(v as u64)
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
    if !(1..=12).contains(&m) || d == 0 || d > 31 {
        return Err("the date is out of range");
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
                secs -= sign * i64::from(oh * 3600 + om * 60);
            }
        }
    }
    if secs < 0 {
        return Err("it lies before 1970");
    }
    (secs as u64).checked_mul(1_000_000_000).and_then(|ns| ns.checked_add(frac_ns)).ok_or("it lies after 2554")
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
}
