//! `oxcdutl migrate` as etcdutl 3.6.14's `migrate` (`etcdutl/etcdutl/migrate_command.go`,
//! `server/storage/schema/migration.go`; no etcdutl 3.6 runs here): a stopped member's
//! storage version taken from 3.6 to 3.5 and back, its argument errors, a version it
//! does not know, a missing data dir; the member refuses to run as 3.5 while its cluster
//! version says 3.6 (etcd's `MustDetectDowngrade`), and runs again once migrated back.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{oxcdutl, spawn_oxcd_with, start_oxcd};
use oxcd_testkit::ports::free_port;

/// `oxcdutl migrate` with `args`: exit code, stderr.
fn migrate(args: &[&str]) -> (i32, String) {
    let out = Command::new(oxcdutl())
        .arg("migrate")
        .args(args)
        .output()
        .expect("run oxcdutl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn curl(url: &str) -> String {
    let out = Command::new("curl")
        .args(["-s", url])
        .output()
        .expect("curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until `/version` of `endpoint` says `want`.
fn version_becomes(endpoint: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = curl(&format!("http://{endpoint}/version"));
        if got == want {
            return;
        }
        assert!(Instant::now() < deadline, "/version stayed {got}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_dir_goes_to_3_5_and_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("m");
    let d = data.to_str().expect("utf-8 path");
    let server = start_oxcd(&data);
    let mut c = server.client().await;
    for i in 0..50 {
        c.put(format!("k{i:02}"), "v", None).await.expect("put");
    }
    version_becomes(
        &server.endpoint,
        r#"{"etcdserver":"3.6.14","etcdcluster":"3.6.0","storage":"3.6.0"}"#,
    );
    server.stop();

    let refused = migrate(&["--data-dir", d, "--target-version", "3.4"]);
    assert_eq!(
        refused,
        (
            128,
            "Error: target version \"3.4\" not supported. Minimal \"3.5\"\n".into()
        )
    );
    let refused = migrate(&["--data-dir", d, "--target-version", "3"]);
    assert_eq!(
        refused,
        (
            128,
            "Error: wrong target version format, expected \"X.Y\", got \"3\"\n".into()
        )
    );
    let (code, err) = migrate(&["--data-dir", d, "--target-version", "3.7"]);
    assert_eq!(code, 1);
    assert!(
        err.ends_with("Error: cannot create migration plan: version \"3.7\" is not supported\n"),
        "{err}"
    );
    let (code, err) = migrate(&["--data-dir", "/nonexistent-oxcd", "--target-version", "3.5"]);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "Error: stat /nonexistent-oxcd/member/snap/db: no such file or directory\n"
    );

    let (code, err) = migrate(&["--data-dir", d, "--target-version", "3.6"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("\tinfo\t")
            && err.contains("storage version up-to-date\t{\"storage-version\": \"3.6\"}"),
        "{err}"
    );
    let (code, err) = migrate(&["--data-dir", d, "--target-version", "3.5"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("updated storage version\t{\"new-storage-version\": \"3.5.0\"}"),
        "{err}"
    );

    // The cluster version still says 3.6: a 3.5 member stops (etcd 3.5 and 3.6 panic
    // the same way); migrating the storage alone is not a downgrade.
    let (cp, pp) = (free_port().expect("port"), free_port().expect("port"));
    let peer = format!("http://127.0.0.1:{pp}");
    let old = spawn_oxcd_with(
        "default",
        &data,
        cp,
        &peer,
        &format!("default={peer}"),
        &["--emulated-version=3.5".to_string()],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let log = std::fs::read_to_string(&old.log).unwrap_or_default();
        if log
            .contains("invalid downgrade; server version is lower than determined cluster version")
        {
            break;
        }
        assert!(Instant::now() < deadline, "no refusal logged:\n{log}");
        std::thread::sleep(Duration::from_millis(100));
    }
    old.stop();

    let (code, err) = migrate(&["--data-dir", d, "--target-version", "3.6"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("\"new-storage-version\": \"3.6.0\""), "{err}");
    // The log still holds the first run's "ready" line: wait for this run's answer.
    let again = start_oxcd(&data);
    version_becomes(
        &again.endpoint,
        r#"{"etcdserver":"3.6.14","etcdcluster":"3.6.0","storage":"3.6.0"}"#,
    );
    let mut c = again.client().await;
    let got = c
        .get("k", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .expect("get");
    assert_eq!(got.count(), 50);
}
