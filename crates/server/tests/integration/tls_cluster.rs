//! Peer TLS with three real `oxcd` processes: CA-signed peer certificates checked by
//! every member (with client TLS too, driven by etcdctl 3.4), peer auto-TLS, and peers
//! refused for a certificate from another CA or a common name not allowed, while the
//! others keep serving.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{OxcdProcess, Pending, free_port};
use oxcd_testkit::pki::{Ca, CertFiles, Spec};

const ETCDCTL: &str = "/usr/bin/etcdctl";

struct Members {
    names: Vec<String>,
    peer_urls: Vec<String>,
    client_urls: Vec<String>,
}

fn members(peer_scheme: &str, client_scheme: &str) -> Members {
    Members {
        names: (0..3).map(|i| format!("m{i}")).collect(),
        peer_urls: (0..3)
            .map(|_| format!("{peer_scheme}://127.0.0.1:{}", free_port()))
            .collect(),
        client_urls: (0..3)
            .map(|_| format!("{client_scheme}://127.0.0.1:{}", free_port()))
            .collect(),
    }
}

fn spawn(dir: &Path, m: &Members, i: usize, extra: Vec<String>) -> Pending {
    let cluster: Vec<String> = m
        .names
        .iter()
        .zip(&m.peer_urls)
        .map(|(n, u)| format!("{n}={u}"))
        .collect();
    let mut flags = vec![
        "--name".to_string(),
        m.names[i].clone(),
        "--listen-peer-urls".into(),
        m.peer_urls[i].clone(),
        "--initial-advertise-peer-urls".into(),
        m.peer_urls[i].clone(),
        "--initial-cluster".into(),
        cluster.join(","),
        "--heartbeat-interval".into(),
        "50".into(),
        "--election-timeout".into(),
        "500".into(),
    ];
    flags.extend(extra);
    OxcdProcess::spawn_at(&dir.join(&m.names[i]), &m.client_urls[i], &flags)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn peer_flags(c: &CertFiles, ca: &Ca) -> Vec<String> {
    vec![
        "--peer-cert-file".into(),
        s(&c.cert),
        "--peer-key-file".into(),
        s(&c.key),
        "--peer-trusted-ca-file".into(),
        s(&ca.cert),
        "--peer-client-cert-auth".into(),
    ]
}

fn etcdctl(endpoints: &str, tls: &[String], args: &[&str]) -> Output {
    Command::new(ETCDCTL)
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", endpoints, "--dial-timeout", "3s"])
        .args(tls)
        .args(args)
        .output()
        .expect("run etcdctl")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        out(o),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn client_and_peer_tls_together_with_etcdctl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(&dir.path().join("pki"), "ca").expect("ca");
    let m = members("https", "https");
    let pending: Vec<Pending> = (0..3)
        .map(|i| {
            let c = ca.issue(&Spec::member(&format!("m{i}"))).expect("cert");
            let mut f = peer_flags(&c, &ca);
            f.extend([
                "--cert-file".into(),
                s(&c.cert),
                "--key-file".into(),
                s(&c.key),
                "--client-cert-auth".into(),
                "--trusted-ca-file".into(),
                s(&ca.cert),
            ]);
            spawn(dir.path(), &m, i, f)
        })
        .collect();
    let _procs: Vec<OxcdProcess> = pending.into_iter().map(Pending::wait_ready).collect();
    let client = ca.issue(&Spec::client("root", "root")).expect("client");
    let tls = vec![
        "--cacert".to_string(),
        s(&ca.cert),
        "--cert".into(),
        s(&client.cert),
        "--key".into(),
        s(&client.key),
    ];
    let o = etcdctl(&m.client_urls[0], &tls, &["put", "k", "over-tls"]);
    assert_eq!(out(&o), "OK\n", "{}", text(&o));
    let o = etcdctl(&m.client_urls[2], &tls, &["get", "k", "--print-value-only"]);
    assert_eq!(
        out(&o),
        "over-tls\n",
        "replicated over peer TLS: {}",
        text(&o)
    );
    let o = etcdctl(&m.client_urls[1], &tls, &["member", "list"]);
    for u in m.peer_urls.iter().chain(&m.client_urls) {
        assert!(
            out(&o).contains(u.as_str()),
            "{u} in member list: {}",
            text(&o)
        );
    }
    let o = etcdctl(
        &m.client_urls[0],
        &tls,
        &["endpoint", "status", "--cluster", "-w", "table"],
    );
    assert!(o.status.success(), "{}", text(&o));
    for u in &m.client_urls {
        assert!(out(&o).contains(u.as_str()), "{u} in status: {}", text(&o));
    }
}

#[test]
fn peer_auto_tls_members_form_a_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = members("https", "http");
    let pending: Vec<Pending> = (0..3)
        .map(|i| spawn(dir.path(), &m, i, vec!["--peer-auto-tls".into()]))
        .collect();
    let _procs: Vec<OxcdProcess> = pending.into_iter().map(Pending::wait_ready).collect();
    let o = etcdctl(&m.client_urls[0], &[], &["put", "k", "auto"]);
    assert_eq!(out(&o), "OK\n", "{}", text(&o));
    let o = etcdctl(&m.client_urls[1], &[], &["get", "k", "--print-value-only"]);
    assert_eq!(out(&o), "auto\n", "{}", text(&o));
    for name in &m.names {
        let cert = dir.path().join(name).join("fixtures/peer/cert.pem");
        assert!(cert.exists(), "{} generated", cert.display());
    }
}

