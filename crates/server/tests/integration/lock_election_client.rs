//! The Lock and Election services through the third-party `etcd-client` crate: a lock
//! waits for its holder's unlock, a lock held by a lease that expires passes to the
//! waiter, a lock without a lease gets a lease of its own; a campaign waits for the
//! leader to resign while an observer sees every leader and value in order. And
//! etcdctl 3.4's `lock` and `elect` (which run the same recipes in the client) work
//! against oxcd.

use crate::common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::InProc;
use common::cluster::{leader_index, three};
use etcd_client::{Client, LockOptions, ProclaimOptions, ResignOptions};

const ETCDCTL: &str = "/usr/bin/etcdctl";

async fn lease(c: &mut Client, ttl: i64) -> i64 {
    c.lease_grant(ttl, None).await.expect("grant").id()
}

/// Locks `name` with `lease` in a task of its own; answers the key.
fn lock_in_background(c: &Client, name: &str, lease: i64) -> tokio::task::JoinHandle<Vec<u8>> {
    let mut c = c.clone();
    let name = name.to_string();
    tokio::spawn(async move {
        let opts = LockOptions::new().with_lease(lease);
        c.lock(name, Some(opts)).await.expect("lock").key().to_vec()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_election_client_locks_wait_for_unlock_and_for_an_expired_holder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |_| {}).await;
    let mut c = m.client().await;
    let first = lease(&mut c, 60).await;
    let second = lease(&mut c, 60).await;
    let held = c
        .lock("job", Some(LockOptions::new().with_lease(first)))
        .await
        .expect("lock")
        .key()
        .to_vec();
    assert_eq!(held, format!("job/{first:x}").into_bytes());
    let waiter = lock_in_background(&c, "job", second);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiter.is_finished(), "the second locker waits");
    c.unlock(held).await.expect("unlock");
    let key = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter gets the lock")
        .expect("task");
    assert_eq!(key, format!("job/{second:x}").into_bytes());
    c.unlock(key).await.expect("unlock");

    // A holder whose lease runs out (no keepalives) loses the lock to the waiter.
    let short = lease(&mut c, 2).await;
    c.lock("job", Some(LockOptions::new().with_lease(short)))
        .await
        .expect("lock with the short lease");
    let started = Instant::now();
    let waiter = lock_in_background(&c, "job", second);
    let key = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("the lock is released when the lease expires")
        .expect("task");
    assert_eq!(key, format!("job/{second:x}").into_bytes());
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let ttl = c
        .lease_time_to_live(short, None)
        .await
        .expect("time to live")
        .ttl();
    assert_eq!(ttl, -1, "the short lease is gone");
    c.unlock(key).await.expect("unlock");

    // Without a lease the server grants one (concurrency's 60 s session).
    let key = c.lock("free", None).await.expect("lock").key().to_vec();
    let kv = c.get(key.clone(), None).await.expect("get").kvs()[0].clone();
    assert!(kv.lease() > 0);
    assert_eq!(key, format!("free/{:x}", kv.lease()).into_bytes());
    let granted = c
        .lease_time_to_live(kv.lease(), None)
        .await
        .expect("time to live")
        .granted_ttl();
    assert_eq!(granted, 60);

    // An unknown lease is refused.
    let e = c
        .lock("job", Some(LockOptions::new().with_lease(0x999)))
        .await
        .expect_err("unknown lease");
    assert!(
        e.to_string()
            .contains("etcdserver: requested lease not found"),
        "{e}"
    );
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_election_client_campaign_observe_proclaim_resign() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |_| {}).await;
    let mut c = m.client().await;
    let a = lease(&mut c, 60).await;
    let b = lease(&mut c, 60).await;
    let mut observer = c.observe("el").await.expect("observe");
    let leader = c
        .campaign("el", "a1", a)
        .await
        .expect("campaign")
        .take_leader()
        .expect("leader key");
    assert_eq!(leader.key(), format!("el/{a:x}").as_bytes());
    let now = c.leader("el").await.expect("leader");
    assert_eq!(now.kv().expect("kv").value(), b"a1");
    let mut cb = c.clone();
    let candidate = tokio::spawn(async move { cb.campaign("el", "b1", b).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!candidate.is_finished(), "the candidate waits");
    c.proclaim(
        "a2",
        Some(ProclaimOptions::new().with_leader(leader.clone())),
    )
    .await
    .expect("proclaim");
    c.resign(Some(ResignOptions::new().with_leader(leader)))
        .await
        .expect("resign");
    let elected = tokio::time::timeout(Duration::from_secs(5), candidate)
        .await
        .expect("the candidate is elected")
        .expect("task")
        .expect("campaign")
        .take_leader()
        .expect("leader key");
    assert_eq!(elected.key(), format!("el/{b:x}").as_bytes());
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let r = tokio::time::timeout(Duration::from_secs(5), observer.message())
            .await
            .expect("observed within 5 s")
            .expect("observe")
            .expect("open");
        let kv = r.kv().expect("kv");
        seen.push(format!(
            "{}={}",
            String::from_utf8_lossy(kv.key()),
            String::from_utf8_lossy(kv.value())
        ));
    }
    assert_eq!(
        seen,
        [
            format!("el/{a:x}=a1"),
            format!("el/{a:x}=a2"),
            format!("el/{b:x}=b1")
        ]
    );
    c.resign(Some(ResignOptions::new().with_leader(elected)))
        .await
        .expect("resign");
    let e = c.leader("el").await.expect_err("no leader");
    assert!(e.to_string().contains("election: no leader"), "{e}");
    m.stop().await;
}

