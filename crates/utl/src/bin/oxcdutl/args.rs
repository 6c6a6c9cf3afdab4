//! Flags parsed as spf13/pflag parses them (etcdutl's parser), with its error texts:
//! `--name value`, `--name=value`, `-x value`, `-xvalue`, `-x=value`, booleans without a
//! value, `--` ending the flags; flags and arguments in any order.

use std::collections::HashMap;

use oxcd_go::quote::quote_str;
use oxcd_go::strconv;

/// A flag's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A boolean: `--flag` is true.
    Bool,
    /// A string.
    Str,
    /// A uint64 (Go's `strconv.ParseUint(s, 0, 64)`).
    Uint,
    /// An int64 (Go's `strconv.ParseInt(s, 0, 64)`).
    Int,
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
        strconv::parse_bool(self.get(name, specs)).unwrap_or(false)
    }

    /// A uint64 flag's value (checked when parsed).
    pub fn uint(&self, name: &str, specs: &[Spec]) -> u64 {
        strconv::parse_uint(self.get(name, specs), 0, 64).unwrap_or(0)
    }

    /// Flag `name` as an int64 (checked when parsed).
    pub fn int(&self, name: &str, specs: &[Spec]) -> i64 {
        strconv::parse_int(self.get(name, specs), 0, 64).unwrap_or(0)
    }
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
            quote_str(&value),
            quote_str(&name)
        )
    };
    match spec.kind {
        Kind::Bool => {
            strconv::parse_bool(&value).map_err(|e| bad(e.to_string()))?;
        }
        Kind::Uint => {
            strconv::parse_uint(&value, 0, 64).map_err(|e| bad(e.to_string()))?;
        }
        Kind::Int => {
            strconv::parse_int(&value, 0, 64).map_err(|e| bad(e.to_string()))?;
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
            parse(&argv("--bump-revision 18446744073709551616"), SPECS).expect_err("range"),
            "invalid argument \"18446744073709551616\" for \"--bump-revision\" flag: strconv.ParseUint: parsing \"18446744073709551616\": value out of range"
        );
        assert_eq!(
            parse(&argv("--mark-compacted=maybe"), SPECS).expect_err("bad"),
            "invalid argument \"maybe\" for \"--mark-compacted\" flag: strconv.ParseBool: parsing \"maybe\": invalid syntax"
        );
    }
}
