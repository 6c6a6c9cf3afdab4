//! Asks a peer which etcd release it runs and what it knows of the cluster's: `GET
//! /version` on its peer URL, as etcd's `getVersion` does (its `etcdserver` and
//! `etcdcluster`), and `GET /downgrade/enabled` (etcd's `getDowngradeEnabled`), over the
//! same connection kind (and TLS) as raft's traffic.

use std::collections::HashMap;
use std::time::Duration;

use oxcd_go::semver::Version;
use tonic::client::GrpcService;
use tonic::transport::Channel;

use super::PeerDialer;
use super::dialer::DialError;

/// The largest `/version` body read.
const MAX_BODY: usize = 64 << 10;

/// Why a peer's version is unknown.
#[derive(Debug, thiserror::Error)]
pub enum VersionError {
    /// It could not be dialed.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// The request failed.
    #[error("request failed: {0}")]
    Request(String),
    /// It answered something other than a version.
    #[error("unreadable answer: {0}")]
    Unreadable(String),
    /// It answered with an error status; `oxcd` when its answer says it is oxcd's.
    #[error("unreadable answer: status {status}")]
    Status {
        /// The status.
        status: http::StatusCode,
        /// Whether the answer carried oxcd's peer header.
        oxcd: bool,
    },
    /// It did not answer in time.
    #[error("timed out")]
    TimedOut,
}

/// The body `/version` answers (etcd's `version.Versions`).
#[derive(serde::Deserialize)]
struct VersionsBody {
    etcdserver: String,
    etcdcluster: String,
}

/// What a peer's `/version` says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerVersions {
    /// Its server version.
    pub server: Version,
    /// The cluster version it knows; None while not decided (or unreadable).
    pub cluster: Option<Version>,
}

/// Peer channels kept between asks, by peer URL: the leader asks every few seconds.
#[derive(Default)]
pub struct VersionAsker {
    dialer: PeerDialer,
    channels: HashMap<String, Channel>,
}

impl VersionAsker {
    /// An asker that dials with `dialer`.
    pub fn new(dialer: PeerDialer) -> VersionAsker {
        VersionAsker {
            dialer,
            channels: HashMap::new(),
        }
    }

    /// The server version of the member at `urls` (tried in turn), None when none
    /// answered within `timeout` each; failures are logged as etcd logs them.
    pub async fn server_version(
        &mut self,
        id: u64,
        urls: &[String],
        timeout: Duration,
    ) -> Option<Version> {
        self.versions(id, urls, timeout).await.map(|v| v.server)
    }

    /// What the member at `urls` (tried in turn) reports on `/version`, None when none
    /// answered within `timeout` each; failures are logged as etcd logs them.
    pub async fn versions(
        &mut self,
        id: u64,
        urls: &[String],
        timeout: Duration,
    ) -> Option<PeerVersions> {
        for url in urls {
            match self
                .get(url, "/version", timeout)
                .await
                .and_then(|b| parse_versions(&b))
            {
                Ok(v) => return Some(v),
                Err(e) => {
                    tracing::warn!(address = %url, remote_member_id = %format!("{id:x}"), error = %e, "failed to reach the peer URL");
                }
            }
        }
        tracing::warn!(remote_member_id = %format!("{id:x}"), "failed to get version");
        None
    }

    /// Whether the member at `urls` (tried in turn) says a downgrade is enabled; Err
    /// when none answered a boolean.
    pub async fn downgrade_enabled(
        &mut self,
        urls: &[String],
        timeout: Duration,
    ) -> Result<bool, VersionError> {
        let mut last = VersionError::TimedOut;
        for url in urls {
            match self.get(url, "/downgrade/enabled", timeout).await {
                Ok(body) => match oxcd_go::strconv::parse_bool(&String::from_utf8_lossy(&body)) {
                    Ok(b) => return Ok(b),
                    Err(_) => {
                        last =
                            VersionError::Unreadable(String::from_utf8_lossy(&body).into_owned());
                        tracing::warn!(address = %url, error = %last, "failed to convert response");
                    }
                },
                Err(e) => {
                    tracing::warn!(address = %url, error = %e, "failed to reach the peer URL");
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// The body of `GET path` at `url`, within `timeout`: over HTTP/2 (oxcd's peers),
    /// else over HTTP/1.1 (an etcd member's peer port routes HTTP/2 to its gRPC server).
    async fn get(
        &mut self,
        url: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<bytes::Bytes, VersionError> {
        let answer = tokio::time::timeout(timeout, self.fetch(url, path, timeout)).await;
        let answer = answer.unwrap_or(Err(VersionError::TimedOut));
        let over_h2 = match answer {
            // An oxcd peer answered: HTTP/1.1 would be asked the same.
            Ok(_) | Err(VersionError::Status { oxcd: true, .. }) => return answer,
            Err(e) => e,
        };
        self.channels.remove(url);
        match crate::peer::etcd::client::get(&self.dialer, url, path, timeout).await {
            Ok(a) if a.status.is_success() => Ok(a.body),
            _ => Err(over_h2),
        }
    }

    async fn fetch(
        &mut self,
        url: &str,
        path: &str,
        timeout: Duration,
    ) -> Result<bytes::Bytes, VersionError> {
        let mut channel = match self.channels.get(url) {
            Some(c) => c.clone(),
            None => {
                let c = self.dialer.connect(url, timeout).await?;
                self.channels.insert(url.to_string(), c.clone());
                c
            }
        };
        let request = http::Request::builder()
            .method(http::Method::GET)
            .uri(path)
            .body(tonic::body::Body::new(axum::body::Body::empty()))
            .map_err(|e| VersionError::Request(e.to_string()))?;
        std::future::poll_fn(|cx| GrpcService::poll_ready(&mut channel, cx))
            .await
            .map_err(|e| VersionError::Request(e.to_string()))?;
        let response = GrpcService::call(&mut channel, request)
            .await
            .map_err(|e| VersionError::Request(e.to_string()))?;
        if !response.status().is_success() {
            return Err(VersionError::Status {
                status: response.status(),
                oxcd: response
                    .headers()
                    .contains_key(super::etcd::routes::OXCD_PEER_HEADER),
            });
        }
        axum::body::to_bytes(axum::body::Body::new(response.into_body()), MAX_BODY)
            .await
            .map_err(|e| VersionError::Request(e.to_string()))
    }
}

/// A `/version` body's versions ("not_decided" is no cluster version).
fn parse_versions(body: &[u8]) -> Result<PeerVersions, VersionError> {
    let v: VersionsBody =
        serde_json::from_slice(body).map_err(|e| VersionError::Unreadable(e.to_string()))?;
    Ok(PeerVersions {
        server: Version::parse(&v.etcdserver)
            .map_err(|e| VersionError::Unreadable(e.to_string()))?,
        cluster: Version::parse(&v.etcdcluster).ok(),
    })
}
