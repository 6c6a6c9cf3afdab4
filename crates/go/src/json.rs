//! A string as Go's `encoding/json` writes it, which etcdctl's JSON output and zap's
//! JSON log fields are made of.
//!
//! Invariant: Go's bytes for every valid UTF-8 string: HTML-safe (`<`, `>`, `&` as
//! `\u003c`, `\u003e`, `\u0026`), U+2028 and U+2029 escaped, other control characters as
//! `\u00XX` but `\n`, `\r`, `\t`.

use std::fmt::Write as _;

/// `s` as a JSON string, quotes included.
pub fn json_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_as_go() {
        assert_eq!(json_string("<a&b>\u{1}"), r#""\u003ca\u0026b\u003e\u0001""#);
        assert_eq!(json_string("a\"b\\c\n\t\r"), r#""a\"b\\c\n\t\r""#);
        assert_eq!(json_string("é\u{2028}"), "\"é\\u2028\"");
    }
}
