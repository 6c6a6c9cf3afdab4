//! One scripted etcdctl 3.4 session against a real etcd (`oxcd_testkit::reference`)
//! started with `--quota-backend-bytes 65536`, as the research for issue 14 did, and
//! against oxcd with the same quota: 12 KB puts until one is refused, then what a full
//! database answers (the alarm listed, puts, txns with and without puts, lease grants,
//! reads, deletes, keepalives, revocations, compaction, Status errors, disarming, and the
//! alarm raised again by the next put while the database is still full). Every answer must be the same but for member and lease ids
//! and revisions; how many puts fit differs with the backend's format and is not
//! compared.

use std::io::Write as _;
use std::process::{Command, Stdio};

use etcd_client::Client;

use super::quota::without_json_lines;
use crate::common::InProc;
use crate::common::etcd::{assert_same_answers, start_etcd_with};

/// etcdctl 3.4 against `endpoint`, with `stdin`: exit code, stdout and stderr (without
/// the client's JSON log lines) as one line of text.
fn etcdctl(endpoint: &str, args: &[&str], stdin: &str) -> String {
    let mut child = Command::new("/usr/bin/etcdctl")
        .env("ETCDCTL_API", "3")
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("etcdctl (apt-get install -y etcd-client)");
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("etcdctl output");
    format!(
        "exit {} stdout {:?} stderr {:?}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        without_json_lines(&String::from_utf8_lossy(&out.stderr))
    )
}

/// `text` with the token after each `marker` (up to a space, newline, quote or
/// parenthesis), where there is one, replaced by `as_`.
fn mask_after(text: &str, marker: &str, as_: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(marker) {
        let (head, tail) = rest.split_at(at + marker.len());
        out.push_str(head);
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '(' | ')' | '\\'))
            .unwrap_or(tail.len());
        if end > 0 {
            out.push_str(as_);
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Masks what differs between the two servers: member ids, lease ids, revisions.
fn mask(text: &str) -> String {
    let t = mask_after(text, "memberID:", "ID");
    let t = mask_after(&t, "lease ", "LEASE");
    mask_after(&t, "compacted revision ", "REV")
}

/// The lease id in etcdctl's `lease <hex> granted with TTL(..)`.
fn lease_id(grant: &str) -> String {
    grant
        .split("lease ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .expect("a granted lease")
        .to_string()
}

/// The session; returns its answers and how many big puts fitted.
async fn session(endpoint: &str) -> (Vec<String>, usize) {
    let mut c = Client::connect([format!("http://{endpoint}")], None)
        .await
        .expect("connect");
    let mut out = Vec::new();
    let mut step = |name: &str, answer: String| out.push(format!("{name}: {}", mask(&answer)));
    let ctl = |args: &[&str]| etcdctl(endpoint, args, "");

    step("put k0", ctl(&["put", "k0", "v0"]));
    let grant = ctl(&["lease", "grant", "600"]);
    let lease = lease_id(&grant);
    step("lease grant before", grant);

    let value = "a".repeat(12_000);
    let mut fitted = 0;
    let refusal = loop {
        let answer = ctl(&["put", &format!("big/{fitted:04}"), &value]);
        if !answer.starts_with("exit 0 ") {
            break answer;
        }
        fitted += 1;
        assert!(fitted < 500, "500 puts of 12 KB never reached the quota");
    };
    step("the put past the quota", refusal);
    step("alarm list", ctl(&["alarm", "list"]));
    step("put small", ctl(&["put", "small", "v"]));
    step(
        "txn, put on success",
        etcdctl(endpoint, &["txn"], "\nput t v\n\n\n"),
    );
    step(
        "txn, put on failure",
        etcdctl(endpoint, &["txn"], "\n\nput t v\n\n"),
    );
    step(
        "txn without puts",
        etcdctl(endpoint, &["txn"], "\nget k0\ndel nothing\n\n\n"),
    );
    step("lease grant", ctl(&["lease", "grant", "60"]));
    step("get", ctl(&["get", "k0"]));
    step(
        "keep-alive",
        ctl(&["lease", "keep-alive", "--once", &lease]),
    );
    step("revoke", ctl(&["lease", "revoke", &lease]));
    step("del", ctl(&["del", "k0"]));
    let rev = c
        .get("k0", None)
        .await
        .expect("get")
        .header()
        .expect("header")
        .revision();
    step("compaction", ctl(&["compaction", &rev.to_string()]));
    let errors = c.status().await.expect("status").errors().join("|");
    step("status errors", errors);
    step("alarm disarm", ctl(&["alarm", "disarm"]));
    step("alarm list after disarm", ctl(&["alarm", "list"]));
    step("put while still full", ctl(&["put", "small", "v"]));
    step("alarm list again", ctl(&["alarm", "list"]));
    step("alarm disarm again", ctl(&["alarm", "disarm"]));
    (out, fitted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_session_matches_real_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (theirs, etcd_fitted) = {
        let flags = ["--quota-backend-bytes".to_string(), "65536".to_string()];
        let etcd = start_etcd_with(&dir.path().join("etcd"), "http", &flags, &[]);
        session(&etcd.endpoint).await
    };
    // The same quota: oxcd's counts the data as etcd's does (`Backend::quota_size`).
    let quota = 65536;
    let m = InProc::start(dir.path().join("oxcd"), |s| s.quota_backend_bytes = quota).await;
    let (ours, oxcd_fitted) = session(&m.addr.to_string()).await;
    m.stop().await;
    eprintln!(
        "12 KB puts that fitted: etcd {etcd_fitted} (quota 65536), oxcd {oxcd_fitted} \
         (quota {quota})"
    );
    assert_same_answers("quota", &theirs, &ours);
}
