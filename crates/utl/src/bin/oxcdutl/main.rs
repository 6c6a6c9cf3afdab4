//! oxcdutl: etcdutl's offline tool for oxcd, with etcdutl 3.5.16's commands, flags,
//! output, messages and exit codes: `snapshot status` and `snapshot restore` (restore
//! takes etcd 3.4/3.5 snapshots and oxcd's, which are etcd's format).
//!
//! Owns the command line only ([`args`]: pflag's parsing; [`commands`]: cobra's command
//! tree and lookup; [`help`]: the usage texts); the work is the `oxcd_utl` library's.
//!
//! Invariant: stdout carries only a command's result; errors go to stderr as
//! `Error: <message>` with etcdutl's exit code (1 for errors and bad flags, 4 for an
//! output format a command cannot print, 128 for wrong arguments).

mod args;
mod commands;
mod help;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use commands::{Command, RESTORE_FLAGS};
use oxcd_utl::restore::{self, RestoreConfig};
use oxcd_utl::status;

/// etcdutl's exit codes.
mod exit {
    /// Any error (also cobra's for bad flags and unknown commands).
    pub const ERROR: u8 = 1;
    /// An output format the command cannot print.
    pub const BAD_FEATURE: u8 = 4;
    /// Wrong arguments.
    pub const BAD_ARGS: u8 = 128;
}

/// How a run ended: text for stdout and stderr, and the exit code.
#[derive(Default)]
struct Outcome {
    stdout: String,
    stderr: String,
    code: u8,
}

impl Outcome {
    fn ok(stdout: String) -> Outcome {
        Outcome {
            stdout,
            ..Default::default()
        }
    }

    /// etcdutl's `ExitWithError`: `Error: <msg>` and the code.
    fn fail(code: u8, msg: &str) -> Outcome {
        Outcome {
            stderr: format!("Error: {msg}\n"),
            code,
            ..Default::default()
        }
    }

    /// An error cobra reports with the usage, which etcdutl's main then reports again.
    fn usage_error(cmd: &Command, msg: &str) -> Outcome {
        Outcome {
            stderr: format!("Error: {msg}\n{}\nError: {msg}\n", help::usage(cmd)),
            code: exit::ERROR,
            ..Default::default()
        }
    }
}

fn run(argv: &[String]) -> Outcome {
    let (cmd, rest) = match commands::find(argv) {
        Ok(found) => found,
        Err(word) => {
            let msg = format!("unknown command {word:?} for {:?}", commands::PROG);
            return Outcome {
                stderr: format!(
                    "Error: {msg}\nRun '{} --help' for usage.\nError: {msg}\n",
                    commands::PROG
                ),
                code: exit::ERROR,
                ..Default::default()
            };
        }
    };
    let specs = cmd.all_flags();
    let flags = match args::parse(&rest, &specs) {
        Ok(f) => f,
        Err(e) => return Outcome::usage_error(cmd, &e),
    };
    if flags.flag("help", &specs) || !cmd.runs {
        return Outcome::ok(help::usage(cmd));
    }
    if let Some(missing) = cmd.required.iter().find(|r| !flags.is_set(r)) {
        return Outcome::usage_error(cmd, &format!("required flag(s) {missing:?} not set"));
    }
    match cmd.path {
        ["version"] => Outcome::ok(help::version()),
        ["help"] => match commands::find(&flags.args) {
            Ok((c, _)) => Outcome::ok(help::usage(c)),
            Err(_) => Outcome {
                stderr: help::unknown_topic(&flags.args, &commands::ROOT),
                ..Default::default()
            },
        },
        ["defrag"] => defrag(flags.get("data-dir", &specs)),
        ["migrate"] => migrate(&flags, &specs),
        ["swap-to-etcd"] => swap_to_etcd(&flags, &specs),
        ["hashkv"] => hashkv(&flags, &specs),
        ["snapshot", "status"] => snapshot_status(&flags, &specs),
        ["snapshot", "restore"] => snapshot_restore(&flags),
        _ => Outcome::ok(help::usage(cmd)),
    }
}

/// etcdutl's `defrag --data-dir`: nothing on stdout when it worked.
fn defrag(data_dir: &str) -> Outcome {
    match oxcd_storage::defrag::offline(data_dir) {
        Ok(_) => Outcome::default(),
        Err(e) => Outcome::fail(
            exit::ERROR,
            &format!("Failed to defragment etcd data[{data_dir}] ({e})"),
        ),
    }
}

/// etcdutl 3.6's `migrate`: its log lines on stderr, nothing on stdout.
fn migrate(flags: &args::Parsed, specs: &[args::Spec]) -> Outcome {
    let cfg = oxcd_utl::migrate::MigrateConfig {
        data_dir: PathBuf::from(flags.get("data-dir", specs)),
        target_version: flags.get("target-version", specs).to_string(),
        force: flags.flag("force", specs),
    };
    match oxcd_utl::migrate::migrate(&cfg) {
        Ok(()) => Outcome::default(),
        Err(e @ oxcd_utl::migrate::MigrateError::BadArgs(_)) => {
            Outcome::fail(exit::BAD_ARGS, &e.to_string())
        }
        Err(e) => Outcome::fail(exit::ERROR, &e.to_string()),
    }
}

