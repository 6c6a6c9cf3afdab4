//! The Downgrade RPC's rules (etcd v3.6.14 `server/etcdserver/v3_server.go` `Downgrade`,
//! `server/etcdserver/version/version.go` `Manager`, `cluster_util.go`
//! `convertToClusterVersion`), in etcd's order of checks and with its errors:
//! - VALIDATE: a target `X.Y[.Z]`, the cluster version known, a linearizable read, the
//!   target exactly one minor below it, no downgrade enabled;
//! - ENABLE: the same checks, then a replicated `downgrade_info_set` (the leader lowers
//!   the cluster version on its next round, [`super::decide`]);
//! - CANCEL: a linearizable read, then a replicated cancel if a downgrade is enabled
//!   (with none, etcd 3.6 only logs `no inflight downgrade job` and answers).
//!
//! Every answer carries the cluster version as `major.minor`.

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::downgrade_request::DowngradeAction;
use oxcd_api::oxcdpb::DowngradeInfoSet;
use oxcd_go::semver::Version;

use super::cluster::{self, ClusterVersions};
use super::decide::one_minor_below;
use crate::machine::reads::Reads;
use crate::machine::writes::Writes;

/// What a downgrade reads and proposes through.
pub struct Handles<'a> {
    /// The cluster's versions and the linearizable read.
    pub reads: &'a Reads,
    /// The `downgrade_info_set` proposals.
    pub writes: &'a Writes,
}

/// etcd's `convertToClusterVersion`: `X.Y.Z` or `X.Y`, kept as `X.Y.0`.
pub fn target_version(text: &str) -> Result<Version, EtcdError> {
    Version::parse(text)
        .or_else(|_| Version::parse(&format!("{text}.0")))
        .map(|v| v.minor_release())
        .map_err(|_| EtcdError::WrongDowngradeVersionFormat)
}

/// Answers a Downgrade request (`action` as sent, `version` its target): the cluster
/// version to report.
pub async fn downgrade(h: &Handles<'_>, action: i32, version: &str) -> Result<String, EtcdError> {
    match DowngradeAction::try_from(action) {
        Ok(DowngradeAction::Validate) => {
            let target = target_version(version)?;
            let cv = recorded(h)
                .await?
                .cluster
                .ok_or(EtcdError::ClusterVersionUnavailable)?;
            validate(h, &target).await?;
            Ok(cv.major_minor())
        }
        Ok(DowngradeAction::Enable) => {
            let target = target_version(version);
            let target = match target {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(error = %e, "reject downgrade request");
                    return Err(e);
                }
            };
            if let Err(e) = validate(h, &target).await {
                tracing::warn!(error = %e, "reject downgrade request");
                return Err(e);
            }
            let set = DowngradeInfoSet {
                enabled: true,
                ver: target.to_string(),
            };
            h.writes.propose(set, None).await?;
            tracing::info!(target_version = %target, "The server is ready to downgrade");
            Ok(cluster_text(&recorded(h).await?))
        }
        Ok(DowngradeAction::Cancel) => {
            if let Err(e) = cancel(h).await {
                tracing::warn!(error = %e, "failed to cancel downgrade");
            }
            Ok(cluster_text(&recorded(h).await?))
        }
        Err(_) => Err(EtcdError::UnknownMethod),
    }
}

/// etcd's `DowngradeValidate`, after the linearizable read.
async fn validate(h: &Handles<'_>, target: &Version) -> Result<(), EtcdError> {
    h.reads.barrier().await?;
    let now = recorded(h).await?;
    let Some(cv) = now.cluster else {
        return Err(EtcdError::ClusterVersionUnavailable);
    };
    if !one_minor_below(target, &cv) {
        return Err(EtcdError::InvalidDowngradeTargetVersion);
    }
    if now.downgrade.enabled {
        return Err(EtcdError::DowngradeInProcess);
    }
    Ok(())
}

/// etcd's `DowngradeCancel`.
async fn cancel(h: &Handles<'_>) -> Result<(), EtcdError> {
    h.reads.barrier().await?;
    if !recorded(h).await?.downgrade.enabled {
        return Err(EtcdError::NoInflightDowngrade);
    }
    let set = DowngradeInfoSet {
        enabled: false,
        ver: String::new(),
    };
    h.writes.propose(set, None).await?;
    Ok(())
}

async fn recorded(h: &Handles<'_>) -> Result<ClusterVersions, EtcdError> {
    h.reads
        .blocking(cluster::read)
        .await
        .map_err(|_| EtcdError::Stopped)?
}

/// The cluster version as the answer carries it (`3.6`; empty while undecided).
fn cluster_text(r: &ClusterVersions) -> String {
    r.cluster
        .as_ref()
        .map(Version::major_minor)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    // etcd v3.6.14 server/etcdserver/cluster_util_test.go TestConvertToClusterVersion.
    #[test]
    fn targets_read_as_etcd_reads_them() {
        assert_eq!(target_version("3.5"), Ok(Version::new(3, 5, 0)));
        assert_eq!(target_version("3.5.7"), Ok(Version::new(3, 5, 0)));
        assert_eq!(
            target_version("3"),
            Err(EtcdError::WrongDowngradeVersionFormat)
        );
        assert_eq!(
            target_version("x.y"),
            Err(EtcdError::WrongDowngradeVersionFormat)
        );
    }
}
