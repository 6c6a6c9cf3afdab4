//! Watchers beside the KV workload: one per member (at least two), each watching the
//! workload's keys from revision 1 with `prev_kv`, asking for progress every half second
//! and resuming after every break from the revision after the last event or bookmark it
//! received, as Kubernetes' reflectors do. What each stream delivered is recorded for
//! [`crate::checker::watch`].
//!
//! A watcher stays on its member while it can and moves to the next one when its member
//! refuses it or stops answering (killed, paused): three seconds without any message,
//! progress asked twice a second, count as a stall. When the workload has stopped and the
//! cluster recovered, each watcher goes on until it has reached the final revision; a
//! fresh watch from revision 1 then reads the whole history again as a reference (unless
//! it was compacted).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, EventType, GetOptions, WatchOptions, WatchResponse};
use serde::{Deserialize, Serialize};

/// The workload's key prefix.
const PREFIX: &str = "k";

/// One event as a watcher received it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The event's revision (the kv's mod_revision).
    pub rev: i64,
    /// The key.
    pub key: String,
    /// The new value; None for a delete.
    pub value: Option<String>,
    /// The kv's create_revision (0 for a delete).
    pub create_rev: i64,
    /// The kv's version (0 for a delete).
    pub version: i64,
    /// prev_kv: the value and mod_revision before.
    pub prev: Option<(String, i64)>,
}

/// What one stream delivered, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// A stream opened on `member` from revision `from`.
    Started { member: usize, from: i64 },
    /// One response's events, received `at` ns after the run started.
    Events { at: u64, events: Vec<Event> },
    /// A response without events (progress): everything up to `rev` was delivered.
    Progress { rev: i64 },
    /// The start revision was compacted; the next stream starts at `rev`.
    Compacted { rev: i64 },
}

/// One watcher's records.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct WatchLog {
    /// Everything its streams delivered.
    pub records: Vec<Record>,
}

/// How the run ended: the final revision, each member's final keys, and the reference.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ending {
    /// The store revision once the clients stopped.
    pub final_rev: i64,
    /// Each member's (key, value, mod_revision) under the prefix, read linearizably.
    pub finals: Vec<Vec<(String, String, i64)>>,
    /// A watch from revision 1 after the run; None if revision 1 was compacted.
    pub reference: Option<Vec<Event>>,
    /// The revision the store was at when the checked history began (0 or 1: empty);
    /// the revisions up to it were written outside the watched prefix.
    pub base_rev: i64,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn events_of(resp: &WatchResponse) -> Vec<Event> {
    resp.events()
        .iter()
        .filter_map(|e| {
            let kv = e.kv()?;
            let put = e.event_type() == EventType::Put;
            Some(Event {
                rev: kv.mod_revision(),
                key: text(kv.key()),
                value: put.then(|| text(kv.value())),
                create_rev: kv.create_revision(),
                version: kv.version(),
                prev: e.prev_kv().map(|p| (text(p.value()), p.mod_revision())),
            })
        })
        .collect()
}

/// A client of `url` with short timeouts (connect 1 s, requests 2 s); None when it
/// cannot connect within 2 s.
pub(crate) async fn connect(url: &str, opts: &Option<ConnectOptions>) -> Option<Client> {
    let opts = opts
        .clone()
        .unwrap_or_default()
        .with_connect_timeout(Duration::from_secs(1))
        .with_timeout(Duration::from_secs(2));
    let connecting = Client::connect([url], Some(opts));
    tokio::time::timeout(Duration::from_secs(2), connecting)
        .await
        .ok()?
        .ok()
}

fn options(from: i64) -> WatchOptions {
    WatchOptions::new()
        .with_prefix()
        .with_start_revision(from)
        .with_prev_key()
        .with_progress_notify()
}

