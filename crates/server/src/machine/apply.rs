//! The apply path: turns committed log entries into MVCC changes and responses.
//!
//! Deterministic: the outcome depends only on the entry and the store's state, never on
//! clocks or on which member applies it. A request that fails (an [`EtcdError`]) changes
//! nothing and consumes no revision; every member fails it the same way. A backend error
//! is not deterministic: it is returned as [`ApplyError::Fatal`] and the member stops.
//!
//! Apply functions get an [`Applier`]: the batch's backend transaction, shared by every
//! module that keeps replicated state in its own tables, and the MVCC writes in it.

use crate::domains::auth::apply as auth;
use crate::domains::kv::txn;
use crate::domains::lease::apply as lease;
use crate::machine::alarms;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, ResponseHeader, TxnResponse,
};
use oxcd_api::oxcdpb::RequestAuth;
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_mvcc::{ApplyBatch, KeyRange, MvccError, RangeOptions, Store, TxnWrite, Written};
use oxcd_storage::batch::BatchTx;

use crate::domains::auth::{AuthState, AuthStore, Changes};
use crate::domains::lease::Lessor;
use crate::domains::membership::Membership;

/// What apply functions work with, for one batch of log entries. Modules with replicated
/// state of their own (leases, auth, membership) join here, each writing its tables in
/// `tx`, so one commit covers all of them and the applied index.
pub struct Applier<'a> {
    /// The batch's backend transaction.
    pub tx: &'a BatchTx<'a>,
    /// The MVCC writes of the batch.
    pub mvcc: ApplyBatch<'a>,
    /// Every lease and its keys.
    pub leases: &'a Lessor,
    /// Users, roles and the auth revision.
    pub auth: &'a AuthStore,
    /// The members and the ids removed.
    pub membership: &'a Membership,
    /// The raft index of the entry being applied.
    pub index: u64,
}

impl<'a> Applier<'a> {
    /// Starts applying a batch to `store` in `tx`, recording its events when
    /// `record_events`.
    pub fn new(
        store: &'a Store,
        leases: &'a Lessor,
        auth: &'a AuthStore,
        membership: &'a Membership,
        tx: &'a BatchTx<'a>,
        record_events: bool,
    ) -> Applier<'a> {
        Applier {
            tx,
            mvcc: store.begin_apply(tx, record_events),
            leases,
            auth,
            membership,
            index: 0,
        }
    }

    /// Ends the batch: what MVCC wrote, to publish once `tx` has committed.
    pub fn finish(self) -> Written {
        self.mvcc.finish()
    }
}

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

/// Why applying failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The request is refused, identically on every member.
    #[error(transparent)]
    Request(#[from] EtcdError),
    /// The backend failed or holds damaged data: stop the member.
    #[error("apply: {0}")]
    Fatal(MvccError),
}

impl From<MvccError> for ApplyError {
    fn from(e: MvccError) -> ApplyError {
        match e {
            MvccError::Compacted => ApplyError::Request(EtcdError::Compacted),
            MvccError::FutureRev => ApplyError::Request(EtcdError::FutureRev),
            other => ApplyError::Fatal(other),
        }
    }
}

impl From<oxcd_storage::StorageError> for ApplyError {
    fn from(e: oxcd_storage::StorageError) -> ApplyError {
        ApplyError::Fatal(MvccError::Storage(e))
    }
}

impl ApplyError {
    /// The error a read answers with: a backend failure on the read path is logged and
    /// answered as etcd's corrupt-cluster error (the member keeps serving).
    pub fn into_read_error(self) -> EtcdError {
        match self {
            ApplyError::Request(e) => e,
            ApplyError::Fatal(e) => mvcc_err(e),
        }
    }
}

/// Maps MVCC errors on the read path to etcd's errors. A backend failure is logged and
/// becomes `Corrupt`.
pub fn mvcc_err(e: MvccError) -> EtcdError {
    match e {
        MvccError::Compacted => EtcdError::Compacted,
        MvccError::FutureRev => EtcdError::FutureRev,
        MvccError::Storage(_) | MvccError::Corrupt(..) => {
            tracing::error!("mvcc read failed: {e}");
            EtcdError::Corrupt
        }
    }
}

