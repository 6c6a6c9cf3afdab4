//! A command-line parser that behaves like pflag, which etcdctl uses: long flags
//! `--name value` / `--name=value`, shorthands `-w json` / `-wjson` / `-w=json` and
//! grouped booleans `-ih`, booleans without a value, flags anywhere among the arguments,
//! `--` ending flags. Values are checked by type when parsed, with pflag's error texts.

use std::collections::HashMap;

use oxcd_go::quote::quote_str;
use oxcd_go::strconv;

/// A flag's type, which decides how its value is checked and how help shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `--name` or `--name=false`.
    Bool,
    /// Any text (help quotes the default).
    Str,
    /// A Go int64 (base prefixes allowed, as pflag's `Int64Var`).
    Int64,
    /// A Go duration (`2s`, `500ms`).
    Duration,
    /// A comma-separated list; given twice, the lists are joined.
    StrSlice,
}

/// A flag a command accepts.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Long name.
    pub name: &'static str,
    /// One-letter shorthand.
    pub short: Option<char>,
    /// Type.
    pub kind: Kind,
    /// Default value, as help prints it.
    pub default: &'static str,
    /// One-line description for help.
    pub usage: &'static str,
}

impl Spec {
    /// The same flag with a shorthand.
    pub const fn short(self, c: char) -> Spec {
        Spec {
            short: Some(c),
            ..self
        }
    }

    /// The same flag with another default.
    pub const fn default(self, d: &'static str) -> Spec {
        Spec { default: d, ..self }
    }

    /// How pflag names the flag in a value error: `-w, --write-out` or `--limit`.
    fn display_name(&self) -> String {
        match self.short {
            Some(c) => format!("-{c}, --{}", self.name),
            None => format!("--{}", self.name),
        }
    }
}

const fn spec(name: &'static str, kind: Kind, default: &'static str, usage: &'static str) -> Spec {
    Spec {
        name,
        short: None,
        kind,
        default,
        usage,
    }
}

/// A boolean flag, false by default.
pub const fn boolean(name: &'static str, usage: &'static str) -> Spec {
    spec(name, Kind::Bool, "false", usage)
}

/// A text flag.
pub const fn string(name: &'static str, default: &'static str, usage: &'static str) -> Spec {
    spec(name, Kind::Str, default, usage)
}

/// An int64 flag, 0 by default.
pub const fn int64(name: &'static str, usage: &'static str) -> Spec {
    spec(name, Kind::Int64, "0", usage)
}

/// A duration flag.
pub const fn duration(name: &'static str, default: &'static str, usage: &'static str) -> Spec {
    spec(name, Kind::Duration, default, usage)
}

/// A list flag.
pub const fn list(name: &'static str, default: &'static str, usage: &'static str) -> Spec {
    spec(name, Kind::StrSlice, default, usage)
}

/// cobra's `-h, --help`, which every command has (help prints its usage as
/// `help for <command>`).
pub const HELP: Spec = boolean("help", "").short('h');

/// Parsed flags and positional arguments.
#[derive(Debug, Default, Clone)]
pub struct Parsed {
    set: HashMap<&'static str, String>,
    specs: Vec<Spec>,
    /// Positional arguments in order.
    pub args: Vec<String>,
    /// How many positional arguments came before a `--` (cobra's ArgsLenAtDash).
    pub args_before_dash: Option<usize>,
}

impl Parsed {
    fn spec(&self, name: &str) -> Option<&Spec> {
        self.specs.iter().find(|s| s.name == name)
    }

    /// A flag's value (its default when not given).
    pub fn get(&self, name: &str) -> &str {
        match self.set.get(name) {
            Some(v) => v,
            None => self.spec(name).map(|s| s.default).unwrap_or(""),
        }
    }

    /// Whether the flag was given.
    pub fn is_set(&self, name: &str) -> bool {
        self.set.contains_key(name)
    }

    /// The flags that were given, by name.
    pub fn given(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.set.keys().copied()
    }

    /// Whether a flag of this name exists here.
    pub fn knows(&self, name: &str) -> bool {
        self.spec(name).is_some()
    }

    /// A boolean flag.
    pub fn flag(&self, name: &str) -> bool {
        strconv::parse_bool(self.get(name)).unwrap_or(false)
    }

    /// An int64 flag (checked when parsed).
    pub fn int(&self, name: &str) -> i64 {
        strconv::parse_int(self.get(name), 0, 64).unwrap_or(0)
    }

    /// A duration flag (checked when parsed); negative durations count as zero.
    pub fn duration(&self, name: &str) -> std::time::Duration {
        let ns = oxcd_go::duration::parse(self.get(name)).unwrap_or(0);
        std::time::Duration::from_nanos(u64::try_from(ns).unwrap_or(0))
    }