/// The key of the next leader an Observe stream reports.
async fn observed(observer: &mut etcd_client::ObserveStream) -> Vec<u8> {
    let r = tokio::time::timeout(Duration::from_secs(5), observer.message())
        .await
        .expect("observed within 5 s")
        .expect("observe")
        .expect("open");
    r.kv().expect("kv").key().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_election_client_followers_lock_and_wait_in_a_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, _) = three(dir.path()).await;
    let leader = leader_index(&members).await;
    let mut on_leader = members[leader].client().await;
    let mut f1 = members[(leader + 1) % 3].client().await;
    let f2 = members[(leader + 2) % 3].client().await;
    let first = lease(&mut on_leader, 60).await;
    let second = lease(&mut on_leader, 60).await;
    let held = f1
        .lock("job", Some(LockOptions::new().with_lease(first)))
        .await
        .expect("lock on a follower")
        .key()
        .to_vec();
    let waiter = lock_in_background(&f2, "job", second);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!waiter.is_finished(), "the other follower waits");
    // A lock's keys are an election's candidates too: the observer sees both holders.
    let mut observer = f2.clone().observe("job").await.expect("observe");
    // The first answer (the holder when the server reads it) before the unlock: an
    // Observe call is answered once established, its first read may come later.
    assert_eq!(
        observed(&mut observer).await,
        format!("job/{first:x}").into_bytes()
    );
    on_leader.unlock(held).await.expect("unlock on the leader");
    let key = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter gets the lock")
        .expect("task");
    assert_eq!(key, format!("job/{second:x}").into_bytes());
    assert_eq!(
        observed(&mut observer).await,
        format!("job/{second:x}").into_bytes()
    );
    for m in members {
        m.stop().await;
    }
}

/// Runs etcdctl 3.4 against `endpoint`, interrupted (as by ^C: it then unlocks or
/// resigns) after `secs` seconds; answers its stdout.
fn etcdctl(endpoint: &str, secs: u32, args: &[&str]) -> String {
    let out = Command::new("timeout")
        .args(["-s", "INT"])
        .arg(secs.to_string())
        .arg(ETCDCTL)
        .arg(format!("--endpoints={endpoint}"))
        .args(args)
        .env("ETCDCTL_API", "3")
        .stdin(Stdio::null())
        .output()
        .expect("run etcdctl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_election_etcdctl_lock_and_elect() {
    assert!(
        std::path::Path::new(ETCDCTL).exists(),
        "this test needs etcdctl 3.4: apt-get install -y etcd-client"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |_| {}).await;
    let endpoint = m.endpoint();
    let ep = endpoint.clone();
    let (held, ran, elected) = tokio::task::spawn_blocking(move || {
        (
            etcdctl(&ep, 3, &["lock", "mylock"]),
            etcdctl(&ep, 10, &["lock", "mylock", "echo", "hi"]),
            etcdctl(&ep, 3, &["elect", "myelection", "p1"]),
        )
    })
    .await
    .expect("etcdctl");
    // Holding the lock until interrupted, it prints the key (and its empty value); with a
    // command, only the command's output.
    assert!(held.starts_with("mylock/"), "{held:?}");
    assert_eq!(held.trim_end().lines().count(), 1, "{held:?}");
    assert_eq!(ran, "hi\n");
    assert!(elected.starts_with("myelection/"), "{elected:?}");
    assert!(elected.ends_with("\np1\n"), "{elected:?}");
    m.stop().await;
}
