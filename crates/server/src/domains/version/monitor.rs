//! The version loops etcd 3.6 runs:
//! - [`run`] (`monitorClusterVersions`, `monitorStorageVersion`), every [`INTERVAL`] and
//!   whenever leadership changes: on the leader, ask every member its release
//!   ([`crate::peer::versions`]), decide the cluster version ([`super::decide`]) and
//!   propose it, then the log vocabulary it asks for ([`super::vocabulary`]); on every
//!   member, bring the storage version to the cluster version ([`super::storage::sync`]);
//! - [`cancel_finished_downgrades`] (`monitorDowngrade`), every `--downgrade-check-time`:
//!   on the leader, cancel an enabled downgrade once every member runs its target.

use std::time::Duration;

use oxcd_api::oxcdpb::{ClusterVersionSet, DowngradeInfoSet};
use tokio::sync::watch;

use super::cluster;
use super::decide::{decide, downgrade_done};
use super::handles::VersionHandles;
use super::storage;
use crate::peer::versions::VersionAsker;

/// How often the loops run (etcd's `monitorVersionInterval`: the peer write timeout
/// less a second).
pub const INTERVAL: Duration = Duration::from_secs(4);

/// Runs both loops until `stop` turns true.
pub async fn run(handles: VersionHandles, mut stop: watch::Receiver<bool>) {
    let mut asker = VersionAsker::new(handles.dialer.clone());
    let mut leadership = handles.role.leadership();
    loop {
        if handles.role.is_leader() {
            let recorded = handles.reads.blocking(cluster::read).await;
            if let Ok(Ok(recorded)) = recorded {
                decide_and_propose(&handles, &mut asker, &recorded).await;
            }
            // The version just proposed has applied here (or failed): its vocabulary.
            let recorded = handles.reads.blocking(cluster::read).await;
            if let Ok(Ok(recorded)) = recorded {
                super::vocabulary::align(&handles, recorded.cluster.as_ref()).await;
            }
        }
        // After the leader's proposal has applied here: its storage follows at once.
        let release = handles.release;
        let _ = handles
            .reads
            .blocking(move |store| {
                if let Ok(recorded) = cluster::read(store) {
                    storage::sync(store, &recorded, release);
                }
            })
            .await;
        tokio::select! {
            _ = tokio::time::sleep(INTERVAL) => {}
            changed = leadership.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// How long each member has to answer while the cluster has no version yet.
///
/// The first decision only chooses between the lowest release and 3.0 (a later round
/// raises it), and a member added before it may be one that is still checking whether
/// it may join: its peer port is bound but does not answer until it knows the cluster's
/// version. Waiting the request timeout for it (twice: HTTP/2, then HTTP/1.1) would
/// leave the cluster undecided for longer than the newcomer waits, and refuse it.
pub const FIRST_DECISION_ASK_TIMEOUT: Duration = Duration::from_millis(500);

/// Every member's release (None where unknown), this one's included, each asked within
/// `timeout`.
async fn member_releases(
    handles: &VersionHandles,
    asker: &mut VersionAsker,
    timeout: Duration,
) -> Vec<Option<oxcd_go::semver::Version>> {
    let me = handles.role.me();
    let mut versions = Vec::new();
    for m in handles.roster.members() {
        if m.id == me {
            versions.push(Some(handles.release.server_version()));
        } else {
            versions.push(asker.server_version(m.id, &m.peer_urls, timeout).await);
        }
    }
    versions
}

/// Cancels an enabled downgrade once every member runs its target, checking every
/// `every` while this member leads, until `stop` turns true.
pub async fn cancel_finished_downgrades(
    handles: VersionHandles,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut asker = VersionAsker::new(handles.dialer.clone());
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if !handles.role.is_leader() {
            continue;
        }
        let Ok(Ok(recorded)) = handles.reads.blocking(cluster::read).await else {
            continue;
        };
        if !recorded.downgrade.enabled {
            continue;
        }
        let versions = member_releases(&handles, &mut asker, handles.request_timeout).await;
        if !downgrade_done(&recorded, &versions) {
            tracing::debug!("remotes server has mismatching etcd version");
            continue;
        }
        tracing::info!(
            cluster_version = %recorded.downgrade.target_version,
            "the cluster has been downgraded"
        );
        let cancel = DowngradeInfoSet {
            enabled: false,
            ver: String::new(),
        };
        if let Err(e) = handles.writes.propose(cancel, None).await {
            tracing::warn!(error = %e, "failed to cancel downgrade");
        }
    }
}

/// The leader's step: every member's release, the decision, the proposal.
async fn decide_and_propose(
    handles: &VersionHandles,
    asker: &mut VersionAsker,
    recorded: &cluster::ClusterVersions,
) {
    let timeout = if recorded.cluster.is_none() {
        FIRST_DECISION_ASK_TIMEOUT.min(handles.request_timeout)
    } else {
        handles.request_timeout
    };
    let versions = member_releases(handles, asker, timeout).await;
    let target = match decide(recorded, &versions) {
        Ok(Some(v)) => v,
        Ok(None) => return,
        Err(e) => {
            tracing::error!(error = %e, "Failed to monitor cluster version");
            return;
        }
    };
    match &recorded.cluster {
        None => tracing::info!(
            cluster_version = %target.major_minor(),
            "setting up initial cluster version using v3 API"
        ),
        Some(from) => tracing::info!(
            from = %from.major_minor(),
            to = %target.major_minor(),
            "updating cluster version using v3 API"
        ),
    }
    let set = ClusterVersionSet {
        ver: target.to_string(),
    };
    match handles.writes.propose(set, None).await {
        Ok(_) => tracing::info!(
            cluster_version = %target.major_minor(),
            "cluster version is updated"
        ),
        Err(e) => tracing::warn!(error = %e, "failed to update cluster version"),
    }
}
