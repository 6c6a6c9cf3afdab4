//! A command-line parser that behaves like cobra/pflag, which etcdctl uses: long flags
//! `--name value` / `--name=value`, shorthands `-w json`, boolean flags without a value,
//! flags anywhere among the arguments, `--` ending flags.

use std::collections::HashMap;

/// A flag a command accepts.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// Long name.
    pub name: &'static str,
    /// One-letter shorthand.
    pub short: Option<char>,
    /// Takes no value (`--prefix`), or `--prefix=false`.
    pub boolean: bool,
    /// Default value.
    pub default: &'static str,
}

/// A value flag.
pub const fn value(name: &'static str, default: &'static str) -> Spec {
    Spec {
        name,
        short: None,
        boolean: false,
        default,
    }
}

/// A boolean flag.
pub const fn boolean(name: &'static str) -> Spec {
    Spec {
        name,
        short: None,
        boolean: true,
        default: "false",
    }
}

/// Parsed flags and positional arguments.
#[derive(Debug, Default)]
pub struct Parsed {
    set: HashMap<&'static str, String>,
    defaults: HashMap<&'static str, &'static str>,
    /// Positional arguments in order.
    pub args: Vec<String>,
}

impl Parsed {
    /// A flag's value (its default when not given).
    pub fn get(&self, name: &str) -> &str {
        self.set
            .get(name)
            .map(String::as_str)
            .or_else(|| self.defaults.get(name).copied())
            .unwrap_or("")
    }

    /// Whether the flag was given.
    pub fn is_set(&self, name: &str) -> bool {
        self.set.contains_key(name)
    }

    /// A boolean flag.
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.get(name), "true" | "1" | "t" | "T" | "TRUE" | "True")
    }

    /// Sets a value that was not given on the command line (from the environment).
    pub fn set_if_unset(&mut self, name: &'static str, v: String) {
        self.set.entry(name).or_insert(v);
    }
}

/// Parses `argv` against `specs`. The error is pflag's text.
pub fn parse(argv: &[String], specs: &[Spec]) -> Result<Parsed, String> {
    let mut p = Parsed {
        defaults: specs.iter().map(|s| (s.name, s.default)).collect(),
        ..Default::default()
    };
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        i += 1;
        if a == "--" {
            p.args.extend(argv[i..].iter().cloned());
            break;
        }
        if let Some(body) = a.strip_prefix("--") {
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let spec = specs
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| format!("unknown flag: --{name}"))?;
            let v = match (inline, spec.boolean) {
                (Some(v), _) => v,
                (None, true) => "true".to_string(),
                (None, false) => {
                    let v = argv
                        .get(i)
                        .ok_or_else(|| format!("flag needs an argument: --{name}"))?;
                    i += 1;
                    v.clone()
                }
            };
            p.set.insert(spec.name, v);
        } else if a.len() > 1
            && a.starts_with('-')
            && !a[1..].starts_with(|c: char| c.is_ascii_digit())
        {
            let mut chars = a[1..].chars();
            let c = chars.next().unwrap_or('-');
            let spec = specs
                .iter()
                .find(|s| s.short == Some(c))
                .ok_or_else(|| format!("unknown shorthand flag: '{c}' in {a}"))?;
            let rest: String = chars.collect();
            let v = if spec.boolean {
                "true".to_string()
            } else if let Some(v) = rest.strip_prefix('=') {
                v.to_string()
            } else if !rest.is_empty() {
                rest
            } else {
                let v = argv
                    .get(i)
                    .ok_or_else(|| format!("flag needs an argument: '{c}' in -{c}"))?;
                i += 1;
                v.clone()
            };
            p.set.insert(spec.name, v);
        } else {
            p.args.push(a.clone());
        }
    }
    Ok(p)
}

/// Splits a txn request line into words as etcdctl does: whitespace separates, double
/// quotes group (with Go-style escapes inside).
pub fn argify(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => match chars.next() {
                            Some('n') => cur.push('\n'),
                            Some('t') => cur.push('\t'),
                            Some(o) => cur.push(o),
                            None => {}
                        },
                        o => cur.push(o),
                    }
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pflag_like() {
        let specs = [
            boolean("prefix"),
            value("limit", "0"),
            Spec {
                name: "write-out",
                short: Some('w'),
                boolean: false,
                default: "simple",
            },
        ];
        let p = parse(
            &v(&["k", "--prefix", "--limit=2", "-w", "json", "end"]),
            &specs,
        )
        .expect("parse");
        assert_eq!(p.args, ["k", "end"]);
        assert!(p.flag("prefix"));
        assert_eq!((p.get("limit"), p.get("write-out")), ("2", "json"));
        assert_eq!(
            parse(&v(&["--nope"]), &specs).unwrap_err(),
            "unknown flag: --nope"
        );
        let p = parse(&v(&["-wjson", "--", "--prefix"]), &specs).expect("parse");
        assert_eq!(
            (p.get("write-out"), p.args.as_slice()),
            ("json", &["--prefix".to_string()][..])
        );
    }

    #[test]
    fn argify_quotes() {
        assert_eq!(
            argify(r#"put "a key" "v\"1" --prev-kv"#),
            ["put", "a key", "v\"1", "--prev-kv"]
        );
        assert_eq!(argify("  get   k  "), ["get", "k"]);
    }
}