/// `swap-to-etcd --data-dir [--wal-dir]`: what was written, on stdout.
fn swap_to_etcd(flags: &args::Parsed, specs: &[args::Spec]) -> Outcome {
    use oxcd_server::backup::etcd_dir::{adopt::MemberDirs, export};
    let member = PathBuf::from(flags.get("data-dir", specs)).join("member");
    let wal = match flags.get("wal-dir", specs) {
        "" => member.join("wal"),
        dir => PathBuf::from(dir),
    };
    let dirs = MemberDirs {
        wal,
        snap: member.join("snap"),
    };
    match export::swap_to_etcd(&member, &dirs) {
        Ok(Some(done)) => Outcome::ok(format!(
            "member {:x} of cluster {:x} written as etcd's at index {} with {} entries after it; oxcd's files are kept in {} and {}\n",
            done.member_id,
            done.cluster_id,
            done.applied,
            done.entries,
            oxcd_server::backup::etcd_dir::swap::beside(&dirs.wal, export::KEPT).display(),
            oxcd_server::backup::etcd_dir::swap::beside(&dirs.snap, export::KEPT).display(),
        )),
        Ok(None) => Outcome::ok("finished the swap an earlier run began\n".to_string()),
        Err(e) => Outcome::fail(exit::ERROR, &e.to_string()),
    }
}

/// etcdutl 3.6's `hashkv <filename> [--rev]`.
fn hashkv(flags: &args::Parsed, specs: &[args::Spec]) -> Outcome {
    if flags.args.len() != 1 {
        return Outcome::fail(exit::BAD_ARGS, "hashkv requires exactly one argument");
    }
    let Some(format) = status::Format::parse(flags.get("write-out", specs)) else {
        return Outcome::fail(exit::BAD_FEATURE, "unsupported output format");
    };
    let h = match oxcd_utl::hashkv::hash_kv(&PathBuf::from(&flags.args[0]), flags.int("rev", specs))
    {
        Ok(h) => h,
        Err(e) => return Outcome::fail(exit::ERROR, &e.to_string()),
    };
    match oxcd_utl::hashkv::print(&h, format) {
        Ok(text) => Outcome::ok(text),
        Err(e) => Outcome::fail(exit::BAD_FEATURE, &e),
    }
}

fn snapshot_status(flags: &args::Parsed, specs: &[args::Spec]) -> Outcome {
    if flags.args.len() != 1 {
        return Outcome::fail(
            exit::BAD_ARGS,
            "snapshot status requires exactly one argument",
        );
    }
    let Some(format) = status::Format::parse(flags.get("write-out", specs)) else {
        return Outcome::fail(exit::BAD_FEATURE, "unsupported output format");
    };
    let s = match status::status(&PathBuf::from(&flags.args[0])) {
        Ok(s) => s,
        Err(e) => return Outcome::fail(exit::ERROR, &e),
    };
    match status::print(&s, format) {
        Ok(text) => Outcome::ok(text),
        Err(e) => Outcome::fail(exit::BAD_FEATURE, &e),
    }
}

fn snapshot_restore(flags: &args::Parsed) -> Outcome {
    if flags.args.len() != 1 {
        return Outcome::fail(
            exit::BAD_ARGS,
            "snapshot restore requires exactly one argument",
        );
    }
    let f = RESTORE_FLAGS;
    let bump = flags.uint("bump-revision", f);
    let mark = flags.flag("mark-compacted", f);
    if (bump == 0 && mark) || (bump > 0 && !mark) {
        return Outcome::fail(
            exit::BAD_ARGS,
            "--mark-compacted required if --revision-bump > 0",
        );
    }
    let name = flags.get("name", f).to_string();
    let data_dir = match flags.get("data-dir", f) {
        "" => PathBuf::from(format!("{name}.etcd")),
        d => PathBuf::from(d),
    };
    let cfg = RestoreConfig {
        snapshot: PathBuf::from(&flags.args[0]),
        name,
        data_dir,
        wal_dir: Some(flags.get("wal-dir", f))
            .filter(|w| !w.is_empty())
            .map(PathBuf::from),
        peer_urls: flags.get("initial-advertise-peer-urls", f).to_string(),
        initial_cluster: flags.get("initial-cluster", f).to_string(),
        initial_cluster_token: flags.get("initial-cluster-token", f).to_string(),
        skip_hash_check: flags.flag("skip-hash-check", f),
        bump_revision: bump,
    };
    match restore::restore(&cfg) {
        Ok(_) => Outcome::default(),
        Err(e) => Outcome::fail(exit::ERROR, &e),
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let out = run(&argv);
    let _ = std::io::stdout().write_all(out.stdout.as_bytes());
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    ExitCode::from(out.code)
}
