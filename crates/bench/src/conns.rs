//! The connections a run shares: `--conns` gRPC connections spread over the endpoints
//! in turn (or all to the leader with `--target-leader`), over TLS with `--cacert`,
//! `--cert`, `--key` or `https://` endpoints, authenticated when `--user` is given.
//! [`Global`] holds these flags and the others every workload takes.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use oxcd_api::etcdserverpb::StatusRequest;
use oxcd_client::{Client, ConnectOptions, Credentials, TlsConfig};

/// Flags every workload takes.
#[derive(Debug, Clone, Args)]
pub struct Global {
    /// gRPC endpoints, comma separated; connections are spread over them in turn.
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "127.0.0.1:2379"
    )]
    pub endpoints: Vec<String>,
    /// Total number of gRPC connections.
    #[arg(long, global = true, default_value_t = 1)]
    pub conns: usize,
    /// Total number of concurrent clients (tasks sharing the connections).
    #[arg(long, global = true, default_value_t = 1)]
    pub clients: usize,
    /// Send every request to the current leader only.
    #[arg(long, global = true)]
    pub target_leader: bool,
    /// username[:password] for authentication (the password is asked for when missing).
    #[arg(long, global = true)]
    pub user: Option<String>,
    /// Dial timeout in seconds.
    #[arg(long, global = true, default_value_t = 2)]
    pub dial_timeout: u64,
    /// Verify the servers' certificates with this CA bundle (TLS for every endpoint).
    #[arg(long, global = true)]
    pub cacert: Option<PathBuf>,
    /// Identify with this TLS client certificate.
    #[arg(long, global = true)]
    pub cert: Option<PathBuf>,
    /// The key of --cert.
    #[arg(long = "key", id = "tls_key", global = true)]
    pub key_file: Option<PathBuf>,
    /// Skip verifying the servers' certificates (testing only).
    #[arg(long, global = true)]
    pub insecure_skip_tls_verify: bool,
    /// Print the result as one JSON object instead of text.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Why connecting failed, as a message for the operator.
pub type Error = String;

fn credentials(user: &Option<String>) -> Result<Option<Credentials>, Error> {
    let Some(u) = user else { return Ok(None) };
    let (name, password) = match u.split_once(':') {
        Some((n, p)) => (n.to_string(), p.to_string()),
        // The prompt goes to stderr: stdout carries the report (--json).
        None => (
            u.clone(),
            oxcd_client::ask_password(&mut std::io::stderr())
                .map_err(|e| format!("reading the password: {e}"))?,
        ),
    };
    Ok(Some(Credentials {
        user: name,
        password,
    }))
}

fn options(g: &Global) -> Result<ConnectOptions, Error> {
    let tls = (g.cacert.is_some()
        || g.cert.is_some()
        || g.key_file.is_some()
        || g.insecure_skip_tls_verify)
        .then(|| TlsConfig {
            ca_file: g.cacert.clone(),
            cert_file: g.cert.clone(),
            key_file: g.key_file.clone(),
            insecure_skip_verify: g.insecure_skip_tls_verify,
        });
    Ok(ConnectOptions {
        tls,
        dial_timeout: Duration::from_secs(g.dial_timeout.max(1)),
        request_timeout: Duration::from_secs(30),
        credentials: credentials(&g.user)?,
        ..ConnectOptions::default()
    })
}

/// Whether the member `c` talks to is the leader (by its Status).
pub async fn is_leader(c: &Client) -> Result<bool, Error> {
    let s = c
        .maintenance()
        .status(StatusRequest {})
        .await
        .map_err(|e| e.to_string())?
        .into_inner();
    let member = s.header.map(|h| h.member_id).unwrap_or_default();
    Ok(s.leader != 0 && s.leader == member)
}

/// The endpoint of the member that is leader, asking each endpoint in turn.
async fn leader_endpoint(endpoints: &[String], opts: &ConnectOptions) -> Result<String, Error> {
    for ep in endpoints {
        let Ok(c) = Client::connect(std::slice::from_ref(ep), opts).await else {
            continue;
        };
        if let Ok(true) = is_leader(&c).await {
            return Ok(ep.clone());
        }
    }
    Err(format!("no leader found among {}", endpoints.join(",")))
}

/// Opens the connections.
pub async fn open(g: &Global) -> Result<Vec<Client>, Error> {
    if g.endpoints.is_empty() {
        return Err("no endpoints given".into());
    }
    let opts = options(g)?;
    let endpoints = if g.target_leader {
        vec![leader_endpoint(&g.endpoints, &opts).await?]
    } else {
        g.endpoints.clone()
    };
    let mut conns = Vec::with_capacity(g.conns.max(1));
    for i in 0..g.conns.max(1) {
        let ep = &endpoints[i % endpoints.len()];
        let c = Client::connect(std::slice::from_ref(ep), &opts)
            .await
            .map_err(|e| format!("{ep}: {e}"))?;
        conns.push(c);
    }
    Ok(conns)
}
