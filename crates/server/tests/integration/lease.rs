//! Leases on three members with the `etcd-client` crate: keepalives sent to a follower
//! keep a lease alive; its remaining TTL survives the leader's death (etcd resets it);
//! expiry deletes the keys on every member; leases reach a member that catches up by
//! snapshot, survive a restart of every member, and the members' state hashes agree;
//! the leader renews the keepalives a follower forwards, and a follower refuses them.

use crate::common;

use std::time::{Duration, Instant};

use common::InProc;
use common::cluster::{OneAway, leader_index, state_hashes, three};
use etcd_client::{EventType, LeaseTimeToLiveOptions, PutOptions, WatchOptions};

/// Seconds `id` has left by `m`'s clock (-1: gone).
async fn remaining(m: &InProc, id: i64) -> i64 {
    m.client()
        .await
        .lease_time_to_live(id, None)
        .await
        .expect("time to live")
        .ttl()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keepalives_through_a_follower_keep_a_lease_whose_time_left_survives_a_leader_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, _) = three(dir.path()).await;
    let leader = leader_index(&members).await;
    let follower = (leader + 1) % 3;
    let mut fc = members[follower].client().await;
    let id = fc.lease_grant(6, None).await.expect("grant").id();
    fc.put("held", "1", Some(PutOptions::new().with_lease(id)))
        .await
        .expect("put with the lease");
    let mut watcher = members[(leader + 2) % 3].client().await;
    let mut deletes = watcher
        .watch("held", Some(WatchOptions::new()))
        .await
        .expect("watch");
    // Renewed only through the follower, for longer than its TTL: it stays.
    let (mut keeper, mut acks) = fc.lease_keep_alive(id).await.expect("keepalive stream");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        keeper.keep_alive().await.expect("send a keepalive");
        let ack = acks.message().await.expect("ack").expect("open");
        assert_eq!(ack.ttl(), 6, "renewed to the full TTL");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    drop((keeper, acks));
    assert!(remaining(&members[leader], id).await >= 5);
    // Two seconds without keepalives, then the leader dies.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before_kill = remaining(&members[leader], id).await;
    assert!((3..=4).contains(&before_kill), "{before_kill}");
    members.remove(leader).stop().await;
    let new_leader = leader_index(&members).await;
    let after_kill = remaining(&members[new_leader], id).await;
    // The new leader continues from what was left (etcd would start over from 6 s).
    assert!(
        (1..=before_kill).contains(&after_kill),
        "{after_kill} s left after the leader change, {before_kill} before"
    );
    // It expires on time: deleted on every member, one event.
    let next = loop {
        let r = tokio::time::timeout(Duration::from_secs(10), deletes.message())
            .await
            .expect("the key is deleted when the lease expires")
            .expect("stream")
            .expect("open");
        if !r.created() {
            break r;
        }
    };
    assert_eq!(next.events().len(), 1);
    assert_eq!(next.events()[0].event_type(), EventType::Delete);
    // Every member applies the revocation (a member's own reads may lag the watcher's
    // member by a moment: serializable reads are allowed to).
    for m in &members {
        let mut c = m.client().await;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let got = c
                .get(
                    "held",
                    Some(etcd_client::GetOptions::new().with_serializable()),
                )
                .await
                .expect("get");
            if got.count() == 0 {
                break;
            }
            assert!(Instant::now() < deadline, "deleted on every member");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert_eq!(remaining(&members[0], id).await, -1);
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_reach_a_member_by_snapshot_and_survive_a_restart_of_every_member() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = OneAway::start(dir.path()).await;
    let members = &cluster.members;
    let mut c = members[0].client().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let id = c.lease_grant(3600, None).await.expect("grant").id();
        for k in 0..3 {
            c.put(
                format!("l{i}/{k}"),
                "v",
                Some(PutOptions::new().with_lease(id)),
            )
            .await
            .expect("put with a lease");
        }
        ids.push(id);
    }
    c.lease_revoke(ids.remove(4)).await.expect("revoke one");
    for i in 0..100 {
        c.put(format!("filler{i}"), "x", None).await.expect("put");
    }
    // Back after the log it missed was compacted: it gets a snapshot.
    cluster.bring_back().await;
    let members = &cluster.members;
    let back = members.len() - 1;
    let deadline = Instant::now() + Duration::from_secs(20);
    let opts = || Some(LeaseTimeToLiveOptions::new().with_keys());
    loop {
        let got = members[back]
            .client()
            .await
            .lease_time_to_live(ids[0], opts())
            .await;
        if got.is_ok_and(|t| t.keys().len() == 3) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lease never reached the member"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let listed = |m: &InProc| {
        let m = m.endpoint();
        async move {
            let mut c = etcd_client::Client::connect([m], None)
                .await
                .expect("connect");
            let mut ids: Vec<i64> = c
                .leases()
                .await
                .expect("leases")
                .leases()
                .iter()
                .map(|l| l.id())
                .collect();
            ids.sort_unstable();
            ids
        }
    };
    let mut expected = ids.clone();
    expected.sort_unstable();
    for m in members {
        assert_eq!(
            listed(m).await,
            expected,
            "every member lists the same leases"
        );
    }
    // Same data, same hash (leases included), on every member.
    let hashes = state_hashes(members, None).await;
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:?}");
    // Every member restarts: the leases and their keys are still there.
    let members = cluster.restart_all().await;
    for m in &members {
        assert_eq!(listed(m).await, expected);
        let t = m
            .client()
            .await
            .lease_time_to_live(ids[1], opts())
            .await
            .expect("time to live");
        assert_eq!(t.keys().len(), 3);
        assert!(t.ttl() > 3500);
    }
    let after = state_hashes(&members, None).await;
    assert!(after.windows(2).all(|w| w[0] == w[1]), "{after:?}");
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_leases_expiring_at_once_do_not_stall_writes() {
    const LEASES: usize = 10_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |_| {}).await;
    // Granted and given a key each by 50 tasks, all with the minimum TTL.
    let mut tasks = Vec::new();
    for t in 0..50 {
        let mut c = m.client().await;
        tasks.push(tokio::spawn(async move {
            for i in (t..LEASES).step_by(50) {
                let id = c.lease_grant(1, None).await.expect("grant").id();
                c.put(
                    format!("x/{i}"),
                    "v",
                    Some(PutOptions::new().with_lease(id)),
                )
                .await
                .expect("put with a lease");
            }
        }));
    }
    for t in tasks {
        t.await.expect("granting task");
    }
    // Writes go on while they expire: every one succeeds; the slowest is reported.
    let mut c = m.client().await;
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    let mut writes = 0;
    loop {
        let t = Instant::now();
        c.put("writer", writes.to_string(), None)
            .await
            .expect("a write while leases expire");
        slowest = slowest.max(t.elapsed());
        writes += 1;
        if writes % 50 == 0 {
            let left = c
                .get(
                    "x/",
                    Some(
                        etcd_client::GetOptions::new()
                            .with_prefix()
                            .with_count_only(),
                    ),
                )
                .await
                .expect("count")
                .count();
            if left == 0 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{left} keys left after 120 s"
            );
        }
    }
    assert!(c.leases().await.expect("leases").leases().is_empty());
    eprintln!(
        "{LEASES} leases expired in {:?} (paced at 1,000/s) while {writes} writes went on; slowest write {slowest:?}",
        started.elapsed()
    );
    m.stop().await;
}

