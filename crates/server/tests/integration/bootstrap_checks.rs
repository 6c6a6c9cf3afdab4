//! Starting members whose configuration or data does not fit the cluster: each fails
//! fast with a clear message, and the running cluster is unharmed.

use crate::common;

use std::time::{Duration, Instant};

use common::InProc;
use common::cluster::{cluster_of, configure, healthy_retry, leader_index, three};

/// Waits until every member's client URLs are published (each has served).
async fn all_published(m: &InProc) {
    let mut c = m.client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = c.member_list().await.expect("member list");
        if list.members().iter().all(|x| !x.client_urls().is_empty()) {
            return;
        }
        assert!(Instant::now() < deadline, "members did not publish");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_lost_its_data_dir_is_refused_with_either_cluster_state() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, peers) = three(dir.path()).await;
    all_published(&members[0]).await;
    let li = leader_index(&members).await;
    let f = (li + 1) % 3;
    let gone = members.remove(f);
    let data = gone.data_dir.clone();
    gone.stop().await;
    std::fs::remove_dir_all(&data).expect("wipe the data dir");
    let cluster = cluster_of(&peers);
    for existing in [false, true] {
        let c = cluster.clone();
        let err = InProc::try_start(data.clone(), move |s| {
            configure(s, f, &c);
            s.initial_cluster_existing = existing;
        })
        .await
        .err()
        .expect("a wiped member must not start");
        assert!(
            err.contains("has already been bootstrapped"),
            "existing={existing}: {err}"
        );
    }
    // The two others still serve.
    let mut c = members[0].client().await;
    c.put("still", "here", None).await.expect("put");
    // The way back: remove it, add it again at the same address, start it empty.
    let listed = c.member_list().await.expect("member list");
    let old = listed
        .members()
        .iter()
        .find(|m| m.peer_urls() == cluster[f].1.as_slice())
        .expect("the wiped member is listed")
        .id();
    // The strict checks want every voter left connected for etcd's 5 s health
    // interval, and the cluster may be younger than that.
    healthy_retry(|| {
        let mut c = c.clone();
        async move { c.member_remove(old).await }
    })
    .await
    .expect("remove the wiped member");
    healthy_retry(|| {
        let mut c = c.clone();
        let urls = cluster[f].1.clone();
        async move { c.member_add(urls, None).await }
    })
    .await
    .expect("add it again");
    let c2 = cluster.clone();
    let back = InProc::start(data.clone(), move |s| {
        configure(s, f, &c2);
        s.initial_cluster_existing = true;
    })
    .await;
    let got = back
        .client()
        .await
        .get("still", None)
        .await
        .expect("read on the member brought back");
    assert_eq!(got.kvs().len(), 1);
    members.push(back);
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joining_an_existing_cluster_needs_reachable_peers_and_membership() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Nobody answers at the peer URLs.
    let nobody = cluster_of(&[
        common::free_port(),
        common::free_port(),
        common::free_port(),
    ]);
    let err = InProc::try_start(dir.path().join("lonely"), move |s| {
        configure(s, 0, &nobody);
        s.initial_cluster_existing = true;
    })
    .await
    .err()
    .expect("no cluster to join");
    assert!(
        err.contains("cannot fetch cluster info from peer urls"),
        "{err}"
    );

    // A member the running cluster does not have (never added).
    let (members, peers) = three(dir.path()).await;
    let mut with_stranger = cluster_of(&peers);
    let stranger_port = common::free_port();
    with_stranger.push((
        "m3".into(),
        vec![format!("http://127.0.0.1:{stranger_port}")],
    ));
    let err = InProc::try_start(dir.path().join("m3"), move |s| {
        configure(s, 3, &with_stranger);
        s.initial_cluster_existing = true;
    })
    .await
    .err()
    .expect("not a member");
    // etcd's check: --initial-cluster must name the running members exactly (a new
    // member is added with `member add` first).
    assert!(err.contains("member count is unequal"), "{err}");
    for m in members {
        m.stop().await;
    }
}
