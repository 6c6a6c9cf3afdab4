//! URLs as etcd reads them: the part of Go's `net/url.Parse` that decides whether etcd
//! accepts a URL, and with which words (`parse "<url>": <why>`); Go's
//! `net.SplitHostPort`; and etcd's `types.NewURLs` rules over them (http and https need
//! `host:port` and no path; unix and unixs take anything Go parses).
//!
//! Invariant: what etcd accepts is accepted and printed back as Go's `URL.String()`;
//! what it refuses is refused with its message. Not reproduced: unescaping, and the
//! checks of host characters and user information (oxcd-client's `peer_urls` has them).

use crate::quote::quote_str;

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
    let fail = |why: String| Err(format!("parse {}: {why}", quote_str(raw)));
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
            return fail(format!("invalid URL escape {}", quote_str(&shown)));
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
            return Err(format!("invalid port {} after host", quote_str(colon_port)));
        }
        return Ok(());
    }
    if let Some(i) = host.rfind(':') {
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(format!("invalid port {} after host", quote_str(colon_port)));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check_url(u: &str) -> Result<(), String> {
        parse_url(u).map(|_| ())
    }

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
    fn quotes_as_go() {
        assert_eq!(
            check_url("http://x\u{1}:1").unwrap_err(),
            r#"parse "http://x\x01:1": net/url: invalid control character in URL"#
        );
        assert_eq!(
            check_url("http://h:\u{e9}").unwrap_err(),
            "parse \"http://h:\u{e9}\": invalid port \":\u{e9}\" after host"
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
}
