//! The core rows of the matrix driven a second time by `bench/go-load`, a load
//! generator built on Go's clientv3 (the client Kubernetes uses), so that no figure
//! depends on oxcd's own Rust client alone. The Go program runs as a child process,
//! prints every successful request's latency, its failures and its own CPU time as one
//! JSON object; this module turns that into a [`Report`] like the Rust workloads'.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::stats::{Report, Samples};

/// Which request the Go generator issues, with the Rust workload's shape.
#[derive(Debug, Clone)]
pub enum GoWork {
    /// Puts of `val_size`-byte values over `space` keys of 8 bytes.
    Put {
        total: u64,
        val_size: usize,
        space: u64,
    },
    /// Ranges of one key (`l`inearizable or `s`erializable).
    Range {
        total: u64,
        consistency: &'static str,
    },
    /// Txns of `ops` puts each.
    TxnPut {
        total: u64,
        ops: u64,
        val_size: usize,
        space: u64,
    },
}

/// What the Go program prints.
#[derive(Debug, Deserialize)]
struct Output {
    latencies_us: Option<Vec<f64>>,
    errors: BTreeMap<String, u64>,
    elapsed_secs: f64,
    cpu_secs: f64,
}

/// A Go run's report, and the CPU time the Go process used.
pub struct GoRun {
    pub report: Report,
    pub cpu: Duration,
}

impl GoWork {
    fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        let mut arg = |k: &str, v: String| {
            a.push(format!("-{k}"));
            a.push(v);
        };
        match self {
            GoWork::Put {
                total,
                val_size,
                space,
            } => {
                arg("workload", "put".into());
                arg("total", total.to_string());
                arg("val-size", val_size.to_string());
                arg("key-space-size", space.to_string());
            }
            GoWork::Range { total, consistency } => {
                arg("workload", "range".into());
                arg("total", total.to_string());
                arg("consistency", (*consistency).into());
            }
            GoWork::TxnPut {
                total,
                ops,
                val_size,
                space,
            } => {
                arg("workload", "txn-put".into());
                arg("total", total.to_string());
                arg("txn-ops", ops.to_string());
                arg("val-size", val_size.to_string());
                arg("key-space-size", space.to_string());
            }
        }
        a
    }

    fn name(&self) -> &'static str {
        match self {
            GoWork::Put { .. } => "put",
            GoWork::Range { .. } => "range",
            GoWork::TxnPut { .. } => "txn-put",
        }
    }

    /// Runs the Go generator `binary` with `clients` requests in flight over `conns`
    /// clientv3 clients spread over `endpoints`.
    pub async fn run(
        &self,
        binary: &Path,
        endpoints: &[String],
        clients: usize,
        conns: usize,
    ) -> Result<GoRun, String> {
        let out = tokio::process::Command::new(binary)
            .arg("-endpoints")
            .arg(endpoints.join(","))
            .arg("-clients")
            .arg(clients.to_string())
            .arg("-conns")
            .arg(conns.to_string())
            .args(self.args())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("{}: {e}", binary.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} exited with {}: {}",
                binary.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let o: Output = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("reading {}'s output: {e}", binary.display()))?;
        let samples = Samples {
            latencies: o
                .latencies_us
                .unwrap_or_default()
                .into_iter()
                .map(|us| Duration::from_secs_f64(us.max(0.0) / 1e6))
                .collect(),
            errors: o.errors,
            elapsed: Duration::from_secs_f64(o.elapsed_secs.max(0.0)),
        };
        Ok(GoRun {
            report: Report::new(self.name(), samples),
            cpu: Duration::from_secs_f64(o.cpu_secs.max(0.0)),
        })
    }
}
