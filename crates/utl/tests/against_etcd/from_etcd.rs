//! From etcd to oxcd: a snapshot `etcdctl snapshot save` took of a real etcd (3.5.16,
//! and Debian's 3.4), restored by oxcdutl, serves the same keys with the same create
//! and mod revisions, versions and leases, at the same revision, with the same HashKV,
//! the same users and roles, auth still on, and takes writes after them.

use std::path::Path;

use oxcd_testkit::ports::free_port;

use crate::common::{
    etcdctl_save, lease_ttl, restore, restore_flags, spawn_oxcd, start_etcd, state, wait_ready,
    write_history,
};

async fn etcd_snapshot_restored_into_oxcd(etcd_binary: &Path) {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd(etcd_binary, &dir.path().join("etcd"));
    let mut c = etcd.client().await;
    let lease = write_history(&mut c).await;
    let before = state(&mut c).await;
    c.auth_enable().await.expect("auth enable");
    let snap = dir.path().join("etcd.db");
    etcdctl_save(&etcd.endpoint, &snap, Some("root:rootpw"));
    etcd.stop();

    let (port, peer_port) = (free_port().expect("port"), free_port().expect("port"));
    let peer = format!("http://127.0.0.1:{peer_port}");
    let data = dir.path().join("oxcd");
    restore(&snap, &restore_flags(&data, "default", &peer));
    let oxcd = spawn_oxcd("default", &data, port, &peer, &format!("default={peer}"));
    wait_ready(&oxcd);
    let mut oc = oxcd.client_as("root", "rootpw").await;
    let after = state(&mut oc).await;
    assert_eq!(after, before);
    assert!(lease_ttl(&mut oc, lease).await > 500, "the lease lives on");
    let mut anon = oxcd.client().await;
    let refused = anon.get("k000", None).await.expect_err("auth is still on");
    assert!(
        refused.to_string().contains("user name is empty"),
        "{refused}"
    );
    let put = oc.put("after", "1", None).await.expect("a write");
    assert_eq!(put.header().expect("header").revision(), before.rev + 1);
    eprintln!(
        "{}: {} keys at revision {}, HashKV {:#x}, {} users and roles: equal on oxcd after oxcdutl snapshot restore",
        etcd_binary.display(),
        before.keys.len(),
        before.rev,
        before.hash,
        before.auth.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_etcd_35_restores_into_oxcd() {
    etcd_snapshot_restored_into_oxcd(&oxcd_testkit::reference::etcd_binary()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_of_etcd_34_restores_into_oxcd() {
    let debian = Path::new(oxcd_testkit::reference::DEBIAN_ETCD);
    assert!(
        debian.exists(),
        "this test needs Debian's etcd 3.4 at {}: apt-get install -y etcd-server",
        debian.display()
    );
    etcd_snapshot_restored_into_oxcd(debian).await;
}
