//! Member-to-member traffic on `--listen-peer-urls`: the raft message transport
//! ([`transport`]: one sending task and stream per peer) and the receiving service
//! ([`service`]), dialed with one [`PeerDialer`]. Streams carry the cluster id; a member
//! of another cluster is refused.

pub mod dialer;
pub mod health;
pub mod remote;
pub mod server;
pub mod service;
pub mod traffic;
pub mod transport;

pub use dialer::PeerDialer;

/// Metadata key carrying the sender's cluster id (hex).
pub const CLUSTER_ID_KEY: &str = "x-oxcd-cluster-id";
/// Metadata key carrying the sender's member id (hex).
pub const FROM_KEY: &str = "x-oxcd-from";
/// Largest snapshot chunk a member sends or accepts: a chunk holds about 1 MiB of
/// dump plus at most one whole row, which can be as large as a request.
pub const MAX_SNAPSHOT_CHUNK: usize = 256 << 20;
/// What a member answers a peer it removed from the cluster (etcd's text); the peer
/// stops when it hears it.
pub const MEMBER_REMOVED: &str = "the member has been permanently removed from the cluster";
