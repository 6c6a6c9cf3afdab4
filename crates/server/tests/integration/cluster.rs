//! Three members over the real peer transport: replication, writes through followers,
//! linearizable reads on followers, losing the leader, and a member rejoining as itself.

use crate::common;

use std::time::{Duration, Instant};

use common::InProc;
use common::cluster::{cluster_of, configure, converge, leader_index, three, three_with};
use etcd_client::GetOptions;
use oxcd_server::peer::transport::PeerFaults;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_replicate_and_survive_losing_the_leader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, peers) = three(dir.path()).await;
    // Same cluster, distinct members, all listed.
    let mut ids = Vec::new();
    let mut cluster_ids = Vec::new();
    for m in &members {
        let mut c = m.client().await;
        let st = c.status().await.expect("status");
        let h = st.header().expect("header");
        ids.push(h.member_id());
        cluster_ids.push(h.cluster_id());
        assert_eq!(c.member_list().await.expect("members").members().len(), 3);
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "distinct member ids");
    assert!(
        cluster_ids.iter().all(|c| *c == cluster_ids[0]),
        "one cluster id: {cluster_ids:?}"
    );

    // Each member publishes its client URLs through raft; every member lists them all.
    let deadline = Instant::now() + Duration::from_secs(10);
    for m in &members {
        let mut c = m.client().await;
        loop {
            let list = c.member_list().await.expect("member list");
            let urls: Vec<String> = list
                .members()
                .iter()
                .flat_map(|x| x.client_urls().to_vec())
                .collect();
            if urls.len() == 3 {
                let mut expected: Vec<String> = members.iter().map(|x| x.endpoint()).collect();
                let mut got = urls.clone();
                expected.sort();
                got.sort();
                assert_eq!(got, expected);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "client URLs not published: {urls:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    // Writes through any member, linearizable reads on every member.
    for (i, m) in members.iter().enumerate() {
        let mut c = m.client().await;
        c.put(format!("k{i}"), format!("v{i}"), None)
            .await
            .expect("put through member");
    }
    for m in &members {
        let mut c = m.client().await;
        let r = c
            .get("k", Some(GetOptions::new().with_prefix()))
            .await
            .expect("linearizable read");
        assert_eq!(r.count(), 3, "every member sees every write");
    }

    // Lose the leader: the other two elect a new one and keep serving.
    let li = leader_index(&members).await;
    let old = members.remove(li);
    let old_dir = old.data_dir.clone();
    old.stop().await;
    let started = Instant::now();
    let mut c = members[0].client().await;
    common::first_write_after(&mut c, "after", started).await;
    eprintln!(
        "writes resumed {:?} after stopping the leader",
        started.elapsed()
    );
    let mut c1 = members[1].client().await;
    assert_eq!(
        c1.get("after", None).await.expect("get").kvs()[0].value(),
        b"x"
    );

    // The old leader comes back with its data and catches up as itself.
    let cluster = cluster_of(&peers);
    let back = InProc::start(old_dir, move |s| configure(s, li, &cluster)).await;
    let mut cb = back.client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = cb
            .get("after", Some(GetOptions::new().with_serializable()))
            .await
            .expect("get");
        if r.count() == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "restarted member did not catch up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let st = cb.status().await.expect("status");
    assert!(
        ids.contains(&st.header().expect("h").member_id()),
        "rejoined as itself"
    );
    back.stop().await;
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_from_another_cluster_or_release_is_refused() {
    use oxcd_api::oxcdpb::RaftEnvelope;
    use oxcd_api::oxcdpb::peer_client::PeerClient;
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, peers) = three(dir.path()).await;
    let mut client = PeerClient::connect(format!("http://127.0.0.1:{}", peers[0]))
        .await
        .expect("connect peer port");
    // A raft stream with these metadata.
    let raft_request = |meta: &[(&'static str, &str)]| {
        let mut req = tonic::Request::new(tokio_stream::iter(vec![RaftEnvelope {
            message: Vec::new(),
        }]));
        for (k, v) in meta {
            req.metadata_mut().insert(*k, v.parse().expect("meta"));
        }
        req
    };
    let foreign = [("x-oxcd-cluster-id", "deadbeef"), ("x-oxcd-from", "1")];
    let err = client
        .raft(raft_request(&foreign))
        .await
        .expect_err("must be refused");
    assert_eq!(
        (err.code(), err.message()),
        (
            tonic::Code::FailedPrecondition,
            "etcdserver: cluster ID mismatch"
        )
    );
    // A sender too old for us (etcd reads its version headers before the cluster id:
    // v3.6.14 rafthttp/http.go checkClusterCompatibilityFromHeader, util.go
    // checkVersionCompatibility) is refused with etcd's errIncompatibleVersion.
    for (server, min_cluster) in [("2.3.8", "2.0.0"), ("3.8.0", "3.7.0")] {
        let req = raft_request(&[
            foreign[0],
            foreign[1],
            ("x-server-version", server),
            ("x-min-cluster-version", min_cluster),
        ]);
        let err = client.raft(req).await.expect_err("must be refused");
        assert_eq!(
            (err.code(), err.message()),
            (tonic::Code::FailedPrecondition, "incompatible version"),
            "{server}"
        );
    }
    // No client request is served on the peer port (etcd 3.6: v3.6.14
    // server/embed/etcd.go servePeers serves only the peer HTTP handler).
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{}", peers[0]))
        .expect("url")
        .connect()
        .await
        .expect("connect peer port");
    let err = oxcd_api::etcdserverpb::kv_client::KvClient::new(channel)
        .range(oxcd_api::etcdserverpb::RangeRequest {
            key: b"still".to_vec(),
            ..Default::default()
        })
        .await
        .expect_err("KV on the peer port");
    assert_eq!(err.code(), tonic::Code::Unimplemented, "{err}");
    // The cluster is unharmed.
    let mut c = members[1].client().await;
    c.put("still", "fine", None).await.expect("put");
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn move_leader_like_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, _) = three(dir.path()).await;
    let li = leader_index(&members).await;
    let mut ids = Vec::new();
    for m in &members {
        let mut c = m.client().await;
        ids.push(
            c.status()
                .await
                .expect("status")
                .header()
                .expect("h")
                .member_id(),
        );
    }
    let follower = (li + 1) % 3;
    // Only the leader moves leadership; only to a member.
    let mut fc = members[follower].client().await;
    let e = fc.move_leader(ids[li]).await.expect_err("follower refuses");
    assert!(e.to_string().contains("etcdserver: not leader"), "{e}");
    let mut lc = members[li].client().await;
    let e = lc.move_leader(0x1234).await.expect_err("unknown target");
    assert!(
        e.to_string().contains("etcdserver: bad leader transferee"),
        "{e}"
    );
    lc.move_leader(ids[follower]).await.expect("move leader");
    assert_eq!(leader_index(&members).await, follower);
    // etcdctl finds the leader among its endpoints and prints what it did.
    let eps = members
        .iter()
        .map(|m| m.addr.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let target = (follower + 1) % 3;
    let out = std::process::Command::new("/usr/bin/etcdctl")
        .arg(format!("--endpoints={eps}"))
        .args(["move-leader", &format!("{:x}", ids[target])])
        .output()
        .expect("etcdctl (apt-get install -y etcd-client)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text,
        format!(
            "Leadership transferred from {:x} to {:x}\n",
            ids[follower], ids[target]
        )
    );
    assert_eq!(leader_index(&members).await, target);
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_endpoint_commands_with_url_endpoints_and_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, _) = three(dir.path()).await;
    let li = leader_index(&members).await;
    members[li]
        .client()
        .await
        .put("k", "v", None)
        .await
        .expect("put");
    // etcdctl 3.4 dials a URL endpoint with the whole URL as the HTTP/2 authority.
    let etcdctl = |args: &[&str]| {
        let out = std::process::Command::new("/usr/bin/etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", members[0].endpoint()))
            .args(args)
            .output()
            .expect("etcdctl (apt-get install -y etcd-client)");
        assert!(out.status.success(), "etcdctl {args:?}: {out:?}");
        // etcdctl 3.4 prints health to stderr, the rest to stdout.
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let status = etcdctl(&["endpoint", "status", "--cluster"]);
    let lines: Vec<&str> = status.lines().collect();
    assert_eq!(lines.len(), 3, "{status}");
    for m in &members {
        assert!(status.contains(&m.endpoint()), "{status}");
    }
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains(", true, false,"))
            .count(),
        1,
        "one leader: {status}"
    );
    let hashes = etcdctl(&["endpoint", "hashkv", "--cluster"]);
    let values: Vec<&str> = hashes
        .lines()
        .filter_map(|l| l.rsplit(", ").next())
        .collect();
    assert_eq!(values.len(), 3, "{hashes}");
    assert!(values.iter().all(|h| *h == values[0]), "{hashes}");
    let health = etcdctl(&["endpoint", "health", "--cluster"]);
    assert_eq!(health.matches("is healthy").count(), 3, "{health}");
    for m in members {
        m.stop().await;
    }
}

