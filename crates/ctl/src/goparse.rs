//! Parsing numbers, booleans and durations exactly as Go's `strconv` and `time` do, with
//! their error texts, because etcdctl (through pflag) reports bad values in those words.

use crate::gofmt::quote_str;

fn syntax(func: &str, s: &str) -> String {
    format!("strconv.{func}: parsing {}: invalid syntax", quote_str(s))
}

fn range(func: &str, s: &str) -> String {
    format!(
        "strconv.{func}: parsing {}: value out of range",
        quote_str(s)
    )
}

/// Go's `underscoreOK`: underscores only between digits (base prefix counts as a digit).
fn underscore_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let b = match b.first() {
        Some(b'-' | b'+') => &b[1..],
        _ => b,
    };
    let mut saw = b'^';
    let mut i = 0;
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1].eq_ignore_ascii_case(&b'x');
    }
    while i < b.len() {
        let c = b[i];
        i += 1;
        if c.is_ascii_digit() || hex && (b'a'..=b'f').contains(&c.to_ascii_lowercase()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

/// Go's `strconv.ParseUint(s, base, 64)`; base 0 reads `0x`, `0o`, `0b`, `0` prefixes and
/// `_` separators. The error names `func` (ParseInt reuses this).
fn parse_uint_as(func: &str, s: &str, base: u32) -> Result<u64, String> {
    if s.is_empty() {
        return Err(syntax(func, s));
    }
    let base0 = base == 0;
    let mut digits = s.as_bytes();
    let mut base = base;
    if base0 {
        base = 10;
        if digits[0] == b'0' {
            let prefix = digits.get(1).map(u8::to_ascii_lowercase);
            (base, digits) = match prefix {
                Some(b'b') if digits.len() >= 3 => (2, &digits[2..]),
                Some(b'o') if digits.len() >= 3 => (8, &digits[2..]),
                Some(b'x') if digits.len() >= 3 => (16, &digits[2..]),
                _ => (8, &digits[1..]),
            };
        }
    }
    let cutoff = u64::MAX / u64::from(base) + 1;
    let mut n: u64 = 0;
    let mut underscores = false;
    for &c in digits {
        let d = match c {
            b'_' if base0 => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => u32::from(c - b'0'),
            _ if c.is_ascii_alphabetic() => u32::from(c.to_ascii_lowercase() - b'a') + 10,
            _ => return Err(syntax(func, s)),
        };
        if d >= base {
            return Err(syntax(func, s));
        }
        if n >= cutoff {
            return Err(range(func, s));
        }
        n *= u64::from(base);
        n = n.checked_add(u64::from(d)).ok_or_else(|| range(func, s))?;
    }
    if underscores && !underscore_ok(s) {
        return Err(syntax(func, s));
    }
    Ok(n)
}

/// Go's `strconv.ParseUint(s, base, 64)`.
pub fn parse_uint(s: &str, base: u32) -> Result<u64, String> {
    parse_uint_as("ParseUint", s, base)
}

/// Go's `strconv.ParseInt(s, base, 64)`.
pub fn parse_int(s: &str, base: u32) -> Result<i64, String> {
    const F: &str = "ParseInt";
    let (neg, body) = match s.as_bytes().first() {
        None => return Err(syntax(F, s)),
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        Some(_) => (false, s),
    };
    let un = match parse_uint_as(F, body, base) {
        Ok(n) => n,
        Err(e) if e.ends_with("value out of range") => return Err(range(F, s)),
        Err(_) => return Err(syntax(F, s)),
    };
    let cutoff = 1u64 << 63;
    match (neg, un) {
        (false, n) if n >= cutoff => Err(range(F, s)),
        (true, n) if n > cutoff => Err(range(F, s)),
        (true, n) => Ok((n as i64).wrapping_neg()),
        (false, n) => Ok(n as i64),
    }
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(syntax("ParseBool", s)),
    }
}

/// Go's `time.ParseDuration`, in nanoseconds (negative durations allowed): the parser
/// the server's flags use too.
pub fn parse_duration(orig: &str) -> Result<i128, String> {
    oxcd_go::duration::parse(orig).map(i128::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_like_go() {
        assert_eq!(parse_int("42", 0), Ok(42));
        assert_eq!(parse_int("0x10", 0), Ok(16));
        assert_eq!(parse_int("010", 0), Ok(8));
        assert_eq!(parse_int("-1_000", 0), Ok(-1000));
        assert_eq!(parse_int("-9223372036854775808", 10), Ok(i64::MIN));
        assert_eq!(
            parse_int("x", 0),
            Err(r#"strconv.ParseInt: parsing "x": invalid syntax"#.into())
        );
        assert_eq!(
            parse_int("99999999999999999999", 0),
            Err(r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#.into())
        );
        assert_eq!(
            parse_int("9223372036854775808", 10),
            Err(r#"strconv.ParseInt: parsing "9223372036854775808": value out of range"#.into())
        );
        assert_eq!(parse_int("ff", 16), Ok(255));
        assert!(parse_int("0x10", 16).is_err());
        assert!(parse_int("1__0", 0).is_err());
        assert!(parse_int("", 10).is_err());
        assert_eq!(
            parse_uint("zz", 16),
            Err(r#"strconv.ParseUint: parsing "zz": invalid syntax"#.into())
        );
    }

    #[test]
    fn bools_and_durations_like_go() {
        assert_eq!(parse_bool("T"), Ok(true));
        assert_eq!(
            parse_bool("xyz"),
            Err(r#"strconv.ParseBool: parsing "xyz": invalid syntax"#.into())
        );
        assert_eq!(parse_duration("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration("1m30.5s"), Ok(90_500_000_000));
        assert_eq!(parse_duration("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration("0"), Ok(0));
        assert_eq!(parse_duration("-1s"), Ok(-1_000_000_000));
        assert_eq!(
            parse_duration("x"),
            Err(r#"time: invalid duration "x""#.into())
        );
        assert_eq!(
            parse_duration("1"),
            Err(r#"time: missing unit in duration "1""#.into())
        );
        assert_eq!(
            parse_duration("1x"),
            Err(r#"time: unknown unit "x" in duration "1x""#.into())
        );
    }
}
