//! The leader's choice of the cluster version (etcd 3.6's `decideClusterVersion`), a
//! pure function of what the cluster recorded and what each member said it runs.
//!
//! - No cluster version yet: the lowest member version, or 3.0.0 while a member has
//!   not answered (etcd proposes that too, so that a version is always decided).
//! - A member has not answered: no change.
//! - A downgrade is enabled: its target, once it is one minor below both the cluster
//!   version and the lowest member version (each member then migrates its storage).
//! - Otherwise the lowest member version, if it is above the cluster version.
//!
//! The version proposed keeps only major and minor (`3.6.0`).

use oxcd_go::semver::Version;

use super::cluster::ClusterVersions;
use super::release::MIN_CLUSTER_VERSION;

/// Why a downgrade's target cannot be applied yet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid downgrade target: {target} is not one minor below {from}")]
pub struct InvalidDowngrade {
    /// The downgrade's target.
    pub target: String,
    /// The version it would go down from (the cluster's, or the lowest member's).
    pub from: String,
}

/// The cluster version the leader should propose (None: keep it), given what the
/// cluster recorded and each member's server version (None: it did not answer).
pub fn decide(
    recorded: &ClusterVersions,
    members: &[Option<Version>],
) -> Result<Option<Version>, InvalidDowngrade> {
    let lowest = lowest(members);
    let Some(cluster) = &recorded.cluster else {
        return Ok(Some(
            lowest.map_or(MIN_CLUSTER_VERSION, |v| v.minor_release()),
        ));
    };
    let Some(lowest) = lowest else {
        return Ok(None);
    };
    if let Some(target) = recorded.downgrade.target() {
        if target.cmp_minor(cluster).is_eq() {
            return Ok(None);
        }
        for from in [cluster, &lowest] {
            if !one_minor_below(&target, from) {
                return Err(InvalidDowngrade {
                    target: target.to_string(),
                    from: from.to_string(),
                });
            }
        }
        return Ok(Some(target.minor_release()));
    }
    if cluster.cmp_minor(&lowest).is_lt() && lowest.major == cluster.major {
        return Ok(Some(lowest.minor_release()));
    }
    Ok(None)
}

/// Whether an enabled downgrade is complete: every member runs the target's major and
/// minor (etcd's `CancelDowngradeIfNeeded`; the leader then cancels it).
pub fn downgrade_done(recorded: &ClusterVersions, members: &[Option<Version>]) -> bool {
    let Some(target) = recorded.downgrade.target() else {
        return false;
    };
    !members.is_empty()
        && members
            .iter()
            .all(|v| v.as_ref().is_some_and(|v| v.cmp_minor(&target).is_eq()))
}

/// The lowest of the members' versions, None if any is unknown.
fn lowest(members: &[Option<Version>]) -> Option<Version> {
    let mut lowest: Option<Version> = None;
    for v in members {
        let v = v.as_ref()?;
        if lowest.as_ref().is_none_or(|l| v < l) {
            lowest = Some(v.clone());
        }
    }
    lowest
}

/// etcd's `isValidDowngrade`: `to` is exactly one minor below `from`.
pub fn one_minor_below(to: &Version, from: &Version) -> bool {
    to.major == from.major && to.minor + 1 == from.minor
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domains::version::cluster::Downgrade;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap_or(Version::new(0, 0, 0))
    }

    fn recorded(cluster: Option<&str>, downgrade_to: Option<&str>) -> ClusterVersions {
        ClusterVersions {
            cluster: cluster.map(v),
            downgrade: match downgrade_to {
                Some(t) => Downgrade {
                    target_version: t.into(),
                    enabled: true,
                },
                None => Downgrade::default(),
            },
        }
    }

    // As etcd's server/etcdserver/version/monitor_test.go TestDecideClusterVersion.
    #[test]
    fn the_cluster_version_follows_the_lowest_member() {
        let both = [Some(v("3.6.14")), Some(v("3.5.17"))];
        assert_eq!(decide(&recorded(None, None), &both), Ok(Some(v("3.5.0"))));
        assert_eq!(
            decide(&recorded(None, None), &[Some(v("3.6.14")), None]),
            Ok(Some(v("3.0.0")))
        );
        assert_eq!(
            decide(&recorded(Some("3.5.0"), None), &[Some(v("3.6.14")), None]),
            Ok(None)
        );
        assert_eq!(
            decide(
                &recorded(Some("3.5.0"), None),
                &[Some(v("3.6.14")), Some(v("3.6.1"))]
            ),
            Ok(Some(v("3.6.0")))
        );
        assert_eq!(decide(&recorded(Some("3.6.0"), None), &both), Ok(None));
    }

    #[test]
    fn a_downgrade_lowers_the_version_one_minor() {
        let all36 = [Some(v("3.6.14")), Some(v("3.6.14"))];
        assert_eq!(
            decide(&recorded(Some("3.6.0"), Some("3.5.0")), &all36),
            Ok(Some(v("3.5.0")))
        );
        assert_eq!(
            decide(&recorded(Some("3.5.0"), Some("3.5.0")), &all36),
            Ok(None)
        );
        assert!(decide(&recorded(Some("3.6.0"), Some("3.4.0")), &all36).is_err());
    }
}
