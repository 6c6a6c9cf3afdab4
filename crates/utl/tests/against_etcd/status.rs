//! `oxcdutl snapshot status` prints what etcdutl 3.5.16 prints, byte for byte, in every
//! output format (and refuses protobuf and unknown formats as it does), for snapshots
//! saved from etcd 3.5, etcd 3.4 and oxcd.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{
    etcdctl_save, etcdutl, output, oxcdutl, run, start_etcd, start_oxcd, write_history,
};

/// Compares both tools' `snapshot status` of `file` in every format.
fn same_status(file: &Path) -> String {
    let mut simple = String::new();
    for format in ["simple", "table", "json", "fields", "protobuf", "yaml"] {
        let theirs = output(
            Command::new(etcdutl())
                .args(["snapshot", "status", "-w", format])
                .arg(file),
        );
        let ours = output(
            Command::new(oxcdutl())
                .args(["snapshot", "status", "-w", format])
                .arg(file),
        );
        assert_eq!(
            String::from_utf8_lossy(&ours.stdout),
            String::from_utf8_lossy(&theirs.stdout),
            "{format} of {}",
            file.display()
        );
        assert_eq!(ours.stderr, theirs.stderr, "{format}: stderr");
        assert_eq!(
            ours.status.code(),
            theirs.status.code(),
            "{format}: exit code"
        );
        if format == "simple" {
            simple = String::from_utf8_lossy(&ours.stdout).into_owned();
        }
    }
    simple
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_is_etcdutls_for_snapshots_of_etcd_35_34_and_oxcd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files: Vec<PathBuf> = Vec::new();
    for (name, binary) in [
        ("etcd35", oxcd_testkit::reference::etcd_binary()),
        (
            "etcd34",
            PathBuf::from(oxcd_testkit::reference::DEBIAN_ETCD),
        ),
    ] {
        let etcd = start_etcd(&binary, &dir.path().join(name));
        write_history(&mut etcd.client().await).await;
        let file = dir.path().join(format!("{name}.db"));
        etcdctl_save(&etcd.endpoint, &file, None);
        files.push(file);
    }
    let oxcd = start_oxcd(&dir.path().join("oxcd"));
    write_history(&mut oxcd.client().await).await;
    let file = dir.path().join("oxcd.db");
    run(Command::new(oxcd_testkit::process::built_binary("oxcdctl"))
        .arg(format!("--endpoints={}", oxcd.endpoint))
        .args(["snapshot", "save"])
        .arg(&file));
    files.push(file);
    for f in &files {
        let simple = same_status(f);
        eprintln!("{}: {}", f.display(), simple.trim());
    }
}
