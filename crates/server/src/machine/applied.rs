//! What applying one committed entry produced: the answer its proposer's waiter
//! receives ([`Outcome`]). Each variant is one kind of request's result; the proposer
//! knows which kind it proposed and takes it out with [`Applied`]'s typed accessors.

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::{CompactionResponse, DeleteRangeResponse, PutResponse, TxnResponse};

/// What a waiter receives: the entry's result, or the error every member refused it with.
pub type Outcome = Result<Applied, EtcdError>;

/// What applying one request produced.
#[derive(Debug, Clone)]
pub enum Applied {
    /// A put.
    Put(PutResponse),
    /// A delete.
    DeleteRange(DeleteRangeResponse),
    /// A txn.
    Txn(TxnResponse),
    /// A compaction.
    Compaction(CompactionResponse),
    /// A member's published attributes were recorded.
    MemberAttributes,
    /// A membership change was applied: the members after it.
    Membership(Vec<oxcd_api::oxcdpb::MemberInfo>),
    /// An alarm request: the alarms it concerns.
    Alarm(Vec<oxcd_api::etcdserverpb::AlarmMember>),
    /// A lease grant.
    LeaseGrant(oxcd_api::etcdserverpb::LeaseGrantResponse),
    /// A lease revocation.
    LeaseRevoke(oxcd_api::etcdserverpb::LeaseRevokeResponse),
    /// Keepalives: each lease's granted TTL (0: not found), in request order.
    LeaseRenew(Vec<i64>),
    /// An auth change was applied (or was no change), at this store revision (its
    /// answer's header revision, as etcd's: the revision when it applied).
    Auth(i64),
    /// The leader's cluster version was recorded (None: it did not parse, nothing
    /// changed).
    ClusterVersion(Option<oxcd_go::semver::Version>),
    /// A downgrade was enabled or cancelled: the cluster's downgrade now.
    Downgrade(crate::domains::version::cluster::Downgrade),
    /// A user logged in.
    Authenticated {
        /// The simple token every member now knows (None without simple tokens).
        simple_token: Option<String>,
        /// The auth revision the entry applied at: a JWT's `revision` claim.
        auth_revision: u64,
        /// The store revision it applied at (the answer's header revision, as etcd's).
        rev: i64,
    },
}
