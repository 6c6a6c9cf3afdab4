//! Checking one flag value the way etcd's Go flag types do, with their error texts:
//! Go's `strconv` numbers (base prefixes, "parse error" / "value out of range"),
//! `time.ParseDuration`, `strconv.ParseBool`, etcd's selective strings ("invalid value")
//! and etcd's URL lists (`types.NewURLs` over Go's `url.Parse`).

use super::table::{Flag, Kind};

/// Checks `value` for `flag`; the error is the reason Go's flag package would give.
pub fn check(flag: &Flag, value: &str) -> Result<(), String> {
    match flag.kind {
        Kind::Str => check_choice(flag.name, value),
        Kind::Bool => parse_bool(value)
            .map(|_| ())
            .ok_or_else(|| "parse error".to_string()),
        Kind::Uint => parse_go_uint(value, 64)
            .map(|_| ())
            .map_err(NumError::flag_text),
        Kind::Uint32 => parse_go_uint(value, 32)
            .map(|_| ())
            .map_err(|e| e.strconv_text("ParseUint", value)),
        Kind::Int => parse_go_int(value, 64)
            .map(|_| ())
            .map_err(NumError::flag_text),
        Kind::Duration => {
            if go_duration_ok(value) {
                Ok(())
            } else {
                Err("parse error".to_string())
            }
        }
        // etcd's UniqueURLs accept "" (the flag keeps its default).
        Kind::Urls if value.is_empty() => Ok(()),
        Kind::Urls => parse_urls(value).map(|_| ()),
    }
}

/// The values of etcd's selective flags (`flags.SelectiveStringValue` and
/// `SelectiveStringsValue`); other string flags are free text at parse time.
pub fn choices(name: &str) -> Option<&'static [&'static str]> {
    Some(match name {
        "initial-cluster-state" => &["new", "existing"],
        "discovery-fallback" => &["exit", "proxy"],
        "proxy" => &["off", "readonly", "on"],
        "v2-deprecation" => &[
            "not-yet",
            "write-only",
            "write-only-skip-check",
            "write-only-drop-data",
            "gone",
        ],
        _ => return None,
    })
}

fn check_choice(name: &str, value: &str) -> Result<(), String> {
    let Some(valid) = choices(name) else {
        return Ok(());
    };
    if name == "v2-deprecation" {
        // SelectiveStringsValue: a comma list, each one valid.
        for v in value.split(',') {
            if !valid.contains(&v) {
                return Err(format!("invalid value {v:?}"));
            }
        }
        return Ok(());
    }
    if valid.contains(&value) {
        Ok(())
    } else {
        Err("invalid value".to_string())
    }
}

/// Go's strconv.ParseBool.
pub fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// Why Go's strconv refused a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumError {
    /// `strconv.ErrSyntax`.
    Syntax,
    /// `strconv.ErrRange`.
    Range,
}

impl NumError {
    /// What Go's flag package says (`numError`).
    fn flag_text(self) -> String {
        match self {
            NumError::Syntax => "parse error".into(),
            NumError::Range => "value out of range".into(),
        }
    }

    /// strconv's own error text (flags whose Set returns it unchanged).
    fn strconv_text(self, func: &str, v: &str) -> String {
        let why = match self {
            NumError::Syntax => "invalid syntax",
            NumError::Range => "value out of range",
        };
        format!("strconv.{func}: parsing {v:?}: {why}")
    }
}

/// Go's `strconv.ParseUint(s, 0, bits)`: `0x`, `0o`, `0b` and leading-`0` octal
/// prefixes, `_` between digits when a prefix is used.
pub fn parse_go_uint(s: &str, bits: u32) -> Result<u64, NumError> {
    if s.is_empty() {
        return Err(NumError::Syntax);
    }
    let (base, digits, prefixed) = match s.as_bytes() {
        [b'0', b'x' | b'X', ..] => (16, &s[2..], true),
        [b'0', b'o' | b'O', ..] => (8, &s[2..], true),
        [b'0', b'b' | b'B', ..] => (2, &s[2..], true),
        [b'0', _, ..] => (8, &s[1..], true),
        _ => (10, s, false),
    };
    if !underscores_ok(s, prefixed) {
        return Err(NumError::Syntax);
    }
    let mut n: u64 = 0;
    let mut any = false;
    let mut overflow = false;
    for c in digits.chars() {
        if c == '_' {
            continue;
        }
        let d = c.to_digit(base).ok_or(NumError::Syntax)?;
        any = true;
        match n
            .checked_mul(u64::from(base))
            .and_then(|m| m.checked_add(u64::from(d)))
        {
            Some(m) => n = m,
            None => overflow = true,
        }
    }
    if !any && base != 8 {
        return Err(NumError::Syntax);
    }
    let max = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    if overflow || n > max {
        return Err(NumError::Range);
    }
    Ok(n)
}

