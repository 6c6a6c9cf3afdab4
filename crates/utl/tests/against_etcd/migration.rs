//! Migration both ways at scale: 100,000 keys with history (overwrites, deletes, a
//! compaction, later puts) and leases, written into etcd 3.5.16 and into oxcd.
//! - etcd → `etcdctl snapshot save` → `oxcdutl snapshot restore` → oxcd;
//! - oxcd → `etcdctl snapshot save` → `etcdutl snapshot restore` → etcd.
//!
//! Each way, every key with its value, create and mod revision, version and lease, the
//! revision, HashKV at it and the leases are equal on both sides, and the restored
//! server's next write takes the next revision.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use etcd_client::{Client, GetOptions, PutOptions};
use oxcd_testkit::ports::free_port;

use crate::common::{
    Server, etcdctl_save, etcdutl, restore, restore_flags, run, spawn_oxcd, start_etcd,
    start_etcd_at, start_oxcd, wait_ready,
};

const KEYS: usize = 100_000;
const LEASES: usize = 20;
/// Concurrent writers of the fill.
const WRITERS: usize = 32;

/// Puts `keys` (index, value, lease) from `WRITERS` tasks, each a share in order.
async fn put_all(c: &Client, keys: Vec<(usize, String, i64)>) {
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let mut c = c.clone();
        let mine: Vec<_> = keys.iter().skip(w).step_by(WRITERS).cloned().collect();
        tasks.push(tokio::spawn(async move {
            for (i, v, lease) in mine {
                let opts = (lease != 0).then(|| PutOptions::new().with_lease(lease));
                c.put(format!("m/{i:06}"), v, opts).await.expect("put");
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
}

/// 100,000 keys, every 50th on one of 20 leases; a fifth overwritten, a twentieth
/// deleted, a compaction 10,000 revisions back, then 1,000 more puts.
async fn write_history(c: &mut Client) {
    let mut leases = Vec::new();
    for _ in 0..LEASES {
        leases.push(c.lease_grant(3600, None).await.expect("grant").id());
    }
    let lease_of = |i: usize| {
        if i.is_multiple_of(50) {
            leases[(i / 50) % LEASES]
        } else {
            0
        }
    };
    put_all(
        c,
        (0..KEYS)
            .map(|i| (i, format!("v{i}"), lease_of(i)))
            .collect(),
    )
    .await;
    put_all(
        c,
        (0..KEYS)
            .filter(|i| i % 5 == 0)
            .map(|i| (i, format!("w{i}"), lease_of(i)))
            .collect(),
    )
    .await;
    let mut deletes = Vec::new();
    for w in 0..WRITERS {
        let mut c = c.clone();
        deletes.push(tokio::spawn(async move {
            for i in (0..KEYS).filter(|i| i % 20 == 1).skip(w).step_by(WRITERS) {
                c.delete(format!("m/{i:06}"), None).await.expect("delete");
            }
        }));
    }
    for d in deletes {
        d.await.expect("deleter");
    }
    let rev = c
        .get("m/", None)
        .await
        .expect("get")
        .header()
        .expect("h")
        .revision();
    c.compact(rev - 10_000, None).await.expect("compact");
    put_all(
        c,
        (KEYS..KEYS + 1_000)
            .map(|i| (i, format!("late{i}"), 0))
            .collect(),
    )
    .await;
}

/// What both sides must agree on: every key (read in pages, a whole range would pass
/// gRPC's 4 MiB limit), the revision, HashKV at it, the leases.
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    keys: Vec<String>,
    rev: i64,
    hash: u32,
    leases: Vec<i64>,
}

async fn snapshot(c: &mut Client) -> Snapshot {
    let rev = c
        .get("m/", None)
        .await
        .expect("get")
        .header()
        .expect("h")
        .revision();
    let mut keys = Vec::new();
    let mut from = b"m/".to_vec();
    loop {
        let page = c
            .get(
                from.clone(),
                Some(
                    GetOptions::new()
                        .with_range("m0")
                        .with_revision(rev)
                        .with_limit(10_000),
                ),
            )
            .await
            .expect("get page");
        for kv in page.kvs() {
            keys.push(format!(
                "{}={} c{} m{} v{} l{}",
                kv.key_str().unwrap_or_default(),
                kv.value_str().unwrap_or_default(),
                kv.create_revision(),
                kv.mod_revision(),
                kv.version(),
                kv.lease()
            ));
        }
        match page.kvs().last() {
            Some(last) if page.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => break,
        }
    }
    let hash = c.hash_kv(rev).await.expect("hashkv").hash();
    let mut leases: Vec<i64> = c
        .leases()
        .await
        .expect("leases")
        .leases()
        .iter()
        .map(|l| l.id())
        .collect();
    leases.sort_unstable();
    Snapshot {
        keys,
        rev,
        hash,
        leases,
    }
}

/// Checks what the restored server holds against `before`, and that it takes the next
/// revision.
async fn check_restored(server: &Server, before: &Snapshot, way: &str) {
    let mut c = server.client().await;
    let after = snapshot(&mut c).await;
    assert_eq!(after.rev, before.rev, "{way}: revision");
    assert_eq!(after.keys.len(), before.keys.len(), "{way}: key count");
    if let Some(i) = (0..after.keys.len()).find(|&i| after.keys[i] != before.keys[i]) {
        panic!("{way}: key {i}: {} != {}", after.keys[i], before.keys[i]);
    }
    assert_eq!(after.hash, before.hash, "{way}: HashKV");
    assert_eq!(after.leases, before.leases, "{way}: leases");
    let put = c.put("next", "1", None).await.expect("a write");
    assert_eq!(put.header().expect("h").revision(), before.rev + 1, "{way}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_keys_move_from_etcd_to_oxcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd(
        &oxcd_testkit::reference::etcd_binary(),
        &dir.path().join("etcd"),
    );
    let mut c = etcd.client().await;
    write_history(&mut c).await;
    let before = snapshot(&mut c).await;
    let snap = dir.path().join("etcd.db");
    etcdctl_save(&etcd.endpoint, &snap, None);
    etcd.stop();

    let (port, peer) = (free_port().expect("port"), free_port().expect("port"));
    let peer = format!("http://127.0.0.1:{peer}");
    let data = dir.path().join("oxcd");
    let started = Instant::now();
    restore(&snap, &restore_flags(&data, "default", &peer));
    let took = started.elapsed();
    let oxcd = spawn_oxcd("default", &data, port, &peer, &format!("default={peer}"));
    wait_ready(&oxcd);
    check_restored(&oxcd, &before, "etcd -> oxcd").await;
    eprintln!(
        "etcd -> oxcd: {} keys at revision {}, HashKV {:#x}, {} leases equal; {} bytes restored in {took:?}",
        before.keys.len(),
        before.rev,
        before.hash,
        before.leases.len(),
        file_len(&snap)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_thousand_keys_move_from_oxcd_to_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let oxcd = start_oxcd(&dir.path().join("oxcd"));
    let mut c = oxcd.client().await;
    write_history(&mut c).await;
    let before = snapshot(&mut c).await;
    let snap = dir.path().join("oxcd.db");
    etcdctl_save(&oxcd.endpoint, &snap, None);
    oxcd.stop();

    let (port, peer) = (free_port().expect("port"), free_port().expect("port"));
    let peer = format!("http://127.0.0.1:{peer}");
    let data = dir.path().join("etcd");
    let started = Instant::now();
    run(Command::new(etcdutl())
        .args(["snapshot", "restore"])
        .arg(&snap)
        .args(restore_flags(&data, "default", &peer)));
    let took = started.elapsed();
    let etcd = start_etcd_at(
        &oxcd_testkit::reference::etcd_binary(),
        &data,
        port,
        &peer,
        &format!("default={peer}"),
    );
    check_restored(&etcd, &before, "oxcd -> etcd").await;
    eprintln!(
        "oxcd -> etcd: {} keys at revision {}, HashKV {:#x}, {} leases equal; {} bytes restored in {took:?}",
        before.keys.len(),
        before.rev,
        before.hash,
        before.leases.len(),
        file_len(&snap)
    );
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}
