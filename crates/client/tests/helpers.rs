//! oxcd-client's watch, lock, election and lease-keeper helpers against a real member
//! (in process, on a real socket): a watch resumes after the member restarts without
//! missing or repeating an event, a compacted start revision ends it with etcd's error,
//! progress requests answer with a revision to resume from; a lock waits for its holder,
//! an election hands over on resignation, and a kept lease outlives its TTL.

use std::path::Path;
use std::time::Duration;

use oxcd_client::{Client, ConnectOptions, Error, watch_prefix};
use oxcd_config::settings::Settings;
use oxcd_server::start::serve;

/// A member on `port` with its data in `dir`; stops when the sender is dropped or used.
async fn member(dir: &Path, port: u16) -> tokio::sync::oneshot::Sender<()> {
    let mut s = Settings::new("default", dir.to_path_buf());
    s.listen_client_urls = vec![format!("http://127.0.0.1:{port}")];
    // Not etcd's default peer port, which tests running together would share.
    s.listen_peer_urls = vec!["http://127.0.0.1:0".into()];
    s.advertise_client_urls = vec![format!("http://127.0.0.1:{port}")];
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(serve::run(
        s,
        async move {
            let _ = stop_rx.await;
        },
        move |_| {
            let _ = ready_tx.send(());
        },
    ));
    ready_rx.await.expect("member started");
    stop_tx
}

async fn client(port: u16) -> Client {
    Client::connect(&[format!("127.0.0.1:{port}")], &ConnectOptions::default())
        .await
        .expect("connected")
}

/// (key, mod_revision) of each event of the next `n` event responses' events.
async fn events(w: &mut oxcd_client::Watch, n: usize) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    while out.len() < n {
        let r = tokio::time::timeout(Duration::from_secs(20), w.next())
            .await
            .expect("an event within 20 s")
            .expect("watch goes on");
        for e in r.events {
            let kv = e.kv.expect("kv");
            out.push((
                String::from_utf8_lossy(&kv.key).into_owned(),
                kv.mod_revision,
            ));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_after_the_member_restarts_without_gaps_or_repeats() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = oxcd_testkit::ports::free_port().expect("port");
    let stop = member(dir.path(), port).await;
    let c = client(port).await;
    let mut w = c
        .watch_resumable(watch_prefix("job/"))
        .await
        .expect("watch created");
    assert_eq!(
        w.next_revision(),
        2,
        "from the revision after the current one"
    );
    for i in 0..5 {
        c.put(format!("job/{i}"), "v").await.expect("put");
    }
    let first = events(&mut w, 5).await;
    let _ = stop.send(());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stop = member(dir.path(), port).await;
    for i in 5..10 {
        c.put(format!("job/{i}"), "v")
            .await
            .expect("put after restart");
    }
    let second = events(&mut w, 5).await;
    let all: Vec<(String, i64)> = first.into_iter().chain(second).collect();
    let want: Vec<(String, i64)> = (0..10).map(|i| (format!("job/{i}"), i + 2)).collect();
    assert_eq!(all, want);
    assert!(w.resumed() >= 1, "the stream was reopened");
    assert_eq!(w.next_revision(), 12);
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compacted_start_ends_the_watch_and_progress_gives_a_revision() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = oxcd_testkit::ports::free_port().expect("port");
    let stop = member(dir.path(), port).await;
    let c = client(port).await;
    for i in 0..5 {
        c.put("k", format!("{i}")).await.expect("put");
    }
    c.compact(4, true).await.expect("compact");
    let mut from = watch_prefix("k");
    from.start_revision = 2;
    // As etcd, the server creates the watch, then cancels it with the compaction.
    let mut w = c.watch_resumable(from).await.expect("created");
    match w.next().await {
        Err(e @ Error::Compacted(4)) => assert_eq!(
            e.to_string(),
            "etcdserver: mvcc: required revision has been compacted"
        ),
        other => panic!("wanted Compacted(4), got {other:?}"),
    }
    let mut from = watch_prefix("k");
    from.start_revision = 4;
    let mut w = c
        .watch_resumable(from)
        .await
        .expect("from the compaction on");
    assert_eq!(
        events(&mut w, 3).await,
        vec![("k".into(), 4), ("k".into(), 5), ("k".into(), 6)]
    );
    w.request_progress().await.expect("asked");
    let p = tokio::time::timeout(Duration::from_secs(5), w.next())
        .await
        .expect("progress within 5 s")
        .expect("progress");
    assert!(p.events.is_empty());
    assert_eq!(p.header.map(|h| h.revision), Some(6));
    assert_eq!(w.next_revision(), 7);
    let _ = stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_wait_elections_hand_over_and_a_kept_lease_outlives_its_ttl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = oxcd_testkit::ports::free_port().expect("port");
    let stop = member(dir.path(), port).await;
    let c = client(port).await;
    let a = c.lease_grant(2, 0).await.expect("grant").id;
    let b = c.lease_grant(30, 0).await.expect("grant").id;
    let keeper = c.keep_lease_alive(a, 2);
    let held = c.lock("mutex", a).await.expect("lock");
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { c.lock("mutex", b).await })
    };
    // Three TTLs later the kept lease still holds the lock and the waiter still waits.
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(keeper.alive());
    assert!(keeper.ttl() > 0);
    assert!(!waiter.is_finished(), "the lock was taken while held");
    c.unlock(held.key.clone()).await.expect("unlock");
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter gets the lock")
        .expect("task")
        .expect("lock");
    assert!(got.key.starts_with(b"mutex/"));
    c.unlock(got.key).await.expect("unlock");

    let first = c.campaign("el", a, "one").await.expect("campaign");
    let leader = first.leader.expect("leader key");
    let mut observed = c.observe("el").await.expect("observe");
    let second = {
        let c = c.clone();
        tokio::spawn(async move { c.campaign("el", b, "two").await })
    };
    c.proclaim(leader.clone(), "one'").await.expect("proclaim");
    let now = c.leader("el").await.expect("leader").kv.expect("kv");
    assert_eq!(now.value, b"one'");
    c.resign(leader).await.expect("resign");
    let won = tokio::time::timeout(Duration::from_secs(5), second)
        .await
        .expect("the second candidate is elected")
        .expect("task")
        .expect("campaign");
    assert_eq!(won.leader.map(|l| l.lease), Some(b));
    let mut values = Vec::new();
    while values.last().map(Vec::as_slice) != Some(b"two".as_slice()) {
        let r = tokio::time::timeout(Duration::from_secs(5), observed.message())
            .await
            .expect("observed within 5 s")
            .expect("stream")
            .expect("a leader");
        values.push(r.kv.expect("kv").value);
    }
    // The stream opens with the leader's value when the server first reads it: before or
    // after the proclamation, which races with it (as on etcd).
    let first = values.first().map(Vec::as_slice);
    assert!(
        first == Some(b"one".as_slice()) || first == Some(b"one'".as_slice()),
        "observed first: {values:?}"
    );
    drop(keeper);
    c.lease_revoke(b).await.expect("revoke");
    let _ = stop.send(());
}
