//! The syntax of etcdctl's txn input, reproduced from how etcdctl 3.4 reads it:
//! comparisons are scanned like Go's `fmt.Sscanf(rest, "%q) %s %q")` after the target
//! and `(`, and request lines are split like its `argify` regular expression
//! (`"(?:[^"\\]|\\.)*"|'[^']*'|[^'"\s]\S*[^'"\s]?`) and then parsed as the get, put and
//! del commands parse their arguments.

use oxcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use oxcd_api::etcdserverpb::request_op::Request;
use oxcd_api::etcdserverpb::{Compare, RequestOp};
use oxcd_go::quote::quote;
use oxcd_go::strconv;

use super::kv::{DEL, GET, PUT, delete_request, put_request, range_request};
use super::lookup::strip_flags;
use crate::args::{self, HELP};
use crate::command::Command;
use crate::fail::{Fail, exit};

fn invalid(msg: String) -> Fail {
    Fail::new(exit::INVALID_INPUT, msg)
}

/// Go's `strconv.Unquote` of a double-quoted literal's inside: `None` on a bad escape.
fn unquote(inner: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut chars = inner.chars().peekable();
    let hex = |chars: &mut std::iter::Peekable<std::str::Chars>, n: usize| -> Option<u32> {
        let mut v = 0u32;
        for _ in 0..n {
            v = v * 16 + chars.next()?.to_digit(16)?;
        }
        Some(v)
    };
    while let Some(c) = chars.next() {
        if c == '\n' || c == '"' {
            return None;
        }
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let e = chars.next()?;
        let ch = match e {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\\' => '\\',
            '"' => '"',
            'x' => {
                out.push(u8::try_from(hex(&mut chars, 2)?).ok()?);
                continue;
            }
            '0'..='7' => {
                let mut v = e.to_digit(8)?;
                for _ in 0..2 {
                    v = v * 8 + chars.next()?.to_digit(8)?;
                }
                out.push(u8::try_from(v).ok()?);
                continue;
            }
            'u' => char::from_u32(hex(&mut chars, 4)?)?,
            'U' => char::from_u32(hex(&mut chars, 8)?)?,
            _ => return None,
        };
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
    }
    Some(out)
}

/// Go's `fmt` scanner over one line, with `Sscanf`'s rules for spaces.
struct Scanner<'a> {
    rest: &'a str,
}

fn is_space(c: char) -> bool {
    c.is_whitespace() && c != '\n'
}

impl Scanner<'_> {
    fn skip_space(&mut self) {
        self.rest = self.rest.trim_start_matches(is_space);
    }

    /// `%q`: a double-quoted (escapes) or back-quoted (raw) string.
    fn quoted(&mut self) -> Option<Vec<u8>> {
        self.skip_space();
        let s = self.rest;
        if let Some(body) = s.strip_prefix('`') {
            let end = body.find('`')?;
            self.rest = &body[end + 1..];
            return Some(body.as_bytes()[..end].to_vec());
        }
        let body = s.strip_prefix('"')?;
        let mut escaped = false;
        for (i, c) in body.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    self.rest = &body[i + 1..];
                    return unquote(&body[..i]);
                }
                _ => {}
            }
        }
        None
    }

    /// `%s`: the next run of non-space characters.
    fn token(&mut self) -> Option<String> {
        self.skip_space();
        if self.rest.is_empty() {
            return None;
        }
        let end = self.rest.find(is_space).unwrap_or(self.rest.len());
        let t = self.rest[..end].to_string();
        self.rest = &self.rest[end..];
        Some(t)
    }

    /// A literal character of the format.
    fn literal(&mut self, c: char) -> bool {
        match self.rest.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    /// A space in the format: one or more spaces in the input, or its end.
    fn space(&mut self) -> bool {
        if !self.rest.is_empty() && !self.rest.starts_with(is_space) {
            return false;
        }
        self.skip_space();
        true
    }
}

/// What `Sscanf(s, "%q) %s %q", &key, &op, &val)` fills in, and how many.
fn scan_compare(s: &str) -> (usize, Vec<u8>, String, Vec<u8>) {
    let mut sc = Scanner { rest: s };
    let (mut key, mut op, mut val) = (Vec::new(), String::new(), Vec::new());
    let n = 'scan: {
        match sc.quoted() {
            Some(k) => key = k,
            None => break 'scan 0,
        }
        if !sc.literal(')') || !sc.space() {
            break 'scan 1;
        }
        match sc.token() {
            Some(o) => op = o,
            None => break 'scan 1,
        }
        if !sc.space() {
            break 'scan 2;
        }
        match sc.quoted() {
            Some(v) => val = v,
            None => break 'scan 2,
        }
        3
    };
    (n, key, op, val)
}