/// Starts m0 and m1 with good certificates and m2 with `bad`; the two serve writes and
/// m2 is refused by them, named in their logs.
fn refused_third_member(bad: impl Fn(&Ca, &Path) -> Vec<String>, extra: &[String], why: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = Ca::new(&dir.path().join("pki"), "ca").expect("ca");
    let m = members("https", "http");
    let good: Vec<Pending> = (0..2)
        .map(|i| {
            let c = ca
                .issue(&Spec {
                    cn: "etcd-peer",
                    ..Spec::member(&format!("m{i}"))
                })
                .expect("cert");
            let mut f = peer_flags(&c, &ca);
            f.extend(extra.iter().cloned());
            spawn(dir.path(), &m, i, f)
        })
        .collect();
    let mut f = bad(&ca, &dir.path().join("pki"));
    f.extend(extra.iter().cloned());
    let intruder = spawn(dir.path(), &m, 2, f);
    let procs: Vec<OxcdProcess> = good.into_iter().map(Pending::wait_ready).collect();
    for k in 0..20 {
        let o = etcdctl(&m.client_urls[k % 2], &[], &["put", &format!("k{k}"), "v"]);
        assert_eq!(
            out(&o),
            "OK\n",
            "the cluster keeps serving writes: {}",
            text(&o)
        );
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let refusals: Vec<String> = procs
        .iter()
        .flat_map(|p| p.logged("rejected connection on peer endpoint"))
        .collect();
    assert!(!refusals.is_empty(), "{why}: the refused peer is logged");
    assert!(
        refusals.iter().any(|l| l.contains(why)),
        "{why} in the refusals: {refusals:?}"
    );
    drop(intruder);
}

#[test]
fn a_peer_with_a_certificate_from_another_ca_is_refused() {
    refused_third_member(
        |ca, pki| {
            // It trusts the cluster's CA, so it is the members that judge its certificate.
            let other = Ca::new(pki, "other-ca").expect("other ca");
            let c = other.issue(&Spec::member("m2")).expect("cert");
            peer_flags(&c, ca)
        },
        &[],
        "UnknownIssuer",
    );
}

#[test]
fn a_peer_with_a_common_name_not_allowed_is_refused() {
    refused_third_member(
        |ca, _| {
            let c = ca
                .issue(&Spec {
                    cn: "intruder",
                    ..Spec::member("m2")
                })
                .expect("cert");
            peer_flags(&c, ca)
        },
        &["--peer-cert-allowed-cn".into(), "etcd-peer".into()],
        "intruder",
    );
}
