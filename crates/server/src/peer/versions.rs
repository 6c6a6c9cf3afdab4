//! Asks a peer which etcd release it runs: `GET /version` on its peer URL, as etcd's
//! `getVersion` does, over the same connection kind (and TLS) as raft's traffic. The
//! answer is etcd's `/version` body; only `etcdserver` is read.

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
    /// It did not answer in time.
    #[error("timed out")]
    TimedOut,
}

/// The body `/version` answers (etcd's `version.Versions`).
#[derive(serde::Deserialize)]
struct Versions {
    etcdserver: String,
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
        for url in urls {
            match tokio::time::timeout(timeout, self.ask(url, timeout)).await {
                Ok(Ok(v)) => return Some(v),
                Ok(Err(e)) => {
                    self.channels.remove(url);
                    tracing::warn!(address = %url, remote_member_id = %format!("{id:x}"), error = %e, "failed to reach the peer URL");
                }
                Err(_) => {
                    self.channels.remove(url);
                    tracing::warn!(address = %url, remote_member_id = %format!("{id:x}"), error = %VersionError::TimedOut, "failed to reach the peer URL");
                }
            }
        }
        tracing::warn!(remote_member_id = %format!("{id:x}"), "failed to get version");
        None
    }

    async fn ask(&mut self, url: &str, timeout: Duration) -> Result<Version, VersionError> {
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
            .uri("/version")
            .body(tonic::body::Body::new(axum::body::Body::empty()))
            .map_err(|e| VersionError::Request(e.to_string()))?;
        std::future::poll_fn(|cx| GrpcService::poll_ready(&mut channel, cx))
            .await
            .map_err(|e| VersionError::Request(e.to_string()))?;
        let response = GrpcService::call(&mut channel, request)
            .await
            .map_err(|e| VersionError::Request(e.to_string()))?;
        if !response.status().is_success() {
            return Err(VersionError::Unreadable(format!(
                "status {}",
                response.status()
            )));
        }
        let body = axum::body::to_bytes(axum::body::Body::new(response.into_body()), MAX_BODY)
            .await
            .map_err(|e| VersionError::Request(e.to_string()))?;
        let versions: Versions =
            serde_json::from_slice(&body).map_err(|e| VersionError::Unreadable(e.to_string()))?;
        Version::parse(&versions.etcdserver).map_err(|e| VersionError::Unreadable(e.to_string()))
    }
}
