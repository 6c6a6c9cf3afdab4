//! Typed proposals: each kind of request the member proposes, the op it travels in
//! through raft, and the answer applying it gives its proposer. The one place where an
//! [`Applied`] is taken apart by kind, and where an answer's header is completed.
//!
//! A kind that stores something new (put, txn, lease grant) costs space: it is
//! proposed only with the [`Admitted`] that the space quota's one check gave
//! ([`crate::machine::writes::Writes::admit`]); every other kind is [`Free`].

use oxcd_api::etcdserverpb::{
    AlarmMember, AlarmRequest, AuthDisableRequest, AuthEnableRequest, AuthRoleAddRequest,
    AuthRoleDeleteRequest, AuthRoleGrantPermissionRequest, AuthRoleRevokePermissionRequest,
    AuthUserAddRequest, AuthUserChangePasswordRequest, AuthUserDeleteRequest,
    AuthUserGrantRoleRequest, AuthUserRevokeRoleRequest, CompactionRequest, CompactionResponse,
    DeleteRangeRequest, DeleteRangeResponse, LeaseGrantRequest, LeaseGrantResponse,
    LeaseRevokeRequest, LeaseRevokeResponse, PutRequest, PutResponse, ResponseHeader, TxnRequest,
    TxnResponse,
};
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_api::oxcdpb::{
    AuthenticateOp, ClusterVersionSet, DowngradeInfoSet, LeaseExpire, LeaseRenew, MemberAttributes,
    MemberInfo, MemberUpdate,
};

use crate::machine::applied::Applied;

/// What fills in an answer's header: this member's ids and term, and its revision now.
pub struct Headers {
    /// The cluster id.
    pub cluster_id: u64,
    /// This member's id.
    pub member_id: u64,
    /// The raft term when answering.
    pub raft_term: u64,
    /// The store's revision when answering.
    pub current_rev: i64,
}

impl Headers {
    /// A header at `revision`.
    pub fn at(&self, revision: i64) -> ResponseHeader {
        ResponseHeader {
            cluster_id: self.cluster_id,
            member_id: self.member_id,
            revision,
            raft_term: self.raft_term,
        }
    }

    /// Completes the header the apply path began (with its revision; 0 when none).
    fn complete(&self, header: &mut Option<ResponseHeader>) {
        let revision = header.as_ref().map_or(0, |h| h.revision);
        *header = Some(self.at(revision));
    }
}

/// A kind of request proposed through raft.
pub trait Proposal: Sized {
    /// What the proposer gets once the entry is applied here.
    type Answer;
    /// The replicated op it travels in.
    fn into_op(self) -> Op;
    /// Its answer in `applied` (Err: `applied` is another kind's, which the one
    /// dispatch never gives).
    fn answer(applied: Applied, headers: &Headers) -> Result<Self::Answer, Applied>;
}

/// A kind of request that costs nothing against the space quota.
pub trait Free: Proposal {}

/// Proof that the space quota admitted a request that stores something new: what
/// proposing a put, a txn or a lease grant takes.
#[derive(Debug)]
pub struct Admitted(pub(crate) ());

macro_rules! proposal {
    ($req:ty => $variant:ident, $answer:ty, |$applied:ident, $h:ident| $take:expr) => {
        impl Proposal for $req {
            type Answer = $answer;
            fn into_op(self) -> Op {
                Op::$variant(self)
            }
            fn answer($applied: Applied, $h: &Headers) -> Result<$answer, Applied> {
                $take
            }
        }
    };
}

macro_rules! free {
    ($($req:ty),* $(,)?) => { $(impl Free for $req {})* };
}