/// Go's `strconv.ParseInt(s, 0, bits)`.
pub fn parse_go_int(s: &str, bits: u32) -> Result<i64, NumError> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let u = parse_go_uint(body, 64)?;
    let limit = 1u64 << (bits - 1);
    if neg {
        if u > limit {
            return Err(NumError::Range);
        }
        Ok((u as i64).wrapping_neg())
    } else {
        if u >= limit {
            return Err(NumError::Range);
        }
        Ok(u as i64)
    }
}

/// Go's underscoreOK: `_` only with a base prefix, and only between digits (or right
/// after the prefix).
fn underscores_ok(s: &str, prefixed: bool) -> bool {
    if !s.contains('_') {
        return true;
    }
    if !prefixed {
        return false;
    }
    // 'd' = digit (or prefix), '_' = underscore; no "__", no leading/trailing '_'.
    let b = s.as_bytes();
    let mut saw = '^';
    let mut i = 0;
    if b.len() >= 2 && b[0] == b'0' && b[1].is_ascii_alphabetic() {
        saw = '0';
        i = 2;
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_alphanumeric() {
            saw = '0';
        } else if c == b'_' {
            if saw != '0' {
                return false;
            }
            saw = '_';
        } else {
            saw = '!';
        }
        i += 1;
    }
    saw != '_'
}

/// Go's time.ParseDuration as a yes/no (negative durations included).
fn go_duration_ok(v: &str) -> bool {
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

/// One URL as etcd keeps it after Go's `url.Parse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoUrl {
    /// Lower-cased scheme.
    pub scheme: String,
    /// `host[:port]` without user info (Go's `URL.Host`).
    pub host: String,
    /// Everything after the scheme, as given (for re-printing).
    rest: String,
}

impl GoUrl {
    /// Go's `URL.String()` for the URLs etcd accepts.
    pub fn text(&self) -> String {
        format!("{}:{}", self.scheme, self.rest)
    }
}

impl std::fmt::Display for GoUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

/// The parts of Go's `url.Parse` that decide what etcd accepts, with Go's messages.
fn go_url_parse(raw: &str) -> Result<(GoUrl, String), String> {
    let fail = |why: String| Err(format!("parse {raw:?}: {why}"));
    if raw.chars().any(|c| (c as u32) < 0x20 || c as u32 == 0x7f) {
        return fail("net/url: invalid control character in URL".into());
    }
    // getScheme.
    let mut scheme = "";
    let mut rest = raw;
    for (i, c) in raw.char_indices() {
        if c.is_ascii_alphabetic() {
            continue;
        }
        if c.is_ascii_digit() || c == '+' || c == '-' || c == '.' {
            if i == 0 {
                break;
            }
            continue;
        }
        if c == ':' {
            if i == 0 {
                return fail("missing protocol scheme".into());
            }
            scheme = &raw[..i];
            rest = &raw[i + 1..];
        }
        break;
    }
    let no_frag = rest.split('#').next().unwrap_or("");
    let before_query = no_frag.split('?').next().unwrap_or("");
    if scheme.is_empty() {
        let first = before_query.split('/').next().unwrap_or("");
        if first.contains(':') {
            return fail("first path segment in URL cannot contain colon".into());
        }
    }
    let (host, path) = match before_query.strip_prefix("//") {
        Some(auth_path) => {
            let (auth, path) = match auth_path.find('/') {
                Some(i) => (&auth_path[..i], &auth_path[i..]),
                None => (auth_path, ""),
            };
            let host = match auth.rfind('@') {
                Some(i) => &auth[i + 1..],
                None => auth,
            };
            if let Err(why) = check_go_host(host) {
                return fail(why);
            }
            (host.to_string(), path.to_string())
        }
        None if !scheme.is_empty() && !before_query.starts_with('/') => {
            // Opaque ("localhost:2379" has scheme "localhost").
            (String::new(), String::new())
        }
        None => (String::new(), before_query.to_string()),
    };
    if let Some(i) = path.find('%') {
        let esc = &path[i..];
        let ok = esc.len() >= 3 && esc[1..3].chars().all(|c| c.is_ascii_hexdigit());
        if !ok {
            let shown: String = esc.chars().take(3).collect();
            return fail(format!("invalid URL escape {shown:?}"));
        }
    }
    Ok((
        GoUrl {
            scheme: scheme.to_ascii_lowercase(),
            host,
            rest: rest.to_string(),
        },
        path,
    ))
}

