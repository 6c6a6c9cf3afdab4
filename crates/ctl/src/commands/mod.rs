//! The commands: their words, flags, help, and what they run.

mod cluster;
mod endpoint;
mod kv;
mod txn;

use std::future::Future;
use std::pin::Pin;

use crate::args::Spec;
use crate::output::Out;
use crate::{Ctx, Fail};

/// What a command's run returns.
pub type Run = Pin<Box<dyn Future<Output = Result<Out, Fail>>>>;

/// A command.
pub struct Command {
    /// The words that name it.
    pub words: &'static [&'static str],
    /// Its own flags (globals are added).
    pub flags: &'static [Spec],
    /// `--help` text.
    pub help: &'static str,
    /// What it does.
    pub run: fn(Ctx) -> Run,
}

const COMMANDS: &[Command] = &[
    kv::GET,
    kv::PUT,
    kv::DEL,
    kv::COMPACTION,
    txn::TXN,
    endpoint::HEALTH,
    endpoint::STATUS,
    endpoint::HASHKV,
    cluster::MOVE_LEADER,
    Command {
        words: &["version"],
        flags: &[],
        help: "version - Prints the version of oxcdctl\n",
        run: version,
    },
];

/// Finds the command named by `words`.
pub fn find(words: &[&str]) -> Option<&'static Command> {
    COMMANDS.iter().find(|c| c.words == words)
}

/// The overall usage text.
pub fn usage() -> String {
    let mut s = String::from(
        "NAME:\n\toxcdctl - A simple command line client for oxcd and etcd (etcdctl compatible).\n\nCOMMANDS:\n",
    );
    for c in COMMANDS {
        s.push_str(&format!("\t{}\n", c.help.lines().next().unwrap_or("")));
    }
    s.push_str("\nRun 'oxcdctl <command> --help' for a command's flags.\n");
    s
}

fn version(_ctx: Ctx) -> Run {
    Box::pin(async move {
        let text = format!(
            "oxcdctl version: {}\nAPI version: 3.5\n",
            env!("CARGO_PKG_VERSION")
        );
        Ok(Out {
            stdout: text.into_bytes(),
            stderr: String::new(),
        })
    })
}
