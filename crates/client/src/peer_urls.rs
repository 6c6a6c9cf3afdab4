//! The check clientv3 makes of peer URLs before it asks for a member to be added or
//! updated (etcd's `types.NewURLs`, "fail-fast before panic in rafthttp"), with Go's
//! messages: each URL, trimmed of white space, must parse as Go's `net/url.Parse` parses
//! it, with scheme http, https, unix or unixs, a `host:port` authority and no path.
//!
//! Only what decides whether a URL is refused, and with which words, is reproduced of
//! Go's parser (Go 1.19, which Debian's etcdctl 3.4 is built with).

use oxcd_go::quote::quote;

use crate::Error;

/// Checks `urls` as clientv3 does before `MemberAdd` and `MemberUpdate`: the first
/// refusal, in Go's words, as [`Error::InvalidUrl`].
pub fn check_peer_urls(urls: &[String]) -> Result<(), Error> {
    if urls.is_empty() {
        return Err(Error::InvalidUrl("no valid URLs given".to_string()));
    }
    for raw in urls {
        check(raw.trim()).map_err(Error::InvalidUrl)?;
    }
    Ok(())
}

/// One URL (already trimmed), as `types.NewURLs` checks it.
fn check(url: &str) -> Result<(), String> {
    let u = parse(url)?;
    if !matches!(u.scheme.as_str(), "http" | "https" | "unix" | "unixs") {
        return Err(format!(
            "URL scheme must be http, https, unix, or unixs: {url}"
        ));
    }
    if !split_host_port_ok(&u.host) {
        return Err(format!(
            "URL address does not have the form \"host:port\": {url}"
        ));
    }
    if !u.path.is_empty() {
        return Err(format!("URL must not contain a path: {url}"));
    }
    Ok(())
}

/// What the check needs of a parsed URL.
#[derive(Debug, Default, PartialEq)]
struct Url {
    /// Lower-cased.
    scheme: String,
    /// Unescaped, with its port.
    host: String,
    /// Unescaped.
    path: String,
}

/// Go's `url.Parse`: the fragment is cut off first; an error reads
/// `parse "<url>": <why>`.
fn parse(raw: &str) -> Result<Url, String> {
    let (u, frag) = raw.split_once('#').unwrap_or((raw, ""));
    let url = parse_reference(u).map_err(|e| format!("parse {}: {e}", quote(u.as_bytes())))?;
    if !frag.is_empty() {
        unescape(frag.as_bytes(), Mode::Fragment)
            .map_err(|e| format!("parse {}: {e}", quote(raw.as_bytes())))?;
    }
    Ok(url)
}

/// Go's `url.parse(rawURL, viaRequest=false)`.
fn parse_reference(raw: &str) -> Result<Url, String> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".to_string());
    }
    let mut url = Url::default();
    if raw == "*" {
        url.path = "*".to_string();
        return Ok(url);
    }
    let (scheme, rest) = scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    let mut rest = if rest.ends_with('?') && rest.matches('?').count() == 1 {
        &rest[..rest.len() - 1]
    } else {
        rest.split_once('?').map_or(rest, |(r, _)| r)
    };
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // A rootless path is opaque: no host, no path.
            return Ok(url);
        }
        let segment = rest.split_once('/').map_or(rest, |(s, _)| s);
        if segment.contains(':') {
            return Err("first path segment in URL cannot contain colon".to_string());
        }
    }
    if (!url.scheme.is_empty() || !rest.starts_with("///")) && rest.starts_with("//") {
        let authority = &rest[2..];
        let (authority, path) = match authority.find('/') {
            Some(i) => authority.split_at(i),
            None => (authority, ""),
        };
        url.host = parse_authority(authority)?;
        rest = path;
    }
    url.path = unescape(rest.as_bytes(), Mode::Path)?;
    Ok(url)
}

