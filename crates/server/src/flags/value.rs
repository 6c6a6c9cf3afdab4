//! Checking one flag value the way etcd's Go flag types do, with their error texts.

use super::table::{Flag, Kind};

/// Checks `value` for `flag`; the error is the reason Go's flag package would give.
pub fn check(flag: &Flag, value: &str) -> Result<(), String> {
    match flag.kind {
        Kind::Str => check_choice(flag.name, value),
        Kind::Bool => parse_bool(value)
            .map(|_| ())
            .ok_or_else(|| "parse error".to_string()),
        Kind::Uint => value
            .parse::<u64>()
            .map(|_| ())
            .map_err(|_| "parse error".to_string()),
        Kind::Int => value
            .parse::<i64>()
            .map(|_| ())
            .map_err(|_| "parse error".to_string()),
        Kind::Duration => parse_duration(value)
            .map(|_| ())
            .ok_or_else(|| "parse error".to_string()),
        Kind::Urls => {
            if value.is_empty() {
                return Ok(());
            }
            value.split(',').try_for_each(check_url)
        }
    }
}

/// The flags that take one of a fixed set of values (etcd's SelectiveStringValue).
fn check_choice(name: &str, value: &str) -> Result<(), String> {
    let valid: &[&str] = match name {
        "initial-cluster-state" => &["new", "existing"],
        "auto-compaction-mode" => &["periodic", "revision"],
        "metrics" => &["basic", "extensive"],
        "logger" => &["zap", "capnslog"],
        "log-level" => &["debug", "info", "warn", "error", "dpanic", "panic", "fatal"],
        "log-format" => &["json", "console"],
        "discovery-fallback" => &["exit", "proxy"],
        "proxy" => &["off", "readonly", "on"],
        "v2-deprecation" => &["not-yet", "write-only", "write-only-drop-data", "gone"],
        _ => return Ok(()),
    };
    if valid.contains(&value) {
        Ok(())
    } else {
        Err(format!("valid values are: {}", valid.join(", ")))
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

/// Go's time.ParseDuration for the units flags use (ns, us, ms, s, m, h; decimals).
pub fn parse_duration(v: &str) -> Option<std::time::Duration> {
    if v == "0" {
        return Some(std::time::Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = v;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num: f64 = rest[..n].parse().ok()?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += num * scale;
        rest = &rest[u..];
    }
    Some(std::time::Duration::from_secs_f64(total))
}

/// etcd's URL rules (types.NewURLs): a known scheme, `host:port`, no path.
pub fn check_url(u: &str) -> Result<(), String> {
    let scheme_err = || format!("URL scheme must be http, https, unix, or unixs: {u}");
    let (scheme, rest) = u.split_once("://").ok_or_else(scheme_err)?;
    if !matches!(scheme, "http" | "https" | "unix" | "unixs") {
        return Err(scheme_err());
    }
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if !has_host_port(host) {
        return Err(format!(
            "URL address does not have the form \"host:port\": {u}"
        ));
    }
    if !path.is_empty() {
        return Err(format!("URL must not contain a path: {u}"));
    }
    Ok(())
}

fn has_host_port(h: &str) -> bool {
    if let Some(rest) = h.strip_prefix('[') {
        return rest
            .split_once("]:")
            .is_some_and(|(_, port)| !port.contains(':'));
    }
    matches!(h.split_once(':'), Some((_, port)) if !port.contains(':'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_like_etcd() {
        assert!(check_url("http://127.0.0.1:2379").is_ok());
        assert!(check_url("http://[::1]:2379").is_ok());
        assert!(check_url("https://host:1").is_ok());
        assert_eq!(
            check_url("foo").unwrap_err(),
            "URL scheme must be http, https, unix, or unixs: foo"
        );
        assert_eq!(
            check_url("http://host").unwrap_err(),
            "URL address does not have the form \"host:port\": http://host"
        );
        assert_eq!(
            check_url("http://h:1/p").unwrap_err(),
            "URL must not contain a path: http://h:1/p"
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
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_bool("T"), Some(true));
        assert_eq!(parse_bool("yes"), None);
    }
}
