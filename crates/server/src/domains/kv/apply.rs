//! What a committed Put, DeleteRange, Txn or Compaction does to the store. Each write
//! request runs as one MVCC write ([`in_txn`]): every check before its first change, so a
//! refused request writes nothing and takes no revision; its answer's header carries the
//! revision after it (the member fills in the rest when it answers).

use oxcd_api::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, PutRequest, ResponseHeader,
    TxnRequest,
};
use oxcd_mvcc::{ApplyBatch, TxnWrite};

use super::txn::apply_txn;
use super::write::{check_put, delete_range, put};
use crate::machine::applied::Applied;
use crate::machine::applier::{Applier, ApplyError};

/// Applies a put: its lease must exist, and the key moves to it.
pub fn apply_put(ctx: &mut Applier<'_>, p: &PutRequest) -> Result<Applied, ApplyError> {
    let leases = ctx.leases;
    in_txn(&mut ctx.mvcc, |txn| {
        check_put(txn, leases, p)?;
        put(txn, leases, p).map(Applied::Put)
    })
}

/// Applies a delete: the deleted keys leave their leases.
pub fn apply_delete_range(
    ctx: &mut Applier<'_>,
    d: &DeleteRangeRequest,
) -> Result<Applied, ApplyError> {
    let leases = ctx.leases;
    in_txn(&mut ctx.mvcc, |txn| {
        delete_range(txn, leases, d).map(Applied::DeleteRange)
    })
}

/// Applies a transaction: its compares, then one branch's operations, as one write.
pub fn apply_txn_request(ctx: &mut Applier<'_>, t: &TxnRequest) -> Result<Applied, ApplyError> {
    let leases = ctx.leases;
    in_txn(&mut ctx.mvcc, |txn| {
        apply_txn(txn, leases, t).map(Applied::Txn)
    })
}

/// Applies a compaction: revisions below it are no longer readable.
pub fn apply_compaction(
    ctx: &mut Applier<'_>,
    c: &CompactionRequest,
) -> Result<Applied, ApplyError> {
    compact(&mut ctx.mvcc, c)
}

/// Runs one write request. Every check runs before the request's first change, so a
/// refused request wrote nothing.
pub fn in_txn(
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
