//! Member-to-member traffic on `--listen-peer-urls`: the raft message transport
//! ([`transport`]: one sending task per peer, with a [`direct`] link where the peer
//! offers one, a gRPC stream where it does not) and the receiving service
//! ([`service`]), dialed with one [`PeerDialer`]. Streams carry the cluster id and the
//! sender's versions; a member of another cluster, or of an incompatible version
//! ([`compat`]), is refused. Members of an etcd cluster are spoken to in etcd's own
//! protocol ([`etcd`]).

pub mod compat;
pub mod dialer;
pub mod direct;
pub mod etcd;
pub mod health;
pub mod remote;
pub mod server;
pub mod service;
pub mod traffic;
pub mod transport;
pub mod versions;

pub use dialer::PeerDialer;

/// Metadata key carrying the sender's cluster id (hex).
pub const CLUSTER_ID_KEY: &str = "x-oxcd-cluster-id";
/// Metadata key carrying the sender's member id (hex).
pub const FROM_KEY: &str = "x-oxcd-from";
/// Largest snapshot chunk a member sends or accepts: a chunk holds about 1 MiB of
/// dump plus at most one whole row, which can be as large as a request.
pub const MAX_SNAPSHOT_CHUNK: usize = 256 << 20;
/// What a member answers a peer it removed from the cluster (etcd's text); the peer
/// stops when it hears it (as [`Refusal::MemberRemoved`]).
pub const MEMBER_REMOVED: &str = "the member has been permanently removed from the cluster";

/// Metadata key of a peer's refusal: its code ([`Refusal`]), which the asker matches,
/// beside the message (etcd's text, for logs and people).
pub const REFUSAL_KEY: &str = "x-oxcd-refusal";

/// Why a peer refused a request, as the member that asked recognises it: by the code in
/// [`REFUSAL_KEY`], never by the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// One of etcd's errors.
    Etcd(oxcd_api::errors::EtcdError),
    /// The asker was removed from the cluster ([`MEMBER_REMOVED`]).
    MemberRemoved,
    /// The asker's versions are not compatible with ours ([`compat::check`]).
    IncompatibleVersion,
}

impl Refusal {
    const MEMBER_REMOVED_CODE: &'static str = "MemberRemoved";
    const INCOMPATIBLE_VERSION_CODE: &'static str = "IncompatibleVersion";

    pub(crate) fn code(self) -> &'static str {
        match self {
            Refusal::Etcd(e) => e.name(),
            Refusal::MemberRemoved => Self::MEMBER_REMOVED_CODE,
            Refusal::IncompatibleVersion => Self::INCOMPATIBLE_VERSION_CODE,
        }
    }

    /// The answer carrying this refusal: etcd's code and text, and the refusal's code.
    pub fn status(self) -> tonic::Status {
        let mut status = match self {
            Refusal::Etcd(e) => tonic::Status::from(e),
            Refusal::MemberRemoved => tonic::Status::failed_precondition(MEMBER_REMOVED),
            // etcd's `errIncompatibleVersion`.
            Refusal::IncompatibleVersion => {
                tonic::Status::failed_precondition("incompatible version")
            }
        };
        status.metadata_mut().insert(
            REFUSAL_KEY,
            tonic::metadata::MetadataValue::from_static(self.code()),
        );
        status
    }

    /// The refusal a peer's answer carries, if any.
    pub fn of(status: &tonic::Status) -> Option<Refusal> {
        Refusal::from_code(status.metadata().get(REFUSAL_KEY)?.to_str().ok()?)
    }

    /// The refusal a [`REFUSAL_KEY`] value names, if any.
    pub fn from_code(code: &str) -> Option<Refusal> {
        if code == Self::MEMBER_REMOVED_CODE {
            return Some(Refusal::MemberRemoved);
        }
        if code == Self::INCOMPATIBLE_VERSION_CODE {
            return Some(Refusal::IncompatibleVersion);
        }
        oxcd_api::errors::EtcdError::from_name(code).map(Refusal::Etcd)
    }
}

impl From<oxcd_api::errors::EtcdError> for Refusal {
    fn from(e: oxcd_api::errors::EtcdError) -> Refusal {
        Refusal::Etcd(e)
    }
}
