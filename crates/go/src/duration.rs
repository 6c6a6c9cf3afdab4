//! Go's `time.Duration` as text: `time.ParseDuration` with Go's error messages, and
//! `Duration.String()` (what etcd's zap logs and etcdctl print for durations).
//!
//! Invariant: the value is Go's, an `int64` of nanoseconds; anything Go refuses is
//! refused here with the same text (`time: invalid duration "x"`,
//! `time: missing unit in duration "1"`, `time: unknown unit "x" in duration "1x"`).

/// 2^63, the bound Go checks its unsigned accumulator against.
const TWO_63: u64 = 1 << 63;

/// Go's `time.ParseDuration`: signed, in nanoseconds.
pub fn parse(orig: &str) -> Result<i64, String> {
    let invalid = || format!("time: invalid duration {}", quote(orig));
    let mut s = orig;
    let mut neg = false;
    if let Some(c @ ('-' | '+')) = s.chars().next() {
        neg = c == '-';
        s = &s[1..];
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        let b = s.as_bytes();
        if !(b[0] == b'.' || b[0].is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (whole, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let pre = s.len() != before;
        let mut frac = (0u64, 1f64);
        let mut post = false;
        if let Some(r) = s.strip_prefix('.') {
            let before = r.len();
            let (f, scale, rest) = leading_fraction(r);
            frac = (f, scale);
            s = rest;
            post = s.len() != before;
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .bytes()
            .take_while(|c| !(*c == b'.' || c.is_ascii_digit()))
            .count();
        if unit_len == 0 {
            return Err(format!("time: missing unit in duration {}", quote(orig)));
        }
        let (unit_text, rest) = s.split_at(unit_len);
        s = rest;
        let unit: u64 = match unit_text {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(format!(
                    "time: unknown unit {} in duration {}",
                    quote(unit_text),
                    quote(orig)
                ));
            }
        };
        if whole > TWO_63 / unit {
            return Err(invalid());
        }
        let mut v = whole * unit;
        let (f, scale) = frac;
        if f > 0 {
            // As Go: the fraction in float64, truncated.
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > TWO_63 {
                return Err(invalid());
            }
        }
        total += v;
        if total > TWO_63 {
            return Err(invalid());
        }
    }
    if neg {
        return Ok((total as i64).wrapping_neg());
    }
    if total > TWO_63 - 1 {
        return Err(invalid());
    }
    Ok(total as i64)
}

/// Go's `leadingInt`: the leading digits and the rest; None on overflow.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    let mut x: u64 = 0;
    for c in s[..n].bytes() {
        if x > TWO_63 / 10 {
            return None;
        }
        x = x * 10 + u64::from(c - b'0');
        if x > TWO_63 {
            return None;
        }
    }
    Some((x, &s[n..]))
}

/// Go's `leadingFraction`: the digits after a dot as an integer and its scale (digits
/// past what fits are dropped), and the rest.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let n = s.bytes().take_while(u8::is_ascii_digit).count();
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    for c in s[..n].bytes() {
        if overflow {
            continue;
        }
        if x > (TWO_63 - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > TWO_63 {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[n..])
}

/// The `time` package's own quoting in its errors: `"`, the text with `"` and `\`
/// escaped, control and non-ASCII characters as `\x` bytes, `"`.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c < ' ' || !c.is_ascii() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

/// Go's `Duration.String()` of `nanos`: `0s`, `1.5s`, `2h0m0s`, `300ms`, `-1m0s`.
pub fn format(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let neg = nanos < 0;
    let u = nanos.unsigned_abs();
    let body = if u < 1_000_000_000 {
        let (scale, unit) = match u {
            0..1_000 => (1, "ns"),
            1_000..1_000_000 => (1_000, "\u{b5}s"),
            _ => (1_000_000, "ms"),
        };
        format!("{}{unit}", fixed(u, scale))
    } else {
        let hours = u / 3_600_000_000_000;
        let minutes = u / 60_000_000_000 % 60;
        let seconds = fixed(u % 60_000_000_000, 1_000_000_000);
        if hours > 0 {
            format!("{hours}h{minutes}m{seconds}s")
        } else if minutes > 0 {
            format!("{minutes}m{seconds}s")
        } else {
            format!("{seconds}s")
        }
    };
    if neg { format!("-{body}") } else { body }
}

/// [`format()`] of a std duration, as Go's `int64` nanoseconds (a longer one prints as
/// Go's longest, `2562047h47m16.854775807s`).
pub fn format_std(d: std::time::Duration) -> String {
    format(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// `v / scale` with the fraction's trailing zeros (and a bare dot) dropped.
fn fixed(v: u64, scale: u64) -> String {
    let whole = v / scale;
    let frac = v % scale;
    if frac == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn parses_as_go() {
        for (text, want) in [
            ("0", 0),
            ("-0", 0),
            ("+0", 0),
            ("5s", 5 * S),
            ("1h30m", 5400 * S),
            ("0.5h", 1800 * S),
            ("90s", 90 * S),
            ("1.5ms", 1_500_000),
            (".5s", S / 2),
            ("1.s", S),
            ("1m30.5s", 90 * S + S / 2),
            ("-1s", -S),
            ("+2m", 120 * S),
            ("1\u{b5}s", 1_000),
            ("1\u{3bc}s", 1_000),
            ("3us", 3_000),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("0.000000001s", 1),
            ("0.1234567891234s", 123_456_789),
        ] {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses_as_go() {
        for (text, why) in [
            ("", r#"time: invalid duration """#),
            ("-", r#"time: invalid duration "-""#),
            ("abc", r#"time: invalid duration "abc""#),
            (".s", r#"time: invalid duration ".s""#),
            ("-1", r#"time: missing unit in duration "-1""#),
            ("5", r#"time: missing unit in duration "5""#),
            ("1..s", r#"time: missing unit in duration "1..s""#),
            ("1.2.3s", r#"time: missing unit in duration "1.2.3s""#),
            ("1x", r#"time: unknown unit "x" in duration "1x""#),
            ("1sm", r#"time: unknown unit "sm" in duration "1sm""#),
            (
                "1é",
                r#"time: unknown unit "\xc3\xa9" in duration "1\xc3\xa9""#,
            ),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            ("99999999999h", r#"time: invalid duration "99999999999h""#),
            (
                "99999999999999999999s",
                r#"time: invalid duration "99999999999999999999s""#,
            ),
            ("--1s", r#"time: invalid duration "--1s""#),
            ("1s\"", r#"time: unknown unit "s\"" in duration "1s\"""#),
        ] {
            assert_eq!(parse(text), Err(why.to_string()), "{text}");
        }
    }

    #[test]
    fn formats_as_go() {
        for (nanos, want) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1\u{b5}s"),
            (2_200_000, "2.2ms"),
            (S, "1s"),
            (S + S / 2, "1.5s"),
            (90 * S, "1m30s"),
            (3600 * S, "1h0m0s"),
            (5400 * S + S / 4, "1h30m0.25s"),
            (-60 * S, "-1m0s"),
            (-3600 * S, "-1h0m0s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ] {
            assert_eq!(format(nanos), want, "{nanos}");
        }
    }

    #[test]
    fn formats_std_durations_as_go() {
        use std::time::Duration;
        assert_eq!(format_std(Duration::ZERO), "0s");
        assert_eq!(format_std(Duration::from_nanos(1_130_610)), "1.13061ms");
        assert_eq!(format_std(Duration::from_nanos(918_843)), "918.843\u{b5}s");
        assert_eq!(format_std(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_std(Duration::from_secs(7200)), "2h0m0s");
        assert_eq!(format_std(Duration::MAX), "2562047h47m16.854775807s");
    }
}
