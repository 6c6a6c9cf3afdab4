//! Finding the command a command line names, as cobra does for etcdctl: flags and their
//! values skipped, exact names or prefixes unique among etcdctl's commands, and unknown
//! words refused with cobra's texts and "Did you mean this?" suggestions.

use super::{Command, ROOT, all_flags, children};
use crate::args::{Kind, Spec};
use crate::gofmt::quote_str;
use crate::help::PROG;
use crate::output::Out;
use crate::{Fail, exit};

/// etcdctl 3.4's top-level command names in the order etcdctl adds them, so that a
/// prefix unique among oxcdctl's commands but not among etcdctl's is refused as etcdctl
/// refuses it, and suggestions come in etcdctl's order.
const ETCDCTL_TOP: &[&str] = &[
    "get",
    "put",
    "del",
    "txn",
    "compaction",
    "alarm",
    "defrag",
    "endpoint",
    "move-leader",
    "watch",
    "version",
    "lease",
    "member",
    "snapshot",
    "make-mirror",
    "migrate",
    "lock",
    "elect",
    "auth",
    "user",
    "role",
    "check",
    "completion",
    "help",
];

/// The arguments that are not flags or flag values, as cobra's `stripFlags` sees them
/// (a long flag it does not know as boolean is taken to have a value).
pub(super) fn strip_flags(args: &[String], specs: &[Spec]) -> Vec<String> {
    let is_bool = |name: &str| specs.iter().any(|s| s.name == name && s.kind == Kind::Bool);
    let short_bool = |c: &str| {
        specs.iter().any(|s| {
            s.kind == Kind::Bool && s.short.is_some_and(|x| c.chars().eq(std::iter::once(x)))
        })
    };
    let mut words = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let s = args[i].as_str();
        i += 1;
        if s == "--" {
            break;
        }
        let long_value = s.starts_with("--") && !s.contains('=') && !is_bool(&s[2..]);
        let short_value = !s.starts_with("--")
            && s.starts_with('-')
            && !s.contains('=')
            && s.chars().count() == 2
            && !short_bool(&s[1..]);
        if long_value || short_value {
            i += 1;
        } else if !s.is_empty() && !s.starts_with('-') {
            words.push(s.to_string());
        }
    }
    words
}

/// cobra's `findNext` with prefix matching: an exact name, or a prefix that only one of
/// etcdctl's commands at that level has.
fn find_next(path: &[&str], word: &str) -> Option<&'static Command> {
    let kids = children(path);
    if let Some(c) = kids.iter().find(|c| c.name() == word) {
        return Some(c);
    }
    let mut names: Vec<&str> = kids.iter().map(|c| c.name()).collect();
    if path.is_empty() {
        names.extend(ETCDCTL_TOP);
        names.sort_unstable();
        names.dedup();
    }
    let matching: Vec<&str> = names.into_iter().filter(|n| n.starts_with(word)).collect();
    match matching.as_slice() {
        [one] => kids.into_iter().find(|c| c.name() == *one),
        _ => None,
    }
}

/// Levenshtein distance, ignoring case (cobra's `ld`).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// cobra's "Did you mean this?" for an unknown command (among oxcdctl's commands).
fn suggestions(word: &str) -> String {
    let ours: Vec<&str> = children(&[]).into_iter().map(|c| c.name()).collect();
    let found: Vec<&str> = ETCDCTL_TOP
        .iter()
        .copied()
        .filter(|n| ours.contains(n) && *n != "help")
        .filter(|n| distance(word, n) <= 2 || n.starts_with(&word.to_lowercase()))
        .collect();
    if found.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n\nDid you mean this?\n");
    for n in found {
        s.push_str(&format!("\t{n}\n"));
    }
    s
}

/// Finds the command `argv` names (cobra's `Find`); returns it and the arguments left
/// once its words are taken out, or the "unknown command" error.
pub fn find(argv: &[String]) -> Result<(&'static Command, Vec<String>), String> {
    let mut cmd: &'static Command = &ROOT;
    let mut args = argv.to_vec();
    while let Some(word) = strip_flags(&args, &all_flags(cmd)).into_iter().next() {
        let Some(next) = find_next(cmd.path, &word) else {
            break;
        };
        if let Some(i) = args.iter().position(|a| *a == word) {
            args.remove(i);
        }
        cmd = next;
    }
    if cmd.path.is_empty()
        && let Some(word) = strip_flags(&args, &all_flags(cmd)).first()
    {
        return Err(format!(
            "unknown command {} for \"{PROG}\"{}",
            quote_str(word),
            suggestions(word)
        ));
    }
    Ok((cmd, args))
}

/// The error for words that name no command: cobra's two lines, then etcdctl's.
pub fn unknown_command(msg: String) -> Fail {
    let mut f = Fail::new(exit::ERROR, msg.clone());
    f.partial = Out::err(format!("Error: {msg}\nRun '{PROG} --help' for usage.\n"));
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn finds_like_cobra() {
        let (c, rest) = find(&v(&["--endpoints", "x", "get", "k", "--prefix"])).expect("get");
        assert_eq!(
            (c.path, rest),
            (&["get"][..], v(&["--endpoints", "x", "k", "--prefix"]))
        );
        let (c, _) = find(&v(&["endpoint", "-w", "json", "stat"])).expect("status");
        assert_eq!(c.path, ["endpoint", "status"]);
        let (c, rest) = find(&v(&["endpoint", "bogus"])).expect("group");
        assert_eq!((c.path, rest), (&["endpoint"][..], v(&["bogus"])));
        let (c, _) = find(&v(&["g", "k"])).expect("prefix");
        assert_eq!(c.path, ["get"]);
        assert_eq!(
            find(&v(&["gett"])).err().unwrap_or_default(),
            "unknown command \"gett\" for \"oxcdctl\"\n\nDid you mean this?\n\tget\n"
        );
        assert!(find(&v(&["e"])).is_err(), "elect or endpoint");
        let (c, rest) = find(&v(&["lease", "k", "--once", "1"])).expect("keep-alive");
        assert_eq!(
            (c.path, rest),
            (&["lease", "keep-alive"][..], v(&["--once", "1"]))
        );
        let (c, _) = find(&v(&["loc", "name"])).expect("lock");
        assert_eq!(c.path, ["lock"]);
        assert!(find(&v(&["m"])).is_err(), "make-mirror or move-leader");
        let (c, _) = find(&[]).expect("root");
        assert!(c.path.is_empty());
    }
}
