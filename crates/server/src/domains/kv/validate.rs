//! Request checks made before proposing, as etcd's gRPC layer makes them: each failure is
//! etcd's error, byte for byte.

use std::collections::HashSet;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use oxcd_api::etcdserverpb::request_op::Request;
use oxcd_api::etcdserverpb::{DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest};

/// Checks a range request.
pub fn range(r: &RangeRequest) -> Result<(), EtcdError> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    if SortOrder::try_from(r.sort_order).is_err() || SortTarget::try_from(r.sort_target).is_err() {
        return Err(EtcdError::InvalidSortOption);
    }
    Ok(())
}

/// Checks a put request.
pub fn put(r: &PutRequest) -> Result<(), EtcdError> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    if r.ignore_value && !r.value.is_empty() {
        return Err(EtcdError::ValueProvided);
    }
    if r.ignore_lease && r.lease != 0 {
        return Err(EtcdError::LeaseProvided);
    }
    Ok(())
}

/// Checks a delete request.
pub fn delete_range(r: &DeleteRangeRequest) -> Result<(), EtcdError> {
    if r.key.is_empty() {
        return Err(EtcdError::EmptyKey);
    }
    Ok(())
}

/// Checks a txn: op counts against `max_ops` (nested txns share the budget), empty keys,
/// each op, and keys written twice in one branch.
pub fn txn(r: &TxnRequest, max_ops: usize) -> Result<(), EtcdError> {
    check_txn_ops(r, max_ops)?;
    check_intervals(&r.success)?;
    check_intervals(&r.failure)?;
    Ok(())
}

fn check_txn_ops(r: &TxnRequest, max_ops: usize) -> Result<(), EtcdError> {
    let ops = r.compare.len().max(r.success.len()).max(r.failure.len());
    if ops > max_ops {
        return Err(EtcdError::TooManyOps);
    }
    if r.compare.iter().any(|c| c.key.is_empty()) {
        return Err(EtcdError::EmptyKey);
    }
    for op in r.success.iter().chain(&r.failure) {
        check_op(op, max_ops - ops)?;
    }
    Ok(())
}

fn check_op(op: &RequestOp, max_ops: usize) -> Result<(), EtcdError> {
    match &op.request {
        Some(Request::RequestRange(r)) => range(r),
        Some(Request::RequestPut(r)) => put(r),
        Some(Request::RequestDeleteRange(r)) => delete_range(r),
        Some(Request::RequestTxn(t)) => check_txn_ops(t, max_ops),
        None => Ok(()),
    }
}

/// A deleted key range: `[start, end)`, a single key when `end` is empty, open-ended when
/// `end` is `\0`.
struct Deleted {
    start: Vec<u8>,
    end: Vec<u8>,
}

impl Deleted {
    fn contains(&self, k: &[u8]) -> bool {
        if self.end.is_empty() {
            return k == self.start.as_slice();
        }
        k >= self.start.as_slice() && (self.end == [0] || k < self.end.as_slice())
    }
}

/// etcd's rule: within one branch (recursively), a key may be put once, and never inside
/// a range that the same branch deletes. Puts in the then/else arms of a nested txn may
/// repeat each other, as only one arm runs.
fn check_intervals(ops: &[RequestOp]) -> Result<(HashSet<Vec<u8>>, Vec<Deleted>), EtcdError> {
    let mut dels: Vec<Deleted> = ops
        .iter()
        .filter_map(|op| match &op.request {
            Some(Request::RequestDeleteRange(d)) => Some(Deleted {
                start: d.key.clone(),
                end: d.range_end.clone(),
            }),
            _ => None,
        })
        .collect();
    let deleted = |dels: &[Deleted], k: &[u8]| dels.iter().any(|d| d.contains(k));
    let mut puts: HashSet<Vec<u8>> = HashSet::new();
    for op in ops {
        let Some(Request::RequestTxn(t)) = &op.request else {
            continue;
        };
        let (puts_then, dels_then) = check_intervals(&t.success)?;
        let (puts_else, dels_else) = check_intervals(&t.failure)?;
        for k in &puts_then {
            if puts.contains(k) || deleted(&dels, k) {
                return Err(EtcdError::DuplicateKey);
            }
            puts.insert(k.clone());
        }
        for k in puts_else {
            if (puts.contains(&k) && !puts_then.contains(&k)) || deleted(&dels, &k) {
                return Err(EtcdError::DuplicateKey);
            }
            puts.insert(k);
        }
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    for op in ops {
        let Some(Request::RequestPut(p)) = &op.request else {
            continue;
        };
        if puts.contains(&p.key) || deleted(&dels, &p.key) {
            return Err(EtcdError::DuplicateKey);
        }
        puts.insert(p.key.clone());
    }
    Ok((puts, dels))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put_op(k: &str) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestPut(PutRequest {
                key: k.into(),
                ..Default::default()
            })),
        }
    }

    fn del_op(k: &str, end: &str) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestDeleteRange(DeleteRangeRequest {
                key: k.into(),
                range_end: end.into(),
                ..Default::default()
            })),
        }
    }

    fn txn_op(success: Vec<RequestOp>, failure: Vec<RequestOp>) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestTxn(TxnRequest {
                success,
                failure,
                ..Default::default()
            })),
        }
    }

    #[test]
    fn duplicate_keys() {
        let t = |success| TxnRequest {
            success,
            ..Default::default()
        };
        assert_eq!(
            txn(&t(vec![put_op("a"), put_op("a")]), 128),
            Err(EtcdError::DuplicateKey)
        );
        assert_eq!(
            txn(&t(vec![put_op("b"), del_op("a", "c")]), 128),
            Err(EtcdError::DuplicateKey)
        );
        assert_eq!(txn(&t(vec![put_op("c"), del_op("a", "c")]), 128), Ok(()));
        assert_eq!(txn(&t(vec![del_op("a", ""), del_op("a", "")]), 128), Ok(()));
        // then/else of a nested txn may put the same key.
        assert_eq!(
            txn(&t(vec![txn_op(vec![put_op("a")], vec![put_op("a")])]), 128),
            Ok(())
        );
        assert_eq!(
            txn(
                &t(vec![txn_op(vec![put_op("a")], vec![]), put_op("a")]),
                128
            ),
            Err(EtcdError::DuplicateKey)
        );
    }

    #[test]
    fn op_limits_and_empty_keys() {
        let many = TxnRequest {
            success: (0..129).map(|i| put_op(&format!("k{i}"))).collect(),
            ..Default::default()
        };
        assert_eq!(txn(&many, 128), Err(EtcdError::TooManyOps));
        let empty = TxnRequest {
            success: vec![put_op("")],
            ..Default::default()
        };
        assert_eq!(txn(&empty, 128), Err(EtcdError::EmptyKey));
        assert_eq!(
            put(&PutRequest {
                key: b"k".to_vec(),
                ignore_value: true,
                value: b"v".to_vec(),
                ..Default::default()
            }),
            Err(EtcdError::ValueProvided)
        );
        assert_eq!(
            range(&RangeRequest {
                key: b"k".to_vec(),
                sort_order: 9,
                ..Default::default()
            }),
            Err(EtcdError::InvalidSortOption)
        );
    }
}
