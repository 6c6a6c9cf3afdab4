//! What a command is: a [`Command`] (its words, flags, help texts and what it runs with
//! a [`Ctx`]), the [`Tree`] of them with what is asked of it (children, descendants,
//! inherited flags), and the failures every command reports the same way. The tree's
//! content, every command, is [`crate::commands`]'; this module knows none of them.

use std::future::Future;
use std::pin::Pin;

use crate::args::{HELP, Spec};
use crate::ctx::Ctx;
use crate::fail::{Fail, exit};
use crate::output::Out;

/// The program's name where etcdctl prints its own.
pub const PROG: &str = "oxcdctl";

/// What a command's run returns.
pub type Run = Pin<Box<dyn Future<Output = Result<Out, Fail>>>>;

/// A command, or a group of commands (no `run`).
pub struct Command {
    /// The words that name it (empty for the root).
    pub path: &'static [&'static str],
    /// cobra's `Use`: its name and arguments.
    pub use_: &'static str,
    /// One-line description.
    pub short: &'static str,
    /// Longer description (help's DESCRIPTION), or empty.
    pub long: &'static str,
    /// Its own flags.
    pub flags: &'static [Spec],
    /// Flags it and every command under it take.
    pub persistent: &'static [Spec],
    /// What it does; `None` for a group, which prints its help.
    pub run: Option<fn(Ctx) -> Run>,
}

impl Command {
    /// Its name (the last word).
    pub fn name(&self) -> &'static str {
        self.path.last().copied().unwrap_or(PROG)
    }
}

/// The command tree: the root and every command under it.
pub struct Tree {
    /// The root: the program alone.
    pub root: &'static Command,
    /// Every command under the root.
    pub commands: &'static [Command],
}

impl Tree {
    /// The commands directly under `path`, by name.
    pub fn children(&self, path: &[&str]) -> Vec<&'static Command> {
        let mut v: Vec<&'static Command> = self
            .commands
            .iter()
            .filter(|c| c.path.len() == path.len() + 1 && c.path.starts_with(path))
            .collect();
        v.sort_by_key(|c| c.name());
        v
    }

    /// Every command under `path`, depth first, by name (etcdctl's `getSubCommands`).
    pub fn descendants(&self, path: &[&str]) -> Vec<&'static Command> {
        let mut out = Vec::new();
        for c in self.children(path) {
            out.push(c);
            out.extend(self.descendants(c.path));
        }
        out
    }

    fn command_at(&self, path: &[&str]) -> Option<&'static Command> {
        if path.is_empty() {
            return Some(self.root);
        }
        self.commands.iter().find(|c| c.path == path)
    }

    /// The flags `path` inherits from the root and the groups above it.
    pub fn inherited_flags(&self, path: &[&str]) -> Vec<Spec> {
        (0..path.len())
            .filter_map(|n| self.command_at(&path[..n]))
            .flat_map(|c| c.persistent.iter().copied())
            .collect()
    }

    /// Every flag `cmd` parses.
    pub fn all_flags(&self, cmd: &Command) -> Vec<Spec> {
        let mut v = self.inherited_flags(cmd.path);
        v.extend(cmd.flags.iter().chain(cmd.persistent).copied());
        v.push(HELP);
        v
    }
}

/// etcdctl's `--consistency` value: true for `s` (serializable), false for `l`
/// (linearizable); anything else is etcdctl's "unknown consistency flag".
pub fn serializable(consistency: &str) -> Result<bool, Fail> {
    match consistency {
        "s" => Ok(true),
        "l" => Ok(false),
        other => Err(Fail::new(
            exit::BAD_FEATURE,
            format!(
                "unknown consistency flag {}",
                oxcd_go::quote::quote_str(other)
            ),
        )),
    }
}

/// A command's refusal of its arguments, with etcdctl's exit code for them.
pub fn bad_args(msg: &str) -> Fail {
    Fail::new(exit::BAD_ARGS, msg)
}

/// What a printer made of an answer, or etcdctl's refusal of the output format for it.
pub fn printed(r: Result<Out, String>) -> Result<Out, Fail> {
    r.map_err(|e| Fail::new(exit::BAD_FEATURE, e))
}

/// A request that failed while the command ran: etcdctl's error exit, whatever the error.
pub fn failed(e: oxcd_client::Error) -> Fail {
    Fail::new(exit::ERROR, e.to_string())
}
