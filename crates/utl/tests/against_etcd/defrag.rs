//! `oxcdutl defrag --data-dir` on a stopped member: nothing on stdout (as etcdutl), the
//! backend file shrinks to its live data, and the member restarts with the same keys,
//! revision and HashKV. A data dir in use or without a backend is refused with
//! etcdutl's `Failed to defragment etcd data[<dir>] (...)` (etcdutl waits for the lock,
//! or panics on a missing file); a missing `--data-dir` as etcdutl refuses it.

use std::process::Command;

use crate::common::{etcdutl, messages, output, oxcdutl, start_oxcd, state, write_history};

fn db_len(data: &std::path::Path) -> u64 {
    std::fs::metadata(data.join("member/snap/db"))
        .expect("db")
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oxcdutl_defrag_shrinks_a_stopped_member_and_refuses_a_running_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("m");
    let server = start_oxcd(&data);
    let mut c = server.client().await;
    write_history(&mut c).await;
    for round in 0..3 {
        for i in 0..400 {
            c.put(format!("big{i:03}"), vec![b'a' + round; 8 * 1024], None)
                .await
                .expect("put");
        }
    }
    let rev = c
        .get("big000", None)
        .await
        .expect("get")
        .header()
        .expect("h")
        .revision();
    // Physical: answered once the compacted rows are deleted (in the background since
    // 2026-11-27), so what the defragmentation finds does not depend on when the member
    // stops.
    c.compact(
        rev,
        Some(etcd_client::CompactionOptions::new().with_physical()),
    )
    .await
    .expect("compact");
    let before = state(&mut c).await;

    let busy = output(
        Command::new(oxcdutl())
            .arg("defrag")
            .arg("--data-dir")
            .arg(&data),
    );
    assert_eq!(busy.status.code(), Some(1), "{busy:?}");
    let msg = messages(&busy);
    assert!(
        msg.starts_with(&format!(
            "Error: Failed to defragment etcd data[{}] (",
            data.display()
        )) && msg.contains("in use by another process"),
        "{msg}"
    );
    server.stop();

    let size = db_len(&data);
    let done = output(
        Command::new(oxcdutl())
            .arg("defrag")
            .arg("--data-dir")
            .arg(&data),
    );
    assert!(done.status.success(), "{done:?}");
    assert!(done.stdout.is_empty(), "{done:?}");
    assert!(db_len(&data) < size, "{size} -> {}", db_len(&data));

    // The restart logs to the same file: move the first run's log (and its readiness
    // line) out of the way.
    std::fs::rename(
        data.with_extension("oxcd.log"),
        data.with_extension("first.log"),
    )
    .expect("move the log");
    let server = start_oxcd(&data);
    let mut c = server.client().await;
    assert_eq!(state(&mut c).await, before);
}

#[test]
fn oxcdutl_defrag_refuses_what_etcdutl_refuses() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope");
    let out = output(
        Command::new(oxcdutl())
            .arg("defrag")
            .arg("--data-dir")
            .arg(&missing),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        messages(&out),
        format!(
            "Error: Failed to defragment etcd data[{}] (open {}/member/snap/db: no such file or directory)\n",
            missing.display(),
            missing.display()
        )
    );
    assert!(!missing.exists(), "nothing is created");
    let ours = output(Command::new(oxcdutl()).arg("defrag"));
    let theirs = output(Command::new(etcdutl()).arg("defrag"));
    assert_eq!(ours.status.code(), theirs.status.code());
    assert_eq!(
        messages(&ours),
        messages(&theirs).replace("etcdutl", "oxcdutl"),
    );
}
