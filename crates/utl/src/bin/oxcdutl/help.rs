//! Help texts as cobra prints them for etcdutl (its template is the usage text alone).

use crate::args::{Kind, Spec};
use crate::commands::{Command, PROG, WRITE_OUT, help_flag};

/// The usage of `cmd`.
pub fn usage(cmd: &Command) -> String {
    let mut out = String::from("Usage:\n");
    let children = cmd.children();
    if cmd.runs {
        let use_ = cmd.use_.split_once(' ').map_or("", |(_, rest)| rest);
        let words = cmd.command_path();
        if use_.is_empty() {
            out.push_str(&format!("  {words} [flags]\n"));
        } else {
            out.push_str(&format!("  {words} {use_} [flags]\n"));
        }
    }
    if !children.is_empty() {
        out.push_str(&format!("  {} [command]\n", cmd.command_path()));
        out.push_str("\nAvailable Commands:\n");
        let pad = children
            .iter()
            .map(|c| c.name().len())
            .max()
            .unwrap_or(0)
            .max(11);
        for c in &children {
            out.push_str(&format!("  {:<pad$} {}\n", c.name(), c.short));
        }
    }
    let mut local: Vec<Spec> = cmd.flags.to_vec();
    local.push(help_flag(cmd));
    if cmd.path.is_empty() {
        local.push(WRITE_OUT);
    }
    out.push_str("\nFlags:\n");
    out.push_str(&flag_usages(&local));
    if !cmd.path.is_empty() {
        out.push_str("\nGlobal Flags:\n");
        out.push_str(&flag_usages(&[WRITE_OUT]));
    }
    if !children.is_empty() {
        out.push_str(&format!(
            "\nUse \"{} [command] --help\" for more information about a command.\n",
            cmd.command_path()
        ));
    }
    out
}

/// pflag's `FlagUsages`: sorted by name, usages in one column.
fn flag_usages(flags: &[Spec]) -> String {
    let mut flags = flags.to_vec();
    flags.sort_by_key(|f| f.name);
    let lines: Vec<(String, String)> = flags
        .iter()
        .map(|f| {
            let mut left = match f.short {
                Some(c) => format!("  -{c}, --{}", f.name),
                None => format!("      --{}", f.name),
            };
            match f.kind {
                Kind::Bool => {}
                Kind::Str => left.push_str(" string"),
                Kind::Uint => left.push_str(" uint"),
                Kind::Int => left.push_str(" int"),
            }
            let mut right = f.usage.to_string();
            match f.kind {
                Kind::Str if !f.default.is_empty() => {
                    right.push_str(&format!(" (default {:?})", f.default));
                }
                Kind::Uint | Kind::Int if f.default != "0" => {
                    right.push_str(&format!(" (default {})", f.default));
                }
                _ => {}
            }
            (left, right)
        })
        .collect();
    let width = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    lines
        .iter()
        .map(|(l, r)| format!("{l:<width$}   {r}\n"))
        .collect()
}

/// What `help <words>` names is not a command: cobra's text.
pub fn unknown_topic(words: &[String], root: &Command) -> String {
    let topics: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
    format!("Unknown help topic [{}]\n{}", topics.join(" "), usage(root))
}

/// `version`'s text.
pub fn version() -> String {
    format!(
        "{PROG} version: {}\nAPI version: 3.6\n",
        env!("CARGO_PKG_VERSION")
    )
}
