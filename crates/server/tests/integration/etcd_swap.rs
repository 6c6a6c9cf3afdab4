//! The binary swap of issue 35's point 5, as etcd users upgrade: stop a member, start
//! the other binary on the same data dir with the same flags. oxcd started on an etcd
//! 3.5.16 member's data dir adopts it as the same member (etcd's WAL, `.snap` files and
//! bbolt backend read as etcd reads them on restart: `server/wal/wal.go` `ReadAll`,
//! `server/etcdserver/api/snap/snapshotter.go` `LoadNewestAvailable`,
//! `server/etcdserver/bootstrap`'s backend at its `consistent_index`); `oxcdutl
//! swap-to-etcd` writes the dir back as etcd's, and etcd continues as that member.
//!
//! A 3-member etcd cluster is swapped to oxcd member by member and back, under the
//! writer, watcher and lease holder of the rolling replacement, with etcd's corruption
//! checks on and raft snapshots every 100 entries (so the WAL starts from a `.snap`
//! file). Also: dirs written by etcdctl 3.4's and etcdutl 3.5's `snapshot restore`, and
//! a dir etcd still runs on (refused, nothing changed).

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::etcd::{Etcd, start_etcd_member};
use crate::common::{OxcdProcess, free_port, revision_at};
use crate::etcd_migration::{
    CHECKS, Endpoints, Member, Process, Workload, caught_up, check_end, client_of,
    cluster_version_becomes, endpoints_of, hashes_equal, revision_of, signal, takes_writes,
};

/// The flags the members run with, etcd and oxcd alike (besides the ones
/// `start_etcd_member` and `OxcdProcess` give each): etcd's corruption checks and
/// frequent raft snapshots.
fn shared_flags() -> Vec<String> {
    let mut flags: Vec<String> = CHECKS.iter().map(|f| f.to_string()).collect();
    flags.push("--snapshot-count=100".into());
    flags
}

