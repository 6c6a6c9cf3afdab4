//! Printing values as Go does, because etcdctl's output is Go's: `strconv.Quote` (`%q`),
//! `encoding/json` strings, `%016x`, `time.Duration.String()`, go-humanize's byte
//! sizes, and capnslog's timestamp.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use oxcd_client::go_quote::quote;

/// [`quote`] of a string.
pub fn quote_str(s: &str) -> String {
    quote(s.as_bytes())
}

/// Go's text for an `*os.PathError`: `<op> <path>: <errno text>` (lower case, no
/// "(os error N)").
pub fn path_error(op: &str, path: &str, e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    let lower: String = chars
        .next()
        .map(|c| c.to_lowercase().chain(chars).collect())
        .unwrap_or_default();
    format!("{op} {path}: {lower}")
}

/// A JSON string as Go's `encoding/json` writes it (HTML-safe: `<`, `>`, `&` escaped).
pub fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go's `%016x` of an int64 (how etcdctl prints a lease id): zero-padded to 16
/// characters, a negative number as `-` and its magnitude (`-000000000000001`).
pub fn hex016(n: i64) -> String {
    if n < 0 {
        format!("-{:015x}", n.unsigned_abs())
    } else {
        format!("{n:016x}")
    }
}

/// go-humanize's `Bytes`: SI units, one decimal below 10.
pub fn bytes(n: u64) -> String {
    const SIZES: [&str; 7] = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    if n < 10 {
        return format!("{n} B");
    }
    let e = (n as f64).log(1000.0).floor();
    let suffix = SIZES[(e as usize).min(SIZES.len() - 1)];
    let val = ((n as f64) / 1000f64.powf(e) * 10.0 + 0.5).floor() / 10.0;
    if val < 10.0 {
        format!("{val:.1} {suffix}")
    } else {
        format!("{val:.0} {suffix}")
    }
}

/// Go's `time.Duration.String()`.
pub fn duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    let frac = |v: u128, unit: u128, digits: usize| -> String {
        let whole = v / unit;
        let rest = v % unit;
        if rest == 0 {
            return whole.to_string();
        }
        let s = format!("{rest:0digits$}");
        format!("{whole}.{}", s.trim_end_matches('0'))
    };
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    if ns < 1_000_000 {
        return format!("{}µs", frac(ns, 1_000, 3));
    }
    if ns < 1_000_000_000 {
        return format!("{}ms", frac(ns, 1_000_000, 6));
    }
    let total_s = ns / 1_000_000_000;
    let sub = ns % 1_000_000_000;
    let (h, m, s) = (total_s / 3600, total_s % 3600 / 60, total_s % 60);
    let secs = frac(s * 1_000_000_000 + sub, 1_000_000_000, 9);
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m{secs}s"),
        (h, m) => format!("{h}h{m}m{secs}s"),
    }
}

/// The time as capnslog stamps its lines (`2006-01-02 15:04:05.000000`), in UTC.
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

    #[test]
    fn quotes_like_go() {
        assert_eq!(quote(b"a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote(b"\x00\x07\n\x7f"), r#""\x00\a\n\x7f""#);
        assert_eq!(quote(&[0xff, b'a']), r#""\xffa""#);
        assert_eq!(quote("héllo ✓".as_bytes()), "\"héllo ✓\"");
        assert_eq!(quote("\u{a0}\u{feff}".as_bytes()), r#""\u00a0\ufeff""#);
        assert_eq!(json_string("<a&b>\u{1}"), r#""\u003ca\u0026b\u003e\u0001""#);
    }

    #[test]
    fn sizes_and_durations_like_go() {
        assert_eq!(bytes(20_480), "20 kB");
        assert_eq!(bytes(1_056_768), "1.1 MB");
        assert_eq!(bytes(573_440), "573 kB");
        assert_eq!(bytes(5), "5 B");
        assert_eq!(duration(Duration::from_nanos(1_130_610)), "1.13061ms");
        assert_eq!(duration(Duration::from_nanos(918_843)), "918.843µs");
        assert_eq!(duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(duration(Duration::from_secs(7200)), "2h0m0s");
    }

    #[test]
    fn hex_like_go() {
        assert_eq!(hex016(0x1234), "0000000000001234");
        assert_eq!(hex016(-1), "-000000000000001");
        assert_eq!(hex016(-0x7fff_ffff_ffff_ffff), "-7fffffffffffffff");
        assert_eq!(hex016(i64::MIN), "-8000000000000000");
    }

    #[test]
    fn capnslog_time() {
        let t = UNIX_EPOCH + Duration::from_micros(1_795_784_399_381_487);
        assert_eq!(log_timestamp(t), "2026-11-27 12:59:59.381487");
    }
}
