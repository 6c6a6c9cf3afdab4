//! `snapshot save` against etcdctl 3.4's, both run against the same oxcd member from
//! the same directory: the same output, messages and exit codes, and the same file
//! (mode 0600, the database and its 32-byte sha256 trailer, no `.part` left).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::parity::member;
use super::{wait_or_kill, without_json_logs};

const ETCDCTL: &str = "/usr/bin/etcdctl";

/// `bin` with `args` in `cwd`: stdout, stderr less the JSON logs, exit code.
pub(crate) fn run(bin: &str, cwd: &Path, args: &[String]) -> (String, String, Option<i32>) {
    let child = Command::new(bin)
        .current_dir(cwd)
        .args(args)
        .env("ETCDCTL_API", "3")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (code, out) = wait_or_kill(child, Duration::from_secs(30));
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        without_json_logs(&out.stderr),
        code,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_save_is_etcdctls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ep, _stop) = member(&dir.path().join("m")).await;
    let oxcdctl = env!("CARGO_BIN_EXE_oxcdctl");
    let put = run(
        oxcdctl,
        dir.path(),
        &[
            format!("--endpoints={ep}"),
            "put".into(),
            "k".into(),
            "v".into(),
        ],
    );
    assert_eq!(put.0, "OK\n");
    let endpoint = format!("--endpoints={ep}");
    let cases: Vec<Vec<String>> = vec![
        vec![
            endpoint.clone(),
            "snapshot".into(),
            "save".into(),
            "{f}".into(),
        ],
        vec![endpoint.clone(), "snapshot".into(), "save".into()],
        vec![
            format!("--endpoints={ep},127.0.0.1:1"),
            "snapshot".into(),
            "save".into(),
            "{f}".into(),
        ],
        vec![
            endpoint.clone(),
            "snapshot".into(),
            "save".into(),
            "missing/{f}".into(),
        ],
    ];
    for (i, case) in cases.iter().enumerate() {
        let with = |who: &str| -> Vec<String> {
            case.iter()
                .map(|a| a.replace("{f}", &format!("{who}{i}.db")))
                .collect()
        };
        let theirs = run(ETCDCTL, dir.path(), &with("etcdctl"));
        let ours = run(oxcdctl, dir.path(), &with("oxcdctl"));
        let ours_as_theirs = (
            ours.0.replace("oxcdctl", "etcdctl"),
            ours.1.replace("oxcdctl", "etcdctl"),
            ours.2,
        );
        assert_eq!(ours_as_theirs, theirs, "{case:?}");
        eprintln!("{case:?}: {:?} {}", ours.2, (ours.0 + &ours.1).trim());
    }
    for who in ["etcdctl", "oxcdctl"] {
        let f = dir.path().join(format!("{who}0.db"));
        let meta = std::fs::metadata(&f).expect("saved");
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{who}");
        assert_eq!(meta.len() % 512, 32, "{who}: the sha256 trailer");
        let bytes = std::fs::read(&f).expect("read");
        let (db, sum) = bytes.split_at(bytes.len() - 32);
        use sha2::Digest;
        assert_eq!(sha2::Sha256::digest(db).as_slice(), sum, "{who}");
    }
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .expect("dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".part"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
