//! What a committed auth entry does: the change's rules are oxcd-auth's
//! ([`oxcd_auth::changes`]); here they run in the batch's transaction ([`change`]), a
//! login records its token on every member ([`authenticate_entry`]), and every request
//! is checked for its caller's permissions as it is applied ([`check_request`],
//! [`needs_admin`]).

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::request_op::Request;
use oxcd_api::etcdserverpb::{DeleteRangeRequest, PutRequest, TxnRequest};
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_api::oxcdpb::{AuthenticateOp, RequestAuth};

use crate::domains::lease::Lessor;
use crate::machine::applied::Applied;
use crate::machine::applier::{Applier, ApplyError};
use oxcd_auth::changes::authenticate;
use oxcd_auth::{Access, AuthState, AuthStore, Changes};

type Outcome = Result<(), EtcdError>;

/// Applies one auth change in the batch: the store raises the revision and writes the
/// rows when `change` accepts.
pub fn change(
    ctx: &mut Applier<'_>,
    change: impl FnOnce(&mut AuthState, &mut Changes) -> Result<(), EtcdError>,
) -> Result<Applied, ApplyError> {
    ctx.auth.apply(ctx.tx, change)??;
    Ok(Applied::Auth(ctx.mvcc.rev()))
}

/// Applies a login: the password was checked by the proposer; here the user must still
/// exist with it, and every member records the simple token it chose.
pub fn authenticate_entry(
    ctx: &mut Applier<'_>,
    a: &AuthenticateOp,
) -> Result<Applied, ApplyError> {
    let auth_revision = {
        let state = ctx.auth.state();
        authenticate(&state, a)?;
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

/// Whether applying `op` needs a user with the root role while auth is on (etcd's
/// `needAdminPermission`: every auth change).
pub fn needs_admin(op: &Op) -> bool {
    matches!(
        op,
        Op::AuthEnable(_)
            | Op::AuthDisable(_)
            | Op::AuthUserAdd(_)
            | Op::AuthUserDelete(_)
            | Op::AuthUserChangePassword(_)
            | Op::AuthUserGrantRole(_)
            | Op::AuthUserRevokeRole(_)
            | Op::AuthRoleAdd(_)
            | Op::AuthRoleDelete(_)
            | Op::AuthRoleGrantPermission(_)
            | Op::AuthRoleRevokePermission(_)
    )
}

/// Checks the keys a KV request or a lease revocation touches against `caller`'s
/// permissions, as etcd's auth applier: a put writes its key (and reads it with
/// prev_kv), and may not join a lease holding keys the caller cannot write; a delete
/// writes its range (and reads it with prev_kv); a txn reads every compare's range and
/// checks each operation of both branches. Beyond etcd 3.5, whose check skips them,
/// nested txns are checked too, and a txn's puts follow the put rules.
pub fn check_request(
    auth: &AuthStore,
    leases: &Lessor,
    caller: Option<&RequestAuth>,
    op: &Op,
) -> Outcome {
    if !auth.enabled() {
        return Ok(());
    }
    match op {
        Op::Put(p) => check_put(auth, leases, caller, p),
        Op::DeleteRange(d) => check_delete(auth, caller, d),
        Op::Txn(t) => check_txn(auth, leases, caller, t),
        Op::LeaseRevoke(r) => check_lease_keys(auth, leases, caller, r.id),
        _ => Ok(()),
    }
}

fn check_put(
    auth: &AuthStore,
    leases: &Lessor,
    caller: Option<&RequestAuth>,
    p: &PutRequest,
) -> Outcome {
    auth.check(caller, &p.key, b"", Access::Write)?;
    if p.lease != 0 {
        check_lease_keys(auth, leases, caller, p.lease)?;
    }
    if p.prev_kv {
        auth.check(caller, &p.key, b"", Access::Read)?;
    }
    Ok(())
}

fn check_delete(auth: &AuthStore, caller: Option<&RequestAuth>, d: &DeleteRangeRequest) -> Outcome {
    if d.prev_kv {
        auth.check(caller, &d.key, &d.range_end, Access::Read)?;
    }
    auth.check(caller, &d.key, &d.range_end, Access::Write)
}

fn check_txn(
    auth: &AuthStore,
    leases: &Lessor,
    caller: Option<&RequestAuth>,
    t: &TxnRequest,
) -> Outcome {
    for c in &t.compare {
        auth.check(caller, &c.key, &c.range_end, Access::Read)?;
    }
    for op in t.success.iter().chain(&t.failure) {
        match &op.request {
            Some(Request::RequestRange(r)) => {
                auth.check(caller, &r.key, &r.range_end, Access::Read)?
            }
            Some(Request::RequestPut(p)) => check_put(auth, leases, caller, p)?,
            Some(Request::RequestDeleteRange(d)) => check_delete(auth, caller, d)?,
            Some(Request::RequestTxn(nested)) => check_txn(auth, leases, caller, nested)?,
            None => {}
        }
    }
    Ok(())
}

/// The keys of lease `id` must all be writable by the caller (a lease it cannot revoke
/// is not one it may put under, or revoke); an admin passes at once.
fn check_lease_keys(
    auth: &AuthStore,
    leases: &Lessor,
    caller: Option<&RequestAuth>,
    id: i64,
) -> Outcome {
    if auth
        .state()
        .check_admin(caller.map(|c| c.username.as_str()))
        .is_ok()
    {
        return Ok(());
    }
    for key in leases.keys(id) {
        auth.check(caller, &key, b"", Access::Write)?;
    }
    Ok(())
}
