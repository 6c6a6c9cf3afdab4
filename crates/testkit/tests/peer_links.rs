//! Peer connections that stall without closing (a silent drop in the network, a dead NAT
//! entry) are noticed and replaced: three real `oxcd` processes behind the testkit's
//! proxies, whose open connections to and from one member stop forwarding bytes.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use oxcd_testkit::cluster::{Cluster, ClusterConfig};

fn oxcd() -> PathBuf {
    oxcd_testkit::process::built_oxcd()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_peer_connections_stall_reconnects_and_serves_linearizable_reads() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cluster = Cluster::start(&ClusterConfig {
        binary: oxcd(),
        members: 3,
        dir: dir.path().to_path_buf(),
        extra_flags: Vec::new(),
        tls: false,
        mixed: None,
    })
    .await
    .expect("cluster starts");
    let mut leader = None;
    for _ in 0..100 {
        leader = cluster.leader().await;
        if leader.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let leader = leader.expect("a leader");
    let follower = (leader + 1) % 3;
    let urls = cluster.client_urls();
    let mut at_leader = etcd_client::Client::connect([urls[leader].clone()], None)
        .await
        .expect("connect to the leader");
    let mut at_follower = etcd_client::Client::connect([urls[follower].clone()], None)
        .await
        .expect("connect to the follower");
    at_follower
        .put("before", "1", None)
        .await
        .expect("put before");

    cluster.freeze_open(follower);
    at_leader
        .put("during", "2", None)
        .await
        .expect("the leader and the other follower make a quorum");

    // The follower's raft traffic sat in stalled connections: it reads the new key only
    // once both sides have given up on them and dialed again.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got =
            tokio::time::timeout(Duration::from_secs(2), at_follower.get("during", None)).await;
        if let Ok(Ok(r)) = &got
            && r.kvs().first().map(|kv| kv.value()) == Some(b"2".as_slice())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the follower never read the key written while its peer connections stalled: {got:?}"
        );
    }
    at_follower
        .put("after", "3", None)
        .await
        .expect("a write through the follower");
    cluster.heal();
}
