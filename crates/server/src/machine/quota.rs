//! The space quota (`--quota-backend-bytes`), as etcd 3.5 charges it.
//!
//! Owns what a request costs against the quota; whether the backend has room for it is
//! the [`oxcd_config::quota::Quota`] the flags set.
//! Only requests that store something new cost anything: a put (etcd's 256 bytes of
//! key metadata plus its key and value), a txn (the larger of its two branches' puts) and
//! a lease grant (64 bytes). Everything else costs 0 and is always admitted, so that an
//! operator can still read, delete, compact, revoke leases and clear alarms on a full
//! database.
//!
//! Invariants:
//! - [`cost`] is a pure function of the request: the apply path uses it (cost > 0) to
//!   decide what a raised NOSPACE alarm refuses, identically on every member.
//! - The backend size is never consulted when applying (members' files differ in size);
//!   only the member receiving a request compares its own size with the quota
//!   (`Quota::admits`), before proposing, as etcd's gRPC layer does.

use oxcd_api::etcdserverpb::request_op::Request;
use oxcd_api::etcdserverpb::{PutRequest, RequestOp, TxnRequest};
use oxcd_api::oxcdpb::internal_request::Op;

/// etcd's estimate of what storing a key's metadata costs.
pub const KV_OVERHEAD: u64 = 256;
/// etcd's estimate of what storing a lease costs.
pub const LEASE_OVERHEAD: u64 = 64;
/// What a put costs: the key metadata, the key and the value.
pub fn put_cost(p: &PutRequest) -> u64 {
    KV_OVERHEAD + p.key.len() as u64 + p.value.len() as u64
}

/// What a txn costs: the larger of what its success and its failure branch put.
///
/// etcd counts only the puts directly in each branch, so a put inside a nested txn costs
/// nothing there and passes a raised NOSPACE alarm. oxcd counts a nested txn's puts as
/// that txn's cost, so no write can grow a database whose space is exhausted.
pub fn txn_cost(t: &TxnRequest) -> u64 {
    branch_cost(&t.success).max(branch_cost(&t.failure))
}

fn branch_cost(ops: &[RequestOp]) -> u64 {
    ops.iter()
        .map(|op| match &op.request {
            Some(Request::RequestPut(p)) => put_cost(p),
            Some(Request::RequestTxn(t)) => txn_cost(t),
            Some(Request::RequestRange(_)) | Some(Request::RequestDeleteRange(_)) | None => 0,
        })
        .sum()
}

/// What a replicated request costs against the quota (0: always admitted).
pub fn cost(op: &Op) -> u64 {
    match op {
        Op::Put(p) => put_cost(p),
        Op::Txn(t) => txn_cost(t),
        Op::LeaseGrant(_) => LEASE_OVERHEAD,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::etcdserverpb::{DeleteRangeRequest, LeaseGrantRequest, RangeRequest};

    fn put(key: &str, value: &str) -> RequestOp {
        RequestOp {
            request: Some(Request::RequestPut(PutRequest {
                key: key.into(),
                value: value.into(),
                ..Default::default()
            })),
        }
    }

    fn get() -> RequestOp {
        RequestOp {
            request: Some(Request::RequestRange(RangeRequest::default())),
        }
    }

    fn del() -> RequestOp {
        RequestOp {
            request: Some(Request::RequestDeleteRange(DeleteRangeRequest::default())),
        }
    }

    #[test]
    fn costs_are_etcds() {
        let p = PutRequest {
            key: b"key".to_vec(),
            value: b"value".to_vec(),
            ..Default::default()
        };
        assert_eq!(cost(&Op::Put(p)), 256 + 3 + 5);
        assert_eq!(
            cost(&Op::LeaseGrant(LeaseGrantRequest { ttl: 5, id: 1 })),
            64
        );
        assert_eq!(cost(&Op::DeleteRange(DeleteRangeRequest::default())), 0);
        let t = TxnRequest {
            success: vec![put("a", "1"), get(), put("bb", "22")],
            failure: vec![put("ccccc", "55555"), del()],
            ..Default::default()
        };
        assert_eq!(txn_cost(&t), (256 + 2) + (256 + 4), "the larger branch");
        let reads = TxnRequest {
            success: vec![get(), del()],
            failure: vec![get()],
            ..Default::default()
        };
        assert_eq!(txn_cost(&reads), 0);
    }

    #[test]
    fn a_nested_txn_costs_its_puts() {
        let inner = TxnRequest {
            failure: vec![put("k", "v")],
            ..Default::default()
        };
        let outer = TxnRequest {
            success: vec![RequestOp {
                request: Some(Request::RequestTxn(inner)),
            }],
            ..Default::default()
        };
        assert_eq!(txn_cost(&outer), 256 + 2);
    }
}
