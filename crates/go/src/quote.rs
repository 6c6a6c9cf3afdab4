//! Go's `strconv.Quote` (`%q`), which Go's programs use to quote values in their
//! messages: strconv's, net/url's and pflag's errors, clientv3's URL errors, etcdctl's
//! output.
//!
//! Invariant: the text is Go's for every input but unassigned code points, which Go
//! escapes and [`quote`] prints as they are (there are no Unicode tables here).

use std::fmt::Write as _;

/// Go's `unicode.IsPrint`, approximated without Unicode tables: controls, separators
/// other than the ASCII space, format characters, private use and noncharacters are not
/// printable; everything else is (unassigned code points are not told apart).
fn is_print(c: char) -> bool {
    let u = c as u32;
    if (0x20..0x7f).contains(&u) {
        return true;
    }
    if c.is_control() {
        return false;
    }
    !matches!(u,
        0xa0 | 0xad | 0x1680 | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x206f
        | 0x3000 | 0x0600..=0x0605 | 0x061c | 0x06dd | 0x070f | 0x08e2 | 0x180e
        | 0xfeff | 0xfff9..=0xfffb | 0x110bd | 0x110cd | 0x1bca0..=0x1bca3
        | 0x1d173..=0x1d17a | 0xe0001 | 0xe0020..=0xe007f | 0xe000..=0xf8ff
        | 0xf0000..=0x10ffff | 0xfdd0..=0xfdef)
        && (u & 0xfffe) != 0xfffe
}

fn escape_rune(out: &mut String, c: char) {
    let u = c as u32;
    let _ = match c {
        '\u{7}' => write!(out, "\\a"),
        '\u{8}' => write!(out, "\\b"),
        '\u{c}' => write!(out, "\\f"),
        '\n' => write!(out, "\\n"),
        '\r' => write!(out, "\\r"),
        '\t' => write!(out, "\\t"),
        '\u{b}' => write!(out, "\\v"),
        _ if u < 0x20 || u == 0x7f => write!(out, "\\x{u:02x}"),
        _ if u < 0x10000 => write!(out, "\\u{u:04x}"),
        _ => write!(out, "\\U{u:08x}"),
    };
}

/// Go's `strconv.Quote` of bytes (`%q`): printable runes as they are, escapes for the
/// rest, `\x..` for bytes that are not UTF-8.
pub fn quote(b: &[u8]) -> String {
    let mut out = String::from("\"");
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if is_print(c) => out.push(c),
                c => escape_rune(&mut out, c),
            }
        }
        for x in chunk.invalid() {
            let _ = write!(out, "\\x{x:02x}");
        }
    }
    out.push('"');
    out
}

/// [`quote`] of a string.
pub fn quote_str(s: &str) -> String {
    quote(s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_like_go() {
        assert_eq!(quote(b"a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote(b"\x00\x07\n\x7f"), r#""\x00\a\n\x7f""#);
        assert_eq!(quote(&[0xff, b'a']), r#""\xffa""#);
        assert_eq!(
            quote("h\u{e9}llo \u{2713}".as_bytes()),
            "\"h\u{e9}llo \u{2713}\""
        );
        assert_eq!(quote("\u{a0}\u{feff}".as_bytes()), r#""\u00a0\ufeff""#);
        assert_eq!(quote("\u{10ffff}".as_bytes()), r#""\U0010ffff""#);
        assert_eq!(quote_str("x'y"), r#""x'y""#);
    }
}
