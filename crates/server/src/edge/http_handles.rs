//! What the plain HTTP endpoints are given: `/metrics` ([`crate::edge::metrics::render`])
//! and the health checks ([`crate::edge::health`]) read the member through these handles.

use std::sync::Arc;

use crate::domains::membership::Membership;
use crate::edge::metrics::Metrics;
use crate::machine::reads::Reads;
use crate::machine::role::Role;
use crate::machine::writes::Writes;
use oxcd_config::quota::Quota;

/// What `/metrics` and the health checks read of the member.
pub struct HttpHandles {
    /// The store, the barrier a linearizable check waits for, the applied index.
    pub reads: Reads,
    /// The proposals waiting.
    pub writes: Writes,
    /// Who leads, raft's indexes.
    pub role: Role,
    /// Whether this member is a learner.
    pub membership: Arc<Membership>,
    /// The leases (their counts).
    pub leases: Arc<crate::domains::lease::Lessor>,
    /// The space quota.
    pub quota: Quota,
    /// What `/metrics` counts that no other part keeps.
    pub metrics: Arc<Metrics>,
    /// The release this member acts as (`/version`, `etcd_server_version`).
    pub release: crate::domains::version::release::Release,
    /// The feature gates (`etcd_server_feature_enabled`).
    pub feature_gates: oxcd_config::features::FeatureGates,
    /// How long a linearizable health check waits.
    pub request_timeout: std::time::Duration,
    /// The watch feed (its stream, watcher and event counts).
    pub watch_hub: Arc<crate::domains::watch::WatchHub>,
}
