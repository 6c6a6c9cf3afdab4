//! A crash while an oxcd learner imports the snapshot an etcd 3.5.16 leader sent (issue
//! 35). The learner saves etcd's bbolt file and the snapshot's v2 store, hands the
//! snapshot to raft at once (as etcd's `rafthttp` `snapshotHandler` steps it after
//! saving the db), and imports the pair when its apply thread installs the snapshot
//! (`backup/etcd_received.rs`). Killed (SIGKILL) while the import's staging backend
//! exists, the member restarts, finds raft's snapshot ahead of its backend and the pair
//! still on disk, imports it again and holds etcd's keys: HashKV equal to etcd's at the
//! same revision.

use std::path::Path;
use std::time::{Duration, Instant};

use etcd_client::Client;

use crate::common::{OxcdProcess, free_port, revision_at};
use crate::etcd_peer::{add_learner, etcd_snapshotting_often, peer_hash_kv};

/// Whether a file whose name ends in `suffix` is in `snap_dir`: `.import`, the staging
/// backend of an import; `.snap.v2`, the received pair (written last of the two).
fn holds(snap_dir: &Path, suffix: &str) -> bool {
    std::fs::read_dir(snap_dir)
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().ends_with(suffix))
        })
        .unwrap_or(false)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_killed_while_importing_etcds_snapshot_imports_it_again_on_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The learner gets a snapshot.
    let (_etcd, mut c, etcd_peer_url) = etcd_snapshotting_often(dir.path()).await;
    // Enough data that the import takes a while (tens of MB in etcd's file).
    let value = vec![b'v'; 4096];
    for i in 0..6000 {
        c.put(format!("k{i:05}"), value.clone(), None)
            .await
            .expect("put");
    }
    let oxcd_peer_url = format!("http://127.0.0.1:{}", free_port());
    add_learner(&c, &oxcd_peer_url).await;
    let data = dir.path().join("oxcd");
    let snap_dir = data.join("member/snap");
    let port = free_port();
    let flags: Vec<String> = [
        "--name",
        "oxcd1",
        "--listen-peer-urls",
        &oxcd_peer_url,
        "--initial-advertise-peer-urls",
        &oxcd_peer_url,
        "--initial-cluster",
        &format!("default={etcd_peer_url},oxcd1={oxcd_peer_url}"),
        "--initial-cluster-state",
        "existing",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut first = OxcdProcess::spawn(&data, port, &flags).into_process();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !holds(&snap_dir, ".import") {
        assert!(
            Instant::now() < deadline,
            "the learner never imported etcd's snapshot"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    first.child.kill().expect("SIGKILL");
    let _ = first.child.wait();
    eprintln!(
        "before the kill, the snapshot sent again: {} time(s)",
        first.logged("already saved: kept").len()
    );
    assert!(
        holds(&snap_dir, ".snap.v2"),
        "killed mid-import, the received pair is still on disk"
    );
    eprintln!("killed while importing; etcd's files kept");

    // Restarted on the same dir with the same flags: raft hands the snapshot again.
    let second = OxcdProcess::start_with(&data, port, &flags);
    assert!(
        !second
            .logged("imported etcd's snapshot database")
            .is_empty(),
        "the restart imported the kept pair"
    );
    assert!(
        !holds(&snap_dir, ".snap.v2"),
        "the pair is removed once installed"
    );
    // The leader may send the snapshot again while the restart imports the kept pair:
    // the pair is then kept as it is (it was once truncated under the import).
    eprintln!(
        "the snapshot sent again during the import: {} time(s)",
        second.logged("already saved: kept").len()
    );
    c.put("after", "restart", None).await.expect("put");
    let rev = revision_at(&mut c, "after").await;
    let mut ours = Client::connect([second.url.clone()], None)
        .await
        .expect("connect");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let got = ours
            .get(
                "after",
                Some(etcd_client::GetOptions::new().with_serializable()),
            )
            .await;
        if got.is_ok_and(|r| !r.kvs().is_empty()) {
            break;
        }
        assert!(Instant::now() < deadline, "the learner caught up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (etcd_hash, oxcd_hash) = (
        peer_hash_kv(&etcd_peer_url, rev).await,
        peer_hash_kv(&oxcd_peer_url, rev).await,
    );
    eprintln!("/members/hashkv at {rev}: etcd {etcd_hash} oxcd {oxcd_hash}");
    assert_eq!(etcd_hash, oxcd_hash, "HashKV equal");
}