    /// A list flag.
    pub fn list(&self, name: &str) -> Vec<String> {
        self.get(name)
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// Sets a flag from elsewhere (the environment), as `fs.Set` would: the value is
    /// checked by type and refused with pflag's error.
    pub fn set_checked(&mut self, name: &str, v: &str) -> Result<(), String> {
        let spec = *self
            .spec(name)
            .ok_or_else(|| format!("no such flag -{name}"))?;
        self.store(&spec, v.to_string())
    }

    fn store(&mut self, spec: &Spec, v: String) -> Result<(), String> {
        let check = match spec.kind {
            Kind::Bool => strconv::parse_bool(&v)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Kind::Int64 => strconv::parse_int(&v, 0, 64)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Kind::Duration => oxcd_go::duration::parse(&v).map(|_| ()),
            Kind::Str | Kind::StrSlice => Ok(()),
        };
        check.map_err(|e| {
            format!(
                "invalid argument {} for {} flag: {e}",
                quote_str(&v),
                quote_str(&spec.display_name())
            )
        })?;
        let v = match (spec.kind, self.set.get(spec.name)) {
            (Kind::StrSlice, Some(old)) => format!("{old},{v}"),
            _ => v,
        };
        self.set.insert(spec.name, v);
        Ok(())
    }
}

/// Parses `argv` against `specs`. The error is pflag's text.
pub fn parse(argv: &[String], specs: &[Spec]) -> Result<Parsed, String> {
    let mut p = Parsed {
        specs: specs.to_vec(),
        ..Default::default()
    };
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        i += 1;
        if a == "--" {
            p.args_before_dash = Some(p.args.len());
            p.args.extend(argv[i..].iter().cloned());
            break;
        }
        if let Some(body) = a.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            if name.is_empty() || name.starts_with('-') || name.starts_with('=') {
                return Err(format!("bad flag syntax: {a}"));
            }
            let spec = *specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| format!("unknown flag: --{name}"))?;
            let v = match (inline, spec.kind) {
                (Some(v), _) => v,
                (None, Kind::Bool) => "true".to_string(),
                (None, _) => {
                    let v = argv
                        .get(i)
                        .ok_or_else(|| format!("flag needs an argument: {a}"))?;
                    i += 1;
                    v.clone()
                }
            };
            p.store(&spec, v)?;
        } else if a.len() > 1 && a.starts_with('-') {
            let mut shorts = &a[1..];
            while let Some(c) = shorts.chars().next() {
                let spec = *specs
                    .iter()
                    .find(|s| s.short == Some(c))
                    .ok_or_else(|| format!("unknown shorthand flag: '{c}' in -{shorts}"))?;
                let rest = &shorts[c.len_utf8()..];
                let v = if rest.len() > 1 && rest.starts_with('=') {
                    shorts = "";
                    rest[1..].to_string()
                } else if spec.kind == Kind::Bool {
                    shorts = rest;
                    "true".to_string()
                } else if !rest.is_empty() {
                    shorts = "";
                    rest.to_string()
                } else {
                    let v = argv
                        .get(i)
                        .ok_or_else(|| format!("flag needs an argument: '{c}' in -{shorts}"))?;
                    i += 1;
                    shorts = "";
                    v.clone()
                };
                p.store(&spec, v)?;
            }
        } else {
            p.args.push(a.clone());
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    const SPECS: [Spec; 4] = [
        boolean("prefix", ""),
        int64("limit", ""),
        string("write-out", "simple", "").short('w'),
        boolean("interactive", "").short('i'),
    ];

    #[test]
    fn pflag_like() {
        let p = parse(
            &v(&["k", "--prefix", "--limit=2", "-w", "json", "end"]),
            &SPECS,
        )
        .expect("parse");
        assert_eq!(p.args, ["k", "end"]);
        assert!(p.flag("prefix"));
        assert_eq!((p.int("limit"), p.get("write-out")), (2, "json"));
        let p = parse(&v(&["-wjson", "--", "--prefix"]), &SPECS).expect("parse");
        assert_eq!(
            (p.get("write-out"), p.args.as_slice()),
            ("json", &["--prefix".to_string()][..])
        );
        let p = parse(&v(&["-iw=fields", "-"]), &SPECS).expect("parse");
        assert!(p.flag("interactive"));
        assert_eq!(
            (p.get("write-out"), p.args.as_slice()),
            ("fields", &v(&["-"])[..])
        );
        let p = parse(&v(&["--limit", "-1"]), &SPECS).expect("parse");
        assert_eq!(p.int("limit"), -1);
    }

    #[test]
    fn pflag_errors() {
        let err = |a: &[&str]| parse(&v(a), &SPECS).expect_err("error");
        assert_eq!(err(&["--nope"]), "unknown flag: --nope");
        assert_eq!(err(&["-5"]), "unknown shorthand flag: '5' in -5");
        assert_eq!(err(&["-iz"]), "unknown shorthand flag: 'z' in -z");
        assert_eq!(err(&["--limit"]), "flag needs an argument: --limit");
        assert_eq!(err(&["-w"]), "flag needs an argument: 'w' in -w");
        assert_eq!(err(&["---x"]), "bad flag syntax: ---x");
        assert_eq!(
            err(&["--limit", "x"]),
            r#"invalid argument "x" for "--limit" flag: strconv.ParseInt: parsing "x": invalid syntax"#
        );
        assert_eq!(
            err(&["-i=maybe"]),
            r#"invalid argument "maybe" for "-i, --interactive" flag: strconv.ParseBool: parsing "maybe": invalid syntax"#
        );
    }
}
