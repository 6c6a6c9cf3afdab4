//! `oxcdutl snapshot restore` refuses what etcdutl 3.5.16 refuses, with the same message
//! and exit code (each case run with both tools from the same directory), but leaves no
//! data dir behind where etcdutl leaves a partial one; it refuses files etcdutl panics
//! on (not bbolt, damaged) with a message saying so; and a disk that fills during a
//! restore leaves nothing that could be taken for a restored member.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use oxcd_api::mvccpb::KeyValue;
use oxcd_bbolt::BoltWriter;
use oxcd_testkit::small_disk::SmallDisk;
use prost::Message as _;

use crate::common::{etcdutl, messages, output, oxcdutl};

/// A bbolt snapshot with `keys` rows of `value_len` bytes in `key` (revisions 2..),
/// and etcd's sha256 trailer when `trailer`.
pub fn write_snapshot(path: &Path, keys: usize, value_len: usize, trailer: bool) {
    let file = std::fs::File::create(path).expect("create");
    let mut w = BoltWriter::new(file).expect("writer");
    w.bucket(b"key").expect("bucket");
    for i in 0..keys {
        let rev = i as i64 + 2;
        let mut k = (rev as u64).to_be_bytes().to_vec();
        k.push(b'_');
        k.extend_from_slice(&0u64.to_be_bytes());
        let kv = KeyValue {
            key: format!("k{i:06}").into_bytes(),
            create_revision: rev,
            mod_revision: rev,
            version: 1,
            value: vec![b'v'; value_len],
            lease: 0,
        };
        w.put(&k, &kv.encode_to_vec()).expect("put");
    }
    w.bucket(b"meta").expect("bucket");
    w.put(b"consistent_index", &9u64.to_be_bytes())
        .expect("put");
    let (file, _) = w.finish().expect("finish");
    file.sync_all().expect("sync");
    if trailer {
        oxcd_testkit::reference::append_sha256_trailer(path).expect("trailer");
    }
}

/// Runs `snapshot restore <args>` with `tool` in `cwd`.
fn restore_in(tool: &Path, cwd: &Path, args: &[&str]) -> Output {
    output(
        Command::new(tool)
            .current_dir(cwd)
            .args(["snapshot", "restore"])
            .args(args),
    )
}

/// Both tools refuse `args` (run in `cwd`, with `out` as their data dir: `ours` for
/// oxcdutl, `theirs` for etcdutl) with the same message and exit code; oxcdutl leaves
/// `ours` as it was.
fn same_refusal(cwd: &Path, args: &[&str], ours: &str, theirs: &str) -> String {
    let existed = cwd.join(ours).exists();
    let with = |dir: &str| -> Vec<String> {
        args.iter()
            .map(|a| a.replace("{dir}", dir))
            .collect::<Vec<_>>()
    };
    let theirs_args = with(theirs);
    let ours_args = with(ours);
    let t = restore_in(
        &etcdutl(),
        cwd,
        &theirs_args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let o = restore_in(
        &oxcdutl(),
        cwd,
        &ours_args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let (tm, om) = (normalized(&messages(&t)), messages(&o));
    assert_eq!(om.replace(ours, theirs), tm, "{args:?}");
    assert_eq!(o.status.code(), t.status.code(), "{args:?}: exit code");
    assert!(!o.status.success(), "{args:?} must fail");
    assert_eq!(
        cwd.join(ours).exists(),
        existed,
        "{args:?}: oxcdutl leaves nothing behind"
    );
    om
}

/// etcdutl's text as oxcdutl words it: its own name, and the one flag whose help
/// differs (`--initial-memory-map-size` is accepted and has no effect).
fn normalized(etcdutl_text: &str) -> String {
    etcdutl_text.replace("etcdutl", "oxcdutl").replace(
        "Initial memory map size of the database in bytes. It uses the default value if not defined or defined to 0",
        "Accepted for etcdutl compatibility; no effect (oxcd's backend maps no memory)",
    )
}

#[test]
fn refusals_are_etcdutls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path();
    write_snapshot(&cwd.join("good.db"), 50, 100, true);
    write_snapshot(&cwd.join("bare.db"), 50, 100, false);
    let mut bad = std::fs::read(cwd.join("good.db")).expect("read");
    bad[5000] ^= 0x01;
    std::fs::write(cwd.join("mismatch.db"), &bad).expect("write");
    std::fs::write(cwd.join("tiny.db"), b"tiny").expect("write");
    std::fs::create_dir_all(cwd.join("full/x")).expect("mkdir");
    std::fs::create_dir_all(cwd.join("wal-exists")).expect("mkdir");
    std::fs::write(cwd.join("a-file"), b"x").expect("write");

    let cases: &[&[&str]] = &[
        &["good.db"],
        &["--data-dir", "{dir}"],
        &["good.db", "bare.db", "--data-dir", "{dir}"],
        &["nope.db", "--data-dir", "{dir}"],
        &["tiny.db", "--data-dir", "{dir}"],
        &["bare.db", "--data-dir", "{dir}"],
        &["mismatch.db", "--data-dir", "{dir}"],
        &["good.db", "--data-dir", "full"],
        &["good.db", "--data-dir", "a-file"],
        &["good.db", "--data-dir", "{dir}", "--wal-dir", "wal-exists"],
        &["good.db", "--data-dir", "{dir}", "--bump-revision", "5"],
        &["good.db", "--data-dir", "{dir}", "--mark-compacted"],
        &["good.db", "--data-dir", "{dir}", "--bump-revision", "x"],
        &["good.db", "--data-dir", "{dir}", "--name", "foo"],
        &[
            "good.db",
            "--data-dir",
            "{dir}",
            "--initial-advertise-peer-urls",
            "foo",
        ],
        &[
            "good.db",
            "--data-dir",
            "{dir}",
            "--initial-cluster",
            "default=http://localhost:2380,other=http://localhost:2380",
        ],
        &[
            "good.db",
            "--data-dir",
            "{dir}",
            "--initial-cluster",
            "default=http://127.0.0.1:1",
        ],
        &["good.db", "--data-dir", "{dir}", "--bogus"],
    ];
    for (i, args) in cases.iter().enumerate() {
        let ours = format!("ours{i}");
        let theirs = format!("theirs{i}");
        let msg = same_refusal(cwd, args, &ours, &theirs);
        eprintln!("{args:?}: {}", msg.lines().next().unwrap_or_default());
    }
}

#[test]
fn files_etcdutl_panics_on_are_refused_plainly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cwd = dir.path();
    let random: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(cwd.join("random.db"), &random).expect("write");
    write_snapshot(&cwd.join("good.db"), 400, 100, false);
    let good = std::fs::read(cwd.join("good.db")).expect("read");
    std::fs::write(cwd.join("cut.db"), &good[..good.len() / 2]).expect("write");
    let mut scribbled = good.clone();
    for b in &mut scribbled[3 * 4096..3 * 4096 + 64] {
        *b = 0xee;
    }
    std::fs::write(cwd.join("scribbled.db"), &scribbled).expect("write");
    for (file, expect) in [
        ("random.db", "is not a bbolt database"),
        ("cut.db", "is damaged: page"),
        ("scribbled.db", "is damaged: page"),
    ] {
        let out = restore_in(
            &oxcdutl(),
            cwd,
            &[file, "--data-dir", "out", "--skip-hash-check"],
        );
        let msg = messages(&out);
        assert_eq!(out.status.code(), Some(1), "{file}: {msg}");
        assert!(
            msg.starts_with("Error: snapshot file \"") && msg.contains(expect),
            "{file}: {msg}"
        );
        assert!(!cwd.join("out").exists(), "{file}: nothing left behind");
        eprintln!("{file}: {}", msg.trim());
    }
}