// The writes of KV: the apply path set the header's revision.
proposal!(PutRequest => Put, PutResponse, |a, h| match a {
    Applied::Put(mut r) => { h.complete(&mut r.header); Ok(r) }
    other => Err(other),
});
proposal!(DeleteRangeRequest => DeleteRange, DeleteRangeResponse, |a, h| match a {
    Applied::DeleteRange(mut r) => { h.complete(&mut r.header); Ok(r) }
    other => Err(other),
});
proposal!(TxnRequest => Txn, TxnResponse, |a, h| match a {
    Applied::Txn(mut r) => { h.complete(&mut r.header); Ok(r) }
    other => Err(other),
});
proposal!(CompactionRequest => Compaction, CompactionResponse, |a, h| match a {
    Applied::Compaction(mut r) => { h.complete(&mut r.header); Ok(r) }
    other => Err(other),
});
// Leases: a grant answers at the revision when it is answered (as etcd's lessor does).
proposal!(LeaseGrantRequest => LeaseGrant, LeaseGrantResponse, |a, h| match a {
    Applied::LeaseGrant(mut r) => { r.header = Some(h.at(h.current_rev)); Ok(r) }
    other => Err(other),
});
proposal!(LeaseRevokeRequest => LeaseRevoke, LeaseRevokeResponse, |a, h| match a {
    Applied::LeaseRevoke(mut r) => { h.complete(&mut r.header); Ok(r) }
    other => Err(other),
});
// Keepalives through raft: each lease's granted TTL (0: not found), in request order.
proposal!(LeaseRenew => LeaseRenew, Vec<i64>, |a, _h| match a {
    Applied::LeaseRenew(ttls) => Ok(ttls),
    other => Err(other),
});
proposal!(LeaseExpire => LeaseExpire, (), |a, _h| match a {
    Applied::LeaseRevoke(_) => Ok(()),
    other => Err(other),
});
// The alarms the request concerns.
proposal!(AlarmRequest => Alarm, Vec<AlarmMember>, |a, _h| match a {
    Applied::Alarm(alarms) => Ok(alarms),
    other => Err(other),
});
// Membership: the members after the change.
proposal!(MemberUpdate => MemberUpdate, Vec<MemberInfo>, |a, _h| match a {
    Applied::Membership(members) => Ok(members),
    other => Err(other),
});
// Versions: what the cluster recorded.
proposal!(ClusterVersionSet => ClusterVersionSet, Option<oxcd_go::semver::Version>, |a, _h| match a {
    Applied::ClusterVersion(v) => Ok(v),
    other => Err(other),
});
proposal!(DowngradeInfoSet => DowngradeInfoSet, crate::domains::version::cluster::Downgrade, |a, _h| match a {
    Applied::Downgrade(d) => Ok(d),
    other => Err(other),
});
proposal!(MemberAttributes => MemberAttributes, (), |a, _h| match a {
    Applied::MemberAttributes => Ok(()),
    other => Err(other),
});

/// A login as every member recorded it.
#[derive(Debug)]
pub struct Login {
    /// The simple token every member now knows (None without simple tokens).
    pub simple_token: Option<String>,
    /// The auth revision the entry applied at: a JWT's `revision` claim.
    pub auth_revision: u64,
    /// The answer's header, at the revision the entry applied at (as etcd's).
    pub header: ResponseHeader,
}

proposal!(AuthenticateOp => Authenticate, Login, |a, h| match a {
    Applied::Authenticated { simple_token, auth_revision, rev } => Ok(Login {
        simple_token,
        auth_revision,
        header: h.at(rev),
    }),
    other => Err(other),
});

/// Auth changes answer a header at the revision when they applied.
macro_rules! auth_change {
    ($($req:ty => $variant:ident),* $(,)?) => {
        $(proposal!($req => $variant, ResponseHeader, |a, h| match a {
            Applied::Auth(rev) => Ok(h.at(rev)),
            other => Err(other),
        });)*
    };
}

auth_change! {
    AuthEnableRequest => AuthEnable,
    AuthDisableRequest => AuthDisable,
    AuthUserAddRequest => AuthUserAdd,
    AuthUserDeleteRequest => AuthUserDelete,
    AuthUserChangePasswordRequest => AuthUserChangePassword,
    AuthUserGrantRoleRequest => AuthUserGrantRole,
    AuthUserRevokeRoleRequest => AuthUserRevokeRole,
    AuthRoleAddRequest => AuthRoleAdd,
    AuthRoleDeleteRequest => AuthRoleDelete,
    AuthRoleGrantPermissionRequest => AuthRoleGrantPermission,
    AuthRoleRevokePermissionRequest => AuthRoleRevokePermission,
}

free!(
    DeleteRangeRequest,
    CompactionRequest,
    LeaseRevokeRequest,
    LeaseRenew,
    LeaseExpire,
    AlarmRequest,
    MemberUpdate,
    MemberAttributes,
    ClusterVersionSet,
    DowngradeInfoSet,
    AuthenticateOp,
    AuthEnableRequest,
    AuthDisableRequest,
    AuthUserAddRequest,
    AuthUserDeleteRequest,
    AuthUserChangePasswordRequest,
    AuthUserGrantRoleRequest,
    AuthUserRevokeRoleRequest,
    AuthRoleAddRequest,
    AuthRoleDeleteRequest,
    AuthRoleGrantPermissionRequest,
    AuthRoleRevokePermissionRequest,
);
