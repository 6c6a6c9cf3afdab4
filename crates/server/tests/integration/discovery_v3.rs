//! etcd 3.6's v3 discovery through an existing cluster: three `oxcd` processes started
//! with `--discovery-endpoints` and `--discovery-token` (no `--initial-cluster`) register
//! in a real etcd (`oxcd_testkit::reference`) and in an oxcd, find each other and form
//! one cluster; a fourth is refused ("cluster is full"); without the size key, discovery
//! fails at once, with etcd's messages.

use std::process::{Child, Stdio};

use crate::common::etcd::start_etcd;
use crate::common::{Children, InProc, fails_with_log, free_port, one_cluster_of, oxcd_command};

/// `oxcd` member `name` discovering its peers at `endpoint` under `token`.
fn member(dir: &std::path::Path, endpoint: &str, token: &str, name: &str) -> (Child, u16) {
    let (peer, client) = (free_port(), free_port());
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log");
    let child = oxcd_command()
        .args(["--name", name])
        .args([
            "--discovery-endpoints",
            endpoint,
            "--discovery-token",
            token,
        ])
        .arg("--data-dir")
        .arg(dir.join(name))
        .args([
            "--initial-advertise-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
            "--listen-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
            "--listen-client-urls",
            &format!("http://127.0.0.1:{client}"),
            "--advertise-client-urls",
            &format!("http://127.0.0.1:{client}"),
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn oxcd");
    (child, client)
}

/// Three members through the discovery cluster at `endpoint`; then a fourth, refused.
async fn bootstrap_through(endpoint: &str, dir: &std::path::Path) {
    let mut c = etcd_client::Client::connect([format!("http://{endpoint}")], None)
        .await
        .expect("connect to the discovery service");
    c.put("/_etcd/registry/tok/_config/size", "3", None)
        .await
        .expect("size key");
    let started: Vec<(Child, u16)> = ["m0", "m1", "m2"]
        .iter()
        .map(|n| member(dir, endpoint, "tok", n))
        .collect();
    let clients: Vec<u16> = started.iter().map(|(_, c)| *c).collect();
    let _members = Children(started.into_iter().map(|(c, _)| c).collect());
    let endpoints: Vec<String> = clients
        .iter()
        .map(|c| format!("http://127.0.0.1:{c}"))
        .collect();
    one_cluster_of(&endpoints, &["m0", "m1", "m2"]).await;
    let regs = c
        .get(
            "/_etcd/registry/tok/members/",
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .expect("registrations");
    assert_eq!(regs.kvs().len(), 3);
    let (late, _) = member(dir, endpoint, "tok", "m3");
    let log = fails_with_log(late, &dir.join("m3.log"));
    assert!(
        log.contains("failed to join discovery cluster (discovery: cluster is full)"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_bootstraps_through_a_real_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd(&dir.path().join("etcd"));
    bootstrap_through(&etcd.endpoint, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_bootstraps_through_an_oxcd_and_a_missing_size_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let service = InProc::start(dir.path().join("service"), |_| {}).await;
    let endpoint = service.endpoint().trim_start_matches("http://").to_string();
    bootstrap_through(&endpoint, dir.path()).await;
    let (child, _) = member(dir.path(), &endpoint, "no-size", "lone");
    let log = fails_with_log(child, &dir.path().join("lone.log"));
    assert!(
        log.contains("failed to join discovery cluster (discovery: size key not found)"),
        "{log}"
    );
    service.stop().await;
}
