//! Server timings etcd exports that no part keeps: how long each Range took
//! (`etcd_server_range_duration_seconds{success}`, etcd 3.6: v3.6.14
//! server/etcdserver/txn/metrics.go, observed for the Range RPC only, not for ranges in
//! a Txn) and how long each applied operation took:
//! `etcd_server_apply_duration_seconds{version="v3",op,success}` (buckets 0.1 ms
//! doubling twenty times) and `etcd_server_slow_apply_total`, counted when an apply
//! takes longer than `--warning-apply-duration` (v3.5.16 server/etcdserver/apply.go
//! `Apply`, util.go `warnOfExpensiveGenericRequest`; v3.6.14 txn/metrics.go).
//!
//! `op` takes etcd's names for the same operations (a lease expiry is etcd's
//! LeaseRevoke); oxcd's replicated keepalives are `LeaseRenew`, which etcd has not (it
//! does not replicate keepalives), and a member's peer URL change is, as in etcd, a
//! membership change and not timed. `success` is false when the operation was refused,
//! but for a compacted revision, as in etcd.
//!
//! Invariant: recording is lock-free (atomic histograms), on the apply thread only.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_storage::timing::{Histogram, HistogramSnapshot};

/// etcd's operation names, in the order of [`ApplyTiming::snapshot`].
pub const OPS: &[&str] = &[
    "Put",
    "DeleteRange",
    "Txn",
    "Compaction",
    "ClusterMemberAttrSet",
    "Alarm",
    "LeaseGrant",
    "LeaseRevoke",
    "LeaseRenew",
    "ClusterVersionSet",
    "DowngradeInfoSet",
    "Authenticate",
    "AuthEnable",
    "AuthDisable",
    "AuthUserAdd",
    "AuthUserDelete",
    "AuthUserChangePassword",
    "AuthUserGrantRole",
    "AuthUserRevokeRole",
    "AuthRoleAdd",
    "AuthRoleDelete",
    "AuthRoleGrantPermission",
    "AuthRoleRevokePermission",
];

/// The index in [`OPS`] of `op`'s name; None for what etcd does not time.
pub fn op_index(op: &Op) -> Option<usize> {
    let name = match op {
        Op::Put(_) => "Put",
        Op::DeleteRange(_) => "DeleteRange",
        Op::Txn(_) => "Txn",
        Op::Compaction(_) => "Compaction",
        Op::MemberAttributes(_) => "ClusterMemberAttrSet",
        Op::Alarm(_) => "Alarm",
        Op::LeaseGrant(_) => "LeaseGrant",
        Op::LeaseRevoke(_) | Op::LeaseExpire(_) => "LeaseRevoke",
        Op::LeaseRenew(_) => "LeaseRenew",
        Op::ClusterVersionSet(_) => "ClusterVersionSet",
        Op::DowngradeInfoSet(_) => "DowngradeInfoSet",
        Op::Authenticate(_) => "Authenticate",
        Op::AuthEnable(_) => "AuthEnable",
        Op::AuthDisable(_) => "AuthDisable",
        Op::AuthUserAdd(_) => "AuthUserAdd",
        Op::AuthUserDelete(_) => "AuthUserDelete",
        Op::AuthUserChangePassword(_) => "AuthUserChangePassword",
        Op::AuthUserGrantRole(_) => "AuthUserGrantRole",
        Op::AuthUserRevokeRole(_) => "AuthUserRevokeRole",
        Op::AuthRoleAdd(_) => "AuthRoleAdd",
        Op::AuthRoleDelete(_) => "AuthRoleDelete",
        Op::AuthRoleGrantPermission(_) => "AuthRoleGrantPermission",
        Op::AuthRoleRevokePermission(_) => "AuthRoleRevokePermission",
        Op::MemberUpdate(_) => return None,
    };
    OPS.iter().position(|n| *n == name)
}

/// One histogram per outcome (failed, succeeded), each made when first observed with
/// etcd's buckets (0.1 ms doubling twenty times).
#[derive(Debug, Default)]
pub struct ByOutcome([std::sync::OnceLock<Histogram>; 2]);

impl ByOutcome {
    /// Records an operation that took `took`.
    pub fn observe(&self, success: bool, took: Duration) {
        self.0[usize::from(success)]
            .get_or_init(|| Histogram::exponential(0.0001, 2.0, 20))
            .observe(took);
    }

    /// Each outcome observed, with its histogram.
    pub fn snapshot(&self) -> Vec<(bool, HistogramSnapshot)> {
        (0..2)
            .filter_map(|i| self.0[i].get().map(|h| (i == 1, h.snapshot())))
            .collect()
    }
}

/// One histogram per (operation, success), and the slow applies.
#[derive(Debug)]
pub struct ApplyTiming {
    /// By operation, in the order of [`OPS`].
    timings: Vec<ByOutcome>,
    slow: AtomicU64,
    /// `--warning-apply-duration`.
    warn_after: Duration,
}

impl ApplyTiming {
    /// Timing that counts an apply longer than `warn_after` as slow.
    pub fn new(warn_after: Duration) -> ApplyTiming {
        ApplyTiming {
            timings: OPS.iter().map(|_| Default::default()).collect(),
            slow: AtomicU64::new(0),
            warn_after,
        }
    }

    /// Records that operation `op` (an index of [`OPS`]) took `took`.
    pub fn observe(&self, op: usize, success: bool, took: Duration) {
        if let Some(by_outcome) = self.timings.get(op) {
            by_outcome.observe(success, took);
        }
        if took > self.warn_after {
            self.slow.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                op = OPS.get(op).copied().unwrap_or(""),
                took_ms = took.as_millis() as u64,
                expected_ms = self.warn_after.as_millis() as u64,
                "apply request took too long"
            );
        }
    }

    /// Every (op, success) observed, with its histogram.
    pub fn snapshot(&self) -> Vec<(&'static str, bool, HistogramSnapshot)> {
        OPS.iter()
            .zip(&self.timings)
            .flat_map(|(name, by_outcome)| {
                by_outcome
                    .snapshot()
                    .into_iter()
                    .map(move |(success, h)| (*name, success, h))
            })
            .collect()
    }

    /// Applies slower than `--warning-apply-duration` so far.
    pub fn slow(&self) -> u64 {
        self.slow.load(Ordering::Relaxed)
    }
}

impl Default for ApplyTiming {
    fn default() -> ApplyTiming {
        ApplyTiming::new(Duration::from_millis(100))
    }
}
