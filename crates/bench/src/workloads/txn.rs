//! `txn-put` (txns of several puts) and `txn-mixed` (read txns and write txns in a
//! given ratio): their flags and their requests.

use clap::Args;
use oxcd_api::etcdserverpb::request_op::Request as Op;
use oxcd_api::etcdserverpb::{PutRequest, RangeRequest, RequestOp, TxnRequest};
use oxcd_client::Client;

use crate::driver::{self, Plan, Request};
use crate::keys::{KeyArgs, KeyGen, mix};
use crate::stats::Report;

/// `txn-put`'s flags.
#[derive(Debug, Clone, Args)]
pub struct TxnPutArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// Total number of txns.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
    /// Puts per txn.
    #[arg(long, default_value_t = 1)]
    pub txn_ops: usize,
    /// Maximum txns per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
}

/// `txn-mixed`'s flags.
#[derive(Debug, Clone, Args)]
pub struct TxnMixedArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// Total number of txns.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
    /// Reads per write.
    #[arg(long, default_value_t = 1.0)]
    pub rw_ratio: f64,
    /// l or s for the reads.
    #[arg(long, default_value = "l")]
    pub consistency: String,
    /// Maximum txns per second (0: unlimited).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
}

fn put_op(g: &KeyGen, k: u64) -> RequestOp {
    RequestOp {
        request: Some(Op::RequestPut(PutRequest {
            key: g.key(k),
            value: g.value(),
            ..PutRequest::default()
        })),
    }
}

async fn send(conn: Client, success: Vec<RequestOp>) -> Result<(), String> {
    let req = TxnRequest {
        success,
        ..TxnRequest::default()
    };
    conn.kv().txn(req).await.map(drop).map_err(driver::message)
}

struct TxnPut {
    keys: KeyGen,
    ops: u64,
}

impl Request for TxnPut {
    async fn issue(&self, n: u64, conn: Client) -> Result<(), String> {
        // Distinct keys within one txn: etcd refuses a txn that puts one key twice.
        let first = n * self.ops;
        let mut seen = std::collections::BTreeSet::new();
        let ops = (first..first + self.ops)
            .map(|i| self.keys.number(i))
            .filter(|k| seen.insert(*k))
            .map(|k| put_op(&self.keys, k))
            .collect();
        send(conn, ops).await
    }
}

/// Runs `txn-put`.
pub async fn txn_put(a: &TxnPutArgs, clients: usize, conns: &[Client]) -> Report {
    let plan = Plan {
        total: a.total,
        clients,
        rate: a.rate,
    };
    let req = TxnPut {
        keys: KeyGen::new(&a.keys),
        ops: a.txn_ops.max(1) as u64,
    };
    Report::new("txn-put", driver::run(plan, conns, req).await)
}

struct TxnMixed {
    keys: KeyGen,
    /// A request is a read when its hash falls below this fraction of u64::MAX.
    read_share: f64,
    serializable: bool,
}

impl Request for TxnMixed {
    async fn issue(&self, n: u64, conn: Client) -> Result<(), String> {
        let k = self.keys.number(n);
        let is_read = (mix(n ^ 0x5eed) as f64 / u64::MAX as f64) < self.read_share;
        let op = if is_read {
            RequestOp {
                request: Some(Op::RequestRange(RangeRequest {
                    key: self.keys.key(k),
                    serializable: self.serializable,
                    ..RangeRequest::default()
                })),
            }
        } else {
            put_op(&self.keys, k)
        };
        send(conn, vec![op]).await
    }
}

/// Runs `txn-mixed`.
pub async fn txn_mixed(
    a: &TxnMixedArgs,
    clients: usize,
    conns: &[Client],
) -> Result<Report, String> {
    if !(a.rw_ratio.is_finite() && a.rw_ratio >= 0.0) {
        return Err(format!(
            "--rw-ratio must be a number >= 0, not {}",
            a.rw_ratio
        ));
    }
    let plan = Plan {
        total: a.total,
        clients,
        rate: a.rate,
    };
    let req = TxnMixed {
        keys: KeyGen::new(&a.keys),
        read_share: a.rw_ratio / (a.rw_ratio + 1.0),
        serializable: crate::workloads::kv::serializable(&a.consistency)?,
    };
    Ok(Report::new(
        "txn-mixed",
        driver::run(plan, conns, req).await,
    ))
}
