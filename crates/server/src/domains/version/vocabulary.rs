//! The cluster version decides the log's vocabulary ([`crate::machine::vocabulary`]):
//! - at 3.5 (or below) the cluster may take etcd 3.5 members (it reports the version
//!   they check when they join), so the log is in etcd's vocabulary and oxcd's
//!   extensions (replicated keepalives, conditional lease expiry, member updates as
//!   normal entries) are off: the leader proposes only what etcd 3.5 applies;
//! - at 3.6 every member runs a 3.6 release, and when none of them is an etcd member
//!   (no etcd peer has attached its streams here), oxcd's extensions switch on.
//!
//! The leader appends the switch ([`align`]); every member reads what follows in the new
//! vocabulary. A cluster goes to 3.5 by etcd's downgrade (`etcdctl downgrade enable
//! 3.5`, or every member started with `--emulated-version=3.5` from the start), and back
//! to 3.6 when the downgrade is cancelled and every member runs 3.6.

use oxcd_go::semver::Version;

use super::handles::VersionHandles;
use crate::machine::vocabulary::Vocabulary;

/// The vocabulary the cluster version asks for, if it differs from `now`; `etcd_peers`:
/// an etcd member is attached.
pub fn wanted(cluster: Option<&Version>, now: Vocabulary, etcd_peers: bool) -> Option<Vocabulary> {
    let cluster = cluster?;
    let takes_etcd_3_5 = (cluster.major, cluster.minor) <= (3, 5);
    match now {
        Vocabulary::Oxcd if takes_etcd_3_5 => Some(Vocabulary::Etcd),
        Vocabulary::Etcd if !takes_etcd_3_5 && !etcd_peers => Some(Vocabulary::Oxcd),
        _ => None,
    }
}

/// On the leader: appends the switch the cluster version `cluster` asks for, if any.
pub async fn align(handles: &VersionHandles, cluster: Option<&Version>) {
    let now = handles.vocabulary.get();
    let etcd_peers = !handles.etcd_streams.peers().is_empty();
    let Some(to) = wanted(cluster, now, etcd_peers) else {
        return;
    };
    tracing::info!(
        cluster_version = %cluster.map(Version::major_minor).unwrap_or_default(),
        from = ?now,
        to = ?to,
        "the cluster version asks for another log vocabulary: switching"
    );
    if let Err(e) = handles.writes.switch_vocabulary(to).await {
        tracing::warn!(error = %e, "failed to switch the log's vocabulary");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).expect("version")
    }

    #[test]
    fn the_cluster_version_decides() {
        let (oxcd, etcd) = (Vocabulary::Oxcd, Vocabulary::Etcd);
        assert_eq!(wanted(None, oxcd, false), None);
        assert_eq!(wanted(Some(&v("3.5.0")), oxcd, false), Some(etcd));
        assert_eq!(wanted(Some(&v("3.4.0")), oxcd, false), Some(etcd));
        assert_eq!(wanted(Some(&v("3.5.0")), etcd, false), None);
        assert_eq!(wanted(Some(&v("3.6.0")), etcd, false), Some(oxcd));
        assert_eq!(wanted(Some(&v("3.6.0")), etcd, true), None);
        assert_eq!(wanted(Some(&v("3.6.0")), oxcd, false), None);
    }
}
