//! The format against the real etcd tools, both ways:
//! - `etcdctl snapshot status` (3.4, the client that must keep working) and `etcdutl
//!   snapshot status` (3.5, where the reference etcd has it beside it) agree with the
//!   hash, revision, key count and size computed here, on files the writer laid out with
//!   etcd's buckets and encodings;
//! - the reference etcd restores such a file (with etcd's sha256 trailer) and serves its
//!   keys at its revision;
//! - the reader reads a snapshot that etcd saved (inline buckets, a tombstone), and what
//!   it reads hashes as etcdctl's status says.

use std::path::Path;
use std::process::Command;

use oxcd_bbolt::BoltWriter;

/// A revision key: main and sub, big-endian, joined by '_'.
fn rev_key(main: u64, sub: u64) -> Vec<u8> {
    let mut k = main.to_be_bytes().to_vec();
    k.push(b'_');
    k.extend_from_slice(&sub.to_be_bytes());
    k
}

fn varint(mut x: u64, out: &mut Vec<u8>) {
    while x >= 0x80 {
        out.push((x as u8) | 0x80);
        x >>= 7;
    }
    out.push(x as u8);
}

/// `mvccpb.KeyValue{key, create_revision, mod_revision, version, value}`.
fn key_value(key: &[u8], create: u64, modified: u64, version: u64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (tag, bytes) in [(0x0a, key), (0x2a, value)] {
        if tag == 0x2a {
            for (t, n) in [(0x10, create), (0x18, modified), (0x20, version)] {
                out.push(t);
                varint(n, &mut out);
            }
        }
        if !bytes.is_empty() {
            out.push(tag);
            varint(bytes.len() as u64, &mut out);
            out.extend_from_slice(bytes);
        }
    }
    out
}

/// Key/value pairs of one bucket, in key order.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

struct Expected {
    hash: u32,
    revision: u64,
    keys: u64,
    size: u64,
}

/// Writes an etcd-shaped backend of `n` keys (each put twice, values of `value_len`
/// bytes) and returns what `snapshot status` must say of it.
fn write_etcd_shaped(path: &Path, n: u64, value_len: usize) -> Expected {
    let mut buckets: Vec<(&[u8], Pairs)> = Vec::new();
    let mut kvs = Vec::new();
    let mut rev = 1;
    for round in 1..=2u64 {
        for i in 0..n {
            rev += 1;
            let key = format!("/registry/pods/ns-{}/pod-{i:07}", i % 17).into_bytes();
            let value = vec![(i % 251) as u8 + round as u8; value_len];
            kvs.push((rev_key(rev, 0), key_value(&key, 2 + i, rev, round, &value)));
        }
    }
    buckets.push((b"alarm", vec![]));
    buckets.push((b"key", kvs));
    buckets.push((
        b"meta",
        vec![
            (b"consistent_index".to_vec(), 1000u64.to_be_bytes().to_vec()),
            (b"term".to_vec(), 2u64.to_be_bytes().to_vec()),
        ],
    ));
    let file = std::fs::File::create(path).expect("create");
    let mut w = BoltWriter::new(file).expect("writer");
    let mut crc = 0u32;
    let mut keys = 0;
    for (name, kvs) in &buckets {
        w.bucket(name).expect("bucket");
        crc = crc32c::crc32c_append(crc, name);
        for (k, v) in kvs {
            w.put(k, v).expect("put");
            crc = crc32c::crc32c_append(crc, k);
            crc = crc32c::crc32c_append(crc, v);
            keys += 1;
        }
    }
    let (file, size) = w.finish().expect("finish");
    file.sync_all().expect("sync");
    Expected {
        hash: crc,
        revision: rev,
        keys,
        size,
    }
}

