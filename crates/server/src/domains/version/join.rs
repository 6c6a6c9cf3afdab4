//! The check a member joining a running cluster with no data runs before it starts,
//! as etcd 3.6 does (`v3.6.14:server/etcdserver/cluster_util.go`
//! `isCompatibleWithCluster`, `isCompatibleWithVers`, `allowedVersionRange`): the
//! cluster version the other members report must lie between 3.0 and this member's
//! release, or, while a downgrade is enabled (any member's `/downgrade/enabled`), be
//! exactly one minor version above it. At least one member must report a cluster
//! version.
//!
//! Three deviations, all kinder than etcd:
//! - While a downgrade is enabled etcd allows only the version one minor above the
//!   joining member's, so a new member of the target release is refused once the
//!   cluster version has fallen to it; oxcd allows `[3.0, release + 1 minor]`.
//! - Where etcd gives up at once on members whose cluster version is not decided yet,
//!   oxcd asks again for a moment: a cluster that has just elected its first leader
//!   decides its version within one round of the version loop.
//! - A voter the others need for a quorum does not wait for their `/downgrade/enabled`,
//!   which cannot answer before it runs: it takes etcd's answer after the timeout at
//!   once (not enabled).

use std::time::Duration;

use oxcd_api::oxcdpb::MemberInfo;
use oxcd_go::semver::Version;

use super::release::{MIN_CLUSTER_VERSION, Release};
use crate::peer::PeerDialer;
use crate::peer::versions::VersionAsker;

/// How often, and how far apart, the members are asked again while none has decided:
/// long enough to outlast a leader's round of the version loop
/// ([`super::monitor::INTERVAL`]) that began before this member was added and whose
/// first decision asks this member too
/// ([`super::monitor::FIRST_DECISION_ASK_TIMEOUT`], twice).
const UNDECIDED_RETRIES: usize = 25;
const UNDECIDED_PAUSE: Duration = Duration::from_millis(300);

/// What the other members' cluster versions say about joining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every member that answered is in range, and one at least did.
    Compatible,
    /// A member's cluster version is out of range.
    Incompatible,
    /// No member reported a cluster version.
    Undecided,
}

/// The cluster versions a member of `release` may join: `[3.0.0, release]`, or up to
/// one minor above it while a downgrade is enabled.
pub fn allowed_range(release: Release, downgrading: bool) -> (Version, Version) {
    let local = release.minor();
    if downgrading {
        (
            MIN_CLUSTER_VERSION,
            Version::new(local.major, local.minor + 1, 0),
        )
    } else {
        (MIN_CLUSTER_VERSION, local)
    }
}

/// The verdict on the cluster versions `reported` by the other members (member id, its
/// cluster version if it answered and has one).
pub fn judge(reported: &[(u64, Option<Version>)], min: &Version, max: &Version) -> Verdict {
    let mut verdict = Verdict::Undecided;
    for (id, cluster) in reported {
        let Some(cluster) = cluster else { continue };
        if cluster < min {
            tracing::warn!(
                remote_member_id = %format!("{id:x}"),
                remote_member_cluster_version = %cluster,
                minimum_cluster_version_supported = %min,
                "cluster version of remote member is not compatible; too low"
            );
            return Verdict::Incompatible;
        }
        if cluster > max {
            tracing::warn!(
                remote_member_id = %format!("{id:x}"),
                remote_member_cluster_version = %cluster,
                maximum_cluster_version_supported = %max,
                "cluster version of remote member is not compatible; too high"
            );
            return Verdict::Incompatible;
        }
        verdict = Verdict::Compatible;
    }
    verdict
}

/// Whether the voters of `members` other than `me` make a quorum without it. When they
/// do not (a second voter added to a one-member cluster), their `/downgrade/enabled`
/// cannot answer before this member runs: etcd asks anyway and, after its request
/// timeout (7 s by default), takes the downgrade as not enabled; oxcd takes the same
/// answer at once.
fn others_have_quorum(members: &[MemberInfo], me: u64) -> bool {
    let voters = members.iter().filter(|m| !m.is_learner);
    let (all, others) = voters.fold((0usize, 0usize), |(all, others), m| {
        (all + 1, others + usize::from(m.id != me))
    });
    others > all / 2
}

