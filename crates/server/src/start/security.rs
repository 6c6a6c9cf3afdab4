//! A member's TLS, resolved from its settings before anything is bound or started:
//! auto-TLS certificates made or reused, every certificate, key, CA and CRL read and
//! checked, and the configurations built for the client port, the peer port and the
//! peer dialer. Any problem is a start-up error naming the file or URL, never a
//! half-started member.

use std::sync::Arc;

use oxcd_transport::listen::{Addr, Conn, ConnCheck, parse_listen_url};
use oxcd_transport::selfcert::{self, Usage};
use oxcd_transport::tls::{ClientTls, ServerTls};
use oxcd_transport::{TlsError, TlsInfo, valid_for_host_of};

use oxcd_config::settings::Settings;

/// The TLS configurations of a member.
#[derive(Clone, Default)]
pub struct Security {
    /// For `https`/`unixs` client and metrics URLs.
    pub client: Option<Arc<ServerTls>>,
    /// For `https`/`unixs` peer URLs.
    pub peer: Option<Arc<ServerTls>>,
    /// Refuses peers whose client certificate does not name their address (etcd's SAN
    /// check), when peers must present one.
    pub peer_check: Option<ConnCheck>,
    /// For dialing `https` peers.
    pub peer_dialer: Option<Arc<ClientTls>>,
}

/// Why a member's TLS settings were refused.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// An `https`/`unixs` client URL without a certificate.
    #[error(
        "TLS key/cert (--cert-file, --key-file) must be provided for client url {0} with HTTPS scheme"
    )]
    NoClientCert(String),
    /// A secure metrics URL without a client certificate.
    #[error(
        "client TLS key/cert (--cert-file, --key-file) must be provided for metrics secure url"
    )]
    NoMetricsCert,
    /// An `https`/`unixs` peer URL (its address) without a certificate.
    #[error("cannot listen on TLS for {0}: KeyFile and CertFile are not presented")]
    NoPeerCert(String),
    /// The client TLS configuration does not build.
    #[error("client TLS: {0}")]
    Client(TlsError),
    /// The peer TLS configuration (serving or dialing) does not build.
    #[error("peer TLS: {0}")]
    Peer(TlsError),
    /// Auto-TLS could not make or reuse its certificate for `side`.
    #[error("{side} auto TLS: {source}")]
    AutoTls {
        /// "client" or "peer".
        side: &'static str,
        /// Why.
        source: TlsError,
    },
}

/// Resolves the TLS settings of `s` (see the module doc).
pub fn load(s: &Settings) -> Result<Security, SecurityError> {
    let client_info = resolve(
        "client",
        &s.client_tls,
        s.client_auto_tls,
        &s.listen_client_urls,
        s,
        Usage::Client,
    )?;
    let peer_info = resolve(
        "peer",
        &s.peer_tls,
        s.peer_auto_tls,
        &s.listen_peer_urls,
        s,
        Usage::Peer,
    )?;
    let mut out = Security::default();
    for u in s
        .listen_client_urls
        .iter()
        .chain(&s.listen_client_http_urls)
    {
        if is_secure(u) && client_info.is_empty() {
            return Err(SecurityError::NoClientCert(u.clone()));
        }
        if !is_secure(u) && !client_info.is_empty() && !s.client_auto_tls {
            tracing::warn!(client_url = %u, "scheme is http or unix while key and cert files are present; ignoring key and cert files");
        }
    }
    if s.listen_metrics_urls.iter().any(|u| is_secure(u)) && client_info.is_empty() {
        return Err(SecurityError::NoMetricsCert);
    }
    for u in &s.listen_peer_urls {
        if is_secure(u) && peer_info.is_empty() {
            let addr = u.split_once("://").map_or(u.as_str(), |(_, a)| a);
            return Err(SecurityError::NoPeerCert(addr.to_string()));
        }
        if !is_secure(u) && !peer_info.is_empty() && !s.peer_auto_tls {
            tracing::warn!(peer_url = %u, "scheme is HTTP while key and cert files are present; ignoring key and cert files");
        }
    }
    if !client_info.is_empty() {
        out.client = Some(Arc::new(
            ServerTls::new("client TLS", &client_info).map_err(SecurityError::Client)?,
        ));
    }
    let peers_elsewhere = s
        .initial_cluster
        .iter()
        .flat_map(|(_, us)| us)
        .chain(&s.peer_urls);
    let dial_tls = peers_elsewhere.into_iter().any(|u| is_secure(u));
    if !peer_info.is_empty() {
        out.peer = Some(Arc::new(
            ServerTls::new("peer TLS", &peer_info).map_err(SecurityError::Peer)?,
        ));
        if peer_info.client_cert_auth && !s.peer_skip_client_san_verification {
            out.peer_check = Some(Arc::new(check_peer_san));
        }
    }
    // With a peer certificate, or when only other members serve https (then this member
    // dials them without one, verifying them against the system's CAs, as etcd).
    if !peer_info.is_empty() || dial_tls {
        out.peer_dialer = Some(Arc::new(
            ClientTls::new("peer TLS (dialing)", &peer_info).map_err(SecurityError::Peer)?,
        ));
    }
    Ok(out)
}

