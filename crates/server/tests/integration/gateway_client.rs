//! A gateway client nobody here wrote: etcd3gw, OpenStack's etcd client, which speaks
//! only etcd's JSON gateway, runs its basic operations (status, members, put, get,
//! prefixes, compare-and-swap, create, delete, leases, locks, watches, transactions)
//! against oxcd (`tests/clients/etcd3gw_basic.py`).
//!
//! `scripts/test.sh` installs etcd3gw into a virtualenv and names its python in
//! `OXCD_ETCD3GW_PYTHON`; without it, `target/etcd3gw-venv/bin/python` is tried.

use std::path::PathBuf;

use crate::common::InProc;

/// The python that has etcd3gw.
fn python() -> PathBuf {
    let path = std::env::var_os("OXCD_ETCD3GW_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/etcd3gw-venv/bin/python")
        });
    assert!(
        path.exists(),
        "this test needs etcd3gw: python3 -m venv target/etcd3gw-venv && \
         target/etcd3gw-venv/bin/pip install etcd3gw (scripts/test.sh does it), or \
         OXCD_ETCD3GW_PYTHON naming a python that has it; {} is missing",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd3gw_runs_its_basic_operations_against_oxcd() {
    let python = python();
    let dir = tempfile::tempdir().expect("tempdir");
    let oxcd = InProc::start(dir.path().join("oxcd"), |_| {}).await;
    let endpoint = oxcd.endpoint();
    let (host, port) = endpoint
        .trim_start_matches("http://")
        .split_once(':')
        .expect("host:port");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/etcd3gw_basic.py");
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(python)
            .arg(script)
            .args([host, port])
            .output(),
    )
    .await
    .expect("etcd3gw finished in time")
    .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "etcd3gw failed: {stdout}");
    assert!(stdout.contains("all steps passed"));
    oxcd.stop().await;
}
