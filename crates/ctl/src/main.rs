//! oxcdctl: a command-line client for oxcd and etcd, compatible with etcdctl v3: same
//! commands, flags, `ETCDCTL_*` variables, output formats and exit codes.
//!
//! Owns: argument parsing ([`args`]), the commands ([`commands`]) and the printers
//! ([`output`]). Invariant: what is printed for a response is decided in `output` only.

mod args;
mod commands;
mod humanize;
mod output;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use args::{Spec, boolean, value};

/// etcdctl's exit codes.
pub mod exit {
    /// A request failed.
    pub const ERROR: u8 = 1;
    /// No endpoint could be reached.
    pub const BAD_CONNECTION: u8 = 2;
    /// Input (stdin) could not be parsed.
    pub const INVALID_INPUT: u8 = 3;
    /// An option value is not supported.
    pub const BAD_FEATURE: u8 = 4;
    /// Wrong arguments.
    pub const BAD_ARGS: u8 = 128;
}

/// A failure: the exit code and the message printed after `Error: `.
#[derive(Debug)]
pub struct Fail {
    /// Exit code.
    pub code: u8,
    /// Message.
    pub msg: String,
    /// What was printed before the failure (e.g. each endpoint's health).
    pub partial: output::Out,
}

impl Fail {
    /// A failure with `code`.
    pub fn new(code: u8, msg: impl Into<String>) -> Fail {
        Fail {
            code,
            msg: msg.into(),
            partial: output::Out::default(),
        }
    }
}

impl From<oxcd_client::Error> for Fail {
    fn from(e: oxcd_client::Error) -> Fail {
        let code = match e {
            oxcd_client::Error::DialTimeout => exit::BAD_CONNECTION,
            oxcd_client::Error::TlsUnsupported(_) => exit::BAD_FEATURE,
            _ => exit::ERROR,
        };
        Fail::new(code, e.to_string())
    }
}

/// Flags every command takes.
pub const GLOBAL: &[Spec] = &[
    value("endpoints", "127.0.0.1:2379"),
    value("dial-timeout", "2s"),
    value("command-timeout", "5s"),
    value("keepalive-time", "2s"),
    value("keepalive-timeout", "6s"),
    value("user", ""),
    value("password", ""),
    value("cacert", ""),
    value("cert", ""),
    value("key", ""),
    boolean("insecure-skip-tls-verify"),
    Spec {
        name: "insecure-transport",
        short: None,
        boolean: true,
        default: "true",
    },
    Spec {
        name: "write-out",
        short: Some('w'),
        boolean: false,
        default: "simple",
    },
    boolean("hex"),
    boolean("debug"),
    Spec {
        name: "discovery-srv",
        short: Some('d'),
        boolean: false,
        default: "",
    },
    value("discovery-srv-name", ""),
    Spec {
        name: "insecure-discovery",
        short: None,
        boolean: true,
        default: "true",
    },
    Spec {
        name: "help",
        short: Some('h'),
        boolean: true,
        default: "false",
    },
];

/// Finds the command words (`get`, or `endpoint status`) among the arguments, skipping
/// global flags and their values.
fn command_words(argv: &[String]) -> (Vec<String>, Vec<String>) {
    let mut words: Vec<String> = Vec::new();
    let mut rest: Vec<String> = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        let takes_value = |name: &str| GLOBAL.iter().any(|s| s.name == name && !s.boolean);
        if words.len() < 2 && !a.starts_with('-') && (words.is_empty() || is_group(&words[0])) {
            words.push(a.clone());
        } else {
            rest.push(a.clone());
            let flag_value = match a.strip_prefix("--") {
                Some(n) => !n.contains('=') && takes_value(n),
                None => a == "-w" || a == "-d",
            };
            if flag_value && i + 1 < argv.len() {
                i += 1;
                rest.push(argv[i].clone());
            }
        }
        i += 1;
        if !words.is_empty() && !is_group(&words[0]) {
            rest.extend(argv[i..].iter().cloned());
            break;
        }
    }
    (words, rest)
}

fn is_group(w: &str) -> bool {
    matches!(w, "endpoint")
}

