//! Flags parsed as spf13/pflag parses them (etcdutl's parser), with its error texts:
//! `--name value`, `--name=value`, `-x value`, `-xvalue`, `-x=value`, booleans without a
//! value, `--` ending the flags; flags and arguments in any order.

use std::collections::HashMap;

/// A flag's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A boolean: `--flag` is true.
    Bool,
    /// A string.
    Str,
    /// A uint64 (Go's `strconv.ParseUint(s, 0, 64)`).
    Uint,
}

/// A flag.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Its long name.
    pub name: &'static str,
    /// Its one-letter name, if any.
    pub short: Option<char>,
    /// Its type.
    pub kind: Kind,
    /// Its default, as text.
    pub default: &'static str,
    /// Its help text.
    pub usage: &'static str,
}

/// The flags and arguments of a command line.
#[derive(Debug, Default)]
pub struct Parsed {
    values: HashMap<&'static str, String>,
    /// Positional arguments, in order.
    pub args: Vec<String>,
}

impl Parsed {
    /// The value of flag `name` (its default when not given).
    pub fn get<'a>(&'a self, name: &str, specs: &'a [Spec]) -> &'a str {
        self.values
            .get(name)
            .map(String::as_str)
            .or_else(|| specs.iter().find(|s| s.name == name).map(|s| s.default))
            .unwrap_or("")
    }

    /// Whether flag `name` was given.
    pub fn is_set(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// A boolean flag's value.
    pub fn flag(&self, name: &str, specs: &[Spec]) -> bool {
        parse_bool(self.get(name, specs)).unwrap_or(false)
    }

    /// A uint64 flag's value (checked when parsed).
    pub fn uint(&self, name: &str, specs: &[Spec]) -> u64 {
        parse_uint(self.get(name, specs)).unwrap_or(0)
    }
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Go's `strconv.ParseUint(s, 0, 64)`, with its error text.
pub fn parse_uint(s: &str) -> Result<u64, String> {
    let syntax = || format!("strconv.ParseUint: parsing {}: invalid syntax", quote(s));
    let (digits, radix) = match s.get(..2) {
        Some("0x" | "0X") => (&s[2..], 16),
        Some("0b" | "0B") => (&s[2..], 2),
        Some("0o" | "0O") => (&s[2..], 8),
        _ if s.len() > 1 && s.starts_with('0') => (&s[1..], 8),
        _ => (s, 10),
    };
    // Underscores only between digits, and only with a base prefix (Go's rule).
    let prefixed = radix != 10 || digits.len() != s.len();
    if digits.is_empty()
        || (digits.contains('_')
            && (!prefixed
                || digits.starts_with('_')
                || digits.ends_with('_')
                || digits.contains("__")))
    {
        return Err(syntax());
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    if !clean.chars().all(|c| c.is_digit(radix)) {
        return Err(syntax());
    }
    u64::from_str_radix(&clean, radix).map_err(|_| {
        format!(
            "strconv.ParseUint: parsing {}: value out of range",
            quote(s)
        )
    })
}

/// Go's `%q` of a plain string.
pub fn quote(s: &str) -> String {
    format!("{s:?}")
}

/// Parses `argv` against `specs` (`-h/--help` among them).
pub fn parse(argv: &[String], specs: &[Spec]) -> Result<Parsed, String> {
    let mut p = Parsed::default();
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        i += 1;
        if a == "--" {
            p.args.extend(argv[i..].iter().cloned());
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| format!("unknown flag: --{name}"))?;
            let value = match (inline, spec.kind) {
                (Some(v), _) => v,
                (None, Kind::Bool) => "true".to_string(),
                (None, _) => {
                    let v = argv
                        .get(i)
                        .ok_or_else(|| format!("flag needs an argument: --{name}"))?;
                    i += 1;
                    v.clone()
                }
            };
            set(&mut p, spec, value)?;
        } else if a.len() > 1 && a.starts_with('-') {
            let mut rest = &a[1..];
            while let Some(c) = rest.chars().next() {
                let spec = specs
                    .iter()
                    .find(|s| s.short == Some(c))
                    .ok_or_else(|| format!("unknown shorthand flag: '{c}' in {a}"))?;
                rest = &rest[c.len_utf8()..];
                let value = if let Some(v) = rest.strip_prefix('=') {
                    let v = v.to_string();
                    rest = "";
                    v
                } else if spec.kind == Kind::Bool {
                    "true".to_string()
                } else if !rest.is_empty() {
                    let v = rest.to_string();
                    rest = "";
                    v
                } else {
                    let v = argv
                        .get(i)
                        .ok_or_else(|| format!("flag needs an argument: '{c}' in -{c}"))?;
                    i += 1;
                    v.clone()
                };
                set(&mut p, spec, value)?;
            }
        } else {
            p.args.push(a.clone());
        }
    }
    Ok(p)
}

fn set(p: &mut Parsed, spec: &Spec, value: String) -> Result<(), String> {
    let bad = |why: String| {
        let name = match spec.short {
            Some(c) => format!("-{c}, --{}", spec.name),
            None => format!("--{}", spec.name),
        };
        format!(
            "invalid argument {} for {} flag: {why}",
            quote(&value),
            quote(&name)
        )
    };
    match spec.kind {
        Kind::Bool => {
            parse_bool(&value).ok_or_else(|| {
                bad(format!(
                    "strconv.ParseBool: parsing {}: invalid syntax",
                    quote(&value)
                ))
            })?;
        }
        Kind::Uint => {
            parse_uint(&value).map_err(bad)?;
        }
        Kind::Str => {}
    }
    p.values.insert(spec.name, value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[Spec] = &[
        Spec {
            name: "write-out",
            short: Some('w'),
            kind: Kind::Str,
            default: "simple",
            usage: "",
        },
        Spec {
            name: "bump-revision",
            short: None,
            kind: Kind::Uint,
            default: "0",
            usage: "",
        },
        Spec {
            name: "mark-compacted",
            short: None,
            kind: Kind::Bool,
            default: "false",
            usage: "",
        },
    ];

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn pflag_forms() {
        let p = parse(
            &argv("a -wjson --mark-compacted b --bump-revision 0x10"),
            SPECS,
        )
        .expect("parse");
        assert_eq!(p.args, ["a", "b"]);
        assert_eq!(p.get("write-out", SPECS), "json");
        assert!(p.flag("mark-compacted", SPECS));
        assert_eq!(p.uint("bump-revision", SPECS), 16);
        let p = parse(&argv("-w=table -- --x"), SPECS).expect("parse");
        assert_eq!(p.get("write-out", SPECS), "table");
        assert_eq!(p.args, ["--x"]);
        assert_eq!(
            parse(&argv("--bogus"), SPECS).expect_err("unknown"),
            "unknown flag: --bogus"
        );
        assert_eq!(
            parse(&argv("-x"), SPECS).expect_err("unknown"),
            "unknown shorthand flag: 'x' in -x"
        );
        assert_eq!(
            parse(&argv("--bump-revision x"), SPECS).expect_err("bad"),
            "invalid argument \"x\" for \"--bump-revision\" flag: strconv.ParseUint: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            parse(&argv("--bump-revision"), SPECS).expect_err("missing"),
            "flag needs an argument: --bump-revision"
        );
        assert_eq!(
            parse_uint("18446744073709551616").expect_err("range"),
            "strconv.ParseUint: parsing \"18446744073709551616\": value out of range"
        );
    }
}
