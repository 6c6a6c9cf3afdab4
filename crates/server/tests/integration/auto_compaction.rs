//! Auto-compaction (`--auto-compaction-mode`, `--auto-compaction-retention`) as etcd
//! 3.5 does it: the compact revision moves without any Compact call (periodic and
//! revision mode), only the leader compacts and a new leader takes over, and bad values
//! stop the server with etcd's own messages and exit code (compared with the reference
//! etcd binary).

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{InProc, OxcdProcess, free_port, oxcd_command};
use etcd_client::{Client, GetOptions};
use oxcd_config::auto_compaction::AutoCompaction;

const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";

/// Waits (up to 30 s) until `url`'s member reports compact revision `want` (HashKV's
/// `compact_revision`); panics with the last one seen.
async fn wait_compacted_to(c: &mut Client, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = -1;
    while Instant::now() < deadline {
        if let Ok(h) = c.hash_kv(0).await {
            seen = h.compact_version();
            if seen == want {
                return;
            }
            assert!(seen <= want, "compacted past {want}: {seen}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("compact revision still {seen} after 30 s, expected {want}");
}

/// Puts `n` values of `key`; returns the revision of the last.
async fn put_times(c: &mut Client, key: &str, n: usize) -> i64 {
    let mut rev = 0;
    for i in 0..n {
        let r = c.put(key, format!("v{i}"), None).await.expect("put");
        rev = r.header().expect("header").revision();
    }
    rev
}

/// The error text of reading `key` at `rev` (None: the read worked).
async fn read_error(c: &mut Client, key: &str, rev: i64) -> Option<String> {
    match c.get(key, Some(GetOptions::new().with_revision(rev))).await {
        Ok(_) => None,
        Err(e) => Some(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn periodic_mode_compacts_without_a_compact_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |s| {
        s.auto_compaction = Some(AutoCompaction::Periodic(Duration::from_secs(2)));
    })
    .await;
    let mut c = m.client().await;
    let last = put_times(&mut c, "k", 5).await;
    // With no more writes, every sample is `last` once a retention period has passed.
    wait_compacted_to(&mut c, last).await;
    let e = read_error(&mut c, "k", last - 1).await.expect("compacted");
    assert!(e.contains(COMPACTED), "{e}");
    assert_eq!(read_error(&mut c, "k", last).await, None);
    // New writes are compacted in turn, about a period later.
    let later = put_times(&mut c, "k", 3).await;
    wait_compacted_to(&mut c, later).await;
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_mode_keeps_the_last_revisions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |s| {
        s.auto_compaction = Some(AutoCompaction::Revision(10));
        s.auto_compaction_revision_interval = Duration::from_millis(100);
    })
    .await;
    let mut c = m.client().await;
    let rev = put_times(&mut c, "k", 25).await;
    wait_compacted_to(&mut c, rev - 10).await;
    assert_eq!(read_error(&mut c, "k", rev - 10).await, None);
    let e = read_error(&mut c, "k", rev - 11).await.expect("compacted");
    assert!(e.contains(COMPACTED), "{e}");
    let rev = put_times(&mut c, "k", 5).await;
    wait_compacted_to(&mut c, rev - 10).await;
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_mode_waits_for_enough_revisions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |s| {
        s.auto_compaction = Some(AutoCompaction::Revision(10));
        s.auto_compaction_revision_interval = Duration::from_millis(50);
    })
    .await;
    let mut c = m.client().await;
    let rev = put_times(&mut c, "k", 5).await;
    assert!(rev <= 10);
    // The compactor looks about ten times, and each time current - 10 is not above
    // zero: nothing is compacted.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let h = c.hash_kv(0).await.expect("hashkv");
    assert_eq!(h.compact_version(), -1, "never compacted (etcd's -1)");
    assert_eq!(read_error(&mut c, "k", 1).await, None);
    m.stop().await;
}

/// Three `oxcd` processes with etcd's flags.
struct Three {
    procs: Vec<Option<OxcdProcess>>,
    urls: Vec<String>,
}

impl Three {
    fn start(dir: &Path, extra: &[&str]) -> Three {
        let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let peers: Vec<String> = (0..3)
            .map(|_| format!("http://127.0.0.1:{}", free_port()))
            .collect();
        let cluster = peers
            .iter()
            .enumerate()
            .map(|(i, u)| format!("m{i}={u}"))
            .collect::<Vec<_>>()
            .join(",");
        let pending: Vec<_> = (0..3)
            .map(|i| {
                let mut f: Vec<String> = [
                    "--name",
                    &format!("m{i}"),
                    "--listen-peer-urls",
                    &peers[i],
                    "--initial-advertise-peer-urls",
                    &peers[i],
                    "--initial-cluster",
                    &cluster,
                    "--heartbeat-interval",
                    "50",
                    "--election-timeout",
                    "500",
                ]
                .iter()
                .map(|s| s.to_string())
                .collect();
                f.extend(extra.iter().map(|s| s.to_string()));
                OxcdProcess::spawn(&dir.join(format!("m{i}")), ports[i], &f)
            })
            .collect();
        let procs: Vec<_> = pending.into_iter().map(|p| Some(p.wait_ready())).collect();
        let urls = procs.iter().flatten().map(|p| p.url.clone()).collect();
        Three { procs, urls }
    }

    /// (the index of the member every running member names as leader, the term), once
    /// they agree.
    async fn leader(&self) -> (usize, u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(found) = self.agreed_leader().await {
                return found;
            }
            assert!(Instant::now() < deadline, "no agreed leader within 30 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn agreed_leader(&self) -> Option<(usize, u64)> {
        let mut ids = [0; 3];
        let mut seen = Vec::new();
        for (i, p) in self.procs.iter().enumerate() {
            if p.is_none() {
                continue;
            }
            let mut c = Client::connect([self.urls[i].clone()], None).await.ok()?;
            let st = c.status().await.ok()?;
            ids[i] = st.header()?.member_id();
            seen.push((st.leader(), st.raft_term()));
        }
        let (leader, term) = *seen.first()?;
        if leader == 0 || seen.iter().any(|s| *s != (leader, term)) {
            return None;
        }
        ids.iter().position(|id| *id == leader).map(|i| (i, term))
    }

    fn logged(&self, i: usize, text: &str) -> usize {
        self.procs[i].as_ref().map_or(0, |p| p.logged(text).len())
    }

    /// Waits (up to 30 s) until member `i` has logged `text` `n` times.
    async fn wait_logged(&self, i: usize, text: &str, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.logged(i, text) < n {
            assert!(
                Instant::now() < deadline,
                "m{i} logged {text:?} {} times in 30 s, expected {n}",
                self.logged(i, text)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

const STARTING: &str = "starting auto periodic compaction";
const COMPLETED: &str = "completed auto periodic compaction";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_compacts_and_a_new_leader_takes_over() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut three = Three::start(dir.path(), &["--auto-compaction-retention", "2s"]);
    let (leader, term) = three.leader().await;
    let mut c = Client::connect([three.urls[leader].clone()], None)
        .await
        .expect("connect");
    let last = put_times(&mut c, "k", 5).await;
    three.wait_logged(leader, COMPLETED, 2).await;
    for url in &three.urls {
        let mut c = Client::connect([url.clone()], None).await.expect("connect");
        wait_compacted_to(&mut c, last).await;
    }
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    if three.leader().await == (leader, term) {
        for &f in &followers {
            assert_eq!(three.logged(f, STARTING), 0, "follower m{f} compacted");
        }
    } else {
        eprintln!("leadership changed during the test: the followers' logs are not checked");
    }

    // The leader goes (kill -9); the next one compacts the writes made since.
    three.procs[leader] = None;
    let (next, term) = three.leader().await;
    assert_ne!(next, leader);
    let mut c = Client::connect([three.urls[next].clone()], None)
        .await
        .expect("connect");
    let later = put_times(&mut c, "k", 3).await;
    wait_compacted_to(&mut c, later).await;
    three.wait_logged(next, COMPLETED, 1).await;
    let other = followers.into_iter().find(|i| *i != next).expect("other");
    if three.leader().await == (next, term) {
        assert_eq!(
            three.logged(other, STARTING),
            0,
            "follower m{other} compacted"
        );
    }
}

/// How a start with `args` (and `env`) ends: (exit code, the error it reports). For
/// etcd, the `error` of its last JSON log line.
fn start_failure(binary: Option<&Path>, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let client = format!("http://127.0.0.1:{}", free_port());
    let peer = format!("http://127.0.0.1:{}", free_port());
    let mut cmd = match binary {
        Some(b) => {
            let mut c = Command::new(b);
            // etcd 3.4 (Debian's, when no reference is named) logs capnslog text.
            c.args(["--logger", "zap"]);
            for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("ETCD_")) {
                c.env_remove(k);
            }
            c
        }
        None => oxcd_command(),
    };
    cmd.arg("--data-dir")
        .arg(dir.path().join("d"))
        .args(["--listen-client-urls", &client])
        .args(["--advertise-client-urls", &client])
        .args(["--listen-peer-urls", &peer])
        .args(["--initial-advertise-peer-urls", &peer])
        .args(["--initial-cluster", &format!("default={peer}")])
        .args(args)
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    if binary.is_none() {
        return (code, stderr.lines().next().unwrap_or_default().to_string());
    }
    let error = stderr
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| v.get("error").and_then(|e| e.as_str()).map(String::from))
        .unwrap_or_else(|| panic!("etcd reported no error for {args:?}: {stderr}"));
    (code, error)
}

#[test]
fn bad_values_stop_the_server_as_etcd_does() {
    let etcd = oxcd_testkit::reference::etcd_binary();
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);
    let cases: &[Case] = &[
        (&["--auto-compaction-mode", "foo"], &[]),
        (&["--auto-compaction-retention", "-1"], &[]),
        (&["--auto-compaction-retention", "abc"], &[]),
        (&["--auto-compaction-retention", "1x"], &[]),
        (&["--auto-compaction-retention", "1.2.3s"], &[]),
        (&["--auto-compaction-retention", "1_000"], &[]),
        (&["--auto-compaction-retention", "é"], &[]),
        (
            &["--auto-compaction-retention", "99999999999999999999"],
            &[],
        ),
        (
            &[
                "--auto-compaction-mode",
                "revision",
                "--auto-compaction-retention",
                "5 ",
            ],
            &[],
        ),
        (
            &[
                "--auto-compaction-mode=",
                "--auto-compaction-retention",
                "1h",
            ],
            &[],
        ),
        (&[], &[("ETCD_AUTO_COMPACTION_RETENTION", "-1")]),
        (&[], &[("ETCD_AUTO_COMPACTION_MODE", "hourly")]),
    ];
    for (args, env) in cases {
        let theirs = start_failure(Some(&etcd), args, env);
        let ours = start_failure(None, args, env);
        eprintln!("{args:?} {env:?}: etcd {theirs:?}");
        assert_eq!(ours, theirs, "{args:?} {env:?}");
    }
}
