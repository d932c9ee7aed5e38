//! Wall-clock time as people read it: Unix seconds now, and as UTC ISO 8601 (certificate
//! validity in `cert print`, `status` and the metrics' help).

/// The wall clock in Unix seconds (0 before 1970).
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `secs` (Unix seconds) as UTC ISO 8601, `YYYY-MM-DDTHH:MM:SSZ` (more digits for years past
/// 9999: a certificate may say "until `u64::MAX`").
pub(crate) fn utc(secs: u64) -> String {
    let (y, m, d) = civil_from_days(secs / 86_400);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// The proleptic Gregorian date of `days` after 1970-01-01: Howard Hinnant's
/// `civil_from_days` (<https://howardhinnant.github.io/date_algorithms.html>), for days ≥ 0.
pub(crate) fn civil_from_days(days: u64) -> (u64, u64, u64) {
    // Shift the epoch to 0000-03-01, so a leap day is the last day of its (March-based) year.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_known_dates() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(59), "1970-01-01T00:00:59Z");
        assert_eq!(utc(86_399), "1970-01-01T23:59:59Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(951_868_800), "2000-03-01T00:00:00Z");
        assert_eq!(utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(utc(1_800_000_000), "2027-01-15T08:00:00Z");
        assert_eq!(utc(4_107_542_399), "2100-02-28T23:59:59Z");
        assert_eq!(utc(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(utc(253_402_300_799), "9999-12-31T23:59:59Z");
        // Never panics, even at the end of time.
        assert!(utc(u64::MAX).ends_with("Z"));
    }

    /// Day by day against a plain count of years and month lengths, over 1970..2500.
    #[test]
    fn civil_from_days_matches_counting() {
        let (mut y, mut m, mut d) = (1970u64, 1u64, 1u64);
        for days in 0..(530 * 366) {
            assert_eq!(civil_from_days(days), (y, m, d), "{days}");
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let len = match m {
                2 if leap => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > len {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }
}
