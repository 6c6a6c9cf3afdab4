//! The command tree: each command's words, flags, help texts and what it runs; finding
//! the command a command line names is [`lookup`]'s.

mod auth;
mod cluster;
mod defrag;
mod elect;
mod endpoint;
mod hold;
mod keep_alive;
mod kv;
mod lease;
mod lock;
mod lookup;
mod member;
mod mirror;
mod role;
mod snapshot;
mod txn;
mod txn_syntax;
mod user;
mod watch;
mod watch_interactive;

use std::future::Future;
use std::pin::Pin;

use crate::Fail;
use crate::args::{HELP, Spec, boolean, duration, list, string};
use crate::help::{API_VERSION, PROG};
use crate::output::Out;
use crate::session::Ctx;

use lookup::strip_flags;

/// A command's refusal of its arguments, with etcdctl's exit code for them.
fn bad_args(msg: &str) -> Fail {
    Fail::new(crate::exit::BAD_ARGS, msg)
}

/// What a printer made of an answer, or etcdctl's refusal of the output format for it.
fn printed(r: Result<Out, String>) -> Result<Out, Fail> {
    r.map_err(|e| Fail::new(crate::exit::BAD_FEATURE, e))
}

/// A request that failed while the command ran: etcdctl's error exit, whatever the error.
fn failed(e: oxcd_client::Error) -> Fail {
    Fail::new(crate::exit::ERROR, e.to_string())
}
pub use lookup::{find, unknown_command};

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

/// The flags every command takes (etcdctl's global flags).
pub const GLOBAL: &[Spec] = &[
    string(
        "cacert",
        "",
        "verify certificates of TLS-enabled secure servers using this CA bundle",
    ),
    string(
        "cert",
        "",
        "identify secure client using this TLS certificate file",
    ),
    duration(
        "command-timeout",
        "5s",
        "timeout for short running command (excluding dial timeout)",
    ),
    boolean("debug", "enable client-side debug logging"),
    duration("dial-timeout", "2s", "dial timeout for client connections"),
    string(
        "discovery-srv",
        "",
        "domain name to query for SRV records describing cluster endpoints",
    )
    .short('d'),
    string(
        "discovery-srv-name",
        "",
        "service name to query when using DNS discovery",
    ),
    list("endpoints", "127.0.0.1:2379", "gRPC endpoints"),
    boolean("hex", "print byte strings as hex encoded strings"),
    boolean(
        "insecure-discovery",
        "accept insecure SRV records describing cluster endpoints",
    )
    .default("true"),
    boolean(
        "insecure-skip-tls-verify",
        "skip server certificate verification (CAUTION: this option should be enabled only for testing purposes)",
    ),
    boolean(
        "insecure-transport",
        "disable transport security for client connections",
    )
    .default("true"),
    duration(
        "keepalive-time",
        "2s",
        "keepalive time for client connections",
    ),
    duration(
        "keepalive-timeout",
        "6s",
        "keepalive timeout for client connections",
    ),
    string("key", "", "identify secure client using this TLS key file"),
    string(
        "password",
        "",
        "password for authentication (if this option is used, --user option shouldn't include password)",
    ),
    string(
        "user",
        "",
        "username[:password] for authentication (prompt if password is not supplied)",
    ),
    string(
        "write-out",
        "simple",
        "set the output format (fields, json, protobuf, simple, table)",
    )
    .short('w'),
];

/// The root: `oxcdctl` alone prints its help.
pub const ROOT: Command = Command {
    path: &[],
    use_: PROG,
    short: "A simple command line client for etcd3.",
    long: "",
    flags: &[],
    persistent: GLOBAL,
    run: None,
};

const VERSION: Command = Command {
    path: &["version"],
    use_: "version",
    short: "Prints the version of oxcdctl",
    long: "",
    flags: &[],
    persistent: &[],
    run: Some(version),
};

