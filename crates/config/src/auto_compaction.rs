//! `--auto-compaction-retention` read as etcd 3.5 reads it (`parseCompactionRetention`
//! in embed/etcd.go), with its `--auto-compaction-mode`.
//!
//! - A plain non-negative integer (Go's `strconv.Atoi`) is hours in `periodic` mode and
//!   revisions in `revision` mode.
//! - Anything else is a Go duration (`5m`, `1h30m`, `0.5h`, `90s`); in `revision` mode
//!   its nanosecond count becomes the number of revisions (etcd's quirk, kept).
//! - Empty means `0`; a retention of zero turns auto-compaction off.
//!
//! Where etcd is clumsy oxcd refuses instead: a negative duration (etcd 3.5 starts with
//! it, then compacts to the newest revision in a busy loop, or fails every time in
//! revision mode), and a number of hours past what a Go duration holds (etcd wraps it
//! around).

use std::time::Duration;

use oxcd_go::duration as go_duration;

/// What auto-compaction keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoCompaction {
    /// `periodic`: history of about this long.
    Periodic(Duration),
    /// `revision`: this many revisions below the current one.
    Revision(i64),
}

/// How often revision mode looks at the current revision (etcd's `revInterval`).
pub const REVISION_INTERVAL: Duration = Duration::from_secs(5 * 60);

const HOUR_NANOS: i64 = 3_600_000_000_000;

/// The auto-compaction that `mode` and `retention` ask for (None: off), or etcd's error.
pub fn parse(mode: &str, retention: &str) -> Result<Option<AutoCompaction>, String> {
    let text = if retention.is_empty() { "0" } else { retention };
    let nanos = match oxcd_go::strconv::parse_int(text, 10, 64).ok() {
        Some(n) if n >= 0 => match mode {
            "revision" => n,
            "periodic" => n.checked_mul(HOUR_NANOS).ok_or_else(|| {
                format!(
                    "error parsing CompactionRetention: {n} hours is more than a Go duration holds (etcd 3.5 wraps it around; oxcd refuses it)"
                )
            })?,
            _ => 0,
        },
        _ => go_duration::parse(text)
            .map_err(|e| format!("error parsing CompactionRetention: {e}"))?,
    };
    if nanos == 0 {
        return Ok(None);
    }
    let compaction = match mode {
        "periodic" => AutoCompaction::Periodic(Duration::from_nanos(nanos.unsigned_abs())),
        "revision" => AutoCompaction::Revision(nanos),
        // etcd's v3compactor.New (`%s` of the mode).
        other => return Err(format!("unsupported compaction mode {other}")),
    };
    if nanos < 0 {
        return Err(format!(
            "error parsing CompactionRetention: retention {text:?} is negative (etcd 3.5 accepts it, then compacts without pause or fails every time; oxcd refuses it)"
        ));
    }
    Ok(Some(compaction))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    type Parsed = Result<Option<AutoCompaction>, String>;

    fn periodic(secs: u64) -> Parsed {
        Ok(Some(AutoCompaction::Periodic(Duration::from_secs(secs))))
    }

    fn revisions(n: i64) -> Parsed {
        Ok(Some(AutoCompaction::Revision(n)))
    }

    fn failed(why: &str) -> Parsed {
        Err(format!("error parsing CompactionRetention: {why}"))
    }

    /// etcd's rules, case by case (the errors as etcd 3.5.16 prints them).
    #[test]
    fn retention_as_etcd_reads_it() {
        let cases: &[(&str, &str, Parsed)] = &[
            ("periodic", "0", Ok(None)),
            ("periodic", "", Ok(None)),
            ("periodic", "0s", Ok(None)),
            ("periodic", "0h0m", Ok(None)),
            ("revision", "0", Ok(None)),
            ("periodic", "1", periodic(3600)),
            ("periodic", "+2", periodic(7200)),
            ("periodic", "007", periodic(7 * 3600)),
            ("periodic", "72", periodic(72 * 3600)),
            ("periodic", "5m", periodic(300)),
            ("periodic", "1h30m", periodic(5400)),
            ("periodic", "0.5h", periodic(1800)),
            ("periodic", "90s", periodic(90)),
            ("periodic", "2s", periodic(2)),
            (
                "periodic",
                "1.5s",
                Ok(Some(AutoCompaction::Periodic(Duration::from_millis(1500)))),
            ),
            ("revision", "1000", revisions(1000)),
            ("revision", "10", revisions(10)),
            // etcd's quirk: a duration in revision mode is its nanosecond count.
            ("revision", "5m", revisions(300 * SEC as i64)),
            ("revision", "1ns", revisions(1)),
            // An integer with no mode to interpret it is nothing (embed API only).
            ("", "5", Ok(None)),
            ("", "0", Ok(None)),
            (
                "periodic",
                "-1",
                failed(r#"time: missing unit in duration "-1""#),
            ),
            (
                "revision",
                "-1",
                failed(r#"time: missing unit in duration "-1""#),
            ),
            ("periodic", "abc", failed(r#"time: invalid duration "abc""#)),
            (
                "periodic",
                "1x",
                failed(r#"time: unknown unit "x" in duration "1x""#),
            ),
            (
                "periodic",
                "1_000",
                failed(r#"time: unknown unit "_" in duration "1_000""#),
            ),
            ("periodic", " 1", failed(r#"time: invalid duration " 1""#)),
            (
                "periodic",
                "99999999999999999999",
                failed(r#"time: invalid duration "99999999999999999999""#),
            ),
            ("", "1h", Err("unsupported compaction mode ".into())),
        ];
        for (mode, text, want) in cases {
            assert_eq!(&parse(mode, text), want, "mode {mode:?} retention {text:?}");
        }
    }

    #[test]
    fn negative_or_overflowing_retention_is_refused() {
        for (mode, text) in [
            ("periodic", "-1h"),
            ("revision", "-5m"),
            ("periodic", "3000000"),
        ] {
            let e = parse(mode, text).expect_err(text);
            assert!(
                e.starts_with("error parsing CompactionRetention: ") && e.contains("oxcd refuses"),
                "{text}: {e}"
            );
        }
        assert_eq!(parse("periodic", "2562047"), periodic(2_562_047 * 3600));
    }
}
