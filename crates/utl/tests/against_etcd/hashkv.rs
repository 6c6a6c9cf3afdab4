//! `oxcdutl hashkv`, etcdutl 3.6's (v3.6.14 etcdutl/etcdutl/hashkv_command.go; no
//! etcdutl 3.6 runs here): on a snapshot of etcd 3.5.16 and of oxcd, after puts,
//! overwrites, deletes and a compaction, its hash at each revision equals what the
//! server's HashKV answered there (but at the compaction revision, see below), in every output format; a compacted or future
//! revision and a missing file get etcd's errors.

use std::path::Path;
use std::process::Command;

use crate::common::{etcdctl_save, output, oxcdutl, start_etcd, start_oxcd, write_history};

/// oxcdutl's `hashkv` of `file` at `rev` in `format`: stdout, stderr, exit code.
fn hashkv(file: &Path, rev: i64, format: &str) -> (String, String, Option<i32>) {
    let out = output(
        Command::new(oxcdutl())
            .args(["hashkv", "-w", format, "--rev", &rev.to_string()])
            .arg(file),
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

/// Checks the tool against `c`'s HashKV at every revision from the compaction to the
/// latest; returns how many revisions were compared.
async fn agrees_with_the_server(c: &mut etcd_client::Client, file: &Path) -> usize {
    let last = c.get("k000", None).await.expect("get");
    let latest = last.header().expect("header").revision();
    let any = c.hash_kv(0).await.expect("hashkv");
    let compacted = any.compact_version();
    let mut compared = 0;
    // At the compaction revision itself a server answers the hash it took when it
    // compacted (v3.6.14 server/storage/mvcc/hash.go hashStorage.HashByRev), which a
    // file does not hold: etcdutl computes that one afresh, as oxcdutl does.
    for rev in (compacted + 1).max(1)..=latest {
        let theirs = c.hash_kv(rev).await.expect("hashkv at rev");
        let want = format!("{}, {rev}, {}\n", theirs.hash(), theirs.compact_version());
        assert_eq!(
            hashkv(file, rev, "simple"),
            (want, String::new(), Some(0)),
            "rev {rev}"
        );
        compared += 1;
    }
    let theirs = c.hash_kv(0).await.expect("hashkv");
    let (h, compact) = (theirs.hash(), theirs.compact_version());
    assert_eq!(
        hashkv(file, 0, "json").0,
        format!("{{\"hash\":{h},\"hashRevision\":{latest},\"compactRevision\":{compact}}}\n")
    );
    assert_eq!(
        hashkv(file, 0, "fields").0,
        format!("\"Hash\" : {h}\n\"Hash revision\" : {latest}\n\"Compact revision\" : {compact}\n")
    );
    let table = hashkv(file, 0, "table").0;
    assert!(
        table.contains("HASH REVISION") && table.contains("COMPACT REVISION"),
        "{table}"
    );
    assert_eq!(
        hashkv(file, compact - 1, "simple"),
        (
            String::new(),
            "Error: mvcc: required revision has been compacted\n".into(),
            Some(1)
        )
    );
    assert_eq!(
        hashkv(file, latest + 1, "simple"),
        (
            String::new(),
            "Error: mvcc: required revision is a future revision\n".into(),
            Some(1)
        )
    );
    assert_eq!(
        hashkv(file, 0, "protobuf"),
        (
            String::new(),
            "Error: protobuf not supported as output format\n".into(),
            Some(4)
        )
    );
    compared
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hashkv_of_a_file_is_the_servers_hashkv() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd(
        &oxcd_testkit::reference::etcd_binary(),
        &dir.path().join("etcd"),
    );
    let mut c = etcd.client().await;
    write_history(&mut c).await;
    let file = dir.path().join("etcd.db");
    etcdctl_save(&etcd.endpoint, &file, None);
    let n = agrees_with_the_server(&mut c, &file).await;
    assert!(n > 20, "{n} revisions compared");
    etcd.stop();

    let oxcd = start_oxcd(&dir.path().join("oxcd"));
    let mut c = oxcd.client().await;
    write_history(&mut c).await;
    let file = dir.path().join("oxcd.db");
    etcdctl_save(&oxcd.endpoint, &file, None);
    agrees_with_the_server(&mut c, &file).await;
    oxcd.stop();

    let missing = dir.path().join("missing.db");
    assert_eq!(
        hashkv(&missing, 0, "simple"),
        (
            String::new(),
            format!(
                "Error: stat {}: no such file or directory\n",
                missing.display()
            ),
            Some(1)
        )
    );
}
