//! `put` and `range`.

use oxcd_api::etcdserverpb::{PutRequest, RangeRequest};
use oxcd_client::Client;

use crate::cli::{PutArgs, RangeArgs};
use crate::driver::{self, Plan, Request};
use crate::keys::KeyGen;
use crate::stats::Report;
use crate::workloads::watch;

/// One put of request `n`'s key (the key generator's choice) with its value.
pub(crate) struct Put(pub(crate) KeyGen);

impl Request for Put {
    async fn issue(&self, n: u64, conn: Client) -> Result<(), String> {
        let req = PutRequest {
            key: self.0.key(self.0.number(n)),
            value: self.0.value(),
            ..PutRequest::default()
        };
        conn.kv().put(req).await.map(drop).map_err(driver::message)
    }
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