/// Go's parseHost port check.
fn check_go_host(host: &str) -> Result<(), String> {
    if let Some(inner) = host.strip_prefix('[') {
        let Some(end) = inner.find(']') else {
            return Err("missing ']' in host".into());
        };
        let colon_port = &inner[end + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {colon_port:?} after host"));
        }
        return Ok(());
    }
    if let Some(i) = host.rfind(':') {
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {colon_port:?} after host"));
        }
    }
    Ok(())
}

fn valid_optional_port(p: &str) -> bool {
    p.is_empty()
        || p.strip_prefix(':')
            .is_some_and(|d| d.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's net.SplitHostPort, with its error texts.
pub fn split_host_port(hostport: &str) -> Result<(String, String), String> {
    let addr_err = |why: &str| {
        if hostport.is_empty() {
            why.to_string()
        } else {
            format!("address {hostport}: {why}")
        }
    };
    let Some(i) = hostport.rfind(':') else {
        return Err(addr_err("missing port in address"));
    };
    let (host, j, k) = if hostport.starts_with('[') {
        let Some(end) = hostport.find(']') else {
            return Err(addr_err("missing ']' in address"));
        };
        if end + 1 == hostport.len() {
            return Err(addr_err("missing port in address"));
        }
        if end + 1 != i {
            if hostport.as_bytes()[end + 1] == b':' {
                return Err(addr_err("too many colons in address"));
            }
            return Err(addr_err("missing port in address"));
        }
        (&hostport[1..end], 1, end + 1)
    } else {
        let host = &hostport[..i];
        if host.contains(':') {
            return Err(addr_err("too many colons in address"));
        }
        (host, 0, 0)
    };
    if hostport[j..].contains('[') {
        return Err(addr_err("unexpected '[' in address"));
    }
    if hostport[k..].contains(']') {
        return Err(addr_err("unexpected ']' in address"));
    }
    Ok((host.to_string(), hostport[i + 1..].to_string()))
}

/// etcd's `types.NewURLs` on a comma list: trimmed, parsed, checked, de-duplicated and
/// sorted (as `flags.UniqueURLs` keeps them).
pub fn parse_urls(list: &str) -> Result<Vec<GoUrl>, String> {
    let mut out: Vec<GoUrl> = Vec::new();
    for raw in list.split(',') {
        let u = parse_url(raw.trim())?;
        if !out.contains(&u) {
            out.push(u);
        }
    }
    out.sort_by_key(GoUrl::text);
    Ok(out)
}

/// One URL by etcd's rules (types.NewURLs): http/https need `host:port` and no path;
/// unix/unixs anything Go can parse.
pub fn parse_url(u: &str) -> Result<GoUrl, String> {
    let (url, path) = go_url_parse(u)?;
    match url.scheme.as_str() {
        "http" | "https" => {
            if split_host_port(&url.host).is_err() {
                return Err(format!(
                    "URL address does not have the form \"host:port\": {u}"
                ));
            }
            if !path.is_empty() {
                return Err(format!("URL must not contain a path: {u}"));
            }
        }
        "unix" | "unixs" => {}
        _ => {
            return Err(format!(
                "URL scheme must be http, https, unix, or unixs: {u}"
            ));
        }
    }
    Ok(url)
}

/// etcd's URL rules for one URL, as a yes/no with etcd's message.
pub fn check_url(u: &str) -> Result<(), String> {
    parse_url(u.trim()).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_like_etcd() {
        assert!(check_url("http://127.0.0.1:2379").is_ok());
        assert!(check_url("http://[::1]:2379").is_ok());
        assert!(check_url("https://host:1").is_ok());
        assert!(check_url("HTTP://127.0.0.1:2379").is_ok());
        assert!(check_url("unix:///tmp/etcd.sock").is_ok());
        assert!(check_url("unix://localhost:2379").is_ok());
        assert!(check_url("http://u@127.0.0.1:1?x=1").is_ok());
        assert_eq!(
            check_url("foo").unwrap_err(),
            "URL scheme must be http, https, unix, or unixs: foo"
        );
        assert_eq!(
            check_url("localhost:2379").unwrap_err(),
            "URL scheme must be http, https, unix, or unixs: localhost:2379"
        );
        assert_eq!(
            check_url("http://host").unwrap_err(),
            "URL address does not have the form \"host:port\": http://host"
        );
        assert_eq!(
            check_url("http://h:1/p").unwrap_err(),
            "URL must not contain a path: http://h:1/p"
        );
        // Go's url.Parse, as the etcd 3.4 binary prints it.
        assert_eq!(
            check_url("127.0.0.1:2379").unwrap_err(),
            "parse \"127.0.0.1:2379\": first path segment in URL cannot contain colon"
        );
        assert_eq!(
            check_url("http://h:port").unwrap_err(),
            "parse \"http://h:port\": invalid port \":port\" after host"
        );
        assert_eq!(
            check_url("http://[::1").unwrap_err(),
            "parse \"http://[::1\": missing ']' in host"
        );
        assert_eq!(
            check_url(":2379").unwrap_err(),
            "parse \":2379\": missing protocol scheme"
        );
    }

    #[test]
    fn url_lists_are_trimmed_deduplicated_and_sorted() {
        let us = parse_urls("http://b:1, HTTP://a:1,http://b:1").expect("urls");
        let texts: Vec<String> = us.iter().map(GoUrl::text).collect();
        assert_eq!(texts, ["http://a:1", "http://b:1"]);
    }

    #[test]
    fn split_host_port_like_go() {
        assert_eq!(
            split_host_port("h:1").expect("ok"),
            ("h".to_string(), "1".to_string())
        );
        assert_eq!(
            split_host_port("[::1]:1").expect("ok"),
            ("::1".to_string(), "1".to_string())
        );
        assert_eq!(split_host_port("").unwrap_err(), "missing port in address");
        assert_eq!(
            split_host_port("a:b:c").unwrap_err(),
            "address a:b:c: too many colons in address"
        );
    }

    #[test]
    fn go_numbers() {
        assert_eq!(parse_go_uint("10", 64), Ok(10));
        assert_eq!(parse_go_uint("0x10", 64), Ok(16));
        assert_eq!(parse_go_uint("010", 64), Ok(8));
        assert_eq!(parse_go_uint("0", 64), Ok(0));
        assert_eq!(parse_go_uint("0b101", 64), Ok(5));
        assert_eq!(parse_go_uint("0x_1_0", 64), Ok(16));
        assert_eq!(parse_go_uint("1_000", 64), Err(NumError::Syntax));
        assert_eq!(parse_go_uint("-1", 64), Err(NumError::Syntax));
        assert_eq!(parse_go_uint("0x", 64), Err(NumError::Syntax));
        assert_eq!(
            parse_go_uint("99999999999999999999", 64),
            Err(NumError::Range)
        );
        assert_eq!(parse_go_uint("4294967296", 32), Err(NumError::Range));
        assert_eq!(parse_go_int("-5", 64), Ok(-5));
        assert_eq!(parse_go_int("-9223372036854775808", 64), Ok(i64::MIN));
        assert_eq!(
            parse_go_int("9223372036854775808", 64),
            Err(NumError::Range)
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
