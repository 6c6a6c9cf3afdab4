//! Bad disks and bad neighbours: a locked data dir, a corrupt WAL, a corrupt backend,
//! a torn WAL tail, a full disk. Each must give a clear error and never lose
//! acknowledged data.

use crate::common;

use std::path::{Path, PathBuf};

use common::InProc;
use etcd_client::GetOptions;
use oxcd_config::settings::Settings;
use oxcd_server::start::serve::{self, ServeError};
use oxcd_testkit::small_disk::SmallDisk;

async fn start_err(data_dir: PathBuf) -> ServeError {
    let mut s = Settings::new("default", data_dir);
    s.listen_client_urls = vec!["http://127.0.0.1:0".into()];
    s.listen_peer_urls = vec!["http://127.0.0.1:0".into()];
    serve::run(s, std::future::pending(), |_| {})
        .await
        .expect_err("start must fail")
}

async fn fill(m: &InProc, n: usize) {
    let mut c = m.client().await;
    for i in 0..n {
        c.put(format!("k{i:04}"), format!("v{i}"), None)
            .await
            .expect("put");
    }
}

fn wal_segments(data: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data.join("member/wal"))
        .expect("wal dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    v.sort();
    v
}

/// Where a segment's records end: segments are preallocated, zeroes follow the data.
fn data_end(bytes: &[u8]) -> usize {
    bytes.iter().rposition(|b| *b != 0).map_or(0, |p| p + 1)
}

#[tokio::test]
async fn locked_data_dir_is_refused_and_the_owner_keeps_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let m = InProc::start(data.clone(), |_| {}).await;
    fill(&m, 3).await;
    let err = start_err(data.clone()).await;
    let msg = err.to_string();
    assert!(msg.contains("in use by another process"), "{msg}");
    assert!(
        msg.contains(&data.display().to_string()),
        "names the dir: {msg}"
    );
    // The first member is unharmed.
    let mut c = m.client().await;
    c.put("after", "1", None).await.expect("owner still writes");
    assert_eq!(
        c.get("k", Some(GetOptions::new().with_prefix()))
            .await
            .expect("get")
            .count(),
        3
    );
    m.stop().await;
}

#[tokio::test]
async fn corrupt_wal_record_refuses_to_start_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let m = InProc::start(data.clone(), |_| {}).await;
    fill(&m, 200).await;
    m.stop().await;
    let seg = wal_segments(&data).pop().expect("segment");
    let mut bytes = std::fs::read(&seg).expect("read");
    let mid = data_end(&bytes) / 2;
    bytes[mid] ^= 0x5a;
    std::fs::write(&seg, &bytes).expect("write");
    // Remove the backend too, so the WAL is the only copy: replay must not drop data.
    std::fs::remove_file(data.join("member/snap/db")).expect("rm db");
    let msg = start_err(data).await.to_string();
    assert!(msg.contains("corrupt record"), "{msg}");
    assert!(
        msg.contains(&seg.display().to_string()),
        "names the file: {msg}"
    );
}

#[tokio::test]
async fn torn_wal_tail_is_repaired_and_acknowledged_data_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let m = InProc::start(data.clone(), |_| {}).await;
    fill(&m, 100).await;
    m.stop().await;
    // A crash in the middle of a write: of a 4 KiB record after the last one, only the
    // first sector reached the disk (the rest of the segment is preallocated zeroes).
    let seg = wal_segments(&data).pop().expect("segment");
    let end = data_end(&std::fs::read(&seg).expect("read"));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .expect("open");
    std::os::unix::fs::FileExt::write_all_at(
        &f,
        &[0, 0x10, 0, 0, 0xde, 0xad, 0xbe, 0xef, 3, 1, 2],
        end as u64,
    )
    .expect("torn write");
    drop(f);
    let m = InProc::start(data, |_| {}).await;
    let mut c = m.client().await;
    assert_eq!(
        c.get("k", Some(GetOptions::new().with_prefix()))
            .await
            .expect("get")
            .count(),
        100
    );
    c.put("more", "x", None).await.expect("writes after repair");
    m.stop().await;
}

#[tokio::test]
async fn corrupt_backend_refuses_to_start_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let m = InProc::start(data.clone(), |_| {}).await;
    fill(&m, 10).await;
    m.stop().await;
    let db = data.join("member/snap/db");
    let mut bytes = std::fs::read(&db).expect("read db");
    for b in bytes.iter_mut().take(4096) {
        *b = 0xff;
    }
    std::fs::write(&db, &bytes).expect("write db");
    let msg = start_err(data).await.to_string();
    assert!(
        msg.contains(&db.display().to_string()),
        "names the file: {msg}"
    );
}

#[tokio::test]
async fn full_disk_fails_writes_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let disk = SmallDisk::mount(dir.path().join("disk"), "6m");
    let data = disk.path.join("data");
    let m = InProc::start(data.clone(), |_| {}).await;
    let mut c = m.client().await;
    let value = vec![b'v'; 32 * 1024];
    let mut acked = Vec::new();
    let mut failure = None;
    for i in 0..2000 {
        match c.put(format!("big{i:04}"), value.clone(), None).await {
            Ok(_) => acked.push(i),
            Err(e) => {
                failure = Some(e.to_string());
                break;
            }
        }
    }
    let failure = failure.expect("a 6 MiB disk must fill up");
    assert!(!acked.is_empty(), "some writes fit");
    eprintln!(
        "disk full after {} acknowledged writes; the next failed with: {failure}",
        acked.len()
    );
    // The member stops itself; it does not limp on.
    drop(c);
    let ended = m.wait().await;
    let msg = ended
        .expect_err("the member must stop with an error")
        .to_string();
    assert!(msg.contains("member stopped"), "{msg}");
    disk.grow("256m");
    let m = InProc::start(data, |_| {}).await;
    let mut c = m.client().await;
    for i in &acked {
        let r = c.get(format!("big{i:04}"), None).await.expect("get");
        assert_eq!(r.kvs().len(), 1, "acknowledged write big{i:04} lost");
        assert_eq!(r.kvs()[0].value(), value.as_slice());
    }
    c.put("after", "ok", None)
        .await
        .expect("writes work again with space");
    m.stop().await;
}