/// Go's `getScheme`: the scheme and the rest, or no scheme when the first characters
/// cannot be one.
fn scheme(raw: &str) -> Result<(&str, &str), String> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".to_string()),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// Go's `parseAuthority`: the host (unescaped), after checking the user information.
fn parse_authority(authority: &str) -> Result<String, String> {
    let (userinfo, host) = match authority.rfind('@') {
        Some(i) => (Some(&authority[..i]), &authority[i + 1..]),
        None => (None, authority),
    };
    let host = parse_host(host)?;
    if let Some(userinfo) = userinfo {
        let valid = userinfo.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '-' | '.'
                        | '_'
                        | ':'
                        | '~'
                        | '!'
                        | '$'
                        | '&'
                        | '\''
                        | '('
                        | ')'
                        | '*'
                        | '+'
                        | ','
                        | ';'
                        | '='
                        | '%'
                        | '@'
                )
        });
        if !valid {
            return Err("net/url: invalid userinfo".to_string());
        }
        for part in userinfo.splitn(2, ':') {
            unescape(part.as_bytes(), Mode::UserPassword)?;
        }
    }
    Ok(host)
}

/// Go's `validOptionalPort`: empty, or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// Go's `parseHost`.
fn parse_host(host: &str) -> Result<String, String> {
    if host.starts_with('[') {
        let Some(i) = host.rfind(']') else {
            return Err("missing ']' in host".to_string());
        };
        let colon_port = &host[i + 1..];
        if !valid_optional_port(colon_port) {
            return Err(format!(
                "invalid port {} after host",
                quote(colon_port.as_bytes())
            ));
        }
        if let Some(zone) = host[..i].find("%25") {
            let h1 = unescape(&host.as_bytes()[..zone], Mode::Host)?;
            let h2 = unescape(&host.as_bytes()[zone..i], Mode::Zone)?;
            let h3 = unescape(&host.as_bytes()[i..], Mode::Host)?;
            return Ok(h1 + &h2 + &h3);
        }
    } else if let Some(i) = host.rfind(':') {
        let colon_port = &host[i..];
        if !valid_optional_port(colon_port) {
            return Err(format!(
                "invalid port {} after host",
                quote(colon_port.as_bytes())
            ));
        }
    }
    unescape(host.as_bytes(), Mode::Host)
}

/// The part of a URL being unescaped (Go's `encoding` modes that matter here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    UserPassword,
    Host,
    Zone,
    Fragment,
}

/// Go's `shouldEscape` for the modes above.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
        )
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    if mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*') {
        return false;
    }
    true
}

fn unhex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        _ => c - b'A' + 10,
    }
}

/// Go's `unescape`: `%XX` decoded; bad escapes, and in a host characters that must be
/// escaped, refused with Go's words.
fn unescape(s: &[u8], mode: Mode) -> Result<String, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                let bad = i + 2 >= s.len()
                    || !s[i + 1].is_ascii_hexdigit()
                    || !s[i + 2].is_ascii_hexdigit();
                if bad {
                    let end = (i + 3).min(s.len());
                    return Err(format!("invalid URL escape {}", quote(&s[i..end])));
                }
                let v = unhex(s[i + 1]) << 4 | unhex(s[i + 2]);
                let escape = &s[i..i + 3];
                if mode == Mode::Host && unhex(s[i + 1]) < 8 && escape != b"%25" {
                    return Err(format!("invalid URL escape {}", quote(escape)));
                }
                if mode == Mode::Zone
                    && escape != b"%25"
                    && v != b' '
                    && should_escape(v, Mode::Host)
                {
                    return Err(format!("invalid URL escape {}", quote(escape)));
                }
                out.push(v);
                i += 3;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!(
                        "invalid character {} in host name",
                        quote(&s[i..i + 1])
                    ));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `net.SplitHostPort`, for whether it fails.
