//! Watch with real clients (the `etcd-client` crate and raw gRPC): events on every member
//! across a leader kill, resumed from a revision; a client that stops reading; progress
//! notifications.

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::InProc;
use common::cluster::{leader_index, three};
use etcd_client::{EventType, WatchOptions};
use oxcd_api::etcdserverpb::watch_client::WatchClient;
use oxcd_api::etcdserverpb::watch_request::RequestUnion;
use oxcd_api::etcdserverpb::{WatchCreateRequest, WatchRequest};

/// (revision, key, value) of each event a watcher saw.
type Seen = Vec<(i64, String, String)>;

/// Reads `stream` until it ends or `n` events came; returns what came.
async fn collect(stream: &mut etcd_client::WatchStream, n: usize, seen: &mut Seen) {
    while seen.len() < n {
        let next = tokio::time::timeout(Duration::from_secs(20), stream.message()).await;
        let Ok(Ok(Some(resp))) = next else { return };
        for e in resp.events() {
            let kv = e.kv().expect("kv");
            assert_eq!(e.event_type(), EventType::Put);
            seen.push((
                kv.mod_revision(),
                kv.key_str().expect("utf-8").to_string(),
                kv.value_str().expect("utf-8").to_string(),
            ));
        }
    }
}

/// Puts `w/<i>` for `range` through any member that answers; returns the revisions.
async fn put_all(members: &[&InProc], range: std::ops::Range<usize>) {
    for i in range {
        let mut done = false;
        for _ in 0..100 {
            for m in members {
                let mut c = m.client().await;
                if c.put(format!("w/{i:04}"), format!("v{i}"), None)
                    .await
                    .is_ok()
                {
                    done = true;
                    break;
                }
            }
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(done, "put w/{i:04} failed on every member");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_on_every_member_see_the_same_events_across_a_leader_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, _) = three(dir.path()).await;
    let opts = || WatchOptions::new().with_prefix();
    let mut streams = Vec::new();
    for m in &members {
        let mut c = m.client().await;
        streams.push(c.watch("w/", Some(opts())).await.expect("watch"));
    }
    let all: Vec<&InProc> = members.iter().collect();
    put_all(&all, 0..50).await;
    let mut seen: Vec<Seen> = vec![Vec::new(); 3];
    for (s, seen) in streams.iter_mut().zip(seen.iter_mut()) {
        collect(s, 50, seen).await;
        assert_eq!(seen.len(), 50);
    }
    // Kill the leader: its watcher's stream ends; the client resumes on a survivor from
    // the revision after the last event it saw.
    let leader = leader_index(&members).await;
    members.remove(leader).stop().await;
    let killed_stream = streams.remove(leader);
    drop(killed_stream);
    let resumed_seen = seen.remove(leader);
    let survivors: Vec<&InProc> = members.iter().collect();
    put_all(&survivors, 50..100).await;
    let last = resumed_seen.last().expect("events").0;
    let mut c = members[0].client().await;
    let mut resumed = c
        .watch("w/", Some(opts().with_start_revision(last + 1)))
        .await
        .expect("resume the watch");
    let mut resumed_seen = resumed_seen;
    collect(&mut resumed, 100, &mut resumed_seen).await;
    for (s, seen) in streams.iter_mut().zip(seen.iter_mut()) {
        collect(s, 100, seen).await;
    }
    seen.push(resumed_seen);
    for s in &seen {
        assert_eq!(s.len(), 100, "every write seen once");
        assert_eq!(s, &seen[0], "the same events in the same order everywhere");
        // Ordered and without a gap: each write is one revision.
        assert!(s.windows(2).all(|w| w[1].0 == w[0].0 + 1), "{s:?}");
    }
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_gets_everything_once_it_reads_again() {
    const PUTS: usize = 6_000; // more batches than the live feed keeps
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |_| {}).await;
    let channel = m.small_window_channel().await;
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tx.send(WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key: b"s/".to_vec(),
            range_end: b"s0".to_vec(),
            ..Default::default()
        })),
    })
    .await
    .expect("create");
    let mut responses = WatchClient::new(channel)
        .watch(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect("watch")
        .into_inner();
    let created = responses.message().await.expect("created").expect("open");
    assert!(created.created);
    // The client reads nothing while the writes go on: they all succeed.
    let mut c = m.client().await;
    let value = "x".repeat(200);
    for i in 0..PUTS {
        c.put(format!("s/{}", i % 100), value.as_str(), None)
            .await
            .expect("put while a watcher is stalled");
    }
    let last = c
        .get("s/0", None)
        .await
        .expect("get")
        .header()
        .expect("h")
        .revision();
    // Now it reads: every revision once, in order, with nothing missing.
    let mut revs = Vec::new();
    while revs.last().copied() != Some(last) {
        let r = tokio::time::timeout(Duration::from_secs(30), responses.message())
            .await
            .expect("events keep coming")
            .expect("stream up")
            .expect("stream open");
        revs.extend(
            r.events
                .iter()
                .map(|e| e.kv.as_ref().expect("kv").mod_revision),
        );
    }
    assert_eq!(revs.len(), PUTS);
    assert!(
        revs.windows(2).all(|w| w[1] == w[0] + 1),
        "ordered, no gap, no repeat"
    );
    drop(tx);
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_and_requests_carry_the_revision_to_resume_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |s| {
        s.watch_progress_notify_interval = Duration::from_millis(200);
    })
    .await;
    let mut c = m.client().await;
    c.put("other", "1", None).await.expect("put");
    let rev = c
        .put("other", "2", None)
        .await
        .expect("put")
        .header()
        .expect("h")
        .revision();
    let mut quiet = c
        .watch("p", Some(WatchOptions::new().with_progress_notify()))
        .await
        .expect("watch");
    let mut silent = c.watch("q", None).await.expect("watch without progress");
    let mut by_kind: BTreeMap<&str, i64> = BTreeMap::new();
    let mut quiet_id = None;
    while !by_kind.contains_key("notify") {
        let r = tokio::time::timeout(Duration::from_secs(5), quiet.message())
            .await
            .expect("a progress notification within 5 s")
            .expect("stream")
            .expect("open");
        if r.created() {
            quiet_id = Some(r.watch_id());
        } else if r.events().is_empty() {
            by_kind.insert("notify", r.header().expect("h").revision());
            assert_eq!(Some(r.watch_id()), quiet_id);
        }
    }
    assert_eq!(
        by_kind["notify"], rev,
        "idle watcher: everything up to {rev} seen"
    );
    // A watcher that did not ask gets none.
    let none = tokio::time::timeout(Duration::from_millis(600), silent.message()).await;
    assert!(
        none.is_err() || none.is_ok_and(|r| r.is_ok_and(|r| r.is_some_and(|r| r.created()))),
        "no progress notification for a watcher that did not ask"
    );
    quiet.request_progress().await.expect("progress request");
    loop {
        let r = tokio::time::timeout(Duration::from_secs(5), quiet.message())
            .await
            .expect("a progress response")
            .expect("stream")
            .expect("open");
        if r.watch_id() == -1 {
            assert_eq!(r.header().expect("h").revision(), rev);
            break;
        }
    }
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_revision_1_over_a_long_history_fits_the_clients_message_limit() {
    // 60,000 small events with their previous values would be about 6 MB in one
    // response; the etcd-client crate (tonic) refuses messages over 4 MiB.
    const TXNS: usize = 600;
    const PER_TXN: usize = 100;
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |_| {}).await;
    let mut c = m.client().await;
    for t in 0..TXNS {
        let puts: Vec<etcd_client::TxnOp> = (0..PER_TXN)
            .map(|i| etcd_client::TxnOp::put(format!("h/{i}"), format!("v{t}"), None))
            .collect();
        c.txn(etcd_client::Txn::new().and_then(puts))
            .await
            .expect("txn");
    }
    let opts = WatchOptions::new()
        .with_prefix()
        .with_start_revision(1)
        .with_prev_key();
    let mut stream = c.watch("h/", Some(opts)).await.expect("watch");
    let mut events = 0;
    let mut largest = 0;
    while events < TXNS * PER_TXN {
        let resp = tokio::time::timeout(Duration::from_secs(20), stream.message())
            .await
            .expect("events keep coming")
            .expect("no error: every response fits")
            .expect("stream open");
        events += resp.events().len();
        largest = largest.max(resp.events().len());
    }
    assert_eq!(events, TXNS * PER_TXN);
    assert!(largest < TXNS * PER_TXN, "split into several responses");
    m.stop().await;
}
