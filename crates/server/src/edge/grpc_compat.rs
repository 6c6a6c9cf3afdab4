//! Makes tonic's transport-level errors look like grpc-go's, which etcd clients expect.
//!
//! A request over the size limit is refused by tonic with `OutOfRange` "Error, decoded
//! message length too large: found N bytes, the limit is: M bytes"; etcd (grpc-go) says
//! `ResourceExhausted` "grpc: received message larger than max (N vs. M)".

use axum::http::{HeaderMap, HeaderValue};

const TONIC_TOO_LARGE: &str = "Error, decoded message length too large: found ";

/// Rewrites a too-large status in a gRPC answer's headers (or trailers-only headers).
pub fn rewrite_headers(h: &mut HeaderMap) {
    let is_out_of_range = h.get("grpc-status").is_some_and(|v| v == "11");
    if !is_out_of_range {
        return;
    }
    let Some(msg) = h
        .get("grpc-message")
        .and_then(|v| v.to_str().ok())
        .map(percent_decode)
    else {
        return;
    };
    let Some(rest) = msg.strip_prefix(TONIC_TOO_LARGE) else {
        return;
    };
    let numbers: Vec<&str> = rest
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .collect();
    if let [found, limit] = numbers[..] {
        let text = format!("grpc: received message larger than max ({found} vs. {limit})");
        if let Ok(v) = HeaderValue::from_str(&percent_encode(&text)) {
            h.insert("grpc-status", HeaderValue::from_static("8"));
            h.insert("grpc-message", v);
        }
    }
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.bytes() {
        if (0x20..0x7f).contains(&c) && c != b'%' {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_size_errors_only() {
        let mut r = HeaderMap::new();
        r.insert("grpc-status", HeaderValue::from_static("11"));
        r.insert(
            "grpc-message",
            HeaderValue::from_static("Error,%20decoded%20message%20length%20too%20large:%20found%20716810%20bytes,%20the%20limit%20is:%20589824%20bytes"),
        );
        rewrite_headers(&mut r);
        assert_eq!(r["grpc-status"], "8");
        assert_eq!(
            percent_decode(r["grpc-message"].to_str().expect("ascii")),
            "grpc: received message larger than max (716810 vs. 589824)"
        );
        let mut other = HeaderMap::new();
        other.insert("grpc-status", HeaderValue::from_static("11"));
        other.insert(
            "grpc-message",
            HeaderValue::from_static("etcdserver: mvcc: required revision has been compacted"),
        );
        rewrite_headers(&mut other);
        assert_eq!(other["grpc-status"], "11");
    }
}
