//! Go's `strconv.ParseInt`, `ParseUint` and `ParseBool`, with their `*strconv.NumError`
//! texts (`strconv.ParseInt: parsing "x": invalid syntax`), which Go's flag packages
//! report bad values with (pflag as they are, the standard `flag` package as
//! "parse error" / "value out of range": see [`NumErrorKind`]).
//!
//! Invariant: Go's results, and Go's first error, for every base and bit size: base 0
//! reads the `0x`, `0o`, `0b` and `0` prefixes and `_` between digits (`1_000`,
//! `0x_ff`); a number too large is out of range even when a bad character follows it.

use std::fmt;

use crate::quote::quote_str;

/// Why strconv refused a value (Go's `NumError.Err`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumErrorKind {
    /// `strconv.ErrSyntax`: "invalid syntax".
    Syntax,
    /// `strconv.ErrRange`: "value out of range".
    Range,
    /// A base other than 0 and 2 to 36: "invalid base N".
    Base(u32),
    /// A bit size over 64: "invalid bit size N".
    BitSize(u32),
}

impl fmt::Display for NumErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NumErrorKind::Syntax => f.write_str("invalid syntax"),
            NumErrorKind::Range => f.write_str("value out of range"),
            NumErrorKind::Base(b) => write!(f, "invalid base {b}"),
            NumErrorKind::BitSize(b) => write!(f, "invalid bit size {b}"),
        }
    }
}

/// Go's `*strconv.NumError`; its text is `strconv.<func>: parsing <%q of num>: <err>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumError {
    /// The function that failed: `ParseInt`, `ParseUint` or `ParseBool`.
    pub func: &'static str,
    /// The text it was given.
    pub num: String,
    /// Why it failed.
    pub err: NumErrorKind,
}

impl fmt::Display for NumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "strconv.{}: parsing {}: {}",
            self.func,
            quote_str(&self.num),
            self.err
        )
    }
}

impl std::error::Error for NumError {}

fn refuse<T>(func: &'static str, num: &str, err: NumErrorKind) -> Result<T, NumError> {
    Err(NumError {
        func,
        num: num.to_string(),
        err,
    })
}

/// Go's `underscoreOK`: underscores only between digits (a base prefix counts as a
/// digit).
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

/// The largest value of `bits` bits (1 to 64).
fn max_of(bits: u32) -> u64 {
    u64::MAX >> (64 - bits)
}

/// Go's `ParseUint`, its errors naming `func` (`ParseInt` calls it too).
fn parse_uint_as(func: &'static str, s0: &str, base: u32, bit_size: u32) -> Result<u64, NumError> {
    if s0.is_empty() {
        return refuse(func, s0, NumErrorKind::Syntax);
    }
    let base0 = base == 0;
    let mut s = s0.as_bytes();
    let base = match base {
        2..=36 => base,
        0 => {
            if s[0] != b'0' {
                10
            } else {
                let (b, skip) = match s.get(1).map(u8::to_ascii_lowercase) {
                    Some(b'b') if s.len() >= 3 => (2, 2),
                    Some(b'o') if s.len() >= 3 => (8, 2),
                    Some(b'x') if s.len() >= 3 => (16, 2),
                    _ => (8, 1),
                };
                s = &s[skip..];
                b
            }
        }
        _ => return refuse(func, s0, NumErrorKind::Base(base)),
    };
    let bits = match bit_size {
        0 => 64,
        1..=64 => bit_size,
        _ => return refuse(func, s0, NumErrorKind::BitSize(bit_size)),
    };
    // The smallest number such that cutoff * base overflows.
    let cutoff = u64::MAX / u64::from(base) + 1;
    let max = max_of(bits);
    let mut underscores = false;
    let mut n: u64 = 0;
    for &c in s {
        let d = match c {
            b'_' if base0 => {
                underscores = true;
                continue;
            }
            b'0'..=b'9' => u32::from(c - b'0'),
            _ if c.is_ascii_alphabetic() => u32::from(c.to_ascii_lowercase() - b'a') + 10,
            _ => return refuse(func, s0, NumErrorKind::Syntax),
        };
        if d >= base {
            return refuse(func, s0, NumErrorKind::Syntax);
        }
        if n >= cutoff {
            return refuse(func, s0, NumErrorKind::Range);
        }
        n *= u64::from(base);
        match n.checked_add(u64::from(d)) {
            Some(n1) if n1 <= max => n = n1,
            _ => return refuse(func, s0, NumErrorKind::Range),
        }
    }
    if underscores && !underscore_ok(s0) {
        return refuse(func, s0, NumErrorKind::Syntax);
    }
    Ok(n)
}

