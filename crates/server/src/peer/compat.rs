//! The version headers of peer traffic and the check a member runs on them, as etcd's
//! rafthttp does (`v3.6.14:server/etcdserver/api/rafthttp/util.go`
//! `checkVersionCompatibility`, `http.go` `checkClusterCompatibilityFromHeader`).
//!
//! Every request a member sends a peer carries its server version and the oldest
//! cluster version it can join. The receiver refuses a sender whose server version is
//! below its own minimum cluster version ("remote version is too low") or whose minimum
//! cluster version is above its own server version ("local version is too low"); both
//! compare major.minor only. The refusal is [`super::Refusal::IncompatibleVersion`].
//!
//! Where etcd reads a missing header as version 2.0.0 (and so refuses it), oxcd admits a
//! sender without headers: oxcd builds before the headers existed sent none, and a
//! rolling upgrade from them must keep its quorum.

use oxcd_go::semver::Version;

use crate::domains::version::release::{MIN_CLUSTER_VERSION, Release};

/// Metadata key carrying the sender's server version (`3.6.14`).
pub const SERVER_VERSION_KEY: &str = "x-server-version";
/// Metadata key carrying the oldest cluster version the sender can join (`3.0.0`).
pub const MIN_CLUSTER_VERSION_KEY: &str = "x-min-cluster-version";

/// The version headers a member of `release` sends.
pub fn headers(release: Release) -> [(&'static str, String); 2] {
    [
        (SERVER_VERSION_KEY, release.server_version().to_string()),
        (MIN_CLUSTER_VERSION_KEY, MIN_CLUSTER_VERSION.to_string()),
    ]
}

/// Why a peer's versions are refused (etcd's texts).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionMismatch {
    /// The sender's server version is below our minimum cluster version.
    #[error("remote version is too low: remote[{remote_id}]={remote}, local={local}")]
    RemoteTooLow {
        /// The sender's member id (hex).
        remote_id: String,
        /// Its server version.
        remote: String,
        /// Ours.
        local: String,
    },
    /// The sender needs a cluster version above our server version.
    #[error("local version is too low: remote[{remote_id}]={remote}, local={local}")]
    LocalTooLow {
        /// The sender's member id (hex).
        remote_id: String,
        /// Its server version.
        remote: String,
        /// Ours.
        local: String,
    },
}

/// Checks a sender's headers (`None` where absent or unparsable) against `local`.
pub fn check(
    remote_id: u64,
    server: Option<&str>,
    min_cluster: Option<&str>,
    local: Release,
) -> Result<(), VersionMismatch> {
    let Some(server) = server.and_then(|s| Version::parse(s).ok()) else {
        return Ok(());
    };
    let local_server = local.server_version();
    if server.cmp_minor(&MIN_CLUSTER_VERSION).is_lt() {
        return Err(VersionMismatch::RemoteTooLow {
            remote_id: format!("{remote_id:x}"),
            remote: server.to_string(),
            local: local_server.to_string(),
        });
    }
    let min_cluster = min_cluster
        .and_then(|s| Version::parse(s).ok())
        .unwrap_or(MIN_CLUSTER_VERSION);
    if min_cluster.cmp_minor(&local_server).is_gt() {
        return Err(VersionMismatch::LocalTooLow {
            remote_id: format!("{remote_id:x}"),
            remote: server.to_string(),
            local: local_server.to_string(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_every_release_and_old_builds() {
        for local in [Release::Etcd35, Release::Etcd36] {
            for remote in [Release::Etcd35, Release::Etcd36] {
                let [(_, s), (_, m)] = headers(remote);
                assert_eq!(check(1, Some(&s), Some(&m), local), Ok(()));
            }
            assert_eq!(check(1, None, None, local), Ok(()));
        }
    }

    #[test]
    fn refuses_as_etcd_does() {
        let e = check(0xa, Some("2.3.8"), Some("2.0.0"), Release::Etcd36).unwrap_err();
        assert_eq!(
            e.to_string(),
            "remote version is too low: remote[a]=2.3.8, local=3.6.14"
        );
        let e = check(0xb, Some("3.8.0"), Some("3.7.0"), Release::Etcd36).unwrap_err();
        assert_eq!(
            e.to_string(),
            "local version is too low: remote[b]=3.8.0, local=3.6.14"
        );
        // A patch above ours in the minimum is the same minor: admitted.
        assert_eq!(
            check(1, Some("3.6.20"), Some("3.6.20"), Release::Etcd36),
            Ok(())
        );
    }
}