const HELP_COMMAND: Command = Command {
    path: &["help"],
    use_: "help [command]",
    short: "Help about any command",
    long: "Help provides help for any command in the application.\nSimply type oxcdctl help [path to command] for full details.",
    flags: &[],
    persistent: &[],
    run: Some(help_command),
};

/// Every command under the root.
const COMMANDS: &[Command] = &[
    kv::GET,
    kv::PUT,
    kv::DEL,
    txn::TXN,
    kv::COMPACTION,
    defrag::DEFRAG,
    endpoint::GROUP,
    endpoint::HEALTH,
    endpoint::STATUS,
    endpoint::HASHKV,
    cluster::MOVE_LEADER,
    watch::WATCH,
    lease::GROUP,
    lease::GRANT,
    lease::REVOKE,
    lease::TIME_TO_LIVE,
    lease::LIST,
    keep_alive::KEEP_ALIVE,
    member::GROUP,
    member::ADD,
    member::REMOVE,
    member::UPDATE,
    member::LIST,
    member::PROMOTE,
    lock::LOCK,
    elect::ELECT,
    mirror::MAKE_MIRROR,
    user::GROUP,
    user::ADD,
    user::DELETE,
    user::GET,
    user::LIST,
    user::PASSWD,
    user::GRANT_ROLE,
    user::REVOKE_ROLE,
    role::GROUP,
    role::ADD,
    role::DELETE,
    role::GET,
    role::LIST,
    role::GRANT_PERMISSION,
    role::REVOKE_PERMISSION,
    snapshot::GROUP,
    snapshot::SAVE,
    auth::GROUP,
    auth::ENABLE,
    auth::DISABLE,
    auth::STATUS,
    VERSION,
    HELP_COMMAND,
];

/// The commands directly under `path`, by name.
pub(crate) fn children(path: &[&str]) -> Vec<&'static Command> {
    let mut v: Vec<&'static Command> = COMMANDS
        .iter()
        .filter(|c| c.path.len() == path.len() + 1 && c.path.starts_with(path))
        .collect();
    v.sort_by_key(|c| c.name());
    v
}

/// Every command under `path`, depth first, by name (etcdctl's `getSubCommands`).
pub fn descendants(path: &[&str]) -> Vec<&'static Command> {
    let mut out = Vec::new();
    for c in children(path) {
        out.push(c);
        out.extend(descendants(c.path));
    }
    out
}

fn command_at(path: &[&str]) -> Option<&'static Command> {
    if path.is_empty() {
        return Some(&ROOT);
    }
    COMMANDS.iter().find(|c| c.path == path)
}

/// The flags `path` inherits from the root and the groups above it.
pub fn inherited_flags(path: &[&str]) -> Vec<Spec> {
    (0..path.len())
        .filter_map(|n| command_at(&path[..n]))
        .flat_map(|c| c.persistent.iter().copied())
        .collect()
}

/// Every flag `cmd` parses.
pub fn all_flags(cmd: &Command) -> Vec<Spec> {
    let mut v = inherited_flags(cmd.path);
    v.extend(cmd.flags.iter().chain(cmd.persistent).copied());
    v.push(HELP);
    v
}

fn version(_ctx: Ctx) -> Run {
    Box::pin(async move {
        Ok(Out::text(format!(
            "{PROG} version: {}\nAPI version: {API_VERSION}\n",
            env!("CARGO_PKG_VERSION"),
        )))
    })
}

/// `help [command]`: the command's usage, or the root's with "Unknown help topic".
fn help_command(ctx: Ctx) -> Run {
    Box::pin(async move {
        Ok(match find(&ctx.flags.args) {
            Ok((cmd, _)) => Out::text(crate::help::usage(cmd)),
            Err(_) => {
                let topics: Vec<String> = ctx.flags.args.iter().map(|a| format!("`{a}`")).collect();
                // cobra prints the root's usage here before its help flag exists.
                let usage = crate::help::usage_without_help_flag(&ROOT);
                Out::err(format!("Unknown help topic [{}]\n", topics.join(" ")))
                    .then(Out::text(usage))
            }
        })
    })
}
