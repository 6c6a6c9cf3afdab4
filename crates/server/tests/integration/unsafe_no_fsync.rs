//! `--unsafe-no-fsync` as etcd has it (etcd's `server/storage/wal/wal.go`, `sync`: with
//! `unsafeNoSync` it returns before `Fdatasync` and observes no fsync time; the flag is
//! set after the WAL is created, so creating it still syncs). Kubernetes' own test
//! servers and many CI setups pass it.
//!
//! Compared with a real etcd started with the flag: writes add nothing to
//! `etcd_disk_wal_fsync_duration_seconds_count`, where without the flag each adds to it.
//! And what oxcd acknowledged survives `kill -9` of the process: the kernel has the
//! records (only a power loss or a kernel crash loses them, which is why it is unsafe).

use crate::common;

use common::etcd::start_etcd_with;
use common::{OxcdProcess, free_port, scrape};
use etcd_client::{Client, GetOptions};

/// The WAL's fsync count in the scrape at `base` (`http://host:port`).
async fn wal_fsyncs(base: &str) -> u64 {
    let text = scrape(base).await;
    text.lines()
        .find_map(|l| l.strip_prefix("etcd_disk_wal_fsync_duration_seconds_count "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no WAL fsync count in the scrape of {base}"))
}

/// Puts `n` keys under `prefix` through `endpoint`.
async fn put_keys(endpoint: &str, prefix: &str, n: usize) {
    let mut c = Client::connect([endpoint], None).await.expect("connect");
    for i in 0..n {
        c.put(format!("{prefix}{i:03}"), "v", None)
            .await
            .expect("put");
    }
}

/// How many WAL fsyncs `n` puts add on the server at `base`.
async fn fsyncs_of_puts(base: &str, n: usize) -> u64 {
    let before = wal_fsyncs(base).await;
    put_keys(base, "k", n).await;
    wal_fsyncs(base).await - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_not_fsynced_as_etcds_are_not() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd_with(
        &dir.path().join("etcd"),
        "http",
        &["--unsafe-no-fsync".to_string()],
        &[],
    );
    let theirs = fsyncs_of_puts(&format!("http://{}", etcd.endpoint), 20).await;
    drop(etcd);

    let oxcd = OxcdProcess::start_with(
        &dir.path().join("oxcd"),
        free_port(),
        &["--unsafe-no-fsync".to_string()],
    );
    let ours = fsyncs_of_puts(&oxcd.url, 20).await;
    drop(oxcd);

    // Without the flag each put is fsynced (batched at most: at least one).
    let synced = OxcdProcess::start(&dir.path().join("oxcd-synced"), free_port());
    let with_fsync = fsyncs_of_puts(&synced.url, 20).await;

    assert_eq!(theirs, 0, "etcd with --unsafe-no-fsync fsynced its WAL");
    assert_eq!(ours, 0, "oxcd with --unsafe-no-fsync fsynced its WAL");
    assert!(with_fsync >= 1, "oxcd without the flag never fsynced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_keeps_what_it_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let port = free_port();
    let flags = ["--unsafe-no-fsync".to_string()];
    let mut server = OxcdProcess::start_with(&data, port, &flags);
    put_keys(&server.url, "kept/", 200).await;
    server.child.kill().expect("kill -9");
    let _ = server.child.wait();
    drop(server);

    let server = OxcdProcess::start_with(&data, port, &flags);
    let mut c = Client::connect([server.url.clone()], None)
        .await
        .expect("connect");
    let r = c
        .get(
            "kept/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .expect("count");
    assert_eq!(r.count(), 200, "acknowledged puts lost to kill -9");
}
