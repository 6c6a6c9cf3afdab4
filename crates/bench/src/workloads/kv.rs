//! `put` and `range`: their flags and their requests.

use clap::Args;
use oxcd_api::etcdserverpb::RangeRequest;
use oxcd_client::Client;

use crate::driver::{self, Plan, Request};
use crate::keys::{KeyArgs, KeyGen, Put};
use crate::stats::Report;
use crate::workloads::watch;

/// `put`'s flags.
#[derive(Debug, Clone, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// Total number of puts.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
    /// Maximum puts per second over all clients (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Watchers kept open during the run, each on one key of the key space (distinct
    /// keys while the space allows), 100 per stream, streams spread over the connections.
    #[arg(long, default_value_t = 0)]
    pub watchers: u64,
}

/// `range`'s flags.
#[derive(Debug, Clone, Args)]
pub struct RangeArgs {
    /// The key, or the start of the range.
    pub key: String,
    /// The end of the range (exclusive); none for a single key.
    pub end: Option<String>,
    /// Total number of ranges.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
    /// Maximum ranges per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// l (linearizable) or s (serializable).
    #[arg(long, default_value = "l")]
    pub consistency: String,
    /// Maximum keys returned (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub limit: i64,
    /// Return keys only.
    #[arg(long)]
    pub keys_only: bool,
    /// Return the count only.
    #[arg(long)]
    pub count_only: bool,
}

/// Runs `put`, with `a.watchers` watchers open on keys of the same space if asked.
pub async fn put(a: &PutArgs, clients: usize, conns: &[Client]) -> Result<Report, String> {
    let plan = Plan {
        total: a.total,
        clients,
        rate: a.rate,
    };
    let keys = KeyGen::new(&a.keys);
    let held = match a.watchers {
        0 => None,
        n => Some(watch::hold(&keys, n, conns).await?),
    };
    let mut report = Report::new("put", driver::run(plan, conns, Put(keys)).await);
    if let Some(held) = held {
        report.extra.insert("watchers".into(), a.watchers as f64);
        report
            .extra
            .insert("events received".into(), held.stop() as f64);
    }
    Ok(report)
}

/// Whether `c` names serializable reads (`s`) rather than linearizable ones (`l`).
pub fn serializable(c: &str) -> Result<bool, String> {
    match c {
        "l" | "L" => Ok(false),
        "s" | "S" => Ok(true),
        other => Err(format!("consistency must be l or s, not {other:?}")),
    }
}

struct Range(RangeRequest);

impl Request for Range {
    async fn issue(&self, _n: u64, conn: Client) -> Result<(), String> {
        conn.kv()
            .range(self.0.clone())
            .await
            .map(drop)
            .map_err(driver::message)
    }
}

/// Runs `range`.
pub async fn range(a: &RangeArgs, clients: usize, conns: &[Client]) -> Result<Report, String> {
    let req = RangeRequest {
        key: a.key.clone().into_bytes(),
        range_end: a.end.clone().unwrap_or_default().into_bytes(),
        limit: a.limit,
        serializable: serializable(&a.consistency)?,
        keys_only: a.keys_only,
        count_only: a.count_only,
        ..RangeRequest::default()
    };
    let plan = Plan {
        total: a.total,
        clients,
        rate: a.rate,
    };
    Ok(Report::new(
        "range",
        driver::run(plan, conns, Range(req)).await,
    ))
}
