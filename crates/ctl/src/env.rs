//! `ETCDCTL_*` environment variables, applied as etcdctl's `SetPflagsFromEnv` applies them
//! when a command first needs its client: each global flag not given on the command line
//! takes `ETCDCTL_<FLAG>` (a value of the wrong type is ignored); a variable that shadows
//! a given flag is fatal; any other `ETCDCTL_*` draws a warning. Messages are capnslog
//! lines on stderr, as etcdctl's.

use std::collections::HashSet;
use std::time::SystemTime;

use oxcd_go::capnslog::log_timestamp;
use oxcd_go::quote::quote_str;

use crate::args::{Parsed, Spec};
use crate::fail::{Fail, exit};
use crate::output::Out;

/// `ETCDCTL_` + the flag's name upper-cased with `-` as `_`.
pub fn var_name(flag: &str) -> String {
    format!("ETCDCTL_{}", flag.to_uppercase().replace('-', "_"))
}

fn log_line(level: char, msg: &str) -> String {
    format!(
        "{} {level} | pkg/flags: {msg}\n",
        log_timestamp(SystemTime::now())
    )
}

/// Applies `vars` (the environment, in order) to the `inherited` flags of `flags`.
/// Returns the warnings to print, or the fatal failure.
pub fn apply(
    flags: &mut Parsed,
    inherited: &[Spec],
    vars: &[(String, String)],
) -> Result<String, Fail> {
    let given: HashSet<String> = flags
        .given()
        .filter(|n| inherited.iter().any(|s| s.name == *n))
        .map(var_name)
        .collect();
    let mut used: HashSet<String> = HashSet::new();
    // etcdctl's main unsets ETCDCTL_API before anything reads the environment.
    used.insert("ETCDCTL_API".to_string());
    // Read by `watch` itself; etcdctl does not warn about them.
    used.insert("ETCDCTL_WATCH_KEY".to_string());
    used.insert("ETCDCTL_WATCH_RANGE_END".to_string());
    let mut names: Vec<&str> = inherited.iter().map(|s| s.name).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let key = var_name(name);
        if given.contains(&key) {
            continue;
        }
        if let Some((_, v)) = vars.iter().find(|(k, _)| *k == key)
            && !v.is_empty()
        {
            used.insert(key);
            let _ = flags.set_checked(name, v);
        }
    }
    let mut warnings = String::new();
    for (k, v) in vars {
        if used.contains(k) {
            continue;
        }
        if given.contains(k) {
            let msg = format!(
                "conflicting environment variable {} is shadowed by corresponding command-line flag (either unset environment variable or disable flag)",
                quote_str(k)
            );
            let mut f = Fail::silent(exit::ERROR);
            f.partial = Out::err(warnings + &log_line('C', &msg));
            return Err(f);
        }
        if k.starts_with("ETCDCTL_") {
            warnings.push_str(&log_line(
                'W',
                &format!("unrecognized environment variable {k}={v}"),
            ));
        }
    }
    Ok(warnings)
}

/// The process environment, in order.
pub fn vars() -> Vec<(String, String)> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{self, string};

    const SPECS: [Spec; 2] = [
        string("endpoints", "127.0.0.1:2379", ""),
        string("write-out", "simple", ""),
    ];

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn like_set_pflags_from_env() {
        let mut p = args::parse(&[], &SPECS).expect("parse");
        let w = apply(
            &mut p,
            &SPECS,
            &env(&[
                ("ETCDCTL_WRITE_OUT", "json"),
                ("ETCDCTL_FOO", "x"),
                ("ETCDCTL_API", "3"),
            ]),
        )
        .expect("ok");
        assert_eq!(p.get("write-out"), "json");
        assert!(w.ends_with(" W | pkg/flags: unrecognized environment variable ETCDCTL_FOO=x\n"));
        assert_eq!(w.lines().count(), 1);

        let mut p = args::parse(&["--endpoints=a".to_string()], &SPECS).expect("parse");
        let f = apply(&mut p, &SPECS, &env(&[("ETCDCTL_ENDPOINTS", "b")])).expect_err("fatal");
        assert_eq!(f.code, exit::ERROR);
        assert!(f.partial.stderr().contains(
            " C | pkg/flags: conflicting environment variable \"ETCDCTL_ENDPOINTS\" is shadowed"
        ));
        assert_eq!(p.get("endpoints"), "a");
    }
}
