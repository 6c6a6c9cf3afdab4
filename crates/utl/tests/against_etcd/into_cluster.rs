//! From oxcd to a new oxcd cluster: `oxcdctl snapshot save` of a one-member oxcd,
//! restored three times (one per member, with different `--name`s) by oxcdutl: the
//! three members form a cluster with the ids etcd would give them (none the old
//! member's), and each serves the data of the snapshot, HashKV included.

use std::collections::BTreeSet;
use std::process::Command;

use oxcd_testkit::ports::free_port;

use crate::common::{
    lease_ttl, restore, run, spawn_oxcd, start_oxcd, state, wait_ready, write_history,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oxcd_snapshot_restores_into_a_new_three_member_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = start_oxcd(&dir.path().join("src"));
    let mut c = src.client().await;
    let lease = write_history(&mut c).await;
    let before = state(&mut c).await;
    let old_id = c
        .status()
        .await
        .expect("status")
        .header()
        .expect("h")
        .member_id();
    let snap = dir.path().join("oxcd.db");
    let saved = run(Command::new(oxcd_testkit::process::built_binary("oxcdctl"))
        .arg(format!("--endpoints={}", src.endpoint))
        .args(["snapshot", "save"])
        .arg(&snap));
    assert_eq!(saved, format!("Snapshot saved at {}\n", snap.display()));
    src.stop();

    let token = "restored-cluster";
    let ports: Vec<(u16, String)> = (0..3)
        .map(|_| {
            let p = free_port().expect("port");
            (free_port().expect("port"), format!("http://127.0.0.1:{p}"))
        })
        .collect();
    let cluster: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, (_, peer))| format!("m{i}={peer}"))
        .collect();
    let cluster = cluster.join(",");
    let mut members = Vec::new();
    for (i, (port, peer)) in ports.iter().enumerate() {
        let data = dir.path().join(format!("m{i}"));
        restore(
            &snap,
            &[
                "--data-dir".into(),
                data.display().to_string(),
                format!("--name=m{i}"),
                format!("--initial-cluster={cluster}"),
                format!("--initial-advertise-peer-urls={peer}"),
                format!("--initial-cluster-token={token}"),
            ],
        );
        members.push(spawn_oxcd(&format!("m{i}"), &data, *port, peer, &cluster));
    }
    for m in &members {
        wait_ready(m);
    }

    let mut c0 = members[0].client().await;
    let list = c0.member_list().await.expect("member list");
    let ids: BTreeSet<u64> = list.members().iter().map(|m| m.id()).collect();
    let expected: BTreeSet<u64> = ports
        .iter()
        .map(|(_, peer)| {
            oxcd_server::domains::membership::ids::member_id(std::slice::from_ref(peer), token)
        })
        .collect();
    assert_eq!(ids, expected, "etcd's ids for the new members");
    assert!(!ids.contains(&old_id), "the old member is gone");
    let names: BTreeSet<&str> = list.members().iter().map(|m| m.name()).collect();
    assert_eq!(names, BTreeSet::from(["m0", "m1", "m2"]));
    let cluster_id = list.header().expect("header").cluster_id();
    assert_eq!(
        cluster_id,
        oxcd_server::domains::membership::ids::cluster_id(
            &expected.iter().copied().collect::<Vec<_>>()
        )
    );

    for m in &members {
        let mut mc = m.client().await;
        assert_eq!(state(&mut mc).await, before, "member {}", m.endpoint);
        assert!(lease_ttl(&mut mc, lease).await > 500, "the lease lives on");
    }
    let mut c2 = members[2].client().await;
    let put = c2.put("after", "1", None).await.expect("a write");
    assert_eq!(put.header().expect("header").revision(), before.rev + 1);
    let seen = c0.get("after", None).await.expect("get");
    assert_eq!(seen.kvs().len(), 1, "replicated to every member");
    eprintln!(
        "oxcdctl snapshot save -> 3 x oxcdutl snapshot restore: {} keys at revision {} on members {:x?} (was {old_id:x})",
        before.keys.len(),
        before.rev,
        ids
    );
}
