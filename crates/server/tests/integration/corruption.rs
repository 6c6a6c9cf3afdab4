//! Corruption detection between members: one member's backend is altered on purpose
//! while it is stopped. With `--experimental-initial-corrupt-check` it refuses to serve;
//! with `--experimental-corrupt-check-time` the leader raises the CORRUPT alarm and every
//! member then refuses writes with "etcdserver: corrupt cluster".

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::InProc;
use common::cluster::{cluster_of, configure, leader_index, three_tweaked};
use etcd_client::{AlarmAction, AlarmType, GetOptions};
use oxcd_api::mvccpb::KeyValue;
use oxcd_storage::backend::Backend;
use oxcd_storage::backend::redb::ReadableTable;
use oxcd_storage::schema;
use prost::Message;

/// Rewrites the value of the newest row of `key` in a stopped member's backend, keeping
/// the row well-formed: only a hash comparison can tell.
fn alter_value(data_dir: &Path, key: &[u8]) {
    let backend = Backend::open(&data_dir.join("member/snap/db")).expect("open backend");
    let tx = backend.begin_write().expect("write");
    {
        let mut t = tx.open_table(schema::KEY).expect("key table");
        let mut target = None;
        for row in t.iter().expect("iter") {
            let (k, v) = row.expect("row");
            let kv = KeyValue::decode(v.value()).expect("decode");
            if kv.key == key {
                target = Some((k.value().to_vec(), kv));
            }
        }
        let (row_key, mut kv) = target.expect("row for key");
        kv.value = b"bit rot".to_vec();
        t.insert(row_key.as_slice(), kv.encode_to_vec().as_slice())
            .expect("rewrite");
    }
    backend.commit(tx, true).expect("commit");
}

/// The member id `m` reports.
async fn member_id(m: &InProc) -> u64 {
    m.client()
        .await
        .status()
        .await
        .expect("status")
        .header()
        .expect("h")
        .member_id()
}

