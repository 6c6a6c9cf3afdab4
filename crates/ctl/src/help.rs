//! Usage texts as etcdctl prints them: its own template (NAME, USAGE, DESCRIPTION,
//! OPTIONS, GLOBAL OPTIONS, aligned by Go's tabwriter) for `--help` and flag errors, and
//! cobra's default template, which etcdctl prints for bad requests inside `txn`.

use std::fmt::Write as _;

use oxcd_go::quote::quote_str;

use crate::args::{HELP, Kind, Spec};
use crate::command::{Command, PROG, Tree};
use crate::tabwriter;

/// The API version `version` and the root help report.
pub const API_VERSION: &str = "3.6";

/// The flags sorted by name, as pflag visits them.
fn sorted(specs: &[Spec]) -> Vec<Spec> {
    let mut v = specs.to_vec();
    v.sort_by_key(|s| s.name);
    v.dedup_by_key(|s| s.name);
    v
}

fn flag_usage(s: &Spec, cmd_name: &str) -> String {
    if s.name == "help" {
        format!("help for {cmd_name}")
    } else {
        s.usage.to_string()
    }
}

/// etcdctl's `etcdFlagUsages`: `  -w, --write-out="simple"\tusage`.
fn etcd_flag_usages(specs: &[Spec], cmd_name: &str) -> String {
    let mut out = String::new();
    for s in sorted(specs) {
        let _ = match s.short {
            Some(c) => write!(out, "  -{c}, --{}", s.name),
            None => write!(out, "      --{}", s.name),
        };
        let _ = match s.kind {
            Kind::Bool => write!(out, "[={}]", s.default),
            Kind::Str => write!(out, "={}", quote_str(s.default)),
            Kind::StrSlice => write!(out, "=[{}]", s.default),
            Kind::Int64 | Kind::Duration => write!(out, "={}", s.default),
        };
        let _ = writeln!(out, "\t{}", flag_usage(&s, cmd_name));
    }
    out
}

/// cobra's `UseLine`: the parents' path, the command's `Use`, then `[flags]`.
fn use_line(cmd: &Command) -> String {
    let mut parts = Vec::new();
    if let Some((_, parents)) = cmd.path.split_last() {
        parts.push(PROG);
        parts.extend(parents);
    }
    parts.push(cmd.use_);
    format!("{} [flags]", parts.join(" "))
}

/// The usage of `cmd` (the root when its path is empty) in `tree`, as etcdctl's
/// `usageFunc`.
pub fn usage(tree: &Tree, cmd: &Command) -> String {
    render(tree, cmd, true)
}

/// [`usage`] without the `-h, --help` line.
pub fn usage_without_help_flag(tree: &Tree, cmd: &Command) -> String {
    render(tree, cmd, false)
}

fn render(tree: &Tree, cmd: &Command, help_flag: bool) -> String {
    let root = cmd.path.is_empty();
    let subs = tree.descendants(cmd.path);
    let mut t = String::from("NAME:\n");
    let name = if root {
        PROG.to_string()
    } else {
        cmd.path.join(" ")
    };
    let _ = writeln!(t, "\t{name} - {}", cmd.short);
    let _ = writeln!(t, "\nUSAGE:\n\t{}", use_line(cmd));
    if root {
        let _ = writeln!(t, "\nVERSION:\n\t{}", env!("CARGO_PKG_VERSION"));
    }
    if !subs.is_empty() {
        let _ = writeln!(t, "\nAPI VERSION:\n\t{API_VERSION}");
        t.push_str("\n\nCOMMANDS:\n");
        for s in subs.iter().filter(|s| s.run.is_some()) {
            let _ = writeln!(t, "\t{}\t{}", s.path[cmd.path.len()..].join(" "), s.short);
        }
    }
    if !cmd.long.is_empty() {
        t.push_str("\nDESCRIPTION:\n");
        for line in cmd.long.trim_matches(['\n', '\t', ' ']).split('\n') {
            let _ = writeln!(t, "\t{line}");
        }
    }
    let mut local: Vec<Spec> = cmd.flags.iter().chain(cmd.persistent).copied().collect();
    if help_flag {
        local.push(HELP);
    }
    t.push_str("\nOPTIONS:\n");
    t.push_str(&etcd_flag_usages(&local, cmd.name()));
    let inherited = tree.inherited_flags(cmd.path);
    if !inherited.is_empty() {
        t.push_str("\nGLOBAL OPTIONS:\n");
        t.push_str(&etcd_flag_usages(&inherited, cmd.name()));
    }
    t.push('\n');
    tabwriter::align(&t)
}

/// cobra's default usage of a `txn` request command (`put`, `get`, `del`), which etcdctl
/// prints to stderr when a request line has a bad flag (pflag's `FlagUsages` layout).
pub fn cobra_usage(cmd: &Command) -> String {
    let mut specs: Vec<Spec> = cmd.flags.to_vec();
    specs.push(HELP);
    let lines: Vec<(String, String)> = sorted(&specs)
        .iter()
        .map(|s| {
            let mut left = match s.short {
                Some(c) => format!("  -{c}, --{}", s.name),
                None => format!("      --{}", s.name),
            };
            left.push_str(match s.kind {
                Kind::Bool => "",
                Kind::Str => " string",
                Kind::Int64 => " int",
                Kind::Duration => " duration",
                Kind::StrSlice => " strings",
            });
            let mut right = flag_usage(s, cmd.name());
            let zero = match s.kind {
                Kind::Str => s.default.is_empty(),
                Kind::Bool => s.default == "false",
                Kind::Int64 | Kind::Duration => s.default == "0",
                Kind::StrSlice => s.default.is_empty(),
            };
            if !zero {
                let _ = match s.kind {
                    Kind::Str => write!(right, " (default {})", quote_str(s.default)),
                    _ => write!(right, " (default {})", s.default),
                };
            }
            (left, right)
        })
        .collect();
    let maxlen = lines.iter().map(|(l, _)| l.len() + 1).max().unwrap_or(0);
    let mut out = format!("Usage:\n   {} [flags]\n\nFlags:\n", cmd.use_);
    for (l, r) in lines {
        let _ = writeln!(out, "{l} {} {r}", " ".repeat(maxlen - l.len()));
    }
    out.push('\n');
    out
}
