//! `lease-keepalive` (its flags and loop): each client grants a lease, then sends keep-alives on its own
//! stream one at a time until `total` round trips are done in all. A server without
//! the Lease service is reported as unsupported.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::Args;
use oxcd_api::etcdserverpb::{LeaseGrantRequest, LeaseKeepAliveRequest};
use oxcd_client::Client;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use crate::stats::{Report, Samples};

/// `lease-keepalive`'s flags.
#[derive(Debug, Clone, Args)]
pub struct LeaseArgs {
    /// Total keep-alive round trips.
    #[arg(long, default_value_t = 10_000)]
    pub total: u64,
}

/// What the run says when the server has no Lease service.
pub const UNSUPPORTED: &str = "unsupported: the server does not implement Lease";

fn refusal(s: tonic::Status) -> String {
    if crate::workloads::unimplemented(&s) {
        UNSUPPORTED.to_string()
    } else {
        crate::driver::message(s)
    }
}

async fn client(conn: Client, total: u64, next: Arc<AtomicU64>) -> Result<Samples, String> {
    let grant = LeaseGrantRequest { ttl: 60, id: 0 };
    let id = conn
        .lease()
        .lease_grant(grant)
        .await
        .map_err(refusal)?
        .into_inner()
        .id;
    let (tx, rx) = mpsc::channel(1);
    let mut s = Samples::default();
    if next.fetch_add(1, Ordering::Relaxed) >= total {
        return Ok(s);
    }
    // The first keep-alive is queued before the call: etcd (grpc-go) answers the
    // stream's headers only with its first message.
    let mut t = Instant::now();
    tx.send(LeaseKeepAliveRequest { id })
        .await
        .map_err(|_| "keep-alive stream closed".to_string())?;
    let mut answers = conn
        .lease()
        .lease_keep_alive(ReceiverStream::new(rx))
        .await
        .map_err(refusal)?
        .into_inner();
    loop {
        match answers.next().await {
            Some(Ok(_)) => s.latencies.push(t.elapsed()),
            Some(Err(e)) => return Err(refusal(e)),
            None => return Err("keep-alive stream closed".into()),
        }
        if next.fetch_add(1, Ordering::Relaxed) >= total {
            break;
        }
        t = Instant::now();
        if tx.send(LeaseKeepAliveRequest { id }).await.is_err() {
            return Err("keep-alive stream closed".into());
        }
    }
    Ok(s)
}

/// Runs `lease-keepalive`.
pub async fn keepalive(a: &LeaseArgs, clients: usize, conns: &[Client]) -> Result<Report, String> {
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients.max(1))
        .map(|i| {
            tokio::spawn(client(
                conns[i % conns.len()].clone(),
                a.total,
                next.clone(),
            ))
        })
        .collect();
    let mut all = Samples::default();
    for t in tasks {
        match t.await {
            Ok(Ok(s)) => all.merge(s),
            Ok(Err(e)) if e == UNSUPPORTED => return Err(e),
            Ok(Err(e)) => *all.errors.entry(e).or_default() += 1,
            Err(e) => *all.errors.entry(format!("client task: {e}")).or_default() += 1,
        }
    }
    all.elapsed = start.elapsed();
    Ok(Report::new("lease-keepalive", all))
}