/// Watcher `id`: streams from its member on, until it has passed `stop_after` (0: not
/// yet known).
async fn watcher(
    id: usize,
    urls: Vec<String>,
    opts: Option<ConnectOptions>,
    start: Instant,
    stop_after: Arc<AtomicI64>,
) -> WatchLog {
    let mut log = WatchLog::default();
    let mut next = 1;
    let mut member = id % urls.len();
    let done = |next: i64| {
        let f = stop_after.load(Ordering::Relaxed);
        f > 0 && next > f
    };
    while !done(next) {
        let Some(mut c) = connect(&urls[member], &opts).await else {
            member = (member + 1) % urls.len();
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let watching =
            tokio::time::timeout(Duration::from_secs(2), c.watch(PREFIX, Some(options(next))));
        let Ok(Ok(mut stream)) = watching.await else {
            member = (member + 1) % urls.len();
            continue;
        };
        log.records.push(Record::Started { member, from: next });
        let mut last_message = Instant::now();
        let stalled = loop {
            if done(next) {
                break false;
            }
            let resp =
                match tokio::time::timeout(Duration::from_millis(500), stream.message()).await {
                    Err(_) => {
                        if last_message.elapsed() > Duration::from_secs(3) {
                            break true;
                        }
                        let _ = stream.request_progress().await;
                        continue;
                    }
                    Ok(Ok(Some(r))) => r,
                    Ok(_) => break true,
                };
            last_message = Instant::now();
            if resp.canceled() {
                if resp.compact_revision() > 0 {
                    log.records.push(Record::Compacted {
                        rev: resp.compact_revision(),
                    });
                    next = resp.compact_revision();
                }
                break false;
            }
            let events = events_of(&resp);
            if let Some(last) = events.last() {
                next = last.rev + 1;
                log.records.push(Record::Events {
                    at: start.elapsed().as_nanos() as u64,
                    events,
                });
            } else if !resp.created() {
                let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
                log.records.push(Record::Progress { rev });
                next = next.max(rev + 1);
            }
        };
        if stalled {
            member = (member + 1) % urls.len();
        }
    }
    log
}

/// The running watchers.
pub struct Watching {
    tasks: Vec<tokio::task::JoinHandle<WatchLog>>,
    stop_after: Arc<AtomicI64>,
}

/// Starts one watcher per member (at least two); `start` is the workload's clock.
pub fn start(urls: &[String], opts: Option<ConnectOptions>, start: Instant) -> Watching {
    let stop_after = Arc::new(AtomicI64::new(0));
    let tasks = (0..urls.len().max(2))
        .map(|id| {
            tokio::spawn(watcher(
                id,
                urls.to_vec(),
                opts.clone(),
                start,
                stop_after.clone(),
            ))
        })
        .collect();
    Watching { tasks, stop_after }
}

async fn final_keys(
    url: &str,
    opts: &Option<ConnectOptions>,
) -> Result<(i64, Vec<(String, String, i64)>), String> {
    let mut c = connect(url, opts)
        .await
        .ok_or_else(|| format!("{url} unreachable after recovery"))?;
    // A recovered cluster may still change leaders: a read refused meanwhile ("leader
    // changed", "no leader") is asked again, as a client would, for 10 s at most.
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        match c.get(PREFIX, Some(GetOptions::new().with_prefix())).await {
            Ok(r) => break r,
            Err(e) if Instant::now() > deadline => return Err(format!("{url}: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    };
    let kvs = r
        .kvs()
        .iter()
        .map(|kv| (text(kv.key()), text(kv.value()), kv.mod_revision()))
        .collect();
    Ok((r.header().map(|h| h.revision()).unwrap_or(0), kvs))
}

/// Waits (30 s at most) until no lease is left, so that no expiry changes the keys
/// while the members' final keys are read.
async fn leases_gone(url: &str, opts: &Option<ConnectOptions>) -> Result<(), String> {
    let mut c = connect(url, opts)
        .await
        .ok_or_else(|| format!("{url} unreachable after recovery"))?;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // A refusal while leaders change is asked again until the deadline.
        let left = match c.leases().await {
            Ok(r) if r.leases().is_empty() => return Ok(()),
            Ok(r) => format!("{} leases still live", r.leases().len()),
            Err(e) => format!("{url}: lease list: {e}"),
        };
        if Instant::now() > deadline {
            return Err(format!("{left} 30 s after recovery"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Reads every event from revision 1 to `last` in one stream; None if compacted.
async fn reference(
    url: &str,
    opts: &Option<ConnectOptions>,
    last: i64,
) -> Result<Option<Vec<Event>>, String> {
    let mut c = connect(url, opts).await.ok_or("unreachable")?;
    let mut stream = c
        .watch(PREFIX, Some(options(1)))
        .await
        .map_err(|e| e.to_string())?;
    let mut all: Vec<Event> = Vec::new();
    while all.last().map(|e| e.rev).unwrap_or(1) < last {
        let next = tokio::time::timeout(Duration::from_secs(10), stream.message()).await;
        let Ok(Ok(Some(resp))) = next else {
            return Err(format!(
                "a watch from revision 1 stopped at {:?} before {last}",
                all.last().map(|e| e.rev)
            ));
        };
        if resp.canceled() {
            return Ok(None);
        }
        all.extend(events_of(&resp));
    }
    Ok(Some(all))
}

impl Watching {
    /// Once the clients stopped and every member is up: waits for the workload's leases
    /// to expire, reads the final revision and keys, lets every watcher reach that revision (30 s at most), reads the reference.
    pub async fn finish(
        self,
        urls: &[String],
        opts: Option<ConnectOptions>,
    ) -> Result<(Vec<WatchLog>, Ending), String> {
        let mut ending = Ending::default();
        leases_gone(&urls[0], &opts).await?;
        for url in urls {
            let (rev, kvs) = final_keys(url, &opts).await?;
            ending.final_rev = ending.final_rev.max(rev);
            ending.finals.push(kvs);
        }
        self.stop_after.store(ending.final_rev, Ordering::Relaxed);
        let mut logs = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        for (i, mut t) in self.tasks.into_iter().enumerate() {
            let left = deadline.saturating_duration_since(Instant::now());
            let waited = tokio::time::timeout(left, &mut t).await;
            if waited.is_err() {
                t.abort();
            }
            match waited {
                Ok(Ok(log)) => logs.push(log),
                Ok(Err(e)) => return Err(format!("watcher {i}: {e}")),
                Err(_) => {
                    return Err(format!(
                        "watcher {i} did not reach revision {} within 30 s of recovery",
                        ending.final_rev
                    ));
                }
            }
        }
        ending.reference = reference(&urls[0], &opts, ending.final_rev).await?;
        Ok((logs, ending))
    }
}