fn status_json(program: &Path, file: &Path) -> serde_json::Value {
    let out = Command::new(program)
        .args(["snapshot", "status", "-w", "json"])
        .arg(file)
        .env("ETCDCTL_API", "3")
        .output()
        .expect("run snapshot status");
    assert!(
        out.status.success(),
        "{} snapshot status: {}",
        program.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn etcds_snapshot_status_reads_the_writers_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut readers = vec![std::path::PathBuf::from("etcdctl")];
    readers.extend(oxcd_testkit::reference::etcdutl_binary());
    for (n, value_len) in [(0, 0), (10, 10), (3000, 300), (200, 9000)] {
        let path = dir.path().join(format!("db-{n}-{value_len}"));
        let want = write_etcd_shaped(&path, n, value_len);
        for program in &readers {
            let got = status_json(program, &path);
            let what = format!("{} on {n} keys of {value_len} B", program.display());
            assert_eq!(got["hash"], u64::from(want.hash), "{what}");
            assert_eq!(
                got["revision"],
                if n == 0 { 0 } else { want.revision },
                "{what}"
            );
            assert_eq!(got["totalKey"], want.keys, "{what}");
            assert_eq!(got["totalSize"], want.size, "{what}");
        }
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run");
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A one-member reference etcd on loopback, killed when dropped.
struct Etcd {
    child: std::process::Child,
    client_url: String,
    log: std::path::PathBuf,
}

impl Etcd {
    /// Starts the reference etcd on `data_dir` as member `name` of a one-member cluster
    /// whose peer URL is `peer_url`.
    fn start(data_dir: &Path, name: &str, peer_url: &str) -> Etcd {
        let client = oxcd_testkit::ports::free_port().expect("port");
        let client_url = format!("http://127.0.0.1:{client}");
        let log = data_dir.with_extension("log");
        let child = oxcd_testkit::process::spawn_logged(
            Command::new(oxcd_testkit::reference::etcd_binary())
                .args(["--name", name, "--data-dir"])
                .arg(data_dir)
                .args(["--listen-peer-urls", peer_url])
                .args(["--initial-advertise-peer-urls", peer_url])
                .args(["--listen-client-urls", &client_url])
                .args(["--advertise-client-urls", &client_url])
                .args(["--initial-cluster", &format!("{name}={peer_url}")]),
            &log,
        )
        .expect("start etcd");
        Etcd {
            child,
            client_url,
            log,
        }
    }

    /// Runs etcdctl 3.4 against it until it succeeds (up to 20 s); returns its output.
    fn etcdctl(&self, args: &[&str]) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let out = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["--endpoints", &self.client_url, "--command-timeout=2s"])
                .args(args)
                .output();
            match out {
                Ok(out) if out.status.success() => {
                    return String::from_utf8_lossy(&out.stdout).into_owned();
                }
                other => {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "etcdctl {args:?}: {other:?}; etcd's log: {}",
                        self.log.display()
                    );
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
            }
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn peer_url() -> String {
    let peer = oxcd_testkit::ports::free_port().expect("port");
    format!("http://127.0.0.1:{peer}")
}

#[test]
fn etcd_restores_and_serves_the_writers_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snap = dir.path().join("snap.db");
    let want = write_etcd_shaped(&snap, 500, 100);
    oxcd_testkit::reference::append_sha256_trailer(&snap).expect("trailer");
    // Restored by etcdutl where the reference etcd has it, by etcdctl 3.4 otherwise;
    // both check the trailer.
    let restored = dir.path().join("restored");
    let restore_tool = oxcd_testkit::reference::etcdutl_binary()
        .unwrap_or_else(|| std::path::PathBuf::from("etcdctl"));
    let peer_url = peer_url();
    run(Command::new(&restore_tool)
        .env("ETCDCTL_API", "3")
        .arg("snapshot")
        .arg("restore")
        .arg(&snap)
        .arg("--data-dir")
        .arg(&restored)
        .args(["--name", "r0", "--initial-cluster"])
        .arg(format!("r0={peer_url}"))
        .arg("--initial-advertise-peer-urls")
        .arg(&peer_url));
    let etcd = Etcd::start(&restored, "r0", &peer_url);
    let answer = etcd.etcdctl(&["get", "--prefix", "--limit=1", "-w", "json", "/registry/"]);
    let json: serde_json::Value = serde_json::from_str(&answer).expect("json");
    assert_eq!(json["count"], 500, "{json}");
    // The revision etcd reports is the snapshot's.
    assert_eq!(json["header"]["revision"], want.revision, "{json}");
}

#[test]
fn the_reader_reads_a_snapshot_etcd_saved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = Etcd::start(&dir.path().join("etcd"), "e0", &peer_url());
    for i in 0..300 {
        let key = format!("k{i:04}");
        etcd.etcdctl(&["put", &key, &"v".repeat(i * 7)]);
    }
    etcd.etcdctl(&["del", "k0000"]);
    let snap = dir.path().join("saved.db");
    let snap_arg = snap.to_string_lossy().into_owned();
    etcd.etcdctl(&["snapshot", "save", &snap_arg]);
    let r = oxcd_bbolt::BoltReader::open(&snap).expect("open etcd's snapshot");
    let names: Vec<String> = r
        .buckets()
        .expect("buckets")
        .into_iter()
        .map(|(n, _)| String::from_utf8_lossy(&n).into_owned())
        .collect();
    for want in [
        "alarm", "auth", "cluster", "key", "lease", "members", "meta",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    // 300 puts and a delete: 301 revisions after the first, the last a tombstone.
    let mut revisions = Vec::new();
    r.for_each(&r.bucket(b"key").expect("key bucket"), &mut |k, v| {
        revisions.push((k.to_vec(), v.to_vec()));
        Ok(())
    })
    .expect("walk the key bucket");
    assert_eq!(revisions.len(), 301);
    let (last, value) = revisions.last().expect("revisions");
    assert_eq!((last.len(), last[17]), (18, b't'), "a tombstone last");
    assert_eq!(value, b"\x0a\x05k0000");
    // The hash etcd's status prints, computed from what the reader read.
    let mut crc = 0u32;
    let mut keys = 0u64;
    for (name, root) in r.buckets().expect("buckets") {
        crc = crc32c::crc32c_append(crc, &name);
        r.for_each(&root, &mut |k, v| {
            crc = crc32c::crc32c_append(crc, k);
            crc = crc32c::crc32c_append(crc, v);
            keys += 1;
            Ok(())
        })
        .expect("walk");
    }
    let status = status_json(Path::new("etcdctl"), &snap);
    assert_eq!(status["hash"], u64::from(crc));
    assert_eq!(status["totalKey"], keys);
    assert_eq!(status["totalSize"], r.size());
}
