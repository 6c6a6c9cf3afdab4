//! Txn: compares, the pre-flight check of every op in the chosen branch, and execution
//! of the ops (nested txns included) inside one write request, so all share one revision.

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use oxcd_api::etcdserverpb::request_op::Request;
use oxcd_api::etcdserverpb::response_op::Response;
use oxcd_api::etcdserverpb::{
    Compare, RequestOp, ResponseHeader, ResponseOp, TxnRequest, TxnResponse,
};
use oxcd_api::mvccpb::KeyValue;
use oxcd_mvcc::{KeyRange, RangeOptions, TxnWrite};

use super::read::range;
use super::write::{check_put, delete_range, put};
use crate::domains::lease::Lessor;
use crate::machine::applier::ApplyError;

/// Whether every key in the compare's range satisfies it (a missing key is compared as
/// a zero key-value, except for value compares, which then fail).
fn compare(txn: &TxnWrite<'_>, c: &Compare) -> Result<bool, ApplyError> {
    // etcd evaluates a compare with a Range (counted as one).
    txn.count_range();
    let res = txn.range(KeyRange::new(&c.key, &c.range_end), RangeOptions::default())?;
    let target = CompareTarget::try_from(c.target).unwrap_or(CompareTarget::Version);
    if res.kvs.is_empty() {
        if target == CompareTarget::Value {
            return Ok(false);
        }
        return Ok(compare_kv(c, target, &KeyValue::default()));
    }
    Ok(res.kvs.iter().all(|kv| compare_kv(c, target, kv)))
}

fn compare_kv(c: &Compare, target: CompareTarget, kv: &KeyValue) -> bool {
    let ord = match (target, &c.target_union) {
        (CompareTarget::Value, Some(TargetUnion::Value(v))) => {
            kv.value.as_slice().cmp(v.as_slice())
        }
        (CompareTarget::Value, _) => kv.value.as_slice().cmp(&[][..]),
        (CompareTarget::Create, u) => kv.create_revision.cmp(&int_of(u, |u| match u {
            TargetUnion::CreateRevision(v) => Some(*v),
            _ => None,
        })),
        (CompareTarget::Mod, u) => kv.mod_revision.cmp(&int_of(u, |u| match u {
            TargetUnion::ModRevision(v) => Some(*v),
            _ => None,
        })),
        (CompareTarget::Version, u) => kv.version.cmp(&int_of(u, |u| match u {
            TargetUnion::Version(v) => Some(*v),
            _ => None,
        })),
        (CompareTarget::Lease, u) => kv.lease.cmp(&int_of(u, |u| match u {
            TargetUnion::Lease(v) => Some(*v),
            _ => None,
        })),
    };
    match CompareResult::try_from(c.result).unwrap_or(CompareResult::Equal) {
        CompareResult::Equal => ord.is_eq(),
        CompareResult::NotEqual => ord.is_ne(),
        CompareResult::Greater => ord.is_gt(),
        CompareResult::Less => ord.is_lt(),
    }
}

fn int_of(u: &Option<TargetUnion>, pick: impl Fn(&TargetUnion) -> Option<i64>) -> i64 {
    u.as_ref().and_then(pick).unwrap_or(0)
}

/// Evaluates compares and picks the branch, recursively: the path of `succeeded` flags.
fn choose_path(txn: &TxnWrite<'_>, r: &TxnRequest, path: &mut Vec<bool>) -> Result<(), ApplyError> {
    let mut ok = true;
    for c in &r.compare {
        if !compare(txn, c)? {
            ok = false;
            break;
        }
    }
    path.push(ok);
    let ops = if ok { &r.success } else { &r.failure };
    for op in ops {
        if let Some(Request::RequestTxn(t)) = &op.request {
            choose_path(txn, t, path)?;
        }
    }
    Ok(())
}

/// Checks the ops of the chosen path before anything is written, so a failing txn
/// changes nothing: reads of compacted or future revisions, puts that need a key or a
/// lease that does not exist.
fn check_path(
    txn: &TxnWrite<'_>,
    leases: &Lessor,
    r: &TxnRequest,
    path: &[bool],
    at: &mut usize,
) -> Result<(), ApplyError> {
    let ok = path[*at];
    *at += 1;
    for op in if ok { &r.success } else { &r.failure } {
        match &op.request {
            Some(Request::RequestRange(rr)) => {
                let rev = txn.rev();
                if rr.revision > rev {
                    return Err(EtcdError::FutureRev.into());
                }
                txn.range(
                    KeyRange::new(&rr.key, b""),
                    RangeOptions {
                        rev: rr.revision,
                        count_only: true,
                        limit: 0,
                    },
                )?;
            }
            Some(Request::RequestPut(p)) => {
                if p.ignore_value || p.ignore_lease {
                    // etcd's check of such a put reads the key with a Range.
                    txn.count_range();
                }
                check_put(txn, leases, p)?
            }
            Some(Request::RequestTxn(t)) => check_path(txn, leases, t, path, at)?,
            Some(Request::RequestDeleteRange(_)) | None => {}
        }
    }
    Ok(())
}

/// Applies a txn request in the write request `txn`.
pub fn apply_txn(
    txn: &mut TxnWrite<'_>,
    leases: &Lessor,
    r: &TxnRequest,
) -> Result<TxnResponse, ApplyError> {
    let mut path = Vec::new();
    choose_path(txn, r, &mut path)?;
    check_path(txn, leases, r, &path, &mut 0)?;
    if !reads_only(r) {
        // etcd evaluates a txn that writes in a read transaction of its own, then ends
        // it and writes in another: its metrics count the two apart.
        txn.end_counted();
    }
    let mut at = 0;
    let resp = exec(txn, leases, r, &path, &mut at)?;
    Ok(resp)
}

fn exec(
    txn: &mut TxnWrite<'_>,
    leases: &Lessor,
    r: &TxnRequest,
    path: &[bool],
    at: &mut usize,
) -> Result<TxnResponse, ApplyError> {
    let ok = path[*at];
    *at += 1;
    let ops: &[RequestOp] = if ok { &r.success } else { &r.failure };
    let mut responses = Vec::with_capacity(ops.len());
    for op in ops {
        let response = match &op.request {
            Some(Request::RequestRange(rr)) => {
                txn.count_range();
                Response::ResponseRange(range(&*txn, rr)?)
            }
            Some(Request::RequestPut(p)) => Response::ResponsePut(put(txn, leases, p)?),
            Some(Request::RequestDeleteRange(d)) => {
                Response::ResponseDeleteRange(delete_range(txn, leases, d)?)
            }
            Some(Request::RequestTxn(t)) => Response::ResponseTxn(exec(txn, leases, t, path, at)?),
            None => continue,
        };
        responses.push(ResponseOp {
            response: Some(response),
        });
    }
    Ok(TxnResponse {
        header: Some(ResponseHeader {
            revision: txn.rev(),
            ..Default::default()
        }),
        succeeded: ok,
        responses,
    })
}

/// Whether every operation of both branches is a range (etcd's `isTxnReadonly`: a
/// nested txn counts as a write).
fn reads_only(r: &TxnRequest) -> bool {
    r.success
        .iter()
        .chain(&r.failure)
        .all(|op| matches!(op.request, Some(Request::RequestRange(_))))
}
