//! Leases and watches under faults: clients grant leases with two keys each, keep half
//! of them alive (then revoke them) and let the rest expire, while a watcher follows
//! every change and resumes from the revision after the last one it saw whenever its
//! stream breaks. Run in a scenario of its own: revocations write revisions the KV model
//! does not know.
//!
//! Checks once the faults stop and the cluster recovered:
//! - the watcher saw each revision at most once, in increasing order, and both keys of a
//!   lease deleted in one revision (atomic revocation);
//! - no key of a kept lease was deleted while its last acknowledged keepalive still had
//!   time left (an expiry never undoes a keepalive), unless its client revoked it;
//! - every acknowledged put shows up as an event;
//! - in the end every lease is gone (expired or revoked) and so are its keys, on every
//!   member, and the members' state hashes agree.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, ConnectOptions, EventType, GetOptions, PutOptions, WatchOptions};

/// Prefix of every key the lease clients write.
pub const PREFIX: &str = "lease/";

/// TTL of every lease (seconds).
const TTL: i64 = 3;

/// What one lease client did with one lease; times in ms since the start.
#[derive(Debug, Clone, Default)]
pub struct LeaseLife {
    /// The lease.
    pub id: i64,
    /// Its keys (puts acknowledged).
    pub keys: Vec<String>,
    /// Kept alive by its client.
    pub kept: bool,
    /// Acknowledged keepalives: (time received, TTL).
    pub acks: Vec<(u64, i64)>,
    /// When its client asked for its revocation.
    pub revoke_sent: Option<u64>,
}

/// One watch event: (time received, revision, key, is a delete).
pub type Seen = (u64, i64, String, bool);

fn ms(start: Instant) -> u64 {
    start.elapsed().as_millis() as u64
}

use crate::watches::connect;

/// One client: lease after lease until `stop`.
async fn client_loop(
    id: usize,
    url: String,
    opts: Option<ConnectOptions>,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<LeaseLife> {
    let mut out = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let Some(mut c) = connect(&url, &opts).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        n += 1;
        let Ok(granted) = c.lease_grant(TTL, None).await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let mut life = LeaseLife {
            id: granted.id(),
            kept: n % 2 == 0,
            ..Default::default()
        };
        for k in 0..2 {
            let key = format!("{PREFIX}{id}/{n}/{k}");
            let put = c.put(
                key.as_str(),
                "v",
                Some(PutOptions::new().with_lease(life.id)),
            );
            if put.await.is_ok() {
                life.keys.push(key);
            }
        }
        if life.kept {
            keep_for(&mut c, &mut life, start, Duration::from_secs(6), &stop).await;
            life.revoke_sent = Some(ms(start));
            let _ = c.lease_revoke(life.id).await;
        }
        out.push(life);
    }
    out
}