fn split_host_port_ok(hostport: &str) -> bool {
    let b = hostport.as_bytes();
    let Some(i) = hostport.rfind(':') else {
        return false;
    };
    let (j, k) = if b[0] == b'[' {
        let Some(end) = hostport.find(']') else {
            return false;
        };
        if end + 1 != i {
            return false;
        }
        (1, end + 1)
    } else {
        if hostport[..i].contains(':') {
            return false;
        }
        (0, 0)
    };
    !hostport[j..].contains('[') && !hostport[k..].contains(']')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(url: &str) -> String {
        match check_peer_urls(&[url.to_string()]) {
            Err(Error::InvalidUrl(m)) => m,
            other => panic!("{url:?} not refused: {other:?}"),
        }
    }

    #[test]
    fn accepts_what_etcd_accepts() {
        for ok in [
            "http://127.0.0.1:2380",
            "https://host:1",
            "HTTP://host:1",
            "  http://x:1 ",
            "unix://sock:1",
            "http://[::1]:2380",
            "http://x:1?query",
            "http://x:1#frag",
            "http://user:pw@x:1",
            "http://é:1",
            "http://[fe80::1%25en0]:1",
            "http://[fe80::1%25%41]:1",
        ] {
            assert!(check_peer_urls(&[ok.to_string()]).is_ok(), "{ok:?} refused");
        }
    }

    /// Messages as etcdctl 3.4.23 prints them for `member add --peer-urls=<url>`.
    #[test]
    fn refuses_in_gos_words() {
        let cases = [
            (
                "ftp://x:1",
                "URL scheme must be http, https, unix, or unixs: ftp://x:1",
            ),
            ("", "URL scheme must be http, https, unix, or unixs: "),
            (
                "http://x",
                "URL address does not have the form \"host:port\": http://x",
            ),
            (
                "http:x:1",
                "URL address does not have the form \"host:port\": http:x:1",
            ),
            (
                "http://a:b:1",
                "URL address does not have the form \"host:port\": http://a:b:1",
            ),
            ("http://x:1/p", "URL must not contain a path: http://x:1/p"),
            ("http://x:1/", "URL must not contain a path: http://x:1/"),
            ("http://[::1", "parse \"http://[::1\": missing ']' in host"),
            (
                "http://a b:1",
                "parse \"http://a b:1\": invalid character \" \" in host name",
            ),
            (":foo", "parse \":foo\": missing protocol scheme"),
            (
                "1a:b",
                "parse \"1a:b\": first path segment in URL cannot contain colon",
            ),
            (
                "http://x:1%zz",
                "parse \"http://x:1%zz\": invalid port \":1%zz\" after host",
            ),
            (
                "http://x:abc",
                "parse \"http://x:abc\": invalid port \":abc\" after host",
            ),
            (
                "http://x%zz:1",
                "parse \"http://x%zz:1\": invalid URL escape \"%zz\"",
            ),
            (
                "http://x%2:1",
                "parse \"http://x%2:1\": invalid URL escape \"%2:\"",
            ),
            (
                "http://x%20:1",
                "parse \"http://x%20:1\": invalid URL escape \"%20\"",
            ),
            (
                "http://x\t:1",
                "parse \"http://x\\t:1\": net/url: invalid control character in URL",
            ),
            (
                "http://x:1/%zz",
                "parse \"http://x:1/%zz\": invalid URL escape \"%zz\"",
            ),
            (
                "http://x:1#%z",
                "parse \"http://x:1#%z\": invalid URL escape \"%z\"",
            ),
            (
                "http://x%41:1",
                "parse \"http://x%41:1\": invalid URL escape \"%41\"",
            ),
            (
                "http://[::1]x:1",
                "parse \"http://[::1]x:1\": invalid port \"x:1\" after host",
            ),
            (
                "http://[::1]:1:2",
                "parse \"http://[::1]:1:2\": invalid port \":1:2\" after host",
            ),
            (
                "http://[fe80::1%25%zz]:1",
                "parse \"http://[fe80::1%25%zz]:1\": invalid URL escape \"%zz\"",
            ),
            ("*", "URL scheme must be http, https, unix, or unixs: *"),
            (
                "http://a[b:1",
                "URL address does not have the form \"host:port\": http://a[b:1",
            ),
            (
                "http://a{b@x:1",
                "parse \"http://a{b@x:1\": net/url: invalid userinfo",
            ),
        ];
        for (url, want) in cases {
            assert_eq!(refusal(url), want, "{url:?}");
        }
        assert_eq!(
            check_peer_urls(&[]).err().map(|e| e.to_string()),
            Some("no valid URLs given".to_string())
        );
        let two = ["http://x:1".to_string(), "http://y".to_string()];
        assert_eq!(
            check_peer_urls(&two).err().map(|e| e.to_string()),
            Some("URL address does not have the form \"host:port\": http://y".to_string())
        );
    }
}
