//! The real etcdctl 3.4 (Debian `etcd-client`) runs one scripted session against oxcd
//! and against a real etcd 3.4 (Debian `etcd-server`); every command's stdout, `Error:`
//! lines and exit code must match. Only what legitimately differs between two servers is
//! masked: cluster/member ids, raft term and index, server version, db size, timings.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{InProc, free_port};

const ETCD: &str = "/usr/bin/etcd";
const ETCDCTL: &str = "/usr/bin/etcdctl";

/// The session: etcdctl arguments and optional stdin.
/// The session (see the file's header).
fn script() -> Vec<(String, String)> {
    let text = include_str!("../../../testdata/etcdctl-session.txt");
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(" <<< ") {
            Some((args, stdin)) => (args.to_string(), stdin.replace("\\n", "\n")),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

struct Etcd {
    child: Child,
    endpoint: String,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_etcd(dir: &Path) -> Etcd {
    assert!(
        Path::new(ETCD).exists() && Path::new(ETCDCTL).exists(),
        "this test needs etcd 3.4 and etcdctl: apt-get install -y etcd-server etcd-client"
    );
    let (c, p) = (free_port(), free_port());
    let client = format!("http://127.0.0.1:{c}");
    let peer = format!("http://127.0.0.1:{p}");
    let child = Command::new(ETCD)
        .arg("--data-dir")
        .arg(dir)
        .args([
            "--listen-client-urls",
            &client,
            "--advertise-client-urls",
            &client,
        ])
        .args([
            "--listen-peer-urls",
            &peer,
            "--initial-advertise-peer-urls",
            &peer,
        ])
        .args(["--initial-cluster", &format!("default={peer}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start etcd");
    let etcd = Etcd {
        child,
        endpoint: format!("127.0.0.1:{c}"),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if run(&etcd.endpoint, "endpoint health", "").2 == 0 {
            return etcd;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("etcd did not become healthy");
}

/// Runs etcdctl; returns stdout, the `Error:` and health lines of stderr, exit code.
fn run(endpoint: &str, args: &str, stdin: &str) -> (String, String, i32) {
    let mut words: Vec<String> = args
        .split(' ')
        .map(|w| w.trim_matches('"').to_string())
        .collect();
    words.insert(0, format!("--endpoints={endpoint}"));
    let mut child = Command::new(ETCDCTL)
        .args(&words)
        .env("ETCDCTL_API", "3")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run etcdctl");
    if let Some(mut i) = child.stdin.take() {
        std::io::Write::write_all(&mut i, stdin.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("etcdctl output");
    let stderr = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.starts_with('{'))
        .map(|l| format!("{l}\n"))
        .collect();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr,
        out.status.code().unwrap_or(-1),
    )
}

/// Masks what differs between two servers that hold the same data.
fn mask(s: &str, endpoint: &str) -> String {
    let mut out = s.replace(endpoint, "ENDPOINT");
    for key in [
        "cluster_id",
        "member_id",
        "raft_term",
        "raftIndex",
        "raftTerm",
        "leader",
        "raftAppliedIndex",
        "dbSize",
        "dbSizeInUse",
        "ClusterID",
        "MemberID",
        "RaftTerm",
    ] {
        out = mask_number_after(&out, &format!("\"{key}\":"));
        out = mask_number_after(&out, &format!("\"{key}\" : "));
    }
    out = mask_between(&out, "\"version\":\"", "\"");
    out = mask_between(&out, "took = ", "\n");
    // endpoint status: "ENDPOINT, <id>, <version>, <db size>, leader, learner, term, index, applied, errors"
    out.lines()
        .map(|l| {
            let cells: Vec<&str> = l.split(", ").collect();
            if l.starts_with("ENDPOINT, ") && cells.len() >= 9 {
                format!(
                    "ENDPOINT, ID, VERSION, SIZE, {}, {}, TERM, INDEX, APPLIED, {}",
                    cells[4],
                    cells[5],
                    cells[9..].join(", ")
                )
            } else if l.starts_with("| ENDPOINT |") && l.split('|').count() >= 12 {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                format!(
                    "| ENDPOINT | ID | VERSION | SIZE | {} | {} | TERM | INDEX | APPLIED | {} |",
                    cells[5], cells[6], cells[10]
                )
            } else if l.starts_with("+--") && l.matches('+').count() > 3 {
                "+--".to_string()
            } else if l.starts_with("|    ENDPOINT") {
                l.split_whitespace().collect::<Vec<_>>().join(" ")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn mask_number_after(s: &str, key: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(key) {
        out.push_str(&rest[..i + key.len()]);
        rest = &rest[i + key.len()..];
        let n = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if n > 0 {
            out.push('N');
        }
        rest = &rest[n..];
    }
    out.push_str(rest);
    out
}

fn mask_between(s: &str, start: &str, end: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(start) {
        out.push_str(&rest[..i + start.len()]);
        rest = &rest[i + start.len()..];
        let n = rest.find(end).unwrap_or(rest.len());
        out.push('X');
        rest = &rest[n..];
    }
    out.push_str(rest);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_session_matches_real_etcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd(&dir.path().join("etcd"));
    let oxcd = InProc::start(dir.path().join("oxcd"), |_| {}).await;
    let ox_ep = oxcd.addr.to_string();
    let mut mismatches = Vec::new();
    let script = script();
    for (args, stdin) in &script {
        let (ep1, ep2, a, s) = (
            etcd.endpoint.clone(),
            ox_ep.clone(),
            args.to_string(),
            stdin.to_string(),
        );
        let (want, got) =
            tokio::task::spawn_blocking(move || (run(&ep1, &a, &s), run(&ep2, &a, &s)))
                .await
                .expect("join");
        let want = (
            mask(&want.0, &etcd.endpoint),
            mask(&want.1, &etcd.endpoint),
            want.2,
        );
        let got = (mask(&got.0, &ox_ep), mask(&got.1, &ox_ep), got.2);
        if want != got {
            mismatches.push(format!("etcdctl {args}\n  etcd: {want:?}\n  oxcd: {got:?}"));
        }
    }
    eprintln!(
        "{} etcdctl commands compared, {} mismatches",
        script.len(),
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "etcdctl output differs:\n{}",
        mismatches.join("\n")
    );
    oxcd.stop().await;
}