/// The flags etcd member `name` ran with (`start_etcd_member`'s), given to oxcd on its
/// data dir, with `--emulated-version=3.5`: the cluster stays at 3.5 once every member
/// is oxcd, so etcd 3.5 can come back (it joins no 3.6 cluster).
fn same_flags_for_oxcd(name: &str, peer_url: &str, cluster: &str) -> Vec<String> {
    let mut flags: Vec<String> = [
        "--listen-peer-urls",
        peer_url,
        "--initial-advertise-peer-urls",
        peer_url,
        "--name",
        name,
        "--initial-cluster",
        cluster,
        "--initial-cluster-state",
        "new",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    flags.extend(shared_flags());
    flags.push("--emulated-version=3.5".into());
    flags
}

/// The held lease's TTL.
const LEASE_TTL: i64 = 10;

/// Stops `pid` as an operator does (SIGTERM).
fn terminate(pid: u32) {
    signal(pid, "TERM");
}

/// Runs `oxcdutl swap-to-etcd` on `data_dir`; its stdout.
fn swap_to_etcd(data_dir: &Path) -> String {
    // The workspace's oxcdutl, built beside oxcd.
    let oxcdutl = Path::new(env!("CARGO_BIN_EXE_oxcd")).with_file_name("oxcdutl");
    assert!(
        oxcdutl.exists(),
        "{} is not built: cargo build --workspace",
        oxcdutl.display()
    );
    let out = std::process::Command::new(oxcdutl)
        .args(["swap-to-etcd", "--data-dir"])
        .arg(data_dir)
        .output()
        .expect("oxcdutl");
    assert!(
        out.status.success(),
        "oxcdutl swap-to-etcd: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The member id the server at `url` answers with.
async fn member_id_at(url: &str) -> u64 {
    client_of(url)
        .await
        .expect("client")
        .status()
        .await
        .expect("status")
        .header()
        .expect("header")
        .member_id()
}

/// The leases the member at `url` knows and the TTL each has left (there is one).
async fn leases_at(url: &str) -> String {
    let mut c = client_of(url).await.expect("client");
    let mut out = Vec::new();
    for l in c.leases().await.expect("leases").leases() {
        let ttl = c
            .lease_time_to_live(l.id(), None)
            .await
            .map(|t| t.ttl())
            .unwrap_or(-2);
        out.push(format!("{:x}: {ttl} s left", l.id()));
    }
    assert!(!out.is_empty(), "the held lease is alive");
    out.join(", ")
}

#[tokio::test]
async fn each_etcd_member_is_swapped_for_oxcd_in_place_and_back_under_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let cluster: String = ports
        .iter()
        .enumerate()
        .map(|(i, (p, _))| format!("etcd{i}=http://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let start_etcd = |i: usize| -> Etcd {
        let name = format!("etcd{i}");
        start_etcd_member(
            &dir.path().join(&name),
            &name,
            ports[i],
            &cluster,
            "new",
            &shared_flags(),
        )
    };
    let mut etcds: Vec<Option<Etcd>> = (0..3).map(|i| Some(start_etcd(i))).collect();
    let mut members: Vec<Member> = (0..3)
        .map(|i| Member {
            name: format!("etcd{i}"),
            id: 0,
            peer_url: format!("http://127.0.0.1:{}", ports[i].0),
            client_url: format!("http://127.0.0.1:{}", ports[i].1),
            process: Process::Elsewhere,
        })
        .collect();
    let first = members[0].client_url.clone();
    assert!(takes_writes(&first).await, "the etcd cluster serves");
    let mut ctl = client_of(&first).await.expect("client");
    for m in ctl.member_list().await.expect("member list").members() {
        if let Some(ours) = members.iter_mut().find(|x| x.name == m.name()) {
            ours.id = m.id();
        }
    }
    let start_rev = revision_at(&mut ctl, "ready").await;
    let endpoints: Endpoints = Arc::new(Mutex::new(endpoints_of(&members)));
    // A member stopping holds its open streams up to 2 s (etcd up to its request
    // timeout), and the lease holder fails over after 3 s without an answer: the lease
    // has room for both and a leader change.
    let load = Workload::with_lease_ttl(&endpoints, start_rev + 1, "all etcd", LEASE_TTL);
    tokio::time::sleep(Duration::from_secs(3)).await;

    // oxcd on a dir etcd still runs on (on other ports: on etcd's, the listeners would
    // fail first, as etcd's own do) is refused, and etcd's files stay as they are.
    let elsewhere = format!("http://127.0.0.1:{}", free_port());
    let refused = crate::common::oxcd_command()
        .arg("--data-dir")
        .arg(dir.path().join("etcd0"))
        .args(same_flags_for_oxcd("etcd0", &members[0].peer_url, &cluster))
        .args([
            "--listen-peer-urls",
            &format!("http://127.0.0.1:{}", free_port()),
        ])
        .args(["--listen-client-urls", &elsewhere])
        .args(["--advertise-client-urls", &elsewhere])
        .output()
        .expect("oxcd");
    let text = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        text.contains("is locked by another process: stop the etcd member"),
        "{text}"
    );
    assert!(
        !dir.path()
            .join("etcd0/member/wal.etcd-before-oxcd")
            .exists()
    );
    eprintln!("oxcd on a running etcd's dir: refused");

    // etcd → oxcd, one member at a time: stop etcd, start oxcd on its dir.
    let mut oxcds: Vec<Option<OxcdProcess>> = (0..3).map(|_| None).collect();
    for i in 0..3 {
        let step = std::time::Instant::now();
        load.phase(format!("etcd{i} swapped"));
        let Some(etcd) = etcds[i].take() else {
            unreachable!()
        };
        terminate(etcd.pid());
        drop(etcd);
        let name = format!("etcd{i}");
        let oxcd = OxcdProcess::spawn_at(
            &dir.path().join(&name),
            &members[i].client_url,
            &same_flags_for_oxcd(&name, &members[i].peer_url, &cluster),
        )
        .wait_ready();
        let adopted = oxcd.logged("adopted etcd's data dir");
        assert_eq!(adopted.len(), 1, "oxcd adopted etcd{i}'s dir");
        assert_eq!(member_id_at(&members[i].client_url).await, members[i].id);
        let other = &members[(i + 1) % 3].client_url;
        let rev = revision_of(other).await;
        assert!(
            caught_up(&members[i].client_url, rev).await,
            "{name} caught up"
        );
        eprintln!(
            "{name} swapped for oxcd after {:?}: {}",
            step.elapsed(),
            adopted[0]
        );
        eprintln!("leases: {}", leases_at(other).await);
        oxcds[i] = Some(oxcd);
    }
    load.phase("all oxcd");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rev = revision_of(&members[0].client_url).await;
    let hash = hashes_equal(&members, rev).await;
    eprintln!("all oxcd: HashKV at {rev} equal on 3 members: {hash}");
    for m in &members {
        assert!(cluster_version_becomes(&m.peer_url, "3.5.0").await);
    }

    // oxcd → etcd, one member at a time: stop oxcd, oxcdutl swap-to-etcd, start etcd.
    for i in 0..3 {
        let step = std::time::Instant::now();
        load.phase(format!("etcd{i} back"));
        let Some(mut oxcd) = oxcds[i].take() else {
            unreachable!()
        };
        terminate(oxcd.child.id());
        let _ = oxcd.child.wait();
        let stopped = step.elapsed();
        let name = format!("etcd{i}");
        let written = swap_to_etcd(&dir.path().join(&name));
        eprintln!(
            "{name}: oxcd stopped in {stopped:?}, swap-to-etcd took {:?}",
            step.elapsed() - stopped
        );
        etcds[i] = Some(start_etcd(i));
        let other = &members[(i + 1) % 3].client_url;
        let rev = revision_of(other).await;
        assert!(caught_up(&members[i].client_url, rev).await, "{name} back");
        assert_eq!(member_id_at(&members[i].client_url).await, members[i].id);
        eprintln!(
            "{name} back on etcd after {:?}: {}",
            step.elapsed(),
            written.trim()
        );
        eprintln!("leases: {}", leases_at(other).await);
    }
    load.phase("all etcd again");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let finished = load.finish().await;
    check_end(&members, finished, dir.path(), &["etcd0", "etcd1", "etcd2"]).await;
    drop(etcds);
}

/// A dir made by `snapshot restore` (etcdctl 3.4's, etcdutl 3.5.16's) from an etcd
/// 3.5.16 snapshot: oxcd started on it with the restore's member flags serves the
/// snapshot's keys as the member the restore named, with etcd's HashKV.
#[tokio::test]
async fn dirs_restored_by_etcdctl_and_etcdutl_are_adopted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = crate::common::etcd::start_etcd(&dir.path().join("etcd"));
    let url = format!("http://{}", etcd.endpoint);
    let mut c = client_of(&url).await.expect("client");
    for i in 0..300 {
        c.put(format!("k/{i:04}"), format!("v{i}"), None)
            .await
            .expect("put");
    }
    c.delete("k/0007", None).await.expect("delete");
    let rev = revision_at(&mut c, "k/").await;
    let theirs = c.hash_kv(rev).await.expect("hashkv").hash();
    let snapshot = dir.path().join("snap.db");
    let saved = std::process::Command::new(crate::common::etcd::ETCDCTL)
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &etcd.endpoint, "snapshot", "save"])
        .arg(&snapshot)
        .output()
        .expect("etcdctl");
    assert!(saved.status.success(), "{saved:?}");
    drop(etcd);

    let mut tools = vec![(
        "etcdctl 3.4",
        std::path::PathBuf::from(crate::common::etcd::ETCDCTL),
    )];
    if let Some(etcdutl) = oxcd_testkit::reference::etcdutl_binary() {
        tools.push(("etcdutl 3.5", etcdutl));
    }
    for (tool, binary) in tools {
        let data = dir.path().join(tool.replace(' ', "-"));
        let peer = format!("http://127.0.0.1:{}", free_port());
        let cluster = format!("m1={peer}");
        let restored = std::process::Command::new(&binary)
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "restore"])
            .arg(&snapshot)
            .arg("--data-dir")
            .arg(&data)
            .args(["--name", "m1", "--initial-cluster", &cluster])
            .args(["--initial-advertise-peer-urls", &peer])
            .output()
            .expect("restore");
        assert!(restored.status.success(), "{tool}: {restored:?}");
        let client_url = format!("http://127.0.0.1:{}", free_port());
        let oxcd = OxcdProcess::spawn_at(
            &data,
            &client_url,
            &[
                "--name".into(),
                "m1".into(),
                "--initial-cluster".into(),
                cluster.clone(),
                "--listen-peer-urls".into(),
                peer.clone(),
                "--initial-advertise-peer-urls".into(),
                peer.clone(),
            ],
        )
        .wait_ready();
        assert_eq!(oxcd.logged("adopted etcd's data dir").len(), 1, "{tool}");
        let mut c = client_of(&client_url).await.expect("client");
        let all = c
            .get("k/", Some(etcd_client::GetOptions::new().with_prefix()))
            .await
            .expect("get");
        assert_eq!(all.kvs().len(), 299, "{tool}");
        assert_eq!(
            c.hash_kv(rev).await.expect("hashkv").hash(),
            theirs,
            "{tool}"
        );
        let members = c.member_list().await.expect("members");
        assert_eq!(members.members().len(), 1);
        assert_eq!(
            members.members()[0].peer_urls(),
            std::slice::from_ref(&peer)
        );
        c.put("after", "x", None).await.expect("a write");
        eprintln!("{tool}'s restored dir adopted: 299 keys, HashKV at {rev} equal to etcd's");
        drop(oxcd);
    }
}
