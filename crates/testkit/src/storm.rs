//! Load beside a checked workload that the members cannot serve at once (the
//! `overload` scenario): clients ranging over a prefix of large values again and again,
//! with the members' range memory bound set small (`--max-inflight-range-bytes`), so
//! that ranges are refused with "etcdserver: too many requests" while the checked
//! clients read and write; and connections opened and dropped in bursts. None of it is
//! in the checked history: the check is that shedding this load never drops, reorders
//! or invents acknowledged work.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::task::JoinHandle;

/// The prefix the storm ranges over (the checked workload's keys are `k...`).
pub const PREFIX: &str = "storm/";
/// Values under [`PREFIX`] and their size: a 3 MiB answer (the etcd-client crate takes
/// answers up to 4 MiB).
const VALUES: usize = 12;
const VALUE_BYTES: usize = 256 << 10;
/// Each member's range bound in the scenario: a third of one answer.
pub const BOUND_BYTES: usize = 1 << 20;

/// What the storm did.
#[derive(Debug, Default, Clone, Copy)]
pub struct StormCounts {
    /// Ranges answered in full.
    pub served: u64,
    /// Ranges refused with "etcdserver: too many requests".
    pub refused: u64,
    /// Ranges that failed otherwise (a member killed or cut off meanwhile).
    pub failed: u64,
    /// Connections opened and dropped.
    pub connections: u64,
}

/// The running storm.
pub struct Storm {
    /// The store's revision once the storm's values were written: the checked history
    /// begins after it.
    pub base_rev: i64,
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<StormCounts>>,
}

impl Storm {
    /// Stops the storm and adds up what it did.
    pub async fn finish(self) -> StormCounts {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = StormCounts::default();
        for t in self.tasks {
            if let Ok(c) = t.await {
                all.served += c.served;
                all.refused += c.refused;
                all.failed += c.failed;
                all.connections += c.connections;
            }
        }
        all
    }
}

/// Fills [`PREFIX`] through `urls[0]`, then starts `rangers` clients per member and a
/// connection churner.
pub async fn start(
    urls: &[String],
    opts: Option<etcd_client::ConnectOptions>,
    rangers: usize,
) -> Result<Storm, String> {
    let mut c = etcd_client::Client::connect([urls[0].clone()], opts.clone())
        .await
        .map_err(|e| format!("storm: connect: {e}"))?;
    let value = vec![b's'; VALUE_BYTES];
    let mut base_rev = 1;
    for i in 0..VALUES {
        let put = c
            .put(format!("{PREFIX}{i:03}"), value.clone(), None)
            .await
            .map_err(|e| format!("storm: fill: {e}"))?;
        base_rev = put.header().map_or(base_rev, |h| h.revision());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for url in urls {
        for _ in 0..rangers {
            tasks.push(tokio::spawn(ranger(
                url.clone(),
                opts.clone(),
                stop.clone(),
            )));
        }
    }
    tasks.push(tokio::spawn(churner(urls.to_vec(), stop.clone())));
    Ok(Storm {
        base_rev,
        stop,
        tasks,
    })
}

/// Ranges over [`PREFIX`] on `url` until `stop`; a failure waits 20 ms, a lost
/// connection is dialled again.
async fn ranger(
    url: String,
    opts: Option<etcd_client::ConnectOptions>,
    stop: Arc<AtomicBool>,
) -> StormCounts {
    let mut counts = StormCounts::default();
    let mut client = None;
    while !stop.load(Ordering::Relaxed) {
        let c = match &mut client {
            Some(c) => c,
            None => match etcd_client::Client::connect([url.clone()], opts.clone()).await {
                Ok(c) => client.insert(c),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let get = c.get(PREFIX, Some(etcd_client::GetOptions::new().with_prefix()));
        match tokio::time::timeout(Duration::from_secs(5), get).await {
            Ok(Ok(r)) if r.kvs().len() == VALUES => counts.served += 1,
            Ok(Ok(_)) => counts.failed += 1,
            Ok(Err(etcd_client::Error::GRpcStatus(s)))
                if s.code() == tonic::Code::ResourceExhausted
                    && s.message() == "etcdserver: too many requests" =>
            {
                counts.refused += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ => {
                counts.failed += 1;
                client = None;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    counts
}

/// Opens 50 TCP connections to each member at once, sends each the HTTP/2 preface,
/// drops them, every 200 ms until `stop`.
async fn churner(urls: Vec<String>, stop: Arc<AtomicBool>) -> StormCounts {
    use tokio::io::AsyncWriteExt;
    let mut counts = StormCounts::default();
    let addrs: Vec<String> = urls
        .iter()
        .filter_map(|u| u.split("://").nth(1).map(str::to_string))
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let mut held = Vec::new();
        for addr in &addrs {
            for _ in 0..50 {
                if let Ok(Ok(mut s)) = tokio::time::timeout(
                    Duration::from_millis(200),
                    tokio::net::TcpStream::connect(addr.as_str()),
                )
                .await
                {
                    let _ = s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").await;
                    held.push(s);
                    counts.connections += 1;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        drop(held);
    }
    counts
}