/// Parses `target("key") op "value"`.
pub fn parse_compare(line: &str) -> Result<Compare, Fail> {
    let Some((target, rest)) = line.split_once('(') else {
        return Err(invalid(format!("malformed comparison: {line}")));
    };
    let (n, key, op, val) = scan_compare(rest);
    if n != 3 {
        return Err(invalid(format!(
            "malformed comparison: {line}; got {target}({}) {op} {}",
            quote(&key),
            quote(&val)
        )));
    }
    let int = || {
        strconv::parse_int(&String::from_utf8_lossy(&val), 10, 64)
            .map_err(|_| invalid(format!("invalid txn compare request: {line}")))
    };
    let (t, union) = match target {
        "ver" | "version" => (CompareTarget::Version, TargetUnion::Version(int()?)),
        "c" | "create" => (CompareTarget::Create, TargetUnion::CreateRevision(int()?)),
        "m" | "mod" => (CompareTarget::Mod, TargetUnion::ModRevision(int()?)),
        "val" | "value" => (CompareTarget::Value, TargetUnion::Value(val.clone())),
        "lease" => (CompareTarget::Lease, TargetUnion::Lease(int()?)),
        other => {
            return Err(invalid(format!(
                "malformed comparison: {line} (unknown target {other})"
            )));
        }
    };
    // etcdctl panics on any other operator; refuse it as malformed instead.
    let result = match op.as_str() {
        "=" => CompareResult::Equal,
        "!=" => CompareResult::NotEqual,
        ">" => CompareResult::Greater,
        "<" => CompareResult::Less,
        _ => {
            return Err(invalid(format!(
                "malformed comparison: {line} (unknown op {op})"
            )));
        }
    };
    Ok(Compare {
        result: result as i32,
        target: t as i32,
        key,
        target_union: Some(union),
        range_end: Vec::new(),
    })
}

fn is_re_space(b: u8) -> bool {
    matches!(b, b'\t' | b'\n' | b'\x0c' | b'\r' | b' ')
}

/// Splits a request line as etcdctl's `argify` does. A single-quoted word is cut as
/// etcdctl 3.4 cuts it (`word[1 : number of words - 1]`, a bug kept for identical
/// results); where etcdctl would crash on that cut, the line is refused.
pub fn argify(line: &str) -> Result<Vec<String>, Fail> {
    let b = line.as_bytes();
    let mut words: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if is_re_space(c) {
            i += 1;
            continue;
        }
        let end = match c {
            b'"' => {
                let mut j = i + 1;
                loop {
                    match b.get(j) {
                        None => break None,
                        Some(b'\\') if b.get(j + 1).is_some_and(|&n| n != b'\n') => j += 2,
                        Some(b'\\') => break None,
                        Some(b'"') => break Some(j + 1),
                        Some(_) => j += 1,
                    }
                }
            }
            b'\'' => b[i + 1..]
                .iter()
                .position(|&x| x == b'\'')
                .map(|p| i + p + 2),
            _ => Some(
                b[i..]
                    .iter()
                    .position(|&x| is_re_space(x))
                    .map_or(b.len(), |p| i + p),
            ),
        };
        match end {
            Some(e) => {
                words.push(&line[i..e]);
                i = e;
            }
            None => i += 1,
        }
    }
    let n = words.len();
    let mut out = Vec::with_capacity(n);
    for w in &words {
        let v = if w.starts_with('\'') {
            let cut = w.as_bytes().get(1..n.saturating_sub(1)).filter(|_| n >= 2);
            let cut = cut.ok_or_else(|| invalid(format!("invalid txn request: {line}")))?;
            String::from_utf8_lossy(cut).into_owned()
        } else if let Some(inner) = w.strip_prefix('"').and_then(|x| x.strip_suffix('"')) {
            let v = unquote(inner).ok_or_else(|| invalid("invalid syntax".into()))?;
            String::from_utf8_lossy(&v).into_owned()
        } else {
            w.to_string()
        };
        out.push(v);
    }
    Ok(out)
}

const REQUESTS: [&Command; 3] = [&PUT, &GET, &DEL];

