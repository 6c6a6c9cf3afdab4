//! How a command ends when it fails: [`Fail`] (the exit code, the `Error:` message and
//! what was printed before it) and etcdctl's exit codes ([`exit`]).

use crate::output::Out;

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
    pub fn bad_flag(usage: String, msg: String) -> Fail {
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
