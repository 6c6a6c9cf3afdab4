//! oxcd's backend written in etcd's format (`backup::etcd_file`), with etcd's sha256
//! trailer, is a snapshot etcd's own tools and server accept: `snapshot status` reads
//! it, `snapshot restore` (etcdutl 3.5 beside the reference etcd, else etcdctl 3.4)
//! restores it, and the reference etcd started on the restore serves every key with
//! the same value, create and mod revision, version and lease, at the same revision,
//! with the same HashKV, and keeps the lease.

use std::path::{Path, PathBuf};
use std::process::Command;

use etcd_client::{Client, GetOptions, PutOptions};
use oxcd_server::backup::etcd_file::write_etcd_file;
use oxcd_storage::backend::Backend;

use crate::common::{self, InProc};

/// Keys with history: puts, overwrites, deletes, a compaction, more puts, a leased key.
async fn write_history(c: &mut Client) -> i64 {
    let lease = c.lease_grant(600, None).await.expect("grant").id();
    for i in 0..200 {
        c.put(format!("k{i:03}"), format!("v{i}"), None)
            .await
            .expect("put");
    }
    for i in 0..50 {
        c.put(format!("k{i:03}"), format!("w{i}"), None)
            .await
            .expect("overwrite");
    }
    for i in 100..110 {
        c.delete(format!("k{i:03}"), None).await.expect("delete");
    }
    let rev = common::revision_at(c, "k000").await;
    c.compact(rev - 20, None).await.expect("compact");
    for i in 0..30 {
        c.put(format!("late{i:02}"), "x".repeat(i * 100), None)
            .await
            .expect("put");
    }
    c.put("leased", "1", Some(PutOptions::new().with_lease(lease)))
        .await
        .expect("leased put");
    lease
}

/// Every key (key, value, create, mod, version, lease), the revision and HashKV.
async fn state(c: &mut Client) -> (Vec<String>, i64, u32) {
    let all = c
        .get("", Some(GetOptions::new().with_from_key()))
        .await
        .expect("get all");
    let rev = all.header().expect("header").revision();
    let kvs = all
        .kvs()
        .iter()
        .map(|kv| {
            format!(
                "{:?}={:?} c{} m{} v{} l{}",
                kv.key_str().unwrap_or_default(),
                kv.value_str().unwrap_or_default(),
                kv.create_revision(),
                kv.mod_revision(),
                kv.version(),
                kv.lease()
            )
        })
        .collect();
    let hash = c.hash_kv(rev).await.expect("hashkv").hash();
    (kvs, rev, hash)
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.env("ETCDCTL_API", "3").output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_restores_oxcds_backup_and_serves_the_same_keys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("oxcd"), |_| {}).await;
    let mut c = m.client().await;
    let lease = write_history(&mut c).await;
    let (keys, rev, hash) = state(&mut c).await;
    let data = m.data_dir.clone();
    m.stop().await;

    let snap = dir.path().join("backup.db");
    let backend = Backend::open(&data.join("member/snap/db")).expect("open the backend");
    let file = std::fs::File::create(&snap).expect("create");
    let (file, size) = write_etcd_file(&backend, file).expect("write etcd's format");
    file.sync_all().expect("sync");
    drop(backend);
    oxcd_testkit::reference::append_sha256_trailer(&snap).expect("trailer");

    etcd_restores_the_same(&snap, dir.path(), lease, (&keys, rev, hash)).await;
    eprintln!(
        "{} keys at revision {rev}, HashKV {hash:#x}: equal on etcd {} after restore ({} B snapshot)",
        keys.len(),
        oxcd_testkit::reference::etcd_version(),
        size
    );
}

