//! Membership changes on real `oxcd` processes behind the testkit's proxies, under a
//! steady write load: a one-member cluster grows to three and to five, shrinks back to
//! three, has a member replaced (removed, then a new one added with an empty data dir),
//! and has its leader killed in the middle of a conf change. No acknowledged write is
//! lost and every member ends with the same HashKV.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::{Client, GetOptions};
use oxcd_testkit::cluster::{Cluster, ClusterConfig};

fn oxcd() -> PathBuf {
    oxcd_testkit::process::built_oxcd()
}

/// Writes `load/<n>` keys through every running member's URL until stopped; the keys
/// acknowledged.
struct Load {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<String>>,
}

impl Load {
    fn start(urls: Vec<String>) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut n = 0u64;
            while !flag.load(Ordering::Relaxed) {
                let url = urls[(n as usize) % urls.len()].clone();
                let Ok(Ok(mut c)) =
                    tokio::time::timeout(Duration::from_secs(1), Client::connect([url], None))
                        .await
                else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    n += 1;
                    continue;
                };
                for _ in 0..50 {
                    let k = format!("load/{n:08}");
                    n += 1;
                    match tokio::time::timeout(Duration::from_secs(3), c.put(k.clone(), "v", None))
                        .await
                    {
                        Ok(Ok(_)) => acked.push(k),
                        _ => break,
                    }
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                }
            }
            acked
        });
        Load { stop, task }
    }

    async fn finish(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.expect("load task")
    }
}

/// Every acknowledged key is on every current member, and their HashKVs agree.
async fn check(cluster: &Cluster, acked: &[String]) {
    let mut hashes = Vec::new();
    for i in cluster.current() {
        let url = cluster.client_urls()[i].clone();
        let mut c = Client::connect([url], None).await.expect("connect");
        // A leader that removed itself hands over; a read may meet the change.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while let Err(e) = c.get("settle", None).await {
            assert!(
                std::time::Instant::now() < deadline,
                "linearizable read: {e}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let got = c
            .get(
                "load/",
                Some(GetOptions::new().with_prefix().with_keys_only()),
            )
            .await
            .expect("range");
        let keys: HashSet<String> = got
            .kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
            .collect();
        let missing = acked.iter().filter(|k| !keys.contains(*k)).count();
        assert_eq!(missing, 0, "member m{i} misses {missing} acknowledged keys");
        let rev = got.header().expect("header").revision();
        hashes.push((i, rev, c.hash_kv(rev).await.expect("hashkv").hash()));
    }
    // Compare at one revision: the lowest any member reported.
    let rev = hashes.iter().map(|h| h.1).min().unwrap_or(0);
    let mut at = Vec::new();
    for i in cluster.current() {
        let url = cluster.client_urls()[i].clone();
        let mut c = Client::connect([url], None).await.expect("connect");
        at.push(c.hash_kv(rev).await.expect("hashkv").hash());
    }
    assert!(
        at.windows(2).all(|w| w[0] == w[1]),
        "HashKV at {rev} differs: {at:?}"
    );
}

/// The names every current member lists, sorted, asked of each member.
async fn listed_everywhere(cluster: &Cluster) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    for i in cluster.current() {
        let url = cluster.client_urls()[i].clone();
        let mut c = Client::connect([url], None).await.expect("connect");
        let mut names: Vec<String> = c
            .member_list()
            .await
            .expect("member list")
            .members()
            .iter()
            .map(|m| m.name().to_string())
            .collect();
        names.sort();
        all.push(names);
    }
    all
}

fn names(ids: &[usize]) -> Vec<String> {
    let mut v: Vec<String> = ids.iter().map(|i| format!("m{i}")).collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_one_to_five_shrink_to_three_replace_and_lose_the_leader_mid_change() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cluster = Cluster::start(&ClusterConfig {
        binary: oxcd(),
        members: 1,
        dir: dir.path().to_path_buf(),
        extra_flags: Vec::new(),
        tls: false,
        mixed: None,
    })
    .await
    .expect("one member starts");
    let load = Load::start(cluster.client_urls());

    // 1 -> 3 -> 5.
    for _ in 0..4 {
        cluster
            .add_member(dir.path(), false)
            .await
            .expect("add a member");
    }
    let five = cluster.current();
    assert_eq!(five, [0, 1, 2, 3, 4]);
    for l in listed_everywhere(&cluster).await {
        assert_eq!(l, names(&five));
    }
    let acked = load.finish().await;
    check(&cluster, &acked).await;

    // 5 -> 3, removing the leader among others.
    let load = Load::start(cluster.client_urls()[..1].to_vec());
    let leader = cluster.leader().await.expect("a leader");
    cluster
        .remove_member(leader)
        .await
        .expect("remove the leader");
    let other = *cluster.current().last().expect("members");
    cluster.remove_member(other).await.expect("remove another");
    assert_eq!(cluster.current().len(), 3);
    let load_acked = load.finish().await;
    let acked: Vec<String> = acked.into_iter().chain(load_acked).collect();
    check(&cluster, &acked).await;

    // Replace a member as after losing its machine: remove it, add a member at the same
    // address, start it with an empty data dir; then another, through a learner.
    let urls: Vec<String> = cluster
        .current()
        .iter()
        .map(|i| cluster.client_urls()[*i].clone())
        .collect();
    let load = Load::start(urls);
    let old = cluster.current()[0];
    cluster
        .replace_member(old, false)
        .await
        .expect("replace a member");
    let old = cluster.current()[1];
    cluster
        .replace_member(old, true)
        .await
        .expect("replace a member through a learner");
    assert_eq!(cluster.current().len(), 3);

    // The leader killed while a learner is being added: the change is applied or not,
    // the same everywhere, and the cluster goes on.
    let leader = cluster.leader().await.expect("a leader");
    let add = {
        let url = cluster.client_urls()[cluster
            .current()
            .iter()
            .copied()
            .find(|i| *i != leader)
            .expect("follower")]
        .clone();
        tokio::spawn(async move {
            let mut c = Client::connect([url], None).await.expect("connect");
            c.member_add(
                ["http://127.0.0.1:1".to_string()],
                Some(etcd_client::MemberAddOptions::new().with_is_learner()),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(5)).await;
    cluster.kill(leader).expect("kill the leader");
    let _ = add.await;
    cluster
        .restart(leader)
        .await
        .expect("restart the old leader");
    let load_acked = load.finish().await;
    let acked: Vec<String> = acked.into_iter().chain(load_acked).collect();
    let lists = listed_everywhere(&cluster).await;
    assert!(
        lists.windows(2).all(|w| w[0] == w[1]),
        "member lists differ: {lists:?}"
    );
    check(&cluster, &acked).await;
}
