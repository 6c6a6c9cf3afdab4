//! The lease table's rows: lease id (i64 big-endian) → `oxcdpb.LeaseRecord`, which has
//! etcd's `leasepb.Lease` field numbers.

use oxcd_api::oxcdpb::LeaseRecord;
use oxcd_mvcc::MvccError;
use oxcd_storage::backend::Backend;
use oxcd_storage::schema;
use prost::Message as _;

/// The row key of lease `id`.
pub(crate) fn key(id: i64) -> [u8; 8] {
    id.to_be_bytes()
}

/// The row value of lease `id` granted with `ttl`, last renewed by the entry at raft
/// index `renewed_at` (0: never).
pub(crate) fn value(id: i64, ttl: i64, renewed_at: u64) -> Vec<u8> {
    LeaseRecord {
        id,
        ttl,
        remaining_ttl: 0,
        renewed_at,
    }
    .encode_to_vec()
}

/// Decodes a row value.
pub(crate) fn decode(v: &[u8]) -> Result<LeaseRecord, MvccError> {
    LeaseRecord::decode(v)
        .map_err(|e| MvccError::Corrupt(Default::default(), format!("lease row: {e}")))
}

/// Every lease in the backend: (id, granted TTL).
pub(crate) fn load(backend: &Backend) -> Result<Vec<(i64, i64)>, MvccError> {
    let mut out = Vec::new();
    for (k, v) in backend.rows(schema::LEASE)? {
        let record = decode(&v)
            .map_err(|e| MvccError::Corrupt(Default::default(), format!("{e} (row {k:02x?})")))?;
        out.push((record.id, record.ttl));
    }
    Ok(out)
}
