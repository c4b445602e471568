//! Nanosecond UTC timestamps as text (file names, logs, reports).

/// `20261122T101500.123456789Z` for a nanosecond UTC timestamp.
pub fn utc_compact(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}.{:09}Z", ns % 1_000_000_000)
}

/// `2026-11-22T10:15:00.123456789Z` (RFC 3339) for a nanosecond UTC timestamp.
pub fn utc_rfc3339(ns: u64) -> String {
    let secs = ns / 1_000_000_000;
    let (y, mo, d, h, mi, s) = civil(secs);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:09}Z", ns % 1_000_000_000)
}

/// `1700000000.000000001`: epoch seconds with nanoseconds, as `--from`/`--to` and the API's
/// `from`/`to` take them.
pub fn epoch_text(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Seconds since the epoch to (year, month, day, hour, minute, second), UTC
/// (Howard Hinnant's days-to-civil algorithm).
fn civil(secs: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, (rem / 3600) as u32, (rem % 3600 / 60) as u32, (rem % 60) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        // 2026-11-22T10:15:00Z = 1795342500
        let ns = 1_795_342_500_000_000_000 + 123_456_789;
        assert_eq!(utc_compact(ns), "20261122T101500.123456789Z");
        assert_eq!(utc_rfc3339(ns), "2026-11-22T10:15:00.123456789Z");
        assert_eq!(utc_rfc3339(0), "1970-01-01T00:00:00.000000000Z");
        // A leap day and the last second of a year.
        assert_eq!(utc_rfc3339(1_709_164_800_000_000_000), "2024-02-29T00:00:00.000000000Z");
        assert_eq!(utc_rfc3339(1_735_689_599_999_999_999), "2024-12-31T23:59:59.999999999Z");
    }
}