/// Parses one request line as the get, put or del command would.
pub fn parse_request(line: &str) -> Result<RequestOp, Fail> {
    let words = argify(line)?;
    if words.len() < 2 {
        return Err(invalid(format!("invalid txn compare request: {line}")));
    }
    let bad = || invalid(format!("invalid txn request: {line}"));
    let first = strip_flags(&words, &[HELP]);
    let word = first.first().ok_or_else(bad)?;
    let matching: Vec<&Command> = REQUESTS
        .into_iter()
        .filter(|c| c.name().starts_with(word.as_str()))
        .collect();
    let exact = REQUESTS.into_iter().find(|c| c.name() == word);
    let cmd = match (exact, matching.as_slice()) {
        (Some(c), _) | (None, &[c]) => c,
        _ => return Err(bad()),
    };
    let mut rest = words.clone();
    if let Some(i) = rest.iter().position(|w| w == word) {
        rest.remove(i);
    }
    let mut specs = cmd.flags.to_vec();
    specs.push(HELP);
    let parsed = match args::parse(&rest, &specs) {
        Ok(p) if !p.flag("help") => p,
        Ok(_) => return Err(bad()),
        Err(_) => {
            let mut f = bad();
            f.partial = crate::output::Out::err(crate::help::cobra_usage(cmd));
            return Err(f);
        }
    };
    let request = match cmd.name() {
        "get" => Request::RequestRange(range_request(&parsed)?),
        "put" => Request::RequestPut(put_request(&parsed, None)?),
        _ => Request::RequestDeleteRange(delete_request(&parsed)?),
    };
    Ok(RequestOp {
        request: Some(request),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(r: Result<Compare, Fail>) -> String {
        r.err().and_then(|f| f.msg).unwrap_or_default()
    }

    #[test]
    fn compares_like_sscanf() {
        let c = parse_compare(r#"mod("k") > "5""#).expect("cmp");
        assert_eq!(c.target_union, Some(TargetUnion::ModRevision(5)));
        let c = parse_compare(r#"value( "a\tb")   =   `x"y` trailing"#).expect("cmp");
        assert_eq!(
            (c.key.as_slice(), c.target_union),
            (&b"a\tb"[..], Some(TargetUnion::Value(b"x\"y".to_vec())))
        );
        assert_eq!(
            msg(parse_compare(r#"value("q")="2""#)),
            r#"malformed comparison: value("q")="2"; got value("q")  """#
        );
        assert_eq!(
            msg(parse_compare(r#"value(q) = "2""#)),
            r#"malformed comparison: value(q) = "2"; got value("")  """#
        );
        assert_eq!(
            msg(parse_compare(r#"value("q") = 2"#)),
            r#"malformed comparison: value("q") = 2; got value("q") = """#
        );
        assert_eq!(msg(parse_compare("bogus")), "malformed comparison: bogus");
        assert_eq!(
            msg(parse_compare(r#"version("q") = "abc""#)),
            r#"invalid txn compare request: version("q") = "abc""#
        );
        assert_eq!(
            msg(parse_compare(r#"foo("q") = "2""#)),
            r#"malformed comparison: foo("q") = "2" (unknown target foo)"#
        );
    }

    #[test]
    fn argify_like_etcdctl() {
        let a = |s: &str| argify(s).unwrap_or_default();
        assert_eq!(
            a(r#"put "a b" "v\"1" --prev-kv"#),
            ["put", "a b", "v\"1", "--prev-kv"]
        );
        assert_eq!(a("  get   k  "), ["get", "k"]);
        assert_eq!(a(r#"put k"x y" v"#), ["put", "k\"x", "y\"", "v"]);
        assert_eq!(a(r#"put "unterminated v"#), ["put", "unterminated", "v"]);
        // etcdctl's cut of single-quoted words: [1 : number of words - 1].
        assert_eq!(a("put 'abcdef' v"), ["put", "a", "v"]);
        assert!(argify("'x'").is_err());
    }

    #[test]
    fn requests() {
        let r = parse_request("g k --prefix").expect("get");
        assert!(matches!(r.request, Some(Request::RequestRange(_))));
        let e = parse_request("put x y --nosuchflag").expect_err("bad flag");
        assert_eq!(
            e.msg.as_deref(),
            Some("invalid txn request: put x y --nosuchflag")
        );
        assert!(
            e.partial
                .stderr()
                .starts_with("Usage:\n   put [options] <key> <value>")
        );
        let e = parse_request("put").expect_err("short");
        assert_eq!(e.msg.as_deref(), Some("invalid txn compare request: put"));
    }
}
