//! The command tree's content, [`TREE`]: every command's words, flags, help texts and
//! what it runs. What a command is and how the tree is walked are [`crate::command`]'s;
//! finding the command a command line names is [`lookup`]'s.

mod auth;
mod cluster;
mod defrag;
mod downgrade;
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
mod watch_events;
mod watch_interactive;

use crate::args::{Spec, boolean, duration, list, string};
use crate::command::{Command, PROG, Run, Tree};
use crate::ctx::Ctx;
use crate::help::{self, API_VERSION};
use crate::output::Out;

pub use lookup::unknown_command;

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
    downgrade::GROUP,
    downgrade::VALIDATE,
    downgrade::ENABLE,
    downgrade::CANCEL,
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

/// The tree every lookup, help text and command runs in.
pub static TREE: Tree = Tree {
    root: &ROOT,
    commands: COMMANDS,
};

/// Finds the command `argv` names (cobra's `Find`) in [`TREE`]; see [`lookup::find`].
pub fn find(argv: &[String]) -> Result<(&'static Command, Vec<String>), String> {
    lookup::find(&TREE, argv)
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
            Ok((cmd, _)) => Out::text(help::usage(&TREE, cmd)),
            Err(_) => {
                let topics: Vec<String> = ctx.flags.args.iter().map(|a| format!("`{a}`")).collect();
                // cobra prints the root's usage here before its help flag exists.
                let usage = help::usage_without_help_flag(&TREE, &ROOT);
                Out::err(format!("Unknown help topic [{}]\n", topics.join(" ")))
                    .then(Out::text(usage))
            }
        })
    })
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