fn is_secure(url: &str) -> bool {
    url.starts_with("https://") || url.starts_with("unixs://")
}

/// The TLS info of one side: as given, or made by auto-TLS when none is given. A
/// self-signed certificate cannot be verified by the other side, so with auto-TLS the
/// checks of the other side's certificate are dropped, as in etcd — but with a warning
/// naming them, where etcd drops them silently.
fn resolve(
    side: &'static str,
    given: &TlsInfo,
    auto: bool,
    listen_urls: &[String],
    s: &Settings,
    usage: Usage,
) -> Result<TlsInfo, SecurityError> {
    if !auto {
        return Ok(given.clone());
    }
    if !given.is_empty() {
        tracing::warn!("ignoring {side} auto TLS since certs given");
        return Ok(given.clone());
    }
    let hosts: Vec<String> = listen_urls
        .iter()
        .filter_map(|u| parse_listen_url(u).ok())
        .map(|u| match u.bind {
            oxcd_transport::listen::Bind::Tcp(a) => a.ip().to_string(),
            oxcd_transport::listen::Bind::Unix(_) => "localhost".to_string(),
        })
        .collect();
    let dir = s.data_dir.join("fixtures").join(side);
    let made = selfcert::self_cert(&dir, &hosts, s.self_signed_cert_validity, usage)
        .map_err(|source| SecurityError::AutoTls { side, source })?;
    let dropped: Vec<&str> = [
        (given.client_cert_auth, "client certificate auth"),
        (given.trusted_ca_file.is_some(), "trusted CA file"),
        (given.crl_file.is_some(), "CRL file"),
        (!given.allowed_cn.is_empty(), "allowed CN"),
        (!given.allowed_hostnames.is_empty(), "allowed hostname"),
    ]
    .into_iter()
    .filter_map(|(set, what)| set.then_some(what))
    .collect();
    if !dropped.is_empty() {
        tracing::warn!(
            "{side} auto TLS: ignoring {} (peers and clients present certificates that cannot be verified against them)",
            dropped.join(", ")
        );
    }
    Ok(TlsInfo {
        options: given.options.clone(),
        ..made
    })
}

/// etcd's check of a peer's client certificate: when it names addresses or hosts,
/// the connection must come from one of them.
fn check_peer_san(conn: &Conn, from: &Addr) -> Result<(), oxcd_transport::tls::HostMismatch> {
    let Addr::Tcp(remote) = from else {
        return Ok(());
    };
    let Some(leaf) = conn.peer_certificates().and_then(|c| c.first()) else {
        return Ok(());
    };
    valid_for_host_of(leaf.as_ref(), remote.ip())
}