/// Applies one replicated operation, proposed for the user `caller` names (if any).
pub fn apply(
    ctx: &mut Applier<'_>,
    op: &Op,
    caller: Option<&RequestAuth>,
) -> Result<Applied, ApplyError> {
    if auth::needs_admin(op) {
        ctx.auth
            .state()
            .check_admin(caller.map(|c| c.username.as_str()))?;
    }
    auth::check_request(ctx.auth, ctx.leases, caller, op)?;
    alarms::check_allowed(ctx.tx, op)?;
    match op {
        Op::Alarm(a) => alarms::apply(ctx.tx, a),
        Op::Compaction(c) => compact(&mut ctx.mvcc, c),
        Op::MemberUpdate(u) => {
            crate::domains::membership::apply::apply_update(ctx.membership, ctx.tx, u)
        }
        Op::MemberAttributes(a) => {
            let key = format!(
                "{}{:016x}",
                oxcd_storage::schema::META_MEMBER_ATTRIBUTES_PREFIX,
                a.id
            );
            ctx.tx.put_meta(&key, &prost::Message::encode_to_vec(a))?;
            Ok(Applied::MemberAttributes)
        }
        Op::Put(p) => {
            let leases = ctx.leases;
            in_txn(&mut ctx.mvcc, |txn| {
                check_put(txn, leases, p)?;
                put(txn, leases, p).map(Applied::Put)
            })
        }
        Op::DeleteRange(d) => {
            let leases = ctx.leases;
            in_txn(&mut ctx.mvcc, |txn| {
                delete_range(txn, leases, d).map(Applied::DeleteRange)
            })
        }
        Op::Txn(t) => {
            let leases = ctx.leases;
            in_txn(&mut ctx.mvcc, |txn| {
                txn::apply_txn(txn, leases, t).map(Applied::Txn)
            })
        }
        Op::LeaseGrant(g) => lease::grant(ctx, g),
        Op::LeaseRevoke(r) => lease::revoke(ctx, r),
        Op::LeaseRenew(r) => lease::renew(ctx, &r.ids),
        Op::LeaseExpire(e) => lease::expire(ctx, e),
        Op::AuthEnable(_) => change_auth(ctx, auth::enable),
        Op::AuthDisable(_) => {
            let applied = change_auth(ctx, auth::disable)?;
            ctx.auth.tokens.clear();
            Ok(applied)
        }
        Op::Authenticate(a) => {
            let auth_revision = {
                let state = ctx.auth.state();
                auth::authenticate(&state, a)?;
                state.revision
            };
            let simple_token = ctx.auth.tokens.record_simple(
                &a.simple_token,
                ctx.index,
                &a.name,
                std::time::Instant::now(),
            );
            Ok(Applied::Authenticated {
                simple_token,
                auth_revision,
                rev: ctx.mvcc.rev(),
            })
        }
        Op::AuthUserAdd(r) => change_auth(ctx, |s, c| auth::user_add(s, c, r)),
        Op::AuthUserDelete(r) => {
            let applied = change_auth(ctx, |s, c| auth::user_delete(s, c, r))?;
            ctx.auth.tokens.invalidate_user(&r.name);
            Ok(applied)
        }
        Op::AuthUserChangePassword(r) => {
            let applied = change_auth(ctx, |s, c| auth::user_change_password(s, c, r))?;
            ctx.auth.tokens.invalidate_user(&r.name);
            Ok(applied)
        }
        Op::AuthUserGrantRole(r) => change_auth(ctx, |s, c| auth::user_grant_role(s, c, r)),
        Op::AuthUserRevokeRole(r) => change_auth(ctx, |s, c| auth::user_revoke_role(s, c, r)),
        Op::AuthRoleAdd(r) => change_auth(ctx, |s, c| auth::role_add(s, c, r)),
        Op::AuthRoleDelete(r) => change_auth(ctx, |s, c| auth::role_delete(s, c, r)),
        Op::AuthRoleGrantPermission(r) => {
            change_auth(ctx, |s, c| auth::role_grant_permission(s, c, r))
        }
        Op::AuthRoleRevokePermission(r) => {
            change_auth(ctx, |s, c| auth::role_revoke_permission(s, c, r))
        }
    }
}

