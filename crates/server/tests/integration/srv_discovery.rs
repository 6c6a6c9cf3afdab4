//! DNS SRV discovery through a DNS server the test runs on loopback
//! (`oxcd_testkit::dns`, named to oxcd by `OXCD_DNS_SERVER`): three `oxcd` processes
//! started with `--discovery-srv` and no `--initial-cluster` find each other in
//! `_etcd-server._tcp.<domain>` and form one cluster; `oxcdctl --discovery-srv` finds
//! them in `_etcd-client._tcp.<domain>`. A member whose SRV records do not list it
//! refuses to start with etcd's message.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};

use oxcd_testkit::dns::{DnsServer, Records};

use crate::common::{Children, fails_with_log, free_port, one_cluster_of, oxcd_command};

const DOMAIN: &str = "oxcd-test.example";

/// `oxcd` member `name` bootstrapping from `DOMAIN`'s records, its peers at `localhost`.
fn member(dir: &std::path::Path, dns: &DnsServer, name: &str, peer: u16, client: u16) -> Child {
    let log = std::fs::File::create(dir.join(format!("{name}.log"))).expect("log");
    oxcd_command()
        .env(
            oxcd_transport::srv::DNS_SERVER_VARIABLE,
            dns.addr().to_string(),
        )
        .args(["--name", name, "--discovery-srv", DOMAIN])
        .arg("--data-dir")
        .arg(dir.join(name))
        .args([
            "--initial-advertise-peer-urls",
            &format!("http://localhost:{peer}"),
            "--listen-peer-urls",
            &format!("http://127.0.0.1:{peer}"),
            "--listen-client-urls",
            &format!("http://127.0.0.1:{client}"),
            "--advertise-client-urls",
            &format!("http://localhost:{client}"),
        ])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn oxcd")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_bootstrap_from_srv_records_and_clients_find_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let peers: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let clients: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut records = Records::default();
    for i in 0..3 {
        records.srv.push((
            format!("_etcd-server._tcp.{DOMAIN}"),
            peers[i],
            "localhost".into(),
        ));
        records.srv.push((
            format!("_etcd-client._tcp.{DOMAIN}"),
            clients[i],
            "localhost".into(),
        ));
    }
    records.a.push(("localhost".into(), Ipv4Addr::LOCALHOST));
    let dns = DnsServer::start(records).expect("DNS server");
    let _members = Children(
        (0..3)
            .map(|i| member(dir.path(), &dns, &format!("m{i}"), peers[i], clients[i]))
            .collect(),
    );
    // One cluster: every member lists the three, under their own names once published.
    let endpoints: Vec<String> = clients
        .iter()
        .map(|c| format!("http://127.0.0.1:{c}"))
        .collect();
    one_cluster_of(&endpoints, &["m0", "m1", "m2"]).await;
    // A client finds the members in _etcd-client._tcp.
    let out = Command::new(oxcd_testkit::process::built_binary("oxcdctl"))
        .env(
            oxcd_transport::srv::DNS_SERVER_VARIABLE,
            dns.addr().to_string(),
        )
        .args(["--discovery-srv", DOMAIN, "endpoint", "health"])
        .output()
        .expect("oxcdctl");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    for c in &clients {
        assert!(
            text.contains(&format!("http://localhost:{c} is healthy")),
            "{text}"
        );
    }
    // Without --insecure-discovery's default, the http endpoints are dropped.
    let out = Command::new(oxcd_testkit::process::built_binary("oxcdctl"))
        .env(
            oxcd_transport::srv::DNS_SERVER_VARIABLE,
            dns.addr().to_string(),
        )
        .args([
            "--discovery-srv",
            DOMAIN,
            "--insecure-discovery=false",
            "endpoint",
            "health",
        ])
        .output()
        .expect("oxcdctl");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("ignoring discovered insecure endpoint"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_the_records_do_not_list_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (peer, other, client) = (free_port(), free_port(), free_port());
    let records = Records {
        srv: vec![(
            format!("_etcd-server._tcp.{DOMAIN}"),
            other,
            "localhost".into(),
        )],
        a: vec![("localhost".into(), Ipv4Addr::LOCALHOST)],
    };
    let dns = DnsServer::start(records).expect("DNS server");
    let child = member(dir.path(), &dns, "m0", peer, client);
    let log = fails_with_log(child, &dir.path().join("m0.log"));
    assert!(
        log.contains("couldn't find local name \\\"m0\\\" in the initial cluster configuration")
            || log.contains("couldn't find local name \"m0\" in the initial cluster configuration"),
        "{log}"
    );
}
