//! `--listen-client-http-urls`, compared with etcd 3.5.16 started with the same flags
//! (etcd's `server/embed/etcd.go`, `configureClientListeners`, and `embed/serve.go`,
//! `onlyGRPC`/`onlyHttp`): the client URL then serves gRPC only (plain HTTP is refused
//! at the protocol), the HTTP URL serves `/health`, `/version`, `/metrics` and the JSON
//! gateway, and the same URL in both flags stops the server with etcd's message.
//! A gRPC client pointed at the HTTP URL fails on both; etcd's waits until the client
//! gives up, oxcd's is answered Unimplemented at once.

use std::process::{Command, Stdio};

use crate::common::etcd::start_etcd_with;
use crate::common::{OxcdProcess, free_port, oxcd_command};

/// What a server with a client URL and an HTTP URL answers.
#[derive(Debug, PartialEq)]
struct Answers {
    /// `GET /health` on the client (gRPC) URL succeeds.
    health_on_grpc_port: bool,
    /// `GET /health` on the HTTP URL: its body.
    health_on_http_port: String,
    /// `GET /version` on the HTTP URL: its keys, in the order printed.
    version_keys_on_http_port: Vec<String>,
    /// The gateway's range on the HTTP URL: its HTTP status.
    gateway_on_http_port: String,
    /// etcdctl's put through the client URL succeeds.
    put_on_grpc_port: bool,
    /// etcdctl's put through the HTTP URL succeeds.
    put_on_http_port: bool,
}

/// curl: whether it succeeded, and what it printed.
fn curl(args: &[&str]) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-s", "-m", "5"])
        .args(args)
        .output()
        .expect("curl (apt-get install -y curl)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// etcdctl 3.4's put through `endpoint`: whether it succeeded.
fn put(endpoint: &str) -> bool {
    Command::new("/usr/bin/etcdctl")
        .env("ETCDCTL_API", "3")
        .args([
            &format!("--endpoints={endpoint}"),
            "--dial-timeout=2s",
            "--command-timeout=3s",
            "put",
            "foo",
            "bar",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("etcdctl (apt-get install -y etcd-client)")
        .success()
}

/// The keys of a flat JSON object's text, in the order printed.
fn json_keys(text: &str) -> Vec<String> {
    text.split('"')
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[1].starts_with(':'))
        .map(|w| w[0].to_string())
        .collect()
}

fn answers(grpc: &str, http: &str) -> Answers {
    Answers {
        health_on_grpc_port: curl(&[&format!("http://{grpc}/health")]).0,
        health_on_http_port: curl(&[&format!("http://{http}/health")]).1,
        version_keys_on_http_port: json_keys(&curl(&[&format!("http://{http}/version")]).1),
        gateway_on_http_port: curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "POST",
            "-d",
            r#"{"key":"Zm9v"}"#,
            &format!("http://{http}/v3/kv/range"),
        ])
        .1,
        put_on_grpc_port: put(grpc),
        put_on_http_port: put(http),
    }
}

#[test]
fn an_http_url_serves_http_and_the_client_url_grpc_as_etcds_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let http = format!("127.0.0.1:{}", free_port());
    let flags = [
        "--listen-client-http-urls".to_string(),
        format!("http://{http}"),
    ];
    let etcd = start_etcd_with(&dir.path().join("etcd"), "http", &flags, &[]);
    let theirs = answers(&etcd.endpoint, &http);
    drop(etcd);

    let port = free_port();
    let http = format!("127.0.0.1:{}", free_port());
    let flags = [
        "--listen-client-http-urls".to_string(),
        format!("http://{http}"),
    ];
    let oxcd = OxcdProcess::start_with(&dir.path().join("oxcd"), port, &flags);
    let mut ours = answers(&format!("127.0.0.1:{port}"), &http);
    // etcd 3.6's `/version` adds `storage` (versions.rs); the reference here is 3.5.
    ours.version_keys_on_http_port.retain(|k| k != "storage");
    let logged = oxcd.logged("serving client traffic");
    drop(oxcd);

    assert_eq!(
        ours,
        Answers {
            health_on_grpc_port: false,
            health_on_http_port: r#"{"health":"true","reason":""}"#.to_string(),
            version_keys_on_http_port: vec!["etcdserver".to_string(), "etcdcluster".to_string()],
            gateway_on_http_port: "200".to_string(),
            put_on_grpc_port: true,
            put_on_http_port: false,
        }
    );
    assert_eq!(ours, theirs, "oxcd's answers differ from etcd's");
    // etcd's log field says what each listener serves.
    for traffic in [r#""traffic":"grpc""#, r#""traffic":"http""#] {
        assert!(
            logged.iter().any(|l| l.contains(traffic)),
            "no listener logged {traffic}: {logged:?}"
        );
    }
}

#[test]
fn the_same_url_for_grpc_and_http_is_refused_as_etcd_refuses_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("http://127.0.0.1:{}", free_port());
    let peer = format!("http://127.0.0.1:{}", free_port());
    let flags = [
        "--listen-client-urls",
        &url,
        "--advertise-client-urls",
        &url,
        "--listen-client-http-urls",
        &url,
        "--listen-peer-urls",
        &peer,
        "--initial-advertise-peer-urls",
        &peer,
        "--initial-cluster",
        &format!("default={peer}"),
    ];
    let expected = format!(
        "cannot bind both --client-listen-urls and --client-listen-http-urls on the same url {url}"
    );
    let etcd = Command::new(oxcd_testkit::reference::etcd_binary())
        .arg("--data-dir")
        .arg(dir.path().join("etcd"))
        .args(flags)
        .output()
        .expect("etcd");
    let oxcd = oxcd_command()
        .arg("--data-dir")
        .arg(dir.path().join("oxcd"))
        .args(flags)
        .output()
        .expect("oxcd");
    for (name, out) in [("etcd", etcd), ("oxcd", oxcd)] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} started");
        assert!(err.contains(&expected), "{name}: {err}");
    }
}