/// Status of every member: (member id, leader it sees, term).
async fn statuses(members: &[InProc]) -> Vec<(u64, u64, u64)> {
    let mut out = Vec::new();
    for m in members {
        let mut c = m.client().await;
        let st = c.status().await.expect("status");
        out.push((
            st.header().expect("h").member_id(),
            st.leader(),
            st.raft_term(),
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_leader_yields_to_the_majority_and_rejoins_quietly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = PeerFaults::default();
    let (members, _) = three_with(dir.path(), Some(faults.clone())).await;
    partitioned_leader_yields(members, faults).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitioned_leader_yields_with_peer_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = PeerFaults::default();
    let (members, _) = common::cluster::three_peer_tls(dir.path(), Some(faults.clone())).await;
    partitioned_leader_yields(members, faults).await;
}

/// The leader cut off from both followers: the majority elects and serves, the old
/// leader refuses linearizable reads, and after the heal it rejoins without an election.
async fn partitioned_leader_yields(members: Vec<InProc>, faults: PeerFaults) {
    let li = leader_index(&members).await;
    let ids: Vec<u64> = statuses(&members).await.iter().map(|s| s.0).collect();
    let majority: Vec<usize> = (0..3).filter(|i| *i != li).collect();
    members[li]
        .client()
        .await
        .put("before", "1", None)
        .await
        .expect("put");
    // Cut the leader off from both followers.
    for &f in &majority {
        faults.cut(ids[li], ids[f]);
    }
    let cut_at = Instant::now();
    // The old leader, alone, stops serving linearizable requests (bounded failure).
    let old = members[li].client().await;
    let minority_read = tokio::spawn(async move {
        let mut old = old;
        let t = Instant::now();
        let r = old.get("before", None).await;
        (r.is_err(), t.elapsed())
    });
    // The majority elects and serves.
    let mut mc = members[majority[0]].client().await;
    let elected = common::first_write_after(&mut mc, "during", cut_at).await;
    let (failed, took) = minority_read.await.expect("join");
    assert!(
        failed,
        "a linearizable read on the isolated old leader must fail"
    );
    // Only a hang fails here; how long the failure takes is printed below.
    assert!(took < Duration::from_secs(30), "the failure took {took:?}");
    let after: Vec<(u64, u64, u64)> = statuses(&members).await;
    let (new_leader, new_term) = (after[majority[0]].1, after[majority[0]].2);
    assert_ne!(new_leader, ids[li]);
    eprintln!(
        "partition: majority wrote again after {elected:?}; minority read failed after {took:?}"
    );
    // Heal: the old leader steps down and catches up without disturbing the new one.
    faults.heal();
    converge(&members.iter().collect::<Vec<_>>(), "during").await;
    let healed = statuses(&members).await;
    for (id, leader, term) in &healed {
        assert_eq!(
            (*leader, *term),
            (new_leader, new_term),
            "member {id:x} after heal"
        );
    }
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn isolated_follower_rejoins_without_an_election() {
    let dir = tempfile::tempdir().expect("tempdir");
    let faults = PeerFaults::default();
    let (members, _) = three_with(dir.path(), Some(faults.clone())).await;
    let li = leader_index(&members).await;
    let st = statuses(&members).await;
    let (leader, term) = (st[li].0, st[li].2);
    let f = (li + 1) % 3;
    let other = (li + 2) % 3;
    faults.cut(st[f].0, st[li].0);
    faults.cut(st[f].0, st[other].0);
    let mut lc = members[li].client().await;
    for i in 0..20 {
        lc.put(format!("while-isolated/{i}"), "x", None)
            .await
            .expect("majority writes");
    }
    // Longer than several election timeouts: the isolated follower's pre-votes fail.
    tokio::time::sleep(Duration::from_millis(800)).await;
    faults.heal();
    converge(&members.iter().collect::<Vec<_>>(), "while-isolated/19").await;
    for (id, l, t) in statuses(&members).await {
        assert_eq!(
            (l, t),
            (leader, term),
            "member {id:x}: rejoining must not force an election"
        );
    }
    for m in members {
        m.stop().await;
    }
}
