//! Finding the command a command line names, as cobra does for etcdctl: flags and their
//! values skipped, exact names or prefixes unique among etcdctl's commands, and unknown
//! words refused with cobra's texts and "Did you mean this?" suggestions.

use oxcd_go::quote::quote_str;

use crate::args::{Kind, Spec};
use crate::command::{Command, PROG, Tree};
use crate::fail::{Fail, exit};
use crate::output::Out;

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
    // etcdctl 3.6.
    "downgrade",
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
fn find_next(tree: &Tree, path: &[&str], word: &str) -> Option<&'static Command> {
    let kids = tree.children(path);
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
fn suggestions(tree: &Tree, word: &str) -> String {
    let ours: Vec<&str> = tree.children(&[]).into_iter().map(|c| c.name()).collect();
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

/// Finds the command `argv` names in `tree` (cobra's `Find`); returns it and the
/// arguments left once its words are taken out, or the "unknown command" error.
pub fn find(tree: &Tree, argv: &[String]) -> Result<(&'static Command, Vec<String>), String> {
    let mut cmd: &'static Command = tree.root;
    let mut args = argv.to_vec();
    while let Some(word) = strip_flags(&args, &tree.all_flags(cmd)).into_iter().next() {
        let Some(next) = find_next(tree, cmd.path, &word) else {
            break;
        };
        if let Some(i) = args.iter().position(|a| *a == word) {
            args.remove(i);
        }
        cmd = next;
    }
    if cmd.path.is_empty()
        && let Some(word) = strip_flags(&args, &tree.all_flags(cmd)).first()
    {
        return Err(format!(
            "unknown command {} for \"{PROG}\"{}",
            quote_str(word),
            suggestions(tree, word)
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
