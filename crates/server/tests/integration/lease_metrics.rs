//! etcd's lease counts (`etcd_debugging_lease_granted_total`, `_revoked_total`,
//! `_renewed_total`, `_ttl_total`, `etcd_debugging_server_lease_expired_total`; etcd's
//! `server/lease/metrics.go` and `server/etcdserver/metrics.go`) after the same lease
//! workload on a fresh etcd 3.5.16 and a fresh oxcd: the same values, the TTL
//! histogram's buckets included.

use std::time::Duration;

use etcd_client::Client;

use crate::common::etcd::on_etcd_then_oxcd;
use crate::common::scrape;

/// The lines of the lease families in the scrape of `base` (`http://host:port`).
async fn lease_lines(base: &str) -> Vec<String> {
    let mut lines: Vec<String> = scrape(base)
        .await
        .lines()
        .filter(|l| {
            l.starts_with("etcd_debugging_lease_") || l.starts_with("etcd_debugging_server_lease_")
        })
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// Grants, a keepalive, a revocation and an expiry; the lease lines after them.
async fn after_workload(base: &str) -> Vec<String> {
    let mut c = Client::connect([base], None).await.expect("connect");
    let mut ids = Vec::new();
    for ttl in [10, 100, 5000] {
        ids.push(c.lease_grant(ttl, None).await.expect("grant").id());
    }
    let (mut keeper, mut answers) = c.lease_keep_alive(ids[0]).await.expect("keepalive");
    keeper.keep_alive().await.expect("send keepalive");
    answers
        .message()
        .await
        .expect("keepalive answer")
        .expect("an answer");
    c.lease_revoke(ids[1]).await.expect("revoke");
    // A lease of the shortest TTL, left to expire: the leader revokes it.
    c.lease_grant(2, None).await.expect("grant");
    // Both count the expiry once the leader's revocation has returned, a moment after
    // the lease is gone: wait for the count itself, not for the lease to be gone.
    let expired = "etcd_debugging_server_lease_expired_total 1";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        if scrape(base).await.lines().any(|l| l == expired) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lease never expired"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    lease_lines(base).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_counts_match_etcds_after_the_same_workload() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (theirs, ours) =
        on_etcd_then_oxcd(dir.path(), |url| async move { after_workload(&url).await }).await;
    assert!(
        theirs
            .iter()
            .any(|l| l == "etcd_debugging_lease_granted_total 4"),
        "{theirs:#?}"
    );
    assert_eq!(ours, theirs);
}
