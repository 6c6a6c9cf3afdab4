//! The time as capnslog (the logger of etcdctl's `pkg/flags` warnings about `ETCDCTL_*`
//! variables) stamps its lines: `2006-01-02 15:04:05.000000`, in UTC.
//!
//! Invariant: the civil date and time of the instant, microseconds truncated.

use std::time::{SystemTime, UNIX_EPOCH};

/// `now` as capnslog stamps it (`2026-11-27 12:59:59.381487`).
pub fn log_timestamp(now: SystemTime) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
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
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{:06}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn capnslog_time() {
        let t = UNIX_EPOCH + Duration::from_micros(1_795_784_399_381_487);
        assert_eq!(log_timestamp(t), "2026-11-27 12:59:59.381487");
        assert_eq!(log_timestamp(UNIX_EPOCH), "1970-01-01 00:00:00.000000");
    }
}
