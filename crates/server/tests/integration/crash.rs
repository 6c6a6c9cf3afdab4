//! `kill -9` of the real `oxcd` binary under concurrent write load: after a restart every
//! acknowledged write is there with its value, and the revision never goes backwards.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{OxcdProcess, free_port};
use etcd_client::{Client, GetOptions};
use tokio::sync::Mutex;

#[derive(Default)]
struct Acked {
    /// (key, value) pairs whose put was acknowledged.
    writes: Vec<(String, String)>,
    /// Highest revision an acknowledged put reported.
    max_rev: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_write_load_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let port = free_port();
    let acked = Arc::new(Mutex::new(Acked::default()));
    let mut total_attempted = 0usize;
    for round in 0..3 {
        let server = OxcdProcess::start(&data, port);
        let stop = Arc::new(AtomicBool::new(false));
        let mut writers = Vec::new();
        for w in 0..8 {
            let (ep, stop, acked) = (server.url.clone(), stop.clone(), acked.clone());
            writers.push(tokio::spawn(async move {
                let mut attempted = 0;
                let Ok(mut c) = Client::connect([ep], None).await else {
                    return attempted;
                };
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let (k, v) = (
                        format!("r{round}/w{w}/{seq:06}"),
                        format!("value-{round}-{w}-{seq}"),
                    );
                    attempted += 1;
                    match c.put(k.clone(), v.clone(), None).await {
                        Ok(r) => {
                            let rev = r.header().map(|h| h.revision()).unwrap_or(0);
                            let mut a = acked.lock().await;
                            a.writes.push((k, v));
                            a.max_rev = a.max_rev.max(rev);
                        }
                        Err(_) => break,
                    }
                    seq += 1;
                }
                attempted
            }));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        // SIGKILL while the writers are mid-flight.
        let mut server = server;
        server.child.kill().expect("kill -9");
        let _ = server.child.wait();
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            total_attempted += w.await.expect("writer");
        }
        drop(server);
    }
    let server = OxcdProcess::start(&data, port);
    let mut c = Client::connect([server.url.clone()], None)
        .await
        .expect("connect");
    let a = acked.lock().await;
    let r = c
        .get("r", Some(GetOptions::new().with_prefix()))
        .await
        .expect("get all");
    let found: std::collections::HashMap<Vec<u8>, Vec<u8>> = r
        .kvs()
        .iter()
        .map(|kv| (kv.key().to_vec(), kv.value().to_vec()))
        .collect();
    let mut missing = 0;
    for (k, v) in &a.writes {
        match found.get(k.as_bytes()) {
            Some(got) if got == v.as_bytes() => {}
            _ => missing += 1,
        }
    }
    let rev = r.header().expect("header").revision();
    eprintln!(
        "crash test: 3 kill -9 rounds, {} puts attempted, {} acknowledged, {} found after restart, {} missing; revision {} >= highest acknowledged {}",
        total_attempted,
        a.writes.len(),
        a.writes.len() - missing,
        missing,
        rev,
        a.max_rev
    );
    assert!(a.writes.len() > 100, "the load should get writes through");
    assert_eq!(missing, 0, "acknowledged writes lost");
    assert!(
        rev >= a.max_rev,
        "revision went backwards: {rev} < {}",
        a.max_rev
    );
}
