//! Runs a request-response workload: `clients` tasks share the connections (client `i`
//! uses connection `i % conns`), take request numbers from one counter until `total`,
//! optionally paced to `rate` per second overall, and time each request.
//!
//! Invariant: every request number below `total` is issued exactly once.

use std::future::Future;
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use oxcd_client::Client;

use crate::stats::Samples;

/// How much load to offer.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    /// Requests in all.
    pub total: u64,
    /// Concurrent clients.
    pub clients: usize,
    /// Requests per second over all clients; 0 is unlimited.
    pub rate: u64,
}

/// Issues request `n` on `conn`; an error is reported by its message.
pub trait Request: Send + Sync + 'static {
    /// The future of one request.
    fn issue(&self, n: u64, conn: Client) -> impl Future<Output = Result<(), String>> + Send;
}

/// Prints `done/total` on stderr while the run goes, when stderr is a terminal.
fn progress(total: u64, done: Arc<AtomicU64>) -> Option<tokio::task::JoinHandle<()>> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    Some(tokio::spawn(async move {
        loop {
            let d = done.load(Ordering::Relaxed).min(total);
            let width = 40u64;
            let filled = (d * width).checked_div(total).unwrap_or(width) as usize;
            eprint!(
                "\r [{}{}] {d}/{total}",
                "=".repeat(filled),
                " ".repeat(width as usize - filled)
            );
            if d >= total {
                eprintln!();
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }))
}

/// Runs `req` according to `plan` over `conns`.
pub async fn run<R: Request>(plan: Plan, conns: &[Client], req: R) -> Samples {
    let req = Arc::new(req);
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let bar = progress(plan.total, done.clone());
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for i in 0..plan.clients.max(1) {
        let conn = conns[i % conns.len()].clone();
        let (req, next, done) = (req.clone(), next.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut s = Samples::default();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= plan.total {
                    return s;
                }
                if plan.rate > 0 {
                    let due = Duration::from_secs_f64(n as f64 / plan.rate as f64);
                    tokio::time::sleep_until(start + due).await;
                }
                let t = Instant::now();
                match req.issue(n, conn.clone()).await {
                    Ok(()) => s.latencies.push(t.elapsed()),
                    Err(e) => *s.errors.entry(e).or_default() += 1,
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut all = Samples::default();
    for t in tasks {
        match t.await {
            Ok(s) => all.merge(s),
            Err(e) => *all.errors.entry(format!("client task: {e}")).or_default() += 1,
        }
    }
    all.elapsed = start.elapsed();
    if let Some(b) = bar {
        let _ = b.await;
    }
    all
}

/// The message of a failed call, as etcd's tool prints it.
pub fn message(status: tonic::Status) -> String {
    use std::error::Error as _;
    let m = status.message();
    let mut text = if m.is_empty() {
        format!("{:?}", status.code())
    } else {
        m.to_string()
    };
    // A transport failure says what went wrong only in its sources.
    let mut source = status.source();
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}
