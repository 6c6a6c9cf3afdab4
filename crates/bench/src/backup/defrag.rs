//! Defragmentation under writes: background writers put at a steady rate; after a
//! baseline, one Maintenance.Defragment call on the member (no client deadline, only
//! the run's timeout); then a short tail. Every put is kept with when it was sent and
//! when it finished, so the puts in flight at any moment of the call are known: the
//! longest of them is the longest pause a writer saw.

use std::time::{Duration, Instant};

use oxcd_api::etcdserverpb::DefragmentRequest;
use serde::Serialize;

use crate::load::{self, Window, Writers};

/// How the writers are run.
#[derive(Debug, Clone)]
pub struct Load {
    pub clients: usize,
    pub conns: usize,
    /// Puts per second over all clients (0: as fast as answered).
    pub rate: u64,
    pub value_size: usize,
    pub baseline: Duration,
    /// Gives up on the call after this long.
    pub timeout: Duration,
}

/// How long the writers go on after the call, to see them recover.
pub const TAIL: Duration = Duration::from_secs(1);

/// What the defragmentation did and what the writers saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Defrag {
    /// The call, sent to answered; none when it failed.
    pub secs: Option<f64>,
    pub error: Option<String>,
    /// The member's database size (Status `dbSize`) just before and after the call.
    pub db_bytes_before: u64,
    pub db_bytes_after: u64,
    /// The longest stretch of the call in which no put succeeded, in ms (see
    /// [`load::longest_stall_ms`]).
    pub stall_ms: f64,
    /// Puts in flight at some moment of the call (sent before it was answered,
    /// finished after it was sent).
    pub during: Window,
    /// Puts finished before the call (the --baseline-secs since the writers started).
    pub baseline: Window,
    /// Puts sent in the [`TAIL`] after the call.
    pub after: Window,
    /// Every put of the run.
    pub all: Window,
}

/// Runs the writers against `url`, defragments that member amid them and measures.
pub async fn under_writes(url: &str, l: &Load) -> Result<Defrag, String> {
    let admin = load::connect(url, Duration::from_secs(60)).await?;
    let writers = Writers::start(url, l.clients, l.conns, l.rate, l.value_size).await?;
    let started = Instant::now();
    tokio::time::sleep(l.baseline).await;
    let db_bytes_before = db_size(&admin).await?;
    let mut maintenance = admin.maintenance();
    let t0 = Instant::now();
    let call = maintenance.defragment(DefragmentRequest {});
    let got = tokio::time::timeout(l.timeout, call).await;
    let t1 = Instant::now();
    tokio::time::sleep(TAIL).await;
    let samples = writers.stop().await;
    let (secs, error) = match got {
        Ok(Ok(_)) => (Some((t1 - t0).as_secs_f64()), None),
        Ok(Err(s)) => (None, Some(s.message().to_string())),
        Err(_) => (None, Some(format!("no answer within {:?}", l.timeout))),
    };
    Ok(Defrag {
        secs,
        error,
        db_bytes_before,
        db_bytes_after: db_size(&admin).await?,
        stall_ms: load::longest_stall_ms(&samples, t0, t1),
        during: Window::overlapping(&samples, t0, t1),
        baseline: Window::of(&samples, started, t0),
        after: Window::sent_in(&samples, t1, t1 + TAIL),
        all: Window::of(&samples, started, Instant::now()),
    })
}

/// The member's database size as its Status gives it.
pub async fn db_size(c: &oxcd_client::Client) -> Result<u64, String> {
    let s = c.status().await.map_err(|e| format!("Status: {e}"))?;
    Ok(u64::try_from(s.db_size).unwrap_or_default())
}
