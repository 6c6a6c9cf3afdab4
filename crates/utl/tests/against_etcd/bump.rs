//! `--bump-revision N --mark-compacted` as etcd 3.5.16 does it: the same snapshot of a
//! real etcd restored by etcdutl into etcd and by oxcdutl into oxcd; both start at the
//! latest revision + N, refuse reads below it as compacted with the same error, hash the
//! same (HashKV, the bump's mark row included), and put the next write at + N + 1.

use std::process::Command;

use etcd_client::{Client, GetOptions};
use oxcd_testkit::ports::free_port;

use crate::common::{
    Server, etcdctl_save, etcdutl, restore, restore_flags, run, spawn_oxcd, start_etcd,
    start_etcd_at, state, wait_ready, write_history,
};

const BUMP: i64 = 1000;

/// What a server answers after the bumped restore: its state, the error of a read at
/// `old`, the compaction revision HashKV reports, and the revision of a put.
async fn after_bump(s: &Server, old: i64) -> (crate::common::State, String, i64, i64) {
    let mut c: Client = s.client().await;
    let st = state(&mut c).await;
    let below = c
        .get("k000", Some(GetOptions::new().with_revision(old)))
        .await
        .expect_err("below the bump is compacted")
        .to_string();
    let compacted = c.hash_kv(0).await.expect("hashkv").compact_version();
    let put = c.put("next", "1", None).await.expect("put");
    let put_rev = put.header().expect("header").revision();
    (st, below, compacted, put_rev)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bump_revision_and_mark_compacted_as_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd_bin = oxcd_testkit::reference::etcd_binary();
    let etcd = start_etcd(&etcd_bin, &dir.path().join("src"));
    let mut c = etcd.client().await;
    write_history(&mut c).await;
    let before = state(&mut c).await;
    let snap = dir.path().join("src.db");
    etcdctl_save(&etcd.endpoint, &snap, None);
    etcd.stop();

    let bump = [
        "--bump-revision".to_string(),
        BUMP.to_string(),
        "--mark-compacted".into(),
    ];
    let (ep, epp) = (free_port().expect("port"), free_port().expect("port"));
    let epeer = format!("http://127.0.0.1:{epp}");
    let edata = dir.path().join("etcd");
    let mut flags = restore_flags(&edata, "default", &epeer);
    flags.extend(bump.iter().cloned());
    run(Command::new(etcdutl())
        .args(["snapshot", "restore"])
        .arg(&snap)
        .args(&flags));
    let theirs = start_etcd_at(&etcd_bin, &edata, ep, &epeer, &format!("default={epeer}"));

    let (op, opp) = (free_port().expect("port"), free_port().expect("port"));
    let opeer = format!("http://127.0.0.1:{opp}");
    let odata = dir.path().join("oxcd");
    let mut flags = restore_flags(&odata, "default", &opeer);
    flags.extend(bump.iter().cloned());
    restore(&snap, &flags);
    let ours = spawn_oxcd("default", &odata, op, &opeer, &format!("default={opeer}"));
    wait_ready(&ours);

    let old = before.rev - 5;
    let t = after_bump(&theirs, old).await;
    let o = after_bump(&ours, old).await;
    assert_eq!(t.0.rev, before.rev + BUMP, "etcd's revision after the bump");
    assert_eq!(o.0, t.0, "keys, revision, HashKV and auth");
    assert_eq!(o.1, t.1, "a read below the bump");
    assert!(
        o.1.contains("etcdserver: mvcc: required revision has been compacted"),
        "{}",
        o.1
    );
    assert_eq!(o.2, t.2, "the compaction revision");
    assert_eq!(o.3, t.3, "the next write's revision");
    assert_eq!(o.3, before.rev + BUMP + 1);
    let (mut tc, mut oc) = (theirs.client().await, ours.client().await);
    assert_eq!(state(&mut oc).await, state(&mut tc).await, "after the put");
    eprintln!(
        "bump {BUMP} from revision {}: both at {}, compacted at {}, next put at {}, HashKV {:#x}",
        before.rev, o.0.rev, o.2, o.3, o.0.hash
    );
}