/// `snapshot status` and `snapshot restore` of `snap` with etcd's tool (etcdutl 3.5
/// beside the reference etcd, else etcdctl 3.4), then the reference etcd started on the
/// restore: it must serve the `expected` keys at the same revision with the same HashKV,
/// and keep `lease`.
async fn etcd_restores_the_same(
    snap: &Path,
    dir: &Path,
    lease: i64,
    (keys, rev, hash): (&[String], i64, u32),
) {
    let tool =
        oxcd_testkit::reference::etcdutl_binary().unwrap_or_else(|| PathBuf::from("etcdctl"));
    let status: serde_json::Value = serde_json::from_str(&run(Command::new(&tool)
        .args(["snapshot", "status", "-w", "json"])
        .arg(snap)))
    .expect("status json");
    assert_eq!(status["revision"], rev, "{status}");
    let peer = common::free_port();
    let restored = dir.join("restored");
    run(Command::new(&tool)
        .args(["snapshot", "restore"])
        .arg(snap)
        .arg("--data-dir")
        .arg(&restored)
        .args(["--name", "default", "--initial-cluster"])
        .arg(format!("default=http://127.0.0.1:{peer}"))
        .arg("--initial-advertise-peer-urls")
        .arg(format!("http://127.0.0.1:{peer}")));
    let etcd = common::etcd::start_etcd_with_peer(&restored, peer, &[]);
    let mut ec = Client::connect([etcd.endpoint.clone()], None)
        .await
        .expect("connect to etcd");
    let (their_keys, their_rev, their_hash) = state(&mut ec).await;
    assert_eq!(their_keys, keys);
    assert_eq!(their_rev, rev);
    assert_eq!(their_hash, hash, "HashKV at revision {rev}");
    let ttl = ec
        .lease_time_to_live(lease, None)
        .await
        .expect("lease ttl")
        .ttl();
    assert!(ttl > 500, "the lease lives on: {ttl}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_snapshot_save_from_oxcd_restores_into_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("oxcd"), |_| {}).await;
    let mut c = m.client().await;
    let lease = write_history(&mut c).await;
    let (keys, rev, hash) = state(&mut c).await;
    let snap = dir.path().join("saved.db");
    let out = run(Command::new("etcdctl")
        .arg(format!("--endpoints={}", m.addr))
        .args(["snapshot", "save"])
        .arg(&snap));
    assert!(out.contains("Snapshot saved at"), "{out}");
    // Writes go on after a snapshot.
    c.put("after", "1", None)
        .await
        .expect("put after the snapshot");
    m.stop().await;
    etcd_restores_the_same(&snap, dir.path(), lease, (&keys, rev, hash)).await;
    eprintln!(
        "etcdctl snapshot save from oxcd: {} keys at revision {rev} equal on etcd {} after restore",
        keys.len(),
        oxcd_testkit::reference::etcd_version()
    );
}

/// Files in the backend's directory that a snapshot stream left behind.
fn snapshot_leftovers(data: &Path) -> Vec<String> {
    std::fs::read_dir(data.join("member/snap"))
        .expect("snap dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".snapshot-"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_killed_while_streaming_a_snapshot_starts_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("m");
    let mut p = common::OxcdProcess::start(&data, common::free_port());
    let mut c = Client::connect([p.url.clone()], None)
        .await
        .expect("connect");
    for i in 0..300 {
        c.put(format!("big{i:03}"), vec![i as u8; 10_000], None)
            .await
            .expect("put");
    }
    let before = state(&mut c).await;
    // A client that reads one message and then stops reading.
    let mut stream = c.snapshot().await.expect("snapshot");
    let first = stream
        .message()
        .await
        .expect("message")
        .expect("a first message");
    assert_eq!(first.blob().len(), 32 * 1024);
    assert!(
        first.remaining_bytes() > 2_000_000,
        "{}",
        first.remaining_bytes()
    );
    assert_eq!(
        snapshot_leftovers(&data),
        Vec::<String>::new(),
        "unlinked while open"
    );
    // Writes go on while a snapshot streams.
    c.put("during", "1", None)
        .await
        .expect("put during the stream");
    let after_put = state(&mut c).await;
    p.child.kill().expect("kill -9");
    let _ = p.child.wait();
    drop(stream);
    assert_eq!(snapshot_leftovers(&data), Vec::<String>::new());
    let p2 = common::OxcdProcess::start(&data, common::free_port());
    let mut c2 = Client::connect([p2.url.clone()], None)
        .await
        .expect("connect");
    assert_eq!(state(&mut c2).await, after_put, "nothing lost");
    assert_ne!(before.1, after_put.1);
    // And a whole snapshot after the restart.
    let mut stream = c2.snapshot().await.expect("snapshot");
    let mut bytes = 0;
    let mut last = None;
    while let Some(msg) = stream.message().await.expect("message") {
        bytes += msg.blob().len();
        last = Some(msg);
    }
    let last = last.expect("messages");
    assert_eq!(
        (last.blob().len(), last.remaining_bytes()),
        (32, 0),
        "the sha256 last"
    );
    assert!(bytes > 3_000_000, "{bytes}");
}