/// Applies one auth change in the batch.
fn change_auth(
    ctx: &mut Applier<'_>,
    change: impl FnOnce(&mut AuthState, &mut Changes) -> Result<(), EtcdError>,
) -> Result<Applied, ApplyError> {
    ctx.auth.apply(ctx.tx, change)??;
    Ok(Applied::Auth(ctx.mvcc.rev()))
}

/// Runs one write request. Every check runs before the request's first change, so a
/// refused request wrote nothing.
pub(crate) fn in_txn(
    batch: &mut ApplyBatch<'_>,
    f: impl FnOnce(&mut TxnWrite<'_>) -> Result<Applied, ApplyError>,
) -> Result<Applied, ApplyError> {
    let mut txn = batch.txn()?;
    let result = f(&mut txn);
    let rev = txn.end();
    result.map(|applied| set_revision(applied, rev))
}

/// Sets the top-level header revision to the revision after the request.
fn set_revision(applied: Applied, rev: i64) -> Applied {
    let h = Some(ResponseHeader {
        revision: rev,
        ..Default::default()
    });
    match applied {
        Applied::Put(mut r) => {
            r.header = h;
            Applied::Put(r)
        }
        Applied::DeleteRange(mut r) => {
            r.header = h;
            Applied::DeleteRange(r)
        }
        Applied::Txn(mut r) => {
            r.header = h;
            Applied::Txn(r)
        }
        other => other,
    }
}

fn compact(batch: &mut ApplyBatch<'_>, c: &CompactionRequest) -> Result<Applied, ApplyError> {
    batch.compact(c.revision)?;
    Ok(Applied::Compaction(CompactionResponse {
        header: Some(ResponseHeader {
            revision: batch.rev(),
            ..Default::default()
        }),
    }))
}

/// Checks a put that depends on state: its lease must exist, and
/// ignore_value / ignore_lease need the key to exist.
pub fn check_put(txn: &TxnWrite<'_>, leases: &Lessor, p: &PutRequest) -> Result<(), EtcdError> {
    if p.lease != 0 && !leases.exists(p.lease) {
        return Err(EtcdError::LeaseNotFound);
    }
    if (p.ignore_value || p.ignore_lease) && txn.get(&p.key).is_none() {
        return Err(EtcdError::KeyNotFound);
    }
    Ok(())
}

/// Executes a checked put; the key moves to the put's lease.
pub fn put(
    txn: &mut TxnWrite<'_>,
    leases: &Lessor,
    p: &PutRequest,
) -> Result<PutResponse, ApplyError> {
    let prev = if p.prev_kv || p.ignore_value || p.ignore_lease {
        txn.range(KeyRange::new(&p.key, b""), RangeOptions::default())?
            .kvs
            .into_iter()
            .next()
    } else {
        None
    };
    let value = match (&prev, p.ignore_value) {
        (Some(kv), true) => kv.value.clone(),
        _ => p.value.clone(),
    };
    let lease = match (&prev, p.ignore_lease) {
        (Some(kv), true) => kv.lease,
        _ => p.lease,
    };
    let rev = txn.put(&p.key, &value, lease)?;
    leases.attach(&p.key, lease);
    Ok(PutResponse {
        header: Some(ResponseHeader {
            revision: rev.main,
            ..Default::default()
        }),
        prev_kv: if p.prev_kv { prev } else { None },
    })
}

/// Executes a delete; the deleted keys leave their leases.
pub fn delete_range(
    txn: &mut TxnWrite<'_>,
    leases: &Lessor,
    d: &DeleteRangeRequest,
) -> Result<DeleteRangeResponse, ApplyError> {
    let range = KeyRange::new(&d.key, &d.range_end);
    let prev_kvs = if d.prev_kv {
        txn.range(range, RangeOptions::default())?.kvs
    } else {
        Vec::new()
    };
    let deleted = txn.delete_range(range)?;
    leases.detach(&deleted);
    Ok(DeleteRangeResponse {
        header: Some(ResponseHeader {
            revision: txn.rev(),
            ..Default::default()
        }),
        deleted: deleted.len() as i64,
        prev_kvs,
    })
}