/// `Peer.RenewLeases`, the way a follower forwards its clients' keepalives: the leader
/// renews them (0 for a lease that does not exist); a member that does not lead refuses
/// with FAILED_PRECONDITION, and the follower then sends them through raft.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_renews_forwarded_keepalives_and_a_follower_refuses_them() {
    use oxcd_api::oxcdpb::PeerRenewLeasesRequest;
    use oxcd_api::oxcdpb::peer_client::PeerClient;
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, peers) = three(dir.path()).await;
    let leader = leader_index(&members).await;
    let follower = (leader + 1) % 3;
    let mut c = members[follower].client().await;
    let id = c.lease_grant(30, None).await.expect("grant").id();
    // The follower answered once it applied the grant; the leader may apply it a moment
    // later. A linearizable read on the leader waits until it has.
    members[leader]
        .client()
        .await
        .lease_time_to_live(id, None)
        .await
        .expect("the leader knows the lease");
    let header = c.status().await.expect("status");
    let header = header.header().expect("header");
    let (cluster, me) = (header.cluster_id(), header.member_id());
    let ask = |port: u16| async move {
        let mut client = PeerClient::connect(format!("http://127.0.0.1:{port}"))
            .await
            .expect("connect peer port");
        let mut req = tonic::Request::new(PeerRenewLeasesRequest {
            ids: vec![id, id + 1],
        });
        req.metadata_mut().insert(
            "x-oxcd-cluster-id",
            format!("{cluster:x}").parse().expect("meta"),
        );
        req.metadata_mut()
            .insert("x-oxcd-from", format!("{me:x}").parse().expect("meta"));
        client.renew_leases(req).await
    };
    let renewed = ask(peers[leader]).await.expect("the leader renews");
    assert_eq!(renewed.get_ref().ttls, vec![30, 0]);
    let other = (leader + 2) % 3;
    let refused = ask(peers[other]).await.expect_err("a follower refuses");
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    // Keepalives through a follower still renew (forwarded to the leader).
    let (mut keeper, mut acks) = c.lease_keep_alive(id).await.expect("keepalive stream");
    keeper.keep_alive().await.expect("send a keepalive");
    let ack = acks.message().await.expect("ack").expect("open");
    assert_eq!(ack.ttl(), 30);
    drop((keeper, acks));
    for m in members {
        m.stop().await;
    }
}
