//! The storage version: which etcd release's data format this member's backend is in
//! (etcd 3.6's `meta/storageVersion`). Set by each member itself, not replicated: once
//! the cluster version is decided, every member brings its storage version to it (3.6
//! sets the key, 3.5 removes it, as etcd's schema migration does).
//!
//! Detection (etcd's `UnsafeDetectSchemaVersion`): the key when present; otherwise 3.5
//! once the backend has applied an entry (its raft term is recorded); otherwise unknown.
//! A member refuses a backend whose storage version is above its own release.

use oxcd_go::semver::Version;
use oxcd_mvcc::Store;
use oxcd_storage::storage_version::{self, Detected};

use super::cluster::ClusterVersions;
use super::release::{MIN_CLUSTER_VERSION, Release};
use crate::machine::fatal::Fatal;

/// This backend's storage version, None when it cannot tell yet (nothing applied).
pub fn detect(store: &Store) -> Option<Version> {
    match storage_version::detect(store.backend()).ok()? {
        Detected::Recorded(v) => Version::parse(&v).ok(),
        Detected::Etcd35 => Some(Version::new(3, 5, 0)),
        Detected::Unknown => None,
    }
}

/// Err when the backend's storage version is above `release` (etcd 3.6's boot check,
/// `schema.Validate`).
pub fn check_boot(store: &Store, release: Release) -> Result<(), Fatal> {
    match detect(store) {
        Some(v) if v.cmp_minor(&release.minor()).is_gt() => Err(Fatal::StorageTooNew {
            version: v.major_minor(),
        }),
        _ => Ok(()),
    }
}

/// The storage version `release` gives the backend under `recorded`, if it differs from
/// the present one (None: nothing to do). A 3.5 member never writes one.
pub fn wanted(
    recorded: &ClusterVersions,
    present: Option<&Version>,
    release: Release,
) -> Option<Version> {
    if !release.has_3_6() {
        return None;
    }
    let cluster = recorded.cluster.as_ref()?;
    if cluster == &MIN_CLUSTER_VERSION {
        return None;
    }
    match present {
        Some(p) if p.cmp_minor(cluster).is_eq() => None,
        _ => Some(cluster.minor_release()),
    }
}

/// Brings the storage version to the cluster version (etcd's
/// `UpdateStorageVersionIfNeeded`), logging each change as etcd does.
pub fn sync(store: &Store, recorded: &ClusterVersions, release: Release) {
    let Some(present) = detect(store) else {
        return; // nothing applied yet: nothing to migrate
    };
    let Some(target) = wanted(recorded, Some(&present), release) else {
        if let Some(d) = recorded.downgrade.target()
            && present.cmp_minor(&d).is_eq()
        {
            tracing::info!(
                target_version = %d.major_minor(),
                server_version = %release.server_version(),
                "The server is ready to downgrade"
            );
        }
        return;
    };
    tracing::info!(
        cluster_version = %recorded.cluster.as_ref().map(Version::major_minor).unwrap_or_default(),
        storage_version = %present.major_minor(),
        "cluster version differs from storage version."
    );
    // 3.5 has no key: going down to it removes the key.
    let value = (target.cmp_minor(&Version::new(3, 6, 0)).is_ge()).then(|| target.to_string());
    match storage_version::set(store.backend(), value.as_deref()) {
        Ok(()) => tracing::info!(new_storage_version = %target, "updated storage version"),
        Err(e) => tracing::warn!(error = %e, "failed to update storage version"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domains::version::cluster::Downgrade;

    fn at(cluster: Option<Version>) -> ClusterVersions {
        ClusterVersions {
            cluster,
            downgrade: Downgrade::default(),
        }
    }

    #[test]
    fn the_storage_version_follows_the_cluster_version_on_3_6_members_only() {
        let v36 = Version::new(3, 6, 0);
        let v35 = Version::new(3, 5, 0);
        assert_eq!(
            wanted(&at(Some(v36.clone())), Some(&v35), Release::Etcd36),
            Some(v36.clone())
        );
        assert_eq!(
            wanted(&at(Some(v36.clone())), Some(&v36), Release::Etcd36),
            None
        );
        assert_eq!(
            wanted(&at(Some(v35.clone())), Some(&v36), Release::Etcd36),
            Some(v35.clone())
        );
        assert_eq!(
            wanted(&at(Some(MIN_CLUSTER_VERSION)), None, Release::Etcd36),
            None
        );
        assert_eq!(wanted(&at(None), None, Release::Etcd36), None);
        assert_eq!(wanted(&at(Some(v36)), Some(&v35), Release::Etcd35), None);
    }
}
