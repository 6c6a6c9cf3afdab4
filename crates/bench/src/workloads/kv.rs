//! `put` and `range`.

use oxcd_api::etcdserverpb::{PutRequest, RangeRequest};
use oxcd_client::Client;

use crate::cli::{PutArgs, RangeArgs};
use crate::driver::{self, Plan, Request};
use crate::keys::KeyGen;
use crate::stats::Report;

struct Put(KeyGen);

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

/// Runs `put`.
pub async fn put(a: &PutArgs, clients: usize, conns: &[Client]) -> Report {
    let plan = Plan {
        total: a.total,
        clients,
        rate: a.rate,
    };
    Report::new(
        "put",
        driver::run(plan, conns, Put(KeyGen::new(&a.keys))).await,
    )
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
