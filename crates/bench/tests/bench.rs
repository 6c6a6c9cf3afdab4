//! oxcd-bench end to end: the workloads against a real oxcd process, and the
//! side-by-side benchmarks (the whole comparison of a 3-member etcd 3.4 and a 3-member
//! oxcd, the learner catch-up, snapshot/restore/defragmentation) at a tiny scale.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BENCH: &str = env!("CARGO_BIN_EXE_oxcd-bench");

fn oxcd() -> PathBuf {
    oxcd_testkit::process::built_oxcd()
}

fn free_port() -> u16 {
    oxcd_testkit::ports::free_port().expect("free port")
}

/// One oxcd member, killed on drop.
struct Member(Child);

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_member(dir: &Path) -> (Member, String) {
    let (client, peer) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{client}");
    let child = Command::new(oxcd())
        .arg(format!("--data-dir={}", dir.join("data").display()))
        .arg(format!("--listen-client-urls={url}"))
        .arg(format!("--advertise-client-urls={url}"))
        .arg(format!("--listen-peer-urls=http://127.0.0.1:{peer}"))
        .arg(format!(
            "--initial-advertise-peer-urls=http://127.0.0.1:{peer}"
        ))
        .arg(format!("--initial-cluster=default=http://127.0.0.1:{peer}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start oxcd");
    let member = Member(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", client)).is_err() {
        assert!(Instant::now() < deadline, "oxcd did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    (member, url)
}

/// Runs oxcd-bench with `args` and returns its stdout; it must exit 0.
fn bench(args: &[&str]) -> String {
    let out = Command::new(BENCH)
        .args(args)
        .output()
        .expect("run oxcd-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "oxcd-bench {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn json(args: &[&str]) -> serde_json::Value {
    let out = bench(args);
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn workloads_against_a_real_member() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_member, url) = start_member(dir.path());
    let common = [
        "--endpoints",
        url.as_str(),
        "--clients",
        "20",
        "--conns",
        "4",
    ];
    let run = |rest: &[&str]| {
        let mut args = common.to_vec();
        args.push("--json");
        args.extend_from_slice(rest);
        json(&args)
    };
    let put = run(&[
        "put",
        "--total",
        "300",
        "--key-space-size",
        "50",
        "--val-size",
        "64",
    ]);
    assert_eq!(put["ok"], 300, "{put}");
    assert_eq!(put["failed"], 0, "{put}");
    assert!(put["qps"].as_f64().is_some_and(|q| q > 0.0), "{put}");
    assert!(
        put["latency_ms"]["p99"].as_f64().is_some_and(|v| v > 0.0),
        "{put}"
    );
    for consistency in ["l", "s"] {
        let range = run(&[
            "range",
            "00000001",
            "--total",
            "200",
            "--consistency",
            consistency,
        ]);
        assert_eq!(range["ok"], 200, "{range}");
    }
    let txn = run(&[
        "txn-put",
        "--total",
        "100",
        "--txn-ops",
        "4",
        "--key-space-size",
        "50",
    ]);
    assert_eq!(txn["ok"], 100, "{txn}");
    let mixed = run(&["txn-mixed", "--total", "200", "--rw-ratio", "3"]);
    assert_eq!(mixed["ok"], 200, "{mixed}");
    let watch = run(&["watch", "--put-total", "10"]);
    assert_eq!(
        watch["extra"]["events received"], watch["extra"]["events expected"],
        "{watch}"
    );
    let latency = run(&["watch-latency", "--put-total", "20"]);
    assert_eq!(latency["failed"], 0, "{latency}");
    let lease = run(&["lease-keepalive", "--total", "10"]);
    assert_eq!(lease["ok"], 10, "{lease}");
    // The text layout follows etcd's benchmark tool.
    let text = bench(&["--endpoints", url.as_str(), "put", "--total", "20"]);
    for needle in [
        "Summary:",
        "Requests/sec:",
        "Response time histogram:",
        "99.9% in",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}

/// `--user` logs every connection in; `authenticate` counts logins; a wrong password is
/// etcd's error, not a run of failures.
#[test]
fn user_flag_logs_in_and_logins_are_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_member, url) = start_member(dir.path());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let opts = oxcd_client::ConnectOptions::default();
        let c = oxcd_client::Client::connect(std::slice::from_ref(&url), &opts)
            .await
            .expect("connect");
        c.user_add("root", "rootpw", false).await.expect("root");
        c.role_add("root").await.expect("root role");
        c.user_grant_role("root", "root").await.expect("grant");
        c.auth_enable().await.expect("auth on");
    });
    let run = |rest: &[&str]| {
        let mut args = vec![
            "--endpoints",
            url.as_str(),
            "--clients",
            "4",
            "--conns",
            "2",
        ];
        args.extend_from_slice(rest);
        args.push("--json");
        json(&args)
    };
    let put = run(&["--user", "root:rootpw", "put", "--total", "50"]);
    assert_eq!(
        (put["ok"].as_u64(), put["failed"].as_u64()),
        (Some(50), Some(0)),
        "{put}"
    );
    let logins = run(&[
        "authenticate",
        "--name",
        "root",
        "--password",
        "rootpw",
        "--total",
        "8",
    ]);
    assert_eq!(logins["ok"], 8, "{logins}");
    let bad = run(&[
        "authenticate",
        "--name",
        "root",
        "--password",
        "x",
        "--total",
        "2",
    ]);
    assert_eq!(bad["failed"], 2, "{bad}");
    let out = Command::new(BENCH)
        .args([
            "--endpoints",
            url.as_str(),
            "--user",
            "root:wrong",
            "put",
            "--total",
            "5",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("etcdserver: authentication failed, invalid user ID or password"),
        "{err}"
    );
    let out = Command::new(BENCH)
        .args(["--endpoints", url.as_str(), "put", "--total", "5", "--json"])
        .output()
        .expect("run");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("user name is empty"),
        "without --user every put is refused: {text}"
    );
}

#[test]
fn a_missing_ca_file_is_a_clear_error() {
    let out = Command::new(BENCH)
        .args([
            "--endpoints",
            "127.0.0.1:1",
            "--cacert",
            "no-such-ca.pem",
            "put",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("open no-such-ca.pem: no such file or directory"),
        "{err}"
    );
}

/// Checks the markdown report at `out`: what the command printed, holding every one of
/// `needles`; returns the raw figures written beside it (`.json`).
fn written_report(out: &Path, printed: &str, needles: &[&str]) -> serde_json::Value {
    let md = std::fs::read_to_string(out).expect("report written");
    assert_eq!(md.trim(), printed.trim());
    for needle in needles {
        assert!(md.contains(needle), "{needle:?} missing from:\n{md}");
    }
    serde_json::from_str(
        &std::fs::read_to_string(out.with_extension("json")).expect("raw figures written"),
    )
    .expect("json")
}

#[test]
fn compare_runs_etcd_and_oxcd_and_writes_the_report() {
    let etcd = Path::new("/usr/bin/etcd");
    assert!(
        etcd.exists(),
        "etcd 3.4 is needed (apt-get install etcd-server; scripts/test.sh installs it)"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("report.md");
    let oxcd = oxcd();
    let data = dir.path().join("data");
    let report = bench(&[
        "compare",
        "--etcd",
        "/usr/bin/etcd",
        "--oxcd",
        oxcd.to_str().expect("utf-8 path"),
        "--dir",
        data.to_str().expect("utf-8 path"),
        "--out",
        out.to_str().expect("utf-8 path"),
        "--scale",
        "0.002",
        "--load-keys",
        "2000",
    ]);
    let raw = written_report(
        &out,
        &report,
        &[
            "| put, 1 client / 1 conn (to the leader) |",
            "| CPU per request, µs |",
            "| range linearizable, 1000 clients / 100 conns |",
            "| auth: put, 1000 clients / 100 conns |",
            "| auth: authenticate (bcrypt cost 10), 20 clients / 4 conns |",
            "The cost of auth",
            "peak RSS of the largest member",
            "follower restart until it serves the keys",
        ],
    );
    let systems: Vec<&str> = raw
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|s| s[0].as_str())
        .collect();
    assert_eq!(systems, ["etcd", "oxcd"]);
    for s in raw.as_array().expect("array") {
        let o = &s[1];
        assert_eq!(o["loaded_keys"], 2000, "{o}");
        assert_eq!(o["load"]["failed"], 0, "{o}");
        assert!(o["restart_secs"].as_f64().is_some_and(|t| t > 0.0), "{o}");
        assert!(o["peak_rss_bytes"].as_u64().is_some_and(|b| b > 0), "{o}");
        for case in o["cases"].as_array().expect("cases") {
            if case["unsupported"].is_string() {
                continue;
            }
            assert_eq!(case["report"]["failed"], 0, "{}: {case}", s[0]);
            assert!(
                case["members_cpu_us"].as_f64().is_some(),
                "members' CPU measured: {}: {case}",
                s[0]
            );
        }
    }
    // Both systems have Watch: the watch case ran and delivered every event.
    for (system, _) in systems.iter().enumerate() {
        let watch = &raw[system][1]["cases"][6]["report"];
        assert_eq!(
            watch["extra"]["events received"], watch["extra"]["events expected"],
            "{watch}"
        );
    }
    assert!(
        !data.join("etcd").exists() && !data.join("oxcd").exists(),
        "data dirs left behind"
    );
}

/// The etcd to add a learner to: the reference etcd when `OXCD_REFERENCE_ETCD` names
/// it, else etcd 3.5 where `../shared/tools/fetch-etcd35.sh` puts it, else Debian's 3.4
/// (learners exist since 3.4); none when no etcd is installed.
fn learner_etcd() -> Option<PathBuf> {
    std::env::var_os(oxcd_testkit::reference::VARIABLE)
        .map(PathBuf::from)
        .into_iter()
        .chain([
            PathBuf::from("/tmp/etcd-3.5/bin/etcd"),
            PathBuf::from(oxcd_testkit::reference::DEBIAN_ETCD),
        ])
        .find(|p| p.exists())
}

/// A side-by-side benchmark's run at a tiny scale.
struct SideBySide {
    /// The etcd it ran.
    etcd: PathBuf,
    /// The first round's outcomes, etcd's then oxcd's.
    outcomes: Vec<serde_json::Value>,
    /// Where each system's round left its logs.
    kept: [PathBuf; 2],
    _dir: tempfile::TempDir,
}

/// Runs `oxcd-bench <mode> <args>` on etcd (none installed: `None`, the test is
/// skipped) and the built oxcd, one round with etcd first, and checks what is common
/// to these benchmarks: the report written and printed with every one of `needles`,
/// both systems in it, each one's member log kept and its data dir removed.
fn side_by_side(mode: &str, args: &[&str], needles: &[&str]) -> Option<SideBySide> {
    let Some(etcd) = learner_etcd() else {
        eprintln!("skipped: no etcd binary (apt-get install etcd-server, or fetch-etcd35.sh)");
        return None;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join(format!("{mode}.md"));
    let data = dir.path().join("data");
    let oxcd = oxcd();
    let mut all = vec![
        mode,
        "--etcd",
        etcd.to_str().expect("utf-8 path"),
        "--oxcd",
        oxcd.to_str().expect("utf-8 path"),
        "--dir",
        data.to_str().expect("utf-8 path"),
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    all.extend_from_slice(args);
    let report = bench(&all);
    let mut needles = needles.to_vec();
    needles.extend([
        "## Round 1: etcd, then oxcd",
        "| | etcd | oxcd | oxcd/etcd |",
    ]);
    let raw = written_report(&out, &report, &needles);
    let outcomes = raw[0].as_array().expect("one round of outcomes").clone();
    let systems: Vec<&str> = outcomes
        .iter()
        .filter_map(|o| o["system"].as_str())
        .collect();
    assert_eq!(systems, ["etcd", "oxcd"]);
    let kept = ["etcd", "oxcd"].map(|system| data.join(format!("round1-{system}")));
    for k in &kept {
        assert!(k.join("m0.log").exists(), "the member's log is kept");
        assert!(!k.join("m0").exists(), "data dirs left behind");
    }
    Some(SideBySide {
        etcd,
        outcomes,
        kept,
        _dir: dir,
    })
}

#[test]
fn learner_catchup_runs_etcd_and_oxcd_and_writes_the_report() {
    let Some(run) = side_by_side(
        "learner-catchup",
        &[
            "--data-mb",
            "5",
            "--snapshot-count",
            "500",
            "--settle-secs",
            "0",
            "--baseline-secs",
            "2",
            "--write-rate",
            "200",
            "--timeout-secs",
            "40",
        ],
        &[
            "| **catch-up: MemberAdd → MemberPromote accepted, s** |",
            "| **write p99 during catch-up, ms** |",
            "| baseline write p99 (before MemberAdd), ms |",
            "| leader term before → after |",
            "Targets: catch-up ≤ 0.5x etcd's",
        ],
    ) else {
        return;
    };
    for o in &run.outcomes {
        assert_eq!(o["fill"]["puts"], 5120, "{o}");
        assert!(o["catchup_secs"].as_f64().is_some_and(|t| t > 0.0), "{o}");
        assert!(
            o["learner_all_keys_secs"].as_f64().is_some(),
            "the promoted learner serves every key: {o}"
        );
        assert!(o["learner_du_bytes"].as_u64().is_some_and(|b| b > 0), "{o}");
    }
    for kept in &run.kept {
        assert!(kept.join("m3.log").exists(), "the learner's log is kept");
    }
}

/// Snapshot, restore and defragmentation on one member of each, 4 MiB of data.
#[test]
fn backup_runs_etcd_and_oxcd_and_writes_the_report() {
    let Some(run) = side_by_side(
        "backup",
        &[
            "--data-mb",
            "4",
            "--writers",
            "10",
            "--write-rate",
            "200",
            "--baseline-secs",
            "1",
        ],
        &[
            "| **snapshot save, MB/s of database** |",
            "| **restore, s** |",
            "| **longest stretch of defrag without a successful put, ms** |",
            "| write p99 before defrag (baseline), ms |",
            "Targets: snapshot MB/s ≥ 1x etcd's",
        ],
    ) else {
        return;
    };
    for o in &run.outcomes {
        assert_eq!(o["fill"]["puts"], 4096, "{o}");
        assert_eq!(o["overwrite"]["puts"], 2048, "{o}");
        assert_eq!(o["live_keys"], 4096, "{o}");
        let snapshot = &o["snapshot"];
        assert!(snapshot["error"].is_null(), "{snapshot}");
        assert_eq!(snapshot["sha256_ok"], true, "{snapshot}");
        assert!(
            snapshot["file_bytes"].as_u64().is_some_and(|b| b > 4 << 20),
            "the snapshot holds the data: {snapshot}"
        );
        // A restore was timed, or it says why not (oxcdutl may not be built).
        let restore = &o["restore"];
        assert!(
            restore["secs"].as_f64().is_some() || restore["note"].is_string(),
            "{restore}"
        );
        let defrag = &o["defrag"];
        assert!(defrag["error"].is_null(), "{defrag}");
        assert!(defrag["secs"].as_f64().is_some(), "{defrag}");
        assert!(defrag["during"]["ok"].as_u64().is_some(), "{defrag}");
        assert_eq!(defrag["all"]["errors"], serde_json::json!({}), "{defrag}");
    }
    assert_eq!(
        run.outcomes[0]["restore"]["secs"].as_f64().is_some(),
        run.etcd.with_file_name("etcdutl").exists(),
        "etcd's restore is timed where etcdutl is beside etcd: {}",
        run.outcomes[0]["restore"]
    );
    for kept in &run.kept {
        assert!(!kept.join("backup").exists(), "snapshot left behind");
    }
}
