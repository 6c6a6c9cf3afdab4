//! The cluster version and the downgrade as replicated state: two meta rows every
//! member writes when it applies the leader's `cluster_version_set` or a
//! `downgrade_info_set`, with etcd's keys and values (`clusterVersion` → `3.6.0`;
//! `downgrade` → `{"target-version":"3.5.0","enabled":true}`), read back for
//! `/version`, Status, metrics and the leader's decisions.
//!
//! Reads go to the backend, never to a copy: a snapshot installed from the leader
//! replaces both rows with the leader's.

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::{ClusterVersionSet, DowngradeInfoSet};
use oxcd_go::semver::Version;
use oxcd_mvcc::Store;
use oxcd_storage::schema::{META_CLUSTER_VERSION, META_DOWNGRADE};

use crate::machine::applied::Applied;
use crate::machine::applier::{Applier, ApplyError, mvcc_err};

/// A downgrade as the cluster records it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Downgrade {
    /// The version the cluster goes down to (`3.5.0`; empty when none).
    #[serde(rename = "target-version")]
    pub target_version: String,
    /// Whether the downgrade is enabled.
    pub enabled: bool,
}

impl Downgrade {
    /// The target as a version, when a downgrade is enabled.
    pub fn target(&self) -> Option<Version> {
        if !self.enabled {
            return None;
        }
        Version::parse(&self.target_version).ok()
    }
}

/// What the cluster decided about versions, as this member has applied it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterVersions {
    /// The cluster version (None: not decided yet).
    pub cluster: Option<Version>,
    /// The downgrade (disabled when none was ever enabled).
    pub downgrade: Downgrade,
}

/// The cluster version and downgrade in `store`, as of its last commit.
pub fn read(store: &Store) -> Result<ClusterVersions, EtcdError> {
    let cluster = store.read_meta(META_CLUSTER_VERSION).map_err(mvcc_err)?;
    let downgrade = store.read_meta(META_DOWNGRADE).map_err(mvcc_err)?;
    Ok(ClusterVersions {
        cluster: cluster.as_deref().and_then(parse_version),
        downgrade: downgrade
            .as_deref()
            .map(parse_downgrade)
            .unwrap_or_default(),
    })
}

fn parse_version(raw: &[u8]) -> Option<Version> {
    Version::parse(std::str::from_utf8(raw).ok()?).ok()
}

fn parse_downgrade(raw: &[u8]) -> Downgrade {
    serde_json::from_slice(raw).unwrap_or_default()
}

/// Applies the leader's decision of the cluster version. A version that does not parse
/// changes nothing (on every member alike).
pub fn apply_version_set(
    ctx: &Applier<'_>,
    req: &ClusterVersionSet,
) -> Result<Applied, ApplyError> {
    let Ok(new) = Version::parse(&req.ver) else {
        tracing::warn!(version = %req.ver, "ignoring a cluster version that does not parse");
        return Ok(Applied::ClusterVersion(None));
    };
    let prev = ctx.tx.get_meta(META_CLUSTER_VERSION)?;
    let prev = prev.as_deref().and_then(parse_version);
    ctx.tx
        .put_meta(META_CLUSTER_VERSION, new.to_string().as_bytes())?;
    match &prev {
        None => tracing::info!(
            cluster_version = %new.major_minor(),
            "set initial cluster version"
        ),
        Some(p) if p != &new => tracing::info!(
            from = %p.major_minor(),
            to = %new.major_minor(),
            "updated cluster version"
        ),
        Some(_) => {}
    }
    Ok(Applied::ClusterVersion(Some(new)))
}

/// Applies a downgrade enabled or cancelled.
pub fn apply_downgrade_set(
    ctx: &Applier<'_>,
    req: &DowngradeInfoSet,
) -> Result<Applied, ApplyError> {
    let info = if req.enabled {
        Downgrade {
            target_version: req.ver.clone(),
            enabled: true,
        }
    } else {
        Downgrade::default()
    };
    let json = serde_json::to_vec(&info).unwrap_or_default();
    ctx.tx.put_meta(META_DOWNGRADE, &json)?;
    if info.enabled {
        tracing::info!(target_version = %info.target_version, "downgrade enabled");
    } else {
        tracing::info!("downgrade cancelled");
    }
    Ok(Applied::Downgrade(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_downgrade_is_written_as_etcd_writes_it() {
        let on = Downgrade {
            target_version: "3.5.0".into(),
            enabled: true,
        };
        assert_eq!(
            serde_json::to_string(&on).ok().as_deref(),
            Some(r#"{"target-version":"3.5.0","enabled":true}"#)
        );
        assert_eq!(
            serde_json::to_string(&Downgrade::default()).ok().as_deref(),
            Some(r#"{"target-version":"","enabled":false}"#)
        );
        assert_eq!(on.target(), Some(Version::new(3, 5, 0)));
        assert_eq!(Downgrade::default().target(), None);
    }
}