/// Global settings every command uses.
pub struct Ctx {
    /// Parsed flags (global and the command's).
    pub flags: args::Parsed,
    /// The printer.
    pub printer: output::Printer,
    /// Connection options.
    pub conn: oxcd_client::ConnectOptions,
}

impl Ctx {
    /// The endpoints.
    pub fn endpoints(&self) -> Vec<String> {
        self.flags
            .get("endpoints")
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.trim().to_string())
            .collect()
    }

    /// Connects to the endpoints.
    pub async fn client(&self) -> Result<oxcd_client::Client, Fail> {
        Ok(oxcd_client::Client::connect(&self.endpoints(), &self.conn).await?)
    }

    /// Runs a request under `--command-timeout`.
    pub async fn timed<T>(
        &self,
        f: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    ) -> Result<T, Fail> {
        match tokio::time::timeout(self.conn.request_timeout, f).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(oxcd_client::Error::Status(s).into()),
            Err(_) => Err(Fail::new(exit::ERROR, "context deadline exceeded")),
        }
    }
}

fn duration_flag(p: &args::Parsed, name: &str) -> Result<Duration, Fail> {
    humanize::parse_go_duration(p.get(name)).ok_or_else(|| {
        Fail::new(
            exit::BAD_ARGS,
            format!("invalid argument {:?} for \"--{name}\" flag", p.get(name)),
        )
    })
}

fn run(argv: Vec<String>) -> Result<output::Out, Fail> {
    let (words, rest) = command_words(&argv);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let cmd = commands::find(&words).ok_or_else(|| match words.first() {
        Some(w) => Fail::new(
            exit::ERROR,
            format!("unknown command {w:?} for \"oxcdctl\"\nRun 'oxcdctl --help' for usage."),
        ),
        None => Fail::new(exit::ERROR, commands::usage()),
    })?;
    let specs: Vec<Spec> = GLOBAL.iter().chain(cmd.flags).copied().collect();
    let mut flags = args::parse(&rest, &specs).map_err(|e| Fail::new(exit::ERROR, e))?;
    if flags.flag("help") {
        return Ok(output::Out {
            stdout: cmd.help.as_bytes().to_vec(),
            stderr: String::new(),
        });
    }
    for s in GLOBAL {
        let key = format!("ETCDCTL_{}", s.name.to_uppercase().replace('-', "_"));
        if let Ok(v) = std::env::var(&key) {
            if flags.is_set(s.name) {
                return Err(Fail::new(
                    exit::BAD_ARGS,
                    format!(
                        "conflicting environment variable {key:?} is shadowed by corresponding command-line flag (either unset environment variable or disable flag)"
                    ),
                ));
            }
            flags.set_if_unset(s.name, v);
        }
    }
    for tls in ["cacert", "cert", "key"] {
        if !flags.get(tls).is_empty() {
            return Err(Fail::new(
                exit::BAD_FEATURE,
                format!("--{tls}: TLS is not supported yet by oxcdctl"),
            ));
        }
    }
    if !flags.get("user").is_empty() {
        return Err(Fail::new(
            exit::BAD_FEATURE,
            "--user: authentication is not supported yet by oxcdctl",
        ));
    }
    let format = output::Format::parse(flags.get("write-out"))
        .map_err(|e| Fail::new(exit::BAD_FEATURE, e))?;
    let conn = oxcd_client::ConnectOptions {
        dial_timeout: duration_flag(&flags, "dial-timeout")?,
        request_timeout: duration_flag(&flags, "command-timeout")?,
    };
    let printer = output::Printer {
        format,
        hex: flags.flag("hex"),
        value_only: false,
    };
    let ctx = Ctx {
        flags,
        printer,
        conn,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Fail::new(exit::ERROR, format!("cannot start runtime: {e}")))?;
    rt.block_on((cmd.run)(ctx))
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match run(argv) {
        Ok(out) => {
            let _ = std::io::stdout().write_all(&out.stdout);
            let _ = std::io::stderr().write_all(out.stderr.as_bytes());
            ExitCode::SUCCESS
        }
        Err(f) => {
            let _ = std::io::stdout().write_all(&f.partial.stdout);
            let _ = std::io::stderr().write_all(f.partial.stderr.as_bytes());
            eprintln!("Error: {}", f.msg);
            ExitCode::from(f.code)
        }
    }
}
