//! The time as capnslog (the logger of etcdctl's `pkg/flags` warnings about `ETCDCTL_*`
//! variables) stamps its lines: `2006-01-02 15:04:05.000000`, in UTC.
//!
//! Invariant: the civil date and time of the instant, microseconds truncated.

use std::time::{SystemTime, UNIX_EPOCH};

/// `now` as capnslog stamps it (`2026-11-27 12:59:59.381487`).
pub fn log_timestamp(now: SystemTime) -> String {
    let d = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (year, month, day, h, m, s) = crate::time::civil(d);
    format!(
        "{year:04}-{month:02}-{day:02} {h:02}:{m:02}:{s:02}.{:06}",
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
