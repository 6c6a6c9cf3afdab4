//! Go's ways of printing sizes and durations, which etcdctl's output uses.

use std::time::Duration;

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
pub fn go_duration(d: Duration) -> String {
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

/// Parses a Go duration as flags take it (`2s`, `500ms`, `1m30s`).
pub fn parse_go_duration(v: &str) -> Option<Duration> {
    if v == "0" {
        return Some(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = v;
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        total += num
            * match &rest[..u] {
                "ns" => 1e-9,
                "us" | "µs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return None,
            };
        rest = &rest[u..];
    }
    if v.is_empty() {
        None
    } else {
        Some(Duration::from_secs_f64(total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_go() {
        assert_eq!(bytes(20_480), "20 kB");
        assert_eq!(bytes(1_056_768), "1.1 MB");
        assert_eq!(bytes(573_440), "573 kB");
        assert_eq!(bytes(5), "5 B");
        assert_eq!(go_duration(Duration::from_nanos(1_130_610)), "1.13061ms");
        assert_eq!(go_duration(Duration::from_nanos(918_843)), "918.843µs");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_secs(7200)), "2h0m0s");
    }
}
