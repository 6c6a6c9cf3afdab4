//! How a member dials its peers: one [`PeerDialer`], built from the settings at start
//! and handed to everything that talks to peers (the raft and snapshot streams, the
//! corruption checks, the checks of a new member), so they all use the same peer TLS
//! settings, source address and version headers.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use oxcd_transport::dial::{ClientConn, Dialer};
use oxcd_transport::listen::{Bind, parse_listen_url};
use oxcd_transport::tls::ClientTls;
use tonic::transport::{Channel, Endpoint};

use crate::domains::version::release::Release;

/// How long a connection to a peer may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How often an open peer connection is pinged (HTTP/2 PING), busy or idle.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
/// How long a ping may go unanswered before the connection is given up and its streams
/// fail: a connection that stalls without closing (a silent drop in the network, a
/// paused peer) is replaced within interval + timeout, as etcd's peer connections time
/// out reads and writes after 5 s.
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a peer could not be dialed.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// A `unix`/`unixs` URL that does not parse.
    #[error("{0}")]
    Url(String),
    /// A URL the channel cannot be made for.
    #[error("invalid peer URL {url:?}: {error}")]
    InvalidUrl {
        /// The peer URL.
        url: String,
        /// Why.
        error: tonic::transport::Error,
    },
    /// The connection failed (its causes printed `a: b: c`, as Go prints them).
    #[error("{}", error_chain(.0))]
    Connect(tonic::transport::Error),
    /// A plain connection failed.
    #[error(transparent)]
    Io(std::io::Error),
}

/// Dials peers: plain `http://` URLs, or `https://` ones with the peer TLS settings.
#[derive(Clone, Debug)]
pub struct PeerDialer {
    tls: Option<Arc<ClientTls>>,
    source_ip: Option<IpAddr>,
    release: Release,
}

impl Default for PeerDialer {
    fn default() -> PeerDialer {
        PeerDialer::new(None, None)
    }
}

impl PeerDialer {
    /// A dialer with `tls` for `https` peers, connecting from `source_ip`.
    pub fn new(tls: Option<Arc<ClientTls>>, source_ip: Option<IpAddr>) -> PeerDialer {
        PeerDialer {
            tls,
            source_ip,
            release: Release::Etcd36,
        }
    }

    /// The same dialer for a member acting as `release`, whose version headers its
    /// requests carry ([`super::compat`]).
    pub fn for_release(self, release: Release) -> PeerDialer {
        PeerDialer { release, ..self }
    }

    /// The release this member's requests announce.
    pub fn release(&self) -> Release {
        self.release
    }

    /// The address peer connections are made from, if one is set.
    pub fn source_ip(&self) -> Option<IpAddr> {
        self.source_ip
    }

    /// The transport dialer for `url`, and the `http://` URI a connection is made for.
    fn dialer_for(&self, url: &str) -> Result<(Dialer, String), DialError> {
        let mut dialer = Dialer::new(self.tls.clone()).with_source_ip(self.source_ip);
        // Connections are always made for an http:// URI; TLS is the dialer's business.
        let mut target = url.replacen("https://", "http://", 1);
        if url.starts_with("https://") {
            dialer = dialer.with_tls(true);
        }
        if url.starts_with("unix") {
            // A unix socket peer: the socket path comes from the URL, the URI gets a
            // placeholder authority.
            let parsed = parse_listen_url(url).map_err(DialError::Url)?;
            if let Bind::Unix(path) = parsed.bind {
                dialer = dialer.with_unix_socket(path).with_tls(parsed.tls);
                target = "http://localhost".into();
            }
        }
        Ok((dialer, target))
    }

    /// A channel to the peer at `url`, connected within `timeout`.
    pub async fn connect(&self, url: &str, timeout: Duration) -> Result<Channel, DialError> {
        let (dialer, target) = self.dialer_for(url)?;
        let endpoint = Endpoint::from_shared(target)
            .map_err(|error| DialError::InvalidUrl {
                url: url.to_string(),
                error,
            })?
            .connect_timeout(timeout)
            .tcp_nodelay(true)
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        endpoint
            .connect_with_connector(dialer)
            .await
            .map_err(DialError::Connect)
    }

    /// A connection to the peer at `url` for HTTP/1.1 (etcd's peer protocol), made within
    /// `timeout`, and the URI its requests are made for. Over TLS it offers no ALPN
    /// protocol ([`Dialer::with_http1`]): an etcd member routes `h2` to its gRPC server.
    pub async fn connection(
        &self,
        url: &str,
        timeout: Duration,
    ) -> Result<(ClientConn, http::Uri), DialError> {
        let (dialer, target) = self.dialer_for(url)?;
        let dialer = dialer.with_http1();
        let uri: http::Uri = target
            .parse()
            .map_err(|_| DialError::Url(format!("invalid peer URL {url:?}")))?;
        match tokio::time::timeout(timeout, dialer.connect(&uri)).await {
            Ok(Ok(conn)) => Ok((conn, uri)),
            Ok(Err(e)) => Err(DialError::Io(e)),
            Err(_) => Err(DialError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("dial {url}: i/o timeout"),
            ))),
        }
    }
}

/// An error with its causes, `a: b: c` as Go prints wrapped errors.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !out.ends_with(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn chains_causes() {
        let inner = std::io::Error::other("connection refused");
        let outer = std::io::Error::other(inner);
        assert_eq!(super::error_chain(&outer), "connection refused");
        let _ = super::PeerDialer::default();
    }
}
