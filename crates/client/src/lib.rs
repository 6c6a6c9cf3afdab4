//! oxcd-client: an async client for etcd v3 servers (oxcd or etcd).
//!
//! Owns: endpoint handling (etcdctl's forms: `host:port`, `http://host:port`), the
//! connection (the first endpoint that answers within the dial timeout), the generated
//! service stubs, and errors that print as etcd's clients print them.
//!
//! Invariant: no retries hide a server error; a request either returns the server's
//! answer or an [`Error`] that says what failed.

use std::time::Duration;

use oxcd_api::etcdserverpb::cluster_client::ClusterClient;
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::maintenance_client::MaintenanceClient;
use tonic::transport::{Channel, Endpoint};

/// Client errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No endpoint could be reached within the dial timeout.
    #[error("context deadline exceeded")]
    DialTimeout,
    /// An endpoint string is not usable.
    #[error("invalid endpoint {0:?}: {1}")]
    BadEndpoint(String, String),
    /// TLS was asked for; it is not built yet.
    #[error("TLS is not supported yet by oxcd-client (endpoint {0})")]
    TlsUnsupported(String),
    /// The server answered with an error.
    #[error("{}", status_text(.0))]
    Status(#[from] tonic::Status),
}

/// How etcd's Go client shows a status: the bare message for etcd's own errors, gRPC's
/// `rpc error: code = ... desc = ...` for anything else.
fn status_text(s: &tonic::Status) -> String {
    if oxcd_api::errors::EtcdError::from_message(s.message()).is_some() {
        s.message().to_string()
    } else if s.code() == tonic::Code::DeadlineExceeded {
        "context deadline exceeded".to_string()
    } else {
        format!("rpc error: code = {:?} desc = {}", s.code(), s.message())
    }
}

/// Connection options.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// How long to try each endpoint.
    pub dial_timeout: Duration,
    /// Per-request timeout.
    pub request_timeout: Duration,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            dial_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
        }
    }
}

/// Turns an etcdctl-style endpoint into a URI.
pub fn endpoint_uri(ep: &str) -> Result<String, Error> {
    if ep.starts_with("https://") || ep.starts_with("unixs://") {
        return Err(Error::TlsUnsupported(ep.to_string()));
    }
    let uri = if ep.starts_with("http://") {
        ep.to_string()
    } else {
        format!("http://{ep}")
    };
    Ok(uri)
}

/// A connected client.
#[derive(Debug, Clone)]
pub struct Client {
    channel: Channel,
    endpoint: String,
}

impl Client {
    /// Connects to the first of `endpoints` that answers.
    pub async fn connect(endpoints: &[String], opts: &ConnectOptions) -> Result<Client, Error> {
        let mut last = Error::DialTimeout;
        for ep in endpoints {
            let uri = endpoint_uri(ep)?;
            let endpoint = Endpoint::from_shared(uri.clone())
                .map_err(|e| Error::BadEndpoint(ep.clone(), e.to_string()))?
                .connect_timeout(opts.dial_timeout)
                .timeout(opts.request_timeout)
                .tcp_nodelay(true);
            match tokio::time::timeout(opts.dial_timeout, endpoint.connect()).await {
                Ok(Ok(channel)) => {
                    return Ok(Client {
                        channel,
                        endpoint: ep.clone(),
                    });
                }
                Ok(Err(_)) | Err(_) => last = Error::DialTimeout,
            }
        }
        Err(last)
    }

    /// The endpoint this client talks to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The KV service.
    pub fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.channel.clone())
    }

    /// The Maintenance service.
    pub fn maintenance(&self) -> MaintenanceClient<Channel> {
        MaintenanceClient::new(self.channel.clone())
    }

    /// The Cluster service.
    pub fn cluster(&self) -> ClusterClient<Channel> {
        ClusterClient::new(self.channel.clone())
    }
}

/// The end of the range covering every key with `prefix` (etcd's `GetPrefixRangeEnd`):
/// the prefix with its last byte below 0xff incremented; `\0` (all keys) if none is.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"a/"), b"a0");
        assert_eq!(prefix_end(&[b'a', 0xff]), b"b");
        assert_eq!(prefix_end(&[0xff, 0xff]), vec![0]);
    }

    #[test]
    fn endpoints_like_etcdctl() {
        assert_eq!(
            endpoint_uri("127.0.0.1:2379").ok().as_deref(),
            Some("http://127.0.0.1:2379")
        );
        assert_eq!(
            endpoint_uri("http://h:1").ok().as_deref(),
            Some("http://h:1")
        );
        assert!(endpoint_uri("https://h:1").is_err());
    }
}
