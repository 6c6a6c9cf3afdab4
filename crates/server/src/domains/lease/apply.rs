//! Applying lease requests: grants and revocations write the lease table in the batch's
//! transaction and tell the lessor; a revocation deletes the lease's keys in one write
//! request (one revision, an event per key); a renewal changes no replicated state and
//! records the raft index of the keepalive in the lease's row (so that an expiry the
//! leader decided before it is void) and restarts the lease's clock on this member.

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseRevokeRequest, LeaseRevokeResponse, ResponseHeader,
};
use oxcd_api::oxcdpb::LeaseExpire;
use oxcd_mvcc::KeyRange;
use oxcd_storage::backend::redb::ReadableTable;
use oxcd_storage::schema;

use crate::domains::kv::apply::in_txn;
use crate::domains::lease::{MAX_TTL, table};
use crate::machine::applied::Applied;
use crate::machine::applier::{Applier, ApplyError};

/// A grant: the proposer chose the id and raised the TTL to the minimum.
pub fn grant(ctx: &mut Applier<'_>, r: &LeaseGrantRequest) -> Result<Applied, ApplyError> {
    if r.id == 0 {
        return Err(EtcdError::LeaseNotFound.into());
    }
    if r.ttl > MAX_TTL {
        return Err(EtcdError::LeaseTtlTooLarge.into());
    }
    if ctx.leases.exists(r.id) {
        return Err(EtcdError::LeaseExist.into());
    }
    // etcd's lessor raises a short TTL to its minimum when it applies the grant (an
    // etcd member proposes the TTL its client asked for; oxcd's proposers raise it
    // already, so this changes nothing for them).
    let ttl = r.ttl.max(ctx.leases.min_ttl());
    ctx.tx
        .open(schema::LEASE)?
        .insert(
            table::key(r.id).as_slice(),
            table::value(r.id, ttl, 0).as_slice(),
        )
        .map_err(|e| ctx.tx.backend().err(e))?;
    ctx.leases.granted(r.id, ttl);
    Ok(Applied::LeaseGrant(LeaseGrantResponse {
        header: Some(ResponseHeader {
            revision: ctx.mvcc.rev(),
            ..Default::default()
        }),
        id: r.id,
        ttl,
        error: String::new(),
    }))
}

/// A revocation: the lease's keys are deleted in one revision, then the lease.
pub fn revoke(ctx: &mut Applier<'_>, r: &LeaseRevokeRequest) -> Result<Applied, ApplyError> {
    let keys = ctx.leases.keys_of(r.id).ok_or(EtcdError::LeaseNotFound)?;
    if !keys.is_empty() {
        in_txn(&mut ctx.mvcc, |txn| {
            for k in &keys {
                txn.delete_range(KeyRange::new(k, b""))?;
            }
            Ok(Applied::LeaseRevoke(LeaseRevokeResponse::default()))
        })?;
    }
    let rev = ctx.mvcc.rev();
    ctx.tx
        .open(schema::LEASE)?
        .remove(table::key(r.id).as_slice())
        .map_err(|e| ctx.tx.backend().err(e))?;
    ctx.leases.revoked(r.id);
    Ok(Applied::LeaseRevoke(LeaseRevokeResponse {
        header: Some(ResponseHeader {
            revision: rev,
            ..Default::default()
        }),
    }))
}

/// Keepalives: each lease's granted TTL, or 0 for a lease that does not exist.
pub fn renew(ctx: &Applier<'_>, ids: &[i64]) -> Result<Applied, ApplyError> {
    let mut table = ctx.tx.open(schema::LEASE)?;
    let mut ttls = Vec::with_capacity(ids.len());
    for &id in ids {
        let key = table::key(id);
        let row = table
            .get(key.as_slice())
            .map_err(|e| ctx.tx.backend().err(e))?
            .map(|v| v.value().to_vec());
        let Some(row) = row else {
            ttls.push(0);
            continue;
        };
        let record = table::decode(&row)?;
        table
            .insert(
                key.as_slice(),
                table::value(id, record.ttl, ctx.index).as_slice(),
            )
            .map_err(|e| ctx.tx.backend().err(e))?;
        ttls.push(ctx.leases.renewed(id).unwrap_or(0));
    }
    Ok(Applied::LeaseRenew(ttls))
}

/// The leader's expiry decision: void if a keepalive was applied after the index the
/// leader had reached when it decided, otherwise a revocation.
pub fn expire(ctx: &mut Applier<'_>, e: &LeaseExpire) -> Result<Applied, ApplyError> {
    let renewed_at = {
        let table = ctx.tx.open(schema::LEASE)?;
        let row = table
            .get(table::key(e.id).as_slice())
            .map_err(|err| ctx.tx.backend().err(err))?
            .map(|v| v.value().to_vec())
            .ok_or(EtcdError::LeaseNotFound)?;
        table::decode(&row)?.renewed_at
    };
    if renewed_at > e.decided_at {
        return Err(EtcdError::LeaseNotFound.into());
    }
    revoke(ctx, &LeaseRevokeRequest { id: e.id })
}
