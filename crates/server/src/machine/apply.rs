//! The one dispatch of the apply path: every committed entry, a request or a conf
//! change, goes through [`apply_entry`]; a request's op goes to its domain's apply
//! function ([`apply`]) after the checks every request meets (auth, alarms).
//!
//! Deterministic: the outcome depends only on the entry and the store's state, never on
//! clocks or on which member applies it. A request that fails (an `EtcdError`) changes
//! nothing and consumes no revision; every member fails it the same way. A backend error
//! or an entry that cannot be read is not deterministic: it is [`Fatal`] and the member
//! stops rather than skip it.

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_api::oxcdpb::{InternalRequest, RequestAuth};
use oxcd_raft::{Entry, EntryType};
use prost::Message as _;

use crate::domains::auth::apply as auth;
use crate::domains::kv::apply as kv;
use crate::domains::lease::apply as lease;
use crate::domains::membership::apply as membership;
use crate::domains::version::cluster as version;
use crate::edge::metrics::timing::{self, ApplyTiming};
use crate::machine::alarms;
use crate::machine::applied::{Applied, Outcome};
use crate::machine::applier::{Applier, ApplyError};
use crate::machine::etcd_entries::{self, EtcdEntry};
use crate::machine::fatal::Fatal;
use crate::machine::vocabulary::Vocabulary;
use oxcd_auth::changes as rules;

/// Applies the committed entry `e` at `ctx.index`, read in the log's `vocabulary`: the
/// proposer's request id (0: none) and the outcome its waiter gets, or None for an entry
/// that answers no one (raft's empty entries, an empty request).
pub fn apply_entry(
    ctx: &mut Applier<'_>,
    e: &Entry,
    timing: &ApplyTiming,
    vocabulary: Vocabulary,
) -> Result<Option<(u64, Outcome)>, Fatal> {
    match e.entry_type {
        EntryType::EntryNormal if e.data.is_empty() => Ok(None),
        EntryType::EntryNormal if vocabulary == Vocabulary::Etcd => {
            match etcd_entries::read(&e.data) {
                Ok(EtcdEntry::Request { id, op, caller }) => {
                    run(ctx, id, &op, caller.as_ref(), timing).map(Some)
                }
                Ok(EtcdEntry::NoEffect { what, .. }) => {
                    tracing::debug!(index = e.index, what, "etcd entry with no effect here");
                    Ok(None)
                }
                // etcd panics on such an entry: no member can apply past it.
                Err(source) => Err(Fatal::EtcdEntryUnreadable {
                    index: e.index,
                    source,
                }),
            }
        }
        EntryType::EntryNormal => match InternalRequest::decode(e.data.as_ref()) {
            Ok(InternalRequest {
                id,
                op: Some(op),
                auth,
            }) => run(ctx, id, &op, auth.as_ref(), timing).map(Some),
            // Same bytes on every member, so every member skips it alike.
            Ok(InternalRequest { op: None, .. }) => {
                tracing::warn!(index = e.index, "empty request in log");
                Ok(None)
            }
            Err(err) => {
                tracing::error!(index = e.index, "undecodable log entry: {err}");
                Ok(None)
            }
        },
        EntryType::EntryConfChange => membership::apply_conf_change(ctx, e, vocabulary).map(Some),
        EntryType::EntryConfChangeV2 => Ok(None),
    }
}

/// Applies request `id`'s `op` for `caller`, timing it: its outcome for the waiter.
fn run(
    ctx: &mut Applier<'_>,
    id: u64,
    op: &Op,
    caller: Option<&RequestAuth>,
    timing: &ApplyTiming,
) -> Result<(u64, Outcome), Fatal> {
    let started = std::time::Instant::now();
    let applied = apply(ctx, op, caller);
    if let Some(i) = timing::op_index(op) {
        let success = match &applied {
            Ok(_) => true,
            Err(ApplyError::Request(e)) => *e == EtcdError::Compacted,
            Err(ApplyError::Fatal(_)) => false,
        };
        timing.observe(i, success, started.elapsed());
    }
    match applied {
        Ok(applied) => Ok((id, Ok(applied))),
        Err(ApplyError::Request(err)) => Ok((id, Err(err))),
        Err(ApplyError::Fatal(fatal)) => Err(Fatal::Backend(fatal)),
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
        Op::Put(p) => kv::apply_put(ctx, p),
        Op::DeleteRange(d) => kv::apply_delete_range(ctx, d),
        Op::Txn(t) => kv::apply_txn_request(ctx, t),
        Op::Compaction(c) => kv::apply_compaction(ctx, c),
        Op::MemberUpdate(u) => membership::apply_update(ctx, u),
        Op::MemberAttributes(a) => membership::apply_attributes(ctx, a),
        Op::LeaseGrant(g) => lease::grant(ctx, g),
        Op::LeaseRevoke(r) => lease::revoke(ctx, r),
        Op::LeaseRenew(r) => lease::renew(ctx, &r.ids),
        Op::LeaseExpire(e) => lease::expire(ctx, e),
        Op::ClusterVersionSet(r) => version::apply_version_set(ctx, r),
        Op::DowngradeInfoSet(r) => version::apply_downgrade_set(ctx, r),
        Op::AuthEnable(_) => auth::change(ctx, rules::enable),
        Op::AuthDisable(_) => {
            let applied = auth::change(ctx, rules::disable)?;
            ctx.auth.tokens.clear();
            Ok(applied)
        }
        Op::Authenticate(a) => auth::authenticate_entry(ctx, a),
        Op::AuthUserAdd(r) => auth::change(ctx, |s, c| rules::user_add(s, c, r)),
        Op::AuthUserDelete(r) => {
            let applied = auth::change(ctx, |s, c| rules::user_delete(s, c, r))?;
            ctx.auth.tokens.invalidate_user(&r.name);
            Ok(applied)
        }
        Op::AuthUserChangePassword(r) => {
            let applied = auth::change(ctx, |s, c| rules::user_change_password(s, c, r))?;
            ctx.auth.tokens.invalidate_user(&r.name);
            Ok(applied)
        }
        Op::AuthUserGrantRole(r) => auth::change(ctx, |s, c| rules::user_grant_role(s, c, r)),
        Op::AuthUserRevokeRole(r) => auth::change(ctx, |s, c| rules::user_revoke_role(s, c, r)),
        Op::AuthRoleAdd(r) => auth::change(ctx, |s, c| rules::role_add(s, c, r)),
        Op::AuthRoleDelete(r) => auth::change(ctx, |s, c| rules::role_delete(s, c, r)),
        Op::AuthRoleGrantPermission(r) => {
            auth::change(ctx, |s, c| rules::role_grant_permission(s, c, r))
        }
        Op::AuthRoleRevokePermission(r) => {
            auth::change(ctx, |s, c| rules::role_revoke_permission(s, c, r))
        }
    }
}