/// Go's `strconv.ParseUint(s, base, bit_size)`: base 0 reads the base from the prefix;
/// bit size 0 is 64.
pub fn parse_uint(s: &str, base: u32, bit_size: u32) -> Result<u64, NumError> {
    parse_uint_as("ParseUint", s, base, bit_size)
}

/// Go's `strconv.ParseInt(s, base, bit_size)`: an optional sign, then as
/// [`parse_uint`]; bit size 0 is 64.
pub fn parse_int(s0: &str, base: u32, bit_size: u32) -> Result<i64, NumError> {
    const F: &str = "ParseInt";
    let (neg, s) = match s0.as_bytes().first() {
        None => return refuse(F, s0, NumErrorKind::Syntax),
        Some(b'+') => (false, &s0[1..]),
        Some(b'-') => (true, &s0[1..]),
        Some(_) => (false, s0),
    };
    let un = match parse_uint_as(F, s, base, bit_size) {
        Ok(n) => n,
        // As Go: the unsigned parse stopped at its largest value; the signed check
        // below decides.
        Err(e) if e.err == NumErrorKind::Range => max_of(if bit_size == 0 { 64 } else { bit_size }),
        Err(e) => return refuse(F, s0, e.err),
    };
    let bits = if bit_size == 0 { 64 } else { bit_size };
    let cutoff = 1u64 << (bits - 1);
    if !neg && un >= cutoff || neg && un > cutoff {
        return refuse(F, s0, NumErrorKind::Range);
    }
    let n = un as i64;
    Ok(if neg { n.wrapping_neg() } else { n })
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Result<bool, NumError> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => refuse("ParseBool", s, NumErrorKind::Syntax),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text<T>(r: Result<T, NumError>) -> String {
        match r {
            Ok(_) => "ok".into(),
            Err(e) => e.to_string(),
        }
    }

    fn kind<T: std::fmt::Debug>(r: Result<T, NumError>) -> NumErrorKind {
        r.expect_err("refused").err
    }

    #[test]
    fn ints_like_go() {
        assert_eq!(parse_int("42", 0, 64), Ok(42));
        assert_eq!(parse_int("0x10", 0, 64), Ok(16));
        assert_eq!(parse_int("010", 0, 64), Ok(8));
        assert_eq!(parse_int("-1_000", 0, 64), Ok(-1000));
        assert_eq!(parse_int("+5", 0, 64), Ok(5));
        assert_eq!(parse_int("-9223372036854775808", 10, 64), Ok(i64::MIN));
        assert_eq!(parse_int("-9223372036854775808", 0, 0), Ok(i64::MIN));
        assert_eq!(
            text(parse_int("x", 0, 64)),
            r#"strconv.ParseInt: parsing "x": invalid syntax"#
        );
        assert_eq!(
            text(parse_int("99999999999999999999", 0, 64)),
            r#"strconv.ParseInt: parsing "99999999999999999999": value out of range"#
        );
        assert_eq!(
            text(parse_int("9223372036854775808", 10, 64)),
            r#"strconv.ParseInt: parsing "9223372036854775808": value out of range"#
        );
        assert_eq!(
            text(parse_int("-9223372036854775809", 10, 64)),
            r#"strconv.ParseInt: parsing "-9223372036854775809": value out of range"#
        );
        assert_eq!(parse_int("ff", 16, 64), Ok(255));
        assert_eq!(kind(parse_int("0x10", 16, 64)), NumErrorKind::Syntax);
        assert_eq!(kind(parse_int("1__0", 0, 64)), NumErrorKind::Syntax);
        assert_eq!(kind(parse_int("1_000", 10, 64)), NumErrorKind::Syntax);
        assert_eq!(kind(parse_int("", 10, 64)), NumErrorKind::Syntax);
        assert_eq!(kind(parse_int("-", 10, 64)), NumErrorKind::Syntax);
        assert_eq!(kind(parse_int("--1", 10, 64)), NumErrorKind::Syntax);
        assert_eq!(parse_int("127", 10, 8), Ok(127));
        assert_eq!(parse_int("-128", 10, 8), Ok(-128));
        assert_eq!(kind(parse_int("128", 10, 8)), NumErrorKind::Range);
        assert_eq!(
            text(parse_int("1", 1, 64)),
            r#"strconv.ParseInt: parsing "1": invalid base 1"#
        );
        assert_eq!(
            text(parse_int("-1", 10, 65)),
            r#"strconv.ParseInt: parsing "-1": invalid bit size 65"#
        );
    }

    #[test]
    fn uints_like_go() {
        assert_eq!(parse_uint("10", 0, 64), Ok(10));
        assert_eq!(parse_uint("0x10", 0, 64), Ok(16));
        assert_eq!(parse_uint("0X1f", 0, 64), Ok(31));
        assert_eq!(parse_uint("010", 0, 64), Ok(8));
        assert_eq!(parse_uint("0", 0, 64), Ok(0));
        assert_eq!(parse_uint("0b101", 0, 64), Ok(5));
        assert_eq!(parse_uint("0o17", 0, 64), Ok(15));
        assert_eq!(parse_uint("0x_1_0", 0, 64), Ok(16));
        assert_eq!(parse_uint("1_000", 0, 64), Ok(1000));
        assert_eq!(parse_uint("0_7", 0, 64), Ok(7));
        assert_eq!(parse_uint("ffffffffffffffff", 16, 64), Ok(u64::MAX));
        for bad in [
            "-1", "+1", "0x", "0b", "0o", "0_", "_1", "1_", "08", "0x1g", " 1", "é",
        ] {
            assert_eq!(kind(parse_uint(bad, 0, 64)), NumErrorKind::Syntax, "{bad}");
        }
        assert_eq!(
            text(parse_uint("zz", 16, 64)),
            r#"strconv.ParseUint: parsing "zz": invalid syntax"#
        );
        assert_eq!(
            text(parse_uint("18446744073709551616", 0, 64)),
            r#"strconv.ParseUint: parsing "18446744073709551616": value out of range"#
        );
        assert_eq!(kind(parse_uint("4294967296", 0, 32)), NumErrorKind::Range);
        assert_eq!(parse_uint("4294967295", 0, 32), Ok(u64::from(u32::MAX)));
        // Go stops at the first error: out of range before the bad character.
        assert_eq!(
            kind(parse_uint("99999999999999999999x", 0, 64)),
            NumErrorKind::Range
        );
        assert_eq!(kind(parse_uint("4294967296x", 0, 32)), NumErrorKind::Range);
        // The text is Go's %q of the input.
        assert_eq!(
            text(parse_uint("\u{1}", 0, 64)),
            r#"strconv.ParseUint: parsing "\x01": invalid syntax"#
        );
    }

    #[test]
    fn bools_like_go() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse_bool(t), Ok(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse_bool(f), Ok(false));
        }
        assert_eq!(
            text(parse_bool("xyz")),
            r#"strconv.ParseBool: parsing "xyz": invalid syntax"#
        );
        assert_eq!(kind(parse_bool("yes")), NumErrorKind::Syntax);
    }
}
