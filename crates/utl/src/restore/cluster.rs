//! The new cluster a restore bootstraps, from etcdutl's flags, checked as etcdutl checks
//! them (etcd's `VerifyBootstrap`, with its messages): the member being restored must be
//! in `--initial-cluster` with exactly its `--initial-advertise-peer-urls`, and no URL
//! may appear twice. Ids are etcd's, so the same flags give the same ids as etcd's
//! restore.

use std::path::Path;

use oxcd_config::flags::{self, value};
use oxcd_config::settings::Settings;
use oxcd_server::domains::membership::ids;

/// What the restore's flags say about the new cluster.
#[derive(Debug, Clone)]
pub struct ClusterFlags<'a> {
    /// `--name`.
    pub name: &'a str,
    /// `--initial-advertise-peer-urls` (comma-separated).
    pub peer_urls: &'a str,
    /// `--initial-cluster`.
    pub initial_cluster: &'a str,
    /// `--initial-cluster-token`.
    pub token: &'a str,
}

/// The settings a new member of the cluster `f` describes would start with: what
/// [`oxcd_server::start::bootstrap::create_member_wal`] creates its WAL from. Members are in
/// id order (as etcd's bootstrap entries are), so restores given the members in
/// different orders still write the same log.
pub fn settings(f: &ClusterFlags<'_>, data_dir: &Path, wal_dir: &Path) -> Result<Settings, String> {
    let mut advertised = Vec::new();
    for u in f.peer_urls.split(',') {
        advertised.push(value::parse_url(u.trim())?.text());
    }
    advertised.sort();
    let mut members = flags::parse_initial_cluster(f.initial_cluster)?;
    flags::verify_bootstrap(f.name, &members, &advertised)?;
    members.sort_by_key(|(_, urls)| ids::member_id(urls, f.token));
    let mut s = Settings::new(f.name, data_dir.to_path_buf());
    s.wal_dir = Some(wal_dir.to_path_buf());
    s.peer_urls = advertised;
    s.initial_cluster = members;
    s.initial_cluster_token = f.token.to_string();
    // As etcd's restore: members are known by their peer URLs only; each publishes its
    // client URLs once it serves.
    s.advertise_client_urls = Vec::new();
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags<'a>(name: &'a str, peer: &'a str, cluster: &'a str) -> ClusterFlags<'a> {
        ClusterFlags {
            name,
            peer_urls: peer,
            initial_cluster: cluster,
            token: "etcd-cluster",
        }
    }

    #[test]
    fn etcdutls_checks_and_messages() {
        let dir = Path::new("/d");
        let ok = settings(
            &flags(
                "b",
                "http://127.0.0.1:2",
                "a=http://127.0.0.1:1,b=http://127.0.0.1:2",
            ),
            dir,
            dir,
        )
        .expect("valid");
        assert_eq!(ok.initial_cluster.len(), 2);
        let err = |n, p, c| settings(&flags(n, p, c), dir, dir).expect_err("refused");
        assert_eq!(
            err(
                "foo",
                "http://localhost:2380",
                "default=http://localhost:2380"
            ),
            "couldn't find local name \"foo\" in the initial cluster configuration"
        );
        assert_eq!(
            err("a", "http://127.0.0.1:9", "a=http://127.0.0.1:1"),
            "--initial-cluster has a=http://127.0.0.1:1 but missing from --initial-advertise-peer-urls=http://127.0.0.1:9 (resolved urls: \"http://127.0.0.1:9\" != \"http://127.0.0.1:1\")"
        );
        assert_eq!(
            err("a", "foo", "a=http://127.0.0.1:1"),
            "URL scheme must be http, https, unix, or unixs: foo"
        );
        assert_eq!(
            err(
                "a",
                "http://127.0.0.1:1",
                "a=http://127.0.0.1:1,b=http://127.0.0.1:1"
            ),
            "initial cluster a=http://127.0.0.1:1,b=http://127.0.0.1:1 has duplicate url"
        );
    }
}
