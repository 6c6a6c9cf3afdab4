//! oxcdctl: a command-line client for oxcd and etcd, compatible with etcdctl 3.4: same
//! commands, flags, `ETCDCTL_*` variables, output formats, help texts, error messages
//! and exit codes, so scripts written for etcdctl run unchanged.
//!
//! Owns: argument parsing ([`args`], pflag's rules), the command tree and its lookup
//! ([`commands`], cobra's rules), help texts ([`help`]), the per-command setup
//! ([`session`], [`env`]) and the printers ([`output`]).
//!
//! Invariants: what is printed for a response is decided in `output` only; a command
//! prints nothing until it has its whole answer (so a failure never leaves half an
//! output), except what etcdctl itself prints before failing (carried in [`Fail`]).

mod args;
mod commands;
mod env;
mod gofmt;
mod goparse;
mod help;
mod output;
mod session;
mod tabwriter;

use std::io::Write;
use std::process::ExitCode;

use output::Out;
use session::Ctx;

/// etcdctl's exit codes.
pub mod exit {
    /// A request failed (also cobra's code for bad flags and unknown commands).
    pub const ERROR: u8 = 1;
    /// The client could not be set up (e.g. authentication refused).
    pub const BAD_CONNECTION: u8 = 2;
    /// Input (stdin) could not be parsed.
    pub const INVALID_INPUT: u8 = 3;
    /// An option value is not supported.
    pub const BAD_FEATURE: u8 = 4;
    /// A watch ended (canceled by the server).
    pub const INTERRUPTED: u8 = 5;
    /// Wrong arguments.
    pub const BAD_ARGS: u8 = 128;
}

/// A failure: the exit code, the message printed as `Error: <msg>` (none for a silent
/// exit), and what was printed before it.
#[derive(Debug)]
pub struct Fail {
    /// Exit code.
    pub code: u8,
    /// Message.
    pub msg: Option<String>,
    /// What was printed before the failure (e.g. each endpoint's health, or usage).
    pub partial: Out,
}

impl Fail {
    /// A failure with `code` and a message.
    pub fn new(code: u8, msg: impl Into<String>) -> Fail {
        Fail {
            code,
            msg: Some(msg.into()),
            partial: Out::default(),
        }
    }

    /// An exit with `code` and no `Error:` line.
    pub fn silent(code: u8) -> Fail {
        Fail {
            code,
            msg: None,
            partial: Out::default(),
        }
    }

    /// A flag that cobra could not parse: usage on stdout, the error twice on stderr
    /// (once from cobra, once from etcdctl), exit 1.
    fn bad_flag(usage: String, msg: String) -> Fail {
        Fail {
            code: exit::ERROR,
            partial: Out::err(format!("Error: {msg}\n"))
                .then(Out::text(usage))
                .then(Out::err("\n")),
            msg: Some(msg),
        }
    }
}

impl From<oxcd_client::Error> for Fail {
    fn from(e: oxcd_client::Error) -> Fail {
        let code = match e {
            oxcd_client::Error::BadEndpoint(..) | oxcd_client::Error::Tls(_) => exit::BAD_ARGS,
            _ => exit::ERROR,
        };
        Fail::new(code, e.to_string())
    }
}

fn run(argv: Vec<String>) -> Result<Out, Fail> {
    let (cmd, rest) = commands::find(&argv).map_err(commands::unknown_command)?;
    let flags = args::parse(&rest, &commands::all_flags(cmd))
        .map_err(|e| Fail::bad_flag(help::usage(cmd), e))?;
    let Some(run) = cmd.run.filter(|_| !flags.flag("help")) else {
        return Ok(Out::text(help::usage(cmd)));
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Fail::new(exit::ERROR, format!("cannot start runtime: {e}")))?;
    rt.block_on(run(Ctx { flags, cmd }))
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
