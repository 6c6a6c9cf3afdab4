//! oxcdctl: a command-line client for oxcd and etcd, compatible with etcdctl 3.4: same
//! commands, flags, `ETCDCTL_*` variables, output formats, help texts, error messages
//! and exit codes, so scripts written for etcdctl run unchanged.
//!
//! Owns the dispatch: find the command, parse its flags, run it with its [`Ctx`], write
//! what it printed and how it failed. The parts: argument parsing ([`args`], pflag's
//! rules), what a command is and the walks of the tree ([`command`]), the command tree
//! and its lookup ([`commands`], cobra's rules), help texts ([`help`]), a command's
//! context ([`ctx`]) and client set-up ([`session`], [`env`](mod@env)), failures and
//! exit codes ([`fail`]) and the printers ([`output`]).
//!
//! Imports go one way: `commands` uses `command`, `ctx`, `session` and `help`, and
//! nothing it uses imports it back; `ctx` knows only `args`.
//!
//! Invariants: what is printed for a response is decided in `output` only; a command
//! prints nothing until it has its whole answer (so a failure never leaves half an
//! output), except what etcdctl itself prints before failing (carried in [`Fail`]).

mod args;
mod command;
mod commands;
mod ctx;
mod env;
mod fail;
mod help;
mod output;
mod session;
mod tabwriter;

use std::io::Write;
use std::process::ExitCode;

use commands::TREE;
use ctx::Ctx;
use fail::{Fail, exit};
use output::Out;

fn run(argv: Vec<String>) -> Result<Out, Fail> {
    let (cmd, rest) = commands::find(&argv).map_err(commands::unknown_command)?;
    let flags = args::parse(&rest, &TREE.all_flags(cmd))
        .map_err(|e| Fail::bad_flag(help::usage(&TREE, cmd), e))?;
    let Some(run) = cmd.run.filter(|_| !flags.flag("help")) else {
        return Ok(Out::text(help::usage(&TREE, cmd)));
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Fail::new(exit::ERROR, format!("cannot start runtime: {e}")))?;
    let inherited = TREE.inherited_flags(cmd.path);
    rt.block_on(run(Ctx { flags, inherited }))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let (out, code, msg) = match run(argv) {
        Ok(out) => (out, 0, None),
        Err(f) => (f.partial, f.code, f.msg),
    };
    out.write();
    if let Some(m) = msg {
        let _ = writeln!(std::io::stderr(), "Error: {m}");
    }
    ExitCode::from(code)
}
