//! Go's `time` formats as etcd's peers write them, in UTC: `time.RFC3339Nano` (what
//! `encoding/json` writes for a `time.Time`, e.g. the `Now` of etcd's `/raft/probing`
//! answer).
//!
//! Invariant: the civil date and time of the instant; RFC3339Nano's fraction drops its
//! trailing zeros, and the dot with them when nothing is left.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The civil date and time of `d` after the Unix epoch: year, month, day, hour, minute,
/// second.
pub fn civil(d: Duration) -> (i64, i64, i64, u64, u64, u64) {
    let secs = d.as_secs();
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, rem / 3600, rem % 3600 / 60, rem % 60)
}

/// `now` in `time.RFC3339Nano`, UTC (`2026-11-28T10:24:05.1234Z`).
pub fn rfc3339_nano(now: SystemTime) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (year, month, day, h, m, s) = civil(d);
    let mut fraction = format!(".{:09}", d.subsec_nanos());
    while fraction.ends_with('0') {
        fraction.pop();
    }
    if fraction == "." {
        fraction.clear();
    }
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}{fraction}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_go_does() {
        let at = |s, n| UNIX_EPOCH + Duration::new(s, n);
        // Values as Go's time.Unix(s, n).UTC().Format(time.RFC3339Nano) prints them.
        assert_eq!(rfc3339_nano(at(0, 0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_nano(at(1_795_854_245, 123_400_000)),
            "2026-11-28T08:24:05.1234Z"
        );
        assert_eq!(
            rfc3339_nano(at(951_782_400, 1)),
            "2000-02-29T00:00:00.000000001Z"
        );
    }
}
