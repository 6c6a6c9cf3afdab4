//! The writes one request is made of, inside its MVCC write: a put (after the checks
//! that depend on state) and a delete, each keeping the lessor's key maps in step. A
//! Put or DeleteRange request is one of them ([`super::apply`]); a txn any number
//! ([`super::txn`]).

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::{
    DeleteRangeRequest, DeleteRangeResponse, PutRequest, PutResponse, ResponseHeader,
};
use oxcd_mvcc::{KeyRange, RangeOptions, TxnWrite};

use crate::domains::lease::Lessor;
use crate::machine::applier::ApplyError;

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
        // etcd reads the previous value with a Range (counted as one).
        txn.count_range();
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
        txn.count_range();
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
