//! What a command needs once its own arguments are checked, a [`Session`], which
//! [`Ctx::session`] sets up from the command's context in etcdctl's order
//! (`clientConfigFromCmd`): `ETCDCTL_*` variables, endpoints, TLS and auth flags, the
//! output format; then the connection.

use std::path::PathBuf;

use oxcd_client::{Client, ConnectOptions, Credentials, TlsConfig};

use crate::args::Parsed;
use crate::ctx::Ctx;
use crate::env;
use crate::fail::{Fail, exit};
use crate::output::{Format, Printer};

/// A command's client settings and printer.
pub struct Session {
    /// The printer for `--write-out` and `--hex`.
    pub printer: Printer,
    /// Connection options.
    pub conn: ConnectOptions,
    /// The endpoints, in order.
    pub endpoints: Vec<String>,
}

impl Ctx {
    /// Reads the environment and the global flags into a [`Session`], failing as etcdctl
    /// fails for each.
    pub fn session(&mut self) -> Result<Session, Fail> {
        let warnings = env::apply(&mut self.flags, &self.inherited, &env::vars())?;
        eprint!("{warnings}");
        let f = &self.flags;
        let mut endpoints = discovered_endpoints(f)?;
        if endpoints.is_empty() {
            endpoints = f.list("endpoints");
        }
        for tls in ["cert", "key", "cacert"] {
            if f.is_set(tls) && f.get(tls).is_empty() {
                return Err(Fail::new(
                    exit::BAD_ARGS,
                    format!("empty string is passed to --{tls} option"),
                ));
            }
        }
        let tls = tls_config(f);
        let credentials = credentials(f)?;
        let format = Format::parse(f.get("write-out"))
            .ok_or_else(|| Fail::new(exit::BAD_FEATURE, "unsupported output format"))?;
        Ok(Session {
            printer: Printer {
                format,
                hex: f.flag("hex"),
                value_only: false,
            },
            conn: ConnectOptions {
                dial_timeout: f.duration("dial-timeout"),
                request_timeout: f.duration("command-timeout"),
                keepalive_time: f.duration("keepalive-time"),
                keepalive_timeout: f.duration("keepalive-timeout"),
                credentials,
                tls,
            },
            endpoints,
        })
    }
}

/// The endpoints `--discovery-srv` finds (none without it), as etcdctl: the SRV records
/// of `_etcd-client-ssl._tcp` then `_etcd-client._tcp`, the http ones dropped with a
/// note unless `--insecure-discovery`.
fn discovered_endpoints(f: &Parsed) -> Result<Vec<String>, Fail> {
    let domain = f.get("discovery-srv").to_string();
    if domain.is_empty() {
        return Ok(Vec::new());
    }
    let name = f.get("discovery-srv-name").to_string();
    // A runtime of its own on a thread of its own: callers may or may not be in one.
    let found = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let resolver = oxcd_transport::srv::SrvResolver::new()?;
            oxcd_transport::srv::client_endpoints(&resolver, &domain, &name).await
        })
    })
    .join()
    .unwrap_or_else(|_| Err("DNS discovery failed".to_string()))
    .map_err(|e| Fail::new(exit::ERROR, e))?;
    if f.flag("insecure-discovery") {
        return Ok(found);
    }
    Ok(found
        .into_iter()
        .filter(|ep| {
            let insecure = ep.starts_with("http://");
            if insecure {
                eprintln!("ignoring discovered insecure endpoint {ep:?}");
            }
            !insecure
        })
        .collect())
}

/// etcdctl's TLS set-up (`newClientCfg`): TLS settings exist when a certificate, key or
/// CA is given, or `--insecure-transport=false`; then bare `host:port` endpoints use
/// TLS too (`https://` ones always do, `http://` ones never). Unlike etcdctl, which
/// drops `--insecure-skip-tls-verify` unless another TLS flag is given, oxcdctl honors
/// it on its own for `https://` endpoints.
fn tls_config(f: &Parsed) -> Option<TlsConfig> {
    let path = |name: &str| {
        Some(f.get(name))
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    };
    let (ca_file, cert_file, key_file) = (path("cacert"), path("cert"), path("key"));
    let skip = f.flag("insecure-skip-tls-verify");
    let given = ca_file.is_some() || cert_file.is_some() || key_file.is_some();
    (given || skip || !f.flag("insecure-transport")).then_some(TlsConfig {
        ca_file,
        cert_file,
        key_file,
        insecure_skip_verify: skip,
    })
}

/// `--user name[:password]` and `--password`, prompting when no password is given.
fn credentials(f: &Parsed) -> Result<Option<Credentials>, Fail> {
    let user = f.get("user");
    if user.is_empty() {
        return Ok(None);
    }
    let password = f.get("password");
    let (user, password) = if !password.is_empty() {
        (user.to_string(), password.to_string())
    } else if let Some((u, p)) = user.split_once(':') {
        (u.to_string(), p.to_string())
    } else {
        let password = oxcd_client::ask_password(&mut std::io::stdout())
            .map_err(|e| Fail::new(exit::ERROR, e.to_string()))?;
        (user.to_string(), password)
    };
    Ok(Some(Credentials { user, password }))
}

impl Session {
    /// Connects to the first endpoint that answers.
    pub async fn client(&self) -> Result<Client, Fail> {
        self.client_for(&self.endpoints).await
    }

    /// Connects to the first of `endpoints` that answers. A refused authentication is
    /// etcdctl's "bad connection" (exit 2); an unreachable cluster is a plain error.
    pub async fn client_for(&self, endpoints: &[String]) -> Result<Client, Fail> {
        Client::connect(endpoints, &self.conn)
            .await
            .map_err(connect_failure)
    }
}

/// How a failed connection ends a command: a refused authentication is etcdctl's "bad
/// connection" (exit 2); anything else, a plain error.
pub fn connect_failure(e: oxcd_client::Error) -> Fail {
    match e {
        oxcd_client::Error::Status(_) => Fail::new(exit::BAD_CONNECTION, e.to_string()),
        other => Fail::from(other),
    }
}