/// Whether a member with id `me`, of the release `dialer` announces, may join the
/// running cluster of `members`, asking them with `dialer`, each within `timeout`.
pub async fn compatible_with_cluster(
    members: &[MemberInfo],
    me: u64,
    dialer: &PeerDialer,
    timeout: Duration,
) -> bool {
    let release = dialer.release();
    let mut asker = VersionAsker::new(dialer.clone());
    let others: Vec<&MemberInfo> = members.iter().filter(|m| m.id != me).collect();
    let answerable = others_have_quorum(members, me);
    if !answerable {
        tracing::info!(
            "the other members need this one for a quorum: not asking whether a downgrade is enabled (a linearizable read there cannot complete), taking it as not enabled"
        );
    }
    for attempt in 0..=UNDECIDED_RETRIES {
        let mut downgrading = false;
        for m in others.iter().filter(|_| answerable) {
            match asker.downgrade_enabled(&m.peer_urls, timeout).await {
                Ok(enabled) => {
                    downgrading = enabled;
                    break;
                }
                Err(e) => tracing::warn!(
                    remote_member_id = %format!("{:x}", m.id),
                    error = %e,
                    "failed to get downgrade enabled status"
                ),
            }
        }
        let mut reported = Vec::new();
        for m in &others {
            let versions = asker.versions(m.id, &m.peer_urls, timeout).await;
            reported.push((m.id, versions.and_then(|v| v.cluster)));
        }
        let (min, max) = allowed_range(release, downgrading);
        match judge(&reported, &min, &max) {
            Verdict::Compatible => return true,
            Verdict::Incompatible => return false,
            Verdict::Undecided if attempt < UNDECIDED_RETRIES => {
                tokio::time::sleep(UNDECIDED_PAUSE).await
            }
            Verdict::Undecided => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Option<Version> {
        Version::parse(s).ok()
    }

    #[test]
    fn ranges_as_etcd() {
        let (min, max) = allowed_range(Release::Etcd36, false);
        assert_eq!(
            (min.to_string(), max.to_string()),
            ("3.0.0".into(), "3.6.0".into())
        );
        let (min, max) = allowed_range(Release::Etcd35, true);
        assert_eq!(
            (min.to_string(), max.to_string()),
            ("3.0.0".into(), "3.6.0".into())
        );
    }

    #[test]
    fn judges_as_etcd() {
        // v3.6.14 server/etcdserver/cluster_util_test.go TestIsCompatibleWithVers's cases.
        let (min, max) = allowed_range(Release::Etcd36, false);
        assert_eq!(
            judge(&[(1, v("3.6.0")), (2, v("3.5.0"))], &min, &max),
            Verdict::Compatible
        );
        assert_eq!(judge(&[(1, v("3.7.0"))], &min, &max), Verdict::Incompatible);
        assert_eq!(judge(&[(1, v("2.3.0"))], &min, &max), Verdict::Incompatible);
        assert_eq!(
            judge(&[(1, None), (2, None)], &min, &max),
            Verdict::Undecided
        );
        assert_eq!(judge(&[], &min, &max), Verdict::Undecided);
        // A 3.5 member joins a cluster at 3.6 only while it downgrades.
        let (min, max) = allowed_range(Release::Etcd35, false);
        assert_eq!(judge(&[(1, v("3.6.0"))], &min, &max), Verdict::Incompatible);
        let (min, max) = allowed_range(Release::Etcd35, true);
        assert_eq!(judge(&[(1, v("3.6.0"))], &min, &max), Verdict::Compatible);
        // Where etcd refuses (its range is then [3.6, 3.6]): the cluster has fallen.
        assert_eq!(judge(&[(1, v("3.5.0"))], &min, &max), Verdict::Compatible);
        assert_eq!(judge(&[(1, v("3.7.0"))], &min, &max), Verdict::Incompatible);
    }

    #[test]
    fn a_voter_the_others_need_does_not_ask_them() {
        let member = |id, is_learner| MemberInfo {
            id,
            is_learner,
            ..Default::default()
        };
        // The second voter of a one-member cluster.
        assert!(!others_have_quorum(
            &[member(1, false), member(2, false)],
            2
        ));
        // A learner: the voters are untouched.
        assert!(others_have_quorum(&[member(1, false), member(2, true)], 2));
        // A fourth voter: three of four are a quorum.
        let four = [1, 2, 3, 4].map(|id| member(id, false));
        assert!(others_have_quorum(&four, 4));
        // A third voter while one of two others is a learner.
        let mixed = [member(1, false), member(2, true), member(3, false)];
        assert!(!others_have_quorum(&mixed, 3));
    }
}
