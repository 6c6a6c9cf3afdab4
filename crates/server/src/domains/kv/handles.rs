//! What KV requests are served with ([`super::service`], [`super::range`],
//! [`super::routes`]): the member's narrow handles.

use std::sync::Arc;

use crate::domains::auth::caller::Callers;
use crate::domains::membership::Membership;
use crate::machine::reads::Reads;
use crate::machine::writes::Writes;

/// What KV requests are served with, shared by the service and the routes.
pub struct KvHandles {
    /// Who makes a request, and the permission checks.
    pub callers: Callers,
    /// Reads: the barrier, the store, headers, the blocking pool.
    pub reads: Reads,
    /// Proposals.
    pub writes: Writes,
    /// Whether this member is a learner (it serves only serializable reads).
    pub membership: Arc<Membership>,
    /// `--max-txn-ops`.
    pub max_txn_ops: usize,
    /// `--max-request-bytes`: the size RangeStream's chunks aim at.
    pub max_request_bytes: usize,
    /// The time of each Range (`etcd_server_range_duration_seconds`).
    pub metrics: Arc<crate::edge::metrics::Metrics>,
}