/// Writes `n` keys through member 0 and waits until every member holds them.
async fn load(members: &[InProc], n: usize) {
    let mut c = members[0].client().await;
    for i in 0..n {
        c.put(format!("k{i:02}"), format!("v{i}"), None)
            .await
            .expect("put");
    }
    for m in members {
        let mut c = m.client().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while c
            .get(
                "k",
                Some(
                    GetOptions::new()
                        .with_prefix()
                        .with_serializable()
                        .with_count_only(),
                ),
            )
            .await
            .expect("count")
            .count()
            < n as i64
        {
            assert!(Instant::now() < deadline, "a member did not catch up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initial_check_refuses_a_member_whose_data_differs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, peers) = three_tweaked(dir.path(), |_| {}).await;
    load(&members, 20).await;
    let cluster = cluster_of(&peers);
    let li = leader_index(&members).await;
    let victim = (li + 1) % 3;
    let healthy = (li + 2) % 3;

    // A healthy member restarted with the check passes it and serves.
    let m = members.remove(healthy.max(victim));
    let n = members.remove(healthy.min(victim));
    let (h, v) = if healthy > victim { (m, n) } else { (n, m) };
    let (h_dir, v_dir) = (h.data_dir.clone(), v.data_dir.clone());
    h.stop().await;
    let c2 = cluster.clone();
    let h = InProc::start(h_dir, move |s| {
        configure(s, healthy, &c2);
        s.initial_corrupt_check = true;
    })
    .await;

    // The altered one is refused, with etcd's error, and does not serve.
    v.stop().await;
    alter_value(&v_dir, b"k07");
    let c3 = cluster.clone();
    let refused = InProc::try_start(v_dir, move |s| {
        configure(s, victim, &c3);
        s.initial_corrupt_check = true;
    })
    .await;
    let err = refused.err().expect("a corrupt member must not start");
    assert!(
        err.ends_with("found data inconsistency with peers"),
        "unexpected error: {err}"
    );
    eprintln!("refused: {err}");
    // The other two keep serving writes.
    h.client().await.put("after", "1", None).await.expect("put");
    h.stop().await;
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_check_raises_the_corrupt_alarm_and_writes_stop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let every = Duration::from_millis(200);
    let (mut members, peers) =
        three_tweaked(dir.path(), move |s| s.corrupt_check_time = every).await;
    load(&members, 20).await;
    let li = leader_index(&members).await;
    // A lease to revoke once the alarm is raised.
    let lease = members[li]
        .client()
        .await
        .lease_grant(60, None)
        .await
        .expect("lease")
        .id();
    let victim = (li + 1) % 3;
    let victim_id = member_id(&members[victim]).await;
    let v = members.remove(victim);
    let v_dir = v.data_dir.clone();
    v.stop().await;
    alter_value(&v_dir, b"k03");
    let cluster = cluster_of(&peers);
    let v = InProc::start(v_dir, move |s| {
        configure(s, victim, &cluster);
        s.corrupt_check_time = every;
    })
    .await;
    members.insert(victim, v);

    // The leader finds it and raises CORRUPT for that member.
    let mut c = members[li].client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let alarms = loop {
        let r = c
            .alarm(AlarmAction::Get, AlarmType::None, None)
            .await
            .expect("alarm list");
        if !r.alarms().is_empty() {
            break r.alarms().to_vec();
        }
        assert!(Instant::now() < deadline, "no alarm raised");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(alarms.len(), 1);
    assert_eq!(alarms[0].member_id(), victim_id);
    assert_eq!(alarms[0].alarm(), AlarmType::Corrupt);

    // Every member now refuses writes, lease grants and revocations with etcd's error
    // (its applierV3Corrupt, server/etcdserver/apply/corrupt.go at v3.6.14); reads still
    // answer.
    for m in &members {
        let mut c = m.client().await;
        let err = c.put("x", "y", None).await.expect_err("write refused");
        assert!(
            err.to_string().contains("etcdserver: corrupt cluster"),
            "unexpected: {err}"
        );
        let err = c.lease_grant(60, None).await.expect_err("grant refused");
        assert!(
            err.to_string().contains("etcdserver: corrupt cluster"),
            "unexpected: {err}"
        );
        let err = c.lease_revoke(lease).await.expect_err("revoke refused");
        assert!(
            err.to_string().contains("etcdserver: corrupt cluster"),
            "unexpected: {err}"
        );
        c.get("k00", None).await.expect("reads still answer");
        let st = c.status().await.expect("status");
        assert_eq!(
            st.errors(),
            [format!("memberID:{victim_id} alarm:CORRUPT ")],
            "status lists the alarm"
        );
    }
    // etcdctl sees it as it would on etcd, and an operator disarms it with etcdctl.
    let etcdctl = |args: &[&str]| {
        let out = std::process::Command::new("/usr/bin/etcdctl")
            .env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(members[li].endpoint())
            .args(args)
            .output()
            .expect("etcdctl (apt-get install -y etcd-client)");
        assert!(out.status.success(), "etcdctl {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(
        etcdctl(&["alarm", "list"]),
        format!("memberID:{victim_id} alarm:CORRUPT \n")
    );
    assert_eq!(
        etcdctl(&["alarm", "disarm"]),
        format!("memberID:{victim_id} alarm:CORRUPT \n")
    );
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_check_finds_a_member_whose_leases_differ() {
    let dir = tempfile::tempdir().expect("tempdir");
    let every = Duration::from_millis(200);
    let (mut members, peers) =
        three_tweaked(dir.path(), move |s| s.corrupt_check_time = every).await;
    let mut c = members[0].client().await;
    let id = c.lease_grant(3600, None).await.expect("grant").id();
    load(&members, 5).await;
    let li = leader_index(&members).await;
    let victim = (li + 1) % 3;
    let v = members.remove(victim);
    let v_dir = v.data_dir.clone();
    v.stop().await;
    // The lease disappears from one member's backend; its keys (HashKV) are untouched.
    let backend = Backend::open(&v_dir.join("member/snap/db")).expect("open backend");
    let tx = backend.begin_write().expect("write");
    tx.open_table(schema::LEASE)
        .expect("lease table")
        .remove(id.to_be_bytes().as_slice())
        .expect("remove the lease row")
        .expect("the lease was there");
    backend.commit(tx, true).expect("commit");
    drop(backend);
    let cluster = cluster_of(&peers);
    let v = InProc::start(v_dir, move |s| {
        configure(s, victim, &cluster);
        s.corrupt_check_time = every;
    })
    .await;
    let victim_id = member_id(&v).await;
    members.insert(victim, v);
    let mut c = members[li].client().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = c
            .alarm(AlarmAction::Get, AlarmType::None, None)
            .await
            .expect("alarm list");
        if let Some(a) = r.alarms().first() {
            assert_eq!(a.member_id(), victim_id);
            assert_eq!(a.alarm(), AlarmType::Corrupt);
            break;
        }
        assert!(Instant::now() < deadline, "no alarm raised");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for m in members {
        m.stop().await;
    }
}

/// Members delete a compaction's rows in the background, each at its own pace: the
/// periodic check, run every 50 ms through large compactions under writes, must accuse
/// nobody, and once the rows are gone every member holds the same state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_compactions_under_the_periodic_check_raise_no_alarm() {
    let _ = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .try_init();
    let dir = tempfile::tempdir().expect("tempdir");
    let every = Duration::from_millis(50);
    let (members, _) = three_tweaked(dir.path(), move |s| s.corrupt_check_time = every).await;
    let li = leader_index(&members).await;
    let mut c = members[li].client().await;
    let mut compactions = 0;
    for round in 0..3 {
        // 5,600 revisions over 200 keys, 8 writers at a time.
        let mut writers = Vec::new();
        for w in 0..8 {
            let mut c = members[li].client().await;
            writers.push(tokio::spawn(async move {
                for i in 0..700 {
                    c.put(
                        format!("k{:03}", (w * 700 + i) % 200),
                        format!("{round}"),
                        None,
                    )
                    .await
                    .expect("put");
                }
            }));
        }
        for w in writers {
            w.await.expect("writer");
        }
        let rev = common::revision_at(&mut c, "k000").await;
        // Not physical: answered at once, the rows deleted while the next round writes.
        c.compact(rev, None).await.expect("compact");
        compactions += 1;
    }
    // Checks go on while the last rows go.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let alarms = c
        .alarm(AlarmAction::Get, AlarmType::None, None)
        .await
        .expect("alarm list");
    let raised: Vec<(u64, AlarmType)> = alarms
        .alarms()
        .iter()
        .map(|a| (a.member_id(), a.alarm()))
        .collect();
    assert!(raised.is_empty(), "false alarm: {raised:?}");
    let hashes = common::cluster::state_hashes(&members, None).await;
    assert!(
        hashes.windows(2).all(|w| w[0] == w[1]),
        "members differ after {compactions} compactions: {hashes:x?}"
    );
    c.put("after", "1", None).await.expect("writes go on");
    for m in members {
        m.stop().await;
    }
}
