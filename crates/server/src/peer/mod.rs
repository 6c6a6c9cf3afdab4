//! Member-to-member traffic on `--listen-peer-urls`: the raft message transport
//! ([`transport`]: one sending task and stream per peer) and the receiving service
//! ([`service`]). Streams carry the cluster id; a member of another cluster is refused.

use std::net::IpAddr;
use std::sync::OnceLock;

pub mod remote;
pub mod service;
pub mod transport;

static SOURCE_IP: OnceLock<Option<IpAddr>> = OnceLock::new();

/// Sets the local address peer connections are made from (once per process).
pub fn set_source_ip(ip: Option<IpAddr>) {
    let _ = SOURCE_IP.set(ip);
}

/// A peer endpoint for `url`, connecting from the configured source address.
pub fn endpoint(url: &str) -> Option<tonic::transport::Endpoint> {
    Some(
        tonic::transport::Endpoint::from_shared(url.to_string())
            .ok()?
            .connect_timeout(std::time::Duration::from_millis(500))
            .tcp_nodelay(true)
            .local_address(SOURCE_IP.get().copied().flatten()),
    )
}

/// Metadata key carrying the sender's cluster id (hex).
pub const CLUSTER_ID_KEY: &str = "x-oxcd-cluster-id";
/// Metadata key carrying the sender's member id (hex).
pub const FROM_KEY: &str = "x-oxcd-from";
/// Largest snapshot chunk a member sends or accepts: a chunk holds about 1 MiB of
/// dump plus at most one whole row, which can be as large as a request.
pub const MAX_SNAPSHOT_CHUNK: usize = 256 << 20;