#[test]
fn a_disk_that_fills_during_a_restore_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snap = dir.path().join("big.db");
    // About 12 MB of rows, on a disk of 8 MiB.
    write_snapshot(&snap, 400, 30_000, true);
    let disk = SmallDisk::mount(dir.path().join("disk"), "8m");
    let data: PathBuf = disk.path.join("data");
    let out = output(
        Command::new(oxcdutl())
            .args(["snapshot", "restore"])
            .arg(&snap)
            .arg("--data-dir")
            .arg(&data),
    );
    let msg = messages(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("no space left on device"), "{msg}");
    assert!(!data.exists(), "no data dir left behind");
    let left: Vec<_> = std::fs::read_dir(&disk.path)
        .expect("read disk")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "nothing left on the disk: {left:?}");
    eprintln!("disk full: {}", msg.trim());

    disk.grow("256m");
    let out = output(
        Command::new(oxcdutl())
            .args(["snapshot", "restore"])
            .arg(&snap)
            .arg("--data-dir")
            .arg(&data),
    );
    assert!(out.status.success(), "{}", messages(&out));
    let mut made: Vec<String> = std::fs::read_dir(&data)
        .expect("data dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    made.sort();
    assert_eq!(made, ["member"], "no temporary left after a restore");
    assert!(data.join("member/snap/db").exists());
    assert!(data.join("member/wal").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_dir_elsewhere_is_restored_and_used() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snap = dir.path().join("s.db");
    write_snapshot(&snap, 30, 10, true);
    let (port, peer_port) = (
        oxcd_testkit::ports::free_port().expect("port"),
        oxcd_testkit::ports::free_port().expect("port"),
    );
    let peer = format!("http://127.0.0.1:{peer_port}");
    let data = dir.path().join("data");
    let wal = dir.path().join("elsewhere/wal");
    let mut flags = crate::common::restore_flags(&data, "default", &peer);
    flags.extend(["--wal-dir".to_string(), wal.display().to_string()]);
    crate::common::restore(&snap, &flags);
    let names = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d)
            .expect("dir")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(&data.join("member")), ["snap"]);
    assert_eq!(names(&dir.path().join("elsewhere")), ["wal"]);
    let m = crate::common::spawn_oxcd_with(
        "default",
        &data,
        port,
        &peer,
        &format!("default={peer}"),
        &["--wal-dir".to_string(), wal.display().to_string()],
    );
    crate::common::wait_ready(&m);
    let mut c = m.client().await;
    let r = c.get("k000029", None).await.expect("get");
    assert_eq!(r.kvs()[0].mod_revision(), 31);
    assert_eq!(r.header().expect("header").revision(), 31);
}
