//! The etcd release a member acts as, and the versions it reports: Status.version,
//! `/version`'s `etcdserver`, `etcd_server_version`, the peer version header and
//! `oxcd --version`'s `etcd Version:` line.
//!
//! oxcd follows etcd 3.6 (the patch named by [`ETCD_3_6`]); `--emulated-version=3.5`
//! makes a member an etcd 3.5 (reporting [`ETCD_3_5`], without 3.6's fields), so that a
//! cluster can be downgraded to 3.5 behaviour and back, member by member, as etcd's
//! downgrade guide does with binaries.

use oxcd_go::semver::Version;

use crate::machine::fatal::Fatal;

/// The etcd 3.6 patch oxcd follows and reports.
pub const ETCD_3_6: Version = Version::new(3, 6, 14);
/// The version a member acting as etcd 3.5 reports: above 3.5.13, the first release
/// Kubernetes sends watch progress requests to.
pub const ETCD_3_5: Version = Version::new(3, 5, 17);
/// The oldest cluster version a member can join (etcd's `MinClusterVersion`).
pub const MIN_CLUSTER_VERSION: Version = Version::new(3, 0, 0);

/// The etcd release a member acts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// etcd 3.5: no storage version, no 3.6 fields.
    Etcd35,
    /// etcd 3.6 (the default).
    Etcd36,
}

impl Release {
    /// The release `--emulated-version` names (`X.Y.0`); 3.6 for anything but 3.5.
    pub fn emulating(version: &Version) -> Release {
        if version.major == 3 && version.minor == 5 {
            Release::Etcd35
        } else {
            Release::Etcd36
        }
    }

    /// The server version it reports (`3.6.14`).
    pub fn server_version(self) -> Version {
        match self {
            Release::Etcd35 => ETCD_3_5,
            Release::Etcd36 => ETCD_3_6,
        }
    }

    /// Its major and minor with patch 0 (`3.6.0`): the cluster and storage version it
    /// brings.
    pub fn minor(self) -> Version {
        self.server_version().minor_release()
    }

    /// Err when the member must stop at this cluster version and downgrade state:
    /// etcd 3.6's `MustDetectDowngrade` (a cluster version above the release), or for
    /// a 3.5 member etcd 3.5's `mustDetectDowngrade`, which first lets a member of an
    /// enabled downgrade's target through and stops any other then.
    pub fn check_cluster(
        self,
        cluster: Option<&Version>,
        downgrade: &super::cluster::Downgrade,
    ) -> Result<(), Fatal> {
        if self == Release::Etcd35 && downgrade.enabled && !downgrade.target_version.is_empty() {
            let target = Version::parse(&downgrade.target_version).ok();
            if target.is_some_and(|t| t.cmp_minor(&self.server_version()).is_eq()) {
                return Ok(());
            }
            return Err(Fatal::NotDowngradeTarget {
                server: self.server_version().to_string(),
                target: downgrade.target_version.clone(),
            });
        }
        let Some(cluster) = cluster else {
            return Ok(());
        };
        if self.server_version().cmp_minor(cluster).is_lt() {
            return Err(Fatal::ServerTooOld {
                server: self.server_version().to_string(),
                cluster: cluster.to_string(),
            });
        }
        Ok(())
    }

    /// Whether it has etcd 3.6's additions (storage version, Status's new fields, the
    /// hash revision, the snapshot's version).
    pub fn has_3_6(self) -> bool {
        self == Release::Etcd36
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domains::version::cluster::Downgrade;

    fn v(s: &str) -> Version {
        Version::parse(s).expect("version")
    }

    #[test]
    fn stops_below_the_cluster_version_as_etcd_does() {
        let none = Downgrade::default();
        let to_3_5 = Downgrade {
            target_version: "3.5.0".into(),
            enabled: true,
        };
        // etcd 3.6: v3.6.14 server/etcdserver/version/downgrade.go MustDetectDowngrade.
        assert!(
            Release::Etcd36
                .check_cluster(Some(&v("3.6.0")), &none)
                .is_ok()
        );
        assert!(Release::Etcd36.check_cluster(None, &none).is_ok());
        assert!(
            Release::Etcd35
                .check_cluster(Some(&v("3.6.0")), &none)
                .is_err()
        );
        // etcd 3.5: v3.5.16 server/etcdserver/api/membership/downgrade.go
        // mustDetectDowngrade: a member of the target joins a cluster still at 3.6.
        assert!(
            Release::Etcd35
                .check_cluster(Some(&v("3.6.0")), &to_3_5)
                .is_ok()
        );
        let to_3_4 = Downgrade {
            target_version: "3.4.0".into(),
            enabled: true,
        };
        let e = Release::Etcd35
            .check_cluster(Some(&v("3.5.0")), &to_3_4)
            .expect_err("not the target");
        assert!(e.to_string().starts_with(
            "invalid downgrade; server version is not allowed to join when downgrade is enabled"
        ));
    }
}
