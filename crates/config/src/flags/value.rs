//! Checking one flag value the way etcd's Go flag types do, with their error texts:
//! Go's `strconv` numbers (base prefixes, "parse error" / "value out of range"),
//! `time.ParseDuration`, `strconv.ParseBool`, etcd's selective strings ("invalid value")
//! and etcd's URL lists (`types.NewURLs` over Go's `url.Parse`). The Go parsers are
//! oxcd-go's; what is the flag package's (its texts, the flag types) is here.

use oxcd_go::strconv::{self, NumError, NumErrorKind};
pub use oxcd_go::url::{GoUrl, parse_url, parse_urls, split_host_port};

/// Go's strconv.ParseBool.
pub fn parse_bool(v: &str) -> Option<bool> {
    strconv::parse_bool(v).ok()
}

/// Go's `strconv.ParseUint(s, 0, bits)`: `0x`, `0o`, `0b` and leading-`0` octal
/// prefixes, `_` between digits.
pub fn parse_go_uint(s: &str, bits: u32) -> Result<u64, NumError> {
    strconv::parse_uint(s, 0, bits)
}

/// Go's `strconv.ParseInt(s, 0, bits)`.
pub fn parse_go_int(s: &str, bits: u32) -> Result<i64, NumError> {
    strconv::parse_int(s, 0, bits)
}

/// What Go's flag package says of a number it could not parse (its `numError`).
pub(crate) fn flag_text(e: NumError) -> String {
    match e.err {
        NumErrorKind::Syntax => "parse error".into(),
        NumErrorKind::Range => "value out of range".into(),
        _ => e.to_string(),
    }
}

/// Go's time.ParseDuration as a yes/no (negative durations included).
pub(crate) fn go_duration_ok(v: &str) -> bool {
    oxcd_go::duration::parse(v).is_ok()
}

/// Go's time.ParseDuration for non-negative values (ns, us, µs, ms, s, m, h; decimals;
/// a leading `+`). `None` for anything Go refuses (syntax, overflow), and for negative
/// durations.
pub fn parse_duration(v: &str) -> Option<std::time::Duration> {
    let nanos = oxcd_go::duration::parse(v).ok()?;
    u64::try_from(nanos)
        .ok()
        .map(std::time::Duration::from_nanos)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_numbers_with_the_flag_packages_texts() {
        let flag_u = |s: &str| parse_go_uint(s, 64).map_err(flag_text);
        assert_eq!(flag_u("10"), Ok(10));
        assert_eq!(flag_u("0x10"), Ok(16));
        assert_eq!(flag_u("010"), Ok(8));
        assert_eq!(flag_u("0b101"), Ok(5));
        assert_eq!(flag_u("0x_1_0"), Ok(16));
        assert_eq!(flag_u("-1"), Err("parse error".to_string()));
        assert_eq!(flag_u("0x"), Err("parse error".to_string()));
        assert_eq!(
            flag_u("99999999999999999999"),
            Err("value out of range".to_string())
        );
        assert_eq!(
            parse_go_uint("4294967296", 32).map_err(|e| e.to_string()),
            Err(r#"strconv.ParseUint: parsing "4294967296": value out of range"#.to_string())
        );
        assert_eq!(parse_go_int("-5", 64), Ok(-5));
        assert_eq!(parse_go_int("-9223372036854775808", 64), Ok(i64::MIN));
        assert_eq!(
            parse_go_int("9223372036854775808", 64).map_err(flag_text),
            Err("value out of range".to_string())
        );
    }

    #[test]
    fn durations_and_bools() {
        assert_eq!(
            parse_duration("2h0m0s"),
            Some(std::time::Duration::from_secs(7200))
        );
        assert_eq!(
            parse_duration("1.5s"),
            Some(std::time::Duration::from_millis(1500))
        );
        assert_eq!(
            parse_duration("10ms"),
            Some(std::time::Duration::from_millis(10))
        );
        assert_eq!(
            parse_duration("5000000000ns"),
            Some(std::time::Duration::from_secs(5))
        );
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration(""), None);
        assert_eq!(parse_duration("1..s"), None, "Go: missing unit");
        assert_eq!(parse_duration("1.2.3s"), None);
        assert_eq!(
            parse_duration("1.s"),
            Some(std::time::Duration::from_secs(1))
        );
        assert_eq!(parse_duration("99999999999h"), None, "overflows Go's int64");
        assert_eq!(parse_duration("9999999999999999999999999999999999s"), None);
        assert!(go_duration_ok("-1s"));
        assert!(!go_duration_ok("1x"));
        assert_eq!(parse_bool("T"), Some(true));
        assert_eq!(parse_bool("yes"), None);
    }
}
