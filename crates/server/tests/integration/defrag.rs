//! Defragmentation (`Maintenance.Defragment`, etcdctl 3.4's `defrag`, `oxcdctl defrag
//! --data-dir`): the backend file shrinks to its live data while the member keeps
//! serving; 100 clients writing through it all succeed and every acknowledged write is
//! kept; a member killed in the middle restarts clean, with its data; the members of a
//! cluster hash the same after each defragmented its own file.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions};

use crate::common::{self, InProc};

const VALUE: usize = 8 * 1024;

/// Writes `n` keys of 8 KiB twice, then compacts: about half of the file is dead history.
async fn fill_with_history(c: &mut Client, n: usize) {
    for round in 0..2 {
        for i in 0..n {
            c.put(format!("big/{i:05}"), vec![b'a' + round; VALUE], None)
                .await
                .expect("put");
        }
    }
    let rev = common::revision_at(c, "big/00000").await;
    c.compact(rev, None).await.expect("compact");
}

fn db_size(data: &Path) -> u64 {
    std::fs::metadata(data.join("member/snap/db"))
        .expect("db")
        .len()
}

fn etcdctl_defrag(endpoint: &str, extra: &[&str]) -> std::process::Output {
    std::process::Command::new("/usr/bin/etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .arg("--command-timeout=120s")
        .arg("defrag")
        .args(extra)
        .output()
        .expect("etcdctl (apt-get install -y etcd-client)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defragmenting_under_100_writers_keeps_every_write_and_shrinks_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |_| {}).await;
    let mut c = m.client().await;
    fill_with_history(&mut c, 3_000).await;
    let before = db_size(&m.data_dir);

    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..100 {
        let (mut c, stop) = (c.clone(), stop.clone());
        writers.push(tokio::spawn(async move {
            let mut last = None;
            let mut n = 0u64;
            while !stop.load(Ordering::Acquire) {
                let v = format!("{w}-{n}");
                if let Err(e) = c.put(format!("w/{w:03}"), v.clone(), None).await {
                    return Err(format!("writer {w}, put {n}: {e}"));
                }
                last = Some(v);
                n += 1;
            }
            Ok((w, last, n))
        }));
    }
    // Let the writers get going, then defragment through etcdctl 3.4.
    let seen = Instant::now();
    while c.get("w/099", None).await.expect("get").kvs().is_empty() {
        assert!(
            seen.elapsed() < Duration::from_secs(30),
            "writers never wrote"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ep = m.endpoint();
    let out = tokio::task::spawn_blocking(move || etcdctl_defrag(&ep, &[]))
        .await
        .expect("join");
    stop.store(true, Ordering::Release);
    assert!(out.status.success(), "etcdctl defrag: {out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Finished defragmenting etcd member[{}]\n", m.endpoint())
    );
    let mut written = 0;
    let mut last_values = HashMap::new();
    for w in writers {
        let (w, last, n) = w.await.expect("join").expect("every write succeeds");
        written += n;
        last_values.insert(w, last.expect("each writer wrote"));
    }
    let after = db_size(&m.data_dir);
    assert!(after < before * 3 / 4, "{before} -> {after} bytes");
    for (w, v) in &last_values {
        let got = c.get(format!("w/{w:03}"), None).await.expect("get");
        assert_eq!(got.kvs()[0].value_str().expect("utf8"), v, "writer {w}");
    }
    let big = c
        .get(
            "big/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .expect("count");
    assert_eq!(big.count(), 3_000);
    eprintln!("{written} writes during the defragmentation; {before} -> {after} bytes");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_killed_while_defragmenting_restarts_clean_with_its_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("m");
    let port = common::free_port();
    let mut p = common::OxcdProcess::start(&data, port);
    let mut c = Client::connect([p.url.clone()], None)
        .await
        .expect("connect");
    fill_with_history(&mut c, 4_000).await;
    let hash = c.hash_kv(0).await.expect("hashkv").hash();
    let temp = data.join("member/snap/db.defrag");
    let defrag = {
        let mut c = c.clone();
        tokio::spawn(async move { c.defragment().await })
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !temp.exists() {
        assert!(
            Instant::now() < deadline,
            "the defragmentation never started"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    p.child.kill().expect("kill -9");
    let _ = p.child.wait();
    assert!(
        defrag.await.expect("join").is_err(),
        "the member died under it"
    );

    let p = common::OxcdProcess::start(&data, port);
    assert!(!temp.exists(), "the half-written copy is removed at start");
    let mut c = Client::connect([p.url.clone()], None)
        .await
        .expect("connect");
    assert_eq!(c.hash_kv(0).await.expect("hashkv").hash(), hash);
    let big = c
        .get(
            "big/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .expect("count");
    assert_eq!(big.count(), 4_000);
    // And a whole defragmentation afterwards works.
    c.defragment().await.expect("defragment");
    assert_eq!(c.hash_kv(0).await.expect("hashkv").hash(), hash);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_of_a_cluster_defragments_and_they_still_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, _) = common::cluster::three(dir.path()).await;
    let mut c = members[0].client().await;
    fill_with_history(&mut c, 500).await;
    let before: Vec<u64> = members.iter().map(|m| db_size(&m.data_dir)).collect();
    let out = tokio::task::spawn_blocking({
        let ep = members[0].endpoint();
        move || etcdctl_defrag(&ep, &["--cluster"])
    })
    .await
    .expect("join");
    assert!(out.status.success(), "etcdctl defrag --cluster: {out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for m in &members {
        assert!(
            stdout.contains(&format!(
                "Finished defragmenting etcd member[{}]",
                m.endpoint()
            )),
            "{stdout}"
        );
    }
    c.put("after", "defrag", None).await.expect("put");
    let mut hashes = Vec::new();
    for (i, m) in members.iter().enumerate() {
        assert!(db_size(&m.data_dir) < before[i], "member {i} shrank");
        let mut mc = m.client().await;
        // Linearizable read first: the member has applied the last put.
        mc.get("after", None).await.expect("get");
        hashes.push(mc.hash_kv(0).await.expect("hashkv").hash());
    }
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:?}");
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_defragmentation_refuses_a_data_dir_in_use_and_shrinks_a_stopped_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("m");
    let m = InProc::start(data.clone(), |_| {}).await;
    let mut c = m.client().await;
    fill_with_history(&mut c, 300).await;
    let hash = c.hash_kv(0).await.expect("hashkv").hash();
    let dir_arg = data.display().to_string();
    let busy = oxcd_storage::defrag::offline(&dir_arg).expect_err("the member holds the lock");
    assert!(
        matches!(
            busy,
            oxcd_storage::defrag::OfflineError::Storage(oxcd_storage::StorageError::Locked { .. })
        ),
        "{busy}"
    );
    m.stop().await;
    let before = db_size(&data);
    let report = oxcd_storage::defrag::offline(&dir_arg).expect("offline defragment");
    assert!(
        report.size_after < before,
        "{before} -> {}",
        report.size_after
    );
    let missing = oxcd_storage::defrag::offline(&dir.path().join("nope").display().to_string())
        .expect_err("no data dir");
    assert!(
        matches!(missing, oxcd_storage::defrag::OfflineError::NoBackend(_)),
        "{missing}"
    );

    let m = InProc::start(data, |_| {}).await;
    let mut c = m.client().await;
    assert_eq!(c.hash_kv(0).await.expect("hashkv").hash(), hash);
    m.stop().await;
}