/// Sends keepalives every TTL/3 for `how_long`, recording the acknowledgements.
async fn keep_for(
    c: &mut Client,
    life: &mut LeaseLife,
    start: Instant,
    how_long: Duration,
    stop: &AtomicBool,
) {
    let until = Instant::now() + how_long;
    while Instant::now() < until && !stop.load(Ordering::Relaxed) {
        let once = async {
            let (mut keeper, mut acks) = c.lease_keep_alive(life.id).await.ok()?;
            keeper.keep_alive().await.ok()?;
            acks.message().await.ok()?
        };
        if let Ok(Some(ack)) = tokio::time::timeout(Duration::from_secs(1), once).await
            && ack.ttl() > 0
        {
            life.acks.push((ms(start), ack.ttl()));
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
}

/// Follows every change under [`PREFIX`], resuming after breaks, until `stop`.
async fn watcher(
    urls: Vec<String>,
    opts: Option<ConnectOptions>,
    start: Instant,
    stop: Arc<AtomicBool>,
) -> Vec<Seen> {
    let mut seen: Vec<Seen> = Vec::new();
    let mut turn = 0;
    while !stop.load(Ordering::Relaxed) {
        turn += 1;
        let Some(mut c) = connect(&urls[turn % urls.len()], &opts).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let from = seen.last().map(|s| s.1 + 1).unwrap_or(1);
        let wopts = WatchOptions::new().with_prefix().with_start_revision(from);
        let Ok(mut stream) = c.watch(PREFIX, Some(wopts)).await else {
            continue;
        };
        while !stop.load(Ordering::Relaxed) {
            let next = tokio::time::timeout(Duration::from_millis(500), stream.message()).await;
            let resp = match next {
                Err(_) => continue,
                Ok(Ok(Some(r))) => r,
                Ok(_) => break,
            };
            if resp.canceled() {
                break;
            }
            for e in resp.events() {
                let Some(kv) = e.kv() else { continue };
                let key = String::from_utf8_lossy(kv.key()).into_owned();
                seen.push((
                    ms(start),
                    kv.mod_revision(),
                    key,
                    e.event_type() == EventType::Delete,
                ));
            }
        }
    }
    seen
}

/// The running lease workload.
pub struct Running {
    clients: Vec<tokio::task::JoinHandle<Vec<LeaseLife>>>,
    watcher: tokio::task::JoinHandle<Vec<Seen>>,
    stop: Arc<AtomicBool>,
    start: Instant,
}

/// Starts `clients` lease clients (client `c` on member `c % members`) and the watcher.
pub fn start(urls: &[String], opts: Option<ConnectOptions>, clients: usize) -> Running {
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let clients = (0..clients)
        .map(|i| {
            tokio::spawn(client_loop(
                i,
                urls[i % urls.len()].clone(),
                opts.clone(),
                start,
                stop.clone(),
            ))
        })
        .collect();
    let watcher = tokio::spawn(watcher(urls.to_vec(), opts, start, stop.clone()));
    Running {
        clients,
        watcher,
        stop,
        start,
    }
}

/// What the lease run saw.
#[derive(Debug)]
pub struct LeaseSummary {
    /// Leases granted and acknowledged.
    pub leases: usize,
    /// Acknowledged keepalives.
    pub keepalives: usize,
    /// Watch events seen.
    pub events: usize,
    /// Deletes caused by expiry (keys of leases their clients never revoked).
    pub expired_keys: usize,
}

impl Running {
    /// Stops the clients; the watcher goes on until the cluster has settled, then every
    /// check runs against `urls` (all members up).
    pub async fn finish(
        self,
        urls: &[String],
        opts: Option<ConnectOptions>,
    ) -> Result<LeaseSummary, String> {
        self.stop.store(true, Ordering::Relaxed);
        let mut lives = Vec::new();
        for c in self.clients {
            lives.extend(c.await.map_err(|e| e.to_string())?);
        }
        let seen = self.watcher.await.map_err(|e| e.to_string())?;
        let ends = settle(urls, &opts).await?;
        check(&lives, &seen, &ends)
    }

    /// Milliseconds since the workload started.
    pub fn elapsed_ms(&self) -> u64 {
        ms(self.start)
    }
}

/// Waits until every lease has expired and no key is left on any member; returns each
/// remaining event seen by a fresh watch from revision 1 (the full history, for the
/// acknowledged-put check).
async fn settle(urls: &[String], opts: &Option<ConnectOptions>) -> Result<Vec<Seen>, String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut left = 0;
        for url in urls {
            let mut c = connect(url, opts)
                .await
                .ok_or_else(|| format!("{url} unreachable after recovery"))?;
            let keys = c
                .get(
                    PREFIX,
                    Some(GetOptions::new().with_prefix().with_count_only()),
                )
                .await
                .map_err(|e| e.to_string())?
                .count();
            let leases = c.leases().await.map_err(|e| e.to_string())?.leases().len();
            left += keys as usize + leases;
        }
        if left == 0 {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{left} leases and keys still there 30 s after the faults stopped"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    agree(urls, opts).await?;
    let mut c = connect(&urls[0], opts).await.ok_or("unreachable")?;
    let mut stream = c
        .watch(
            PREFIX,
            Some(WatchOptions::new().with_prefix().with_start_revision(1)),
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut all = Vec::new();
    while let Ok(Ok(Some(r))) = tokio::time::timeout(Duration::from_secs(1), stream.message()).await
    {
        for e in r.events() {
            if let Some(kv) = e.kv() {
                all.push((
                    0,
                    kv.mod_revision(),
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    e.event_type() == EventType::Delete,
                ));
            }
        }
    }
    Ok(all)
}

/// Every member's state hash (leases included) is the same once they applied the same
/// log.
async fn agree(urls: &[String], opts: &Option<ConnectOptions>) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut hashes = Vec::new();
        for url in urls {
            let mut c = connect(url, opts).await.ok_or("unreachable")?;
            c.get("settle", None).await.map_err(|e| e.to_string())?;
            hashes.push(c.hash().await.map_err(|e| e.to_string())?.hash());
        }
        if hashes.windows(2).all(|w| w[0] == w[1]) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("members' state hashes differ: {hashes:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn check(lives: &[LeaseLife], seen: &[Seen], all: &[Seen]) -> Result<LeaseSummary, String> {
    // Ordered, unique.
    if let Some(w) = seen.windows(2).find(|w| w[1].1 < w[0].1) {
        return Err(format!("watch went back in revision: {w:?}"));
    }
    let mut per_rev: HashMap<(i64, &str), usize> = HashMap::new();
    for s in seen {
        *per_rev.entry((s.1, s.2.as_str())).or_default() += 1;
    }
    if let Some(((rev, key), n)) = per_rev.iter().find(|(_, n)| **n > 1) {
        return Err(format!("{key} at revision {rev} seen {n} times"));
    }
    // Atomic revocation: both keys of a lease deleted in one revision.
    let deleted_at: BTreeMap<&str, i64> = all
        .iter()
        .filter(|s| s.3)
        .map(|s| (s.2.as_str(), s.1))
        .collect();
    let mut expired_keys = 0;
    for l in lives.iter().filter(|l| l.keys.len() == 2) {
        let revs: Vec<Option<&i64>> = l.keys.iter().map(|k| deleted_at.get(k.as_str())).collect();
        if revs[0] != revs[1] {
            return Err(format!(
                "keys of lease {:x} deleted at different revisions: {revs:?}",
                l.id
            ));
        }
        if l.revoke_sent.is_none() {
            expired_keys += 2;
        }
    }
    // No expiry undoes an acknowledged keepalive: a kept lease's keys are not deleted
    // before its last acknowledged keepalive ran out, unless its client revoked it.
    // (The delete is seen after it happened, so this can only miss, not invent.)
    let when_deleted: HashMap<&str, u64> = seen
        .iter()
        .filter(|s| s.3)
        .map(|s| (s.2.as_str(), s.0))
        .collect();
    for l in lives.iter().filter(|l| l.kept) {
        for k in &l.keys {
            let Some(&d) = when_deleted.get(k.as_str()) else {
                continue;
            };
            if l.revoke_sent.is_some_and(|r| r <= d) {
                continue;
            }
            if let Some((a, ttl)) = l.acks.iter().rev().find(|(a, _)| *a <= d)
                && d + 1000 < a + *ttl as u64 * 1000
            {
                return Err(format!(
                    "{k} deleted at {d} ms though lease {:x} was kept alive at {a} ms for {ttl} s",
                    l.id
                ));
            }
        }
    }
    // Every acknowledged put is in the history.
    let put: std::collections::HashSet<&str> =
        all.iter().filter(|s| !s.3).map(|s| s.2.as_str()).collect();
    if let Some(k) = lives
        .iter()
        .flat_map(|l| &l.keys)
        .find(|k| !put.contains(k.as_str()))
    {
        return Err(format!("acknowledged put of {k} is not in the history"));
    }
    Ok(LeaseSummary {
        leases: lives.len(),
        keepalives: lives.iter().map(|l| l.acks.len()).sum(),
        events: seen.len(),
        expired_keys,
    })
}
