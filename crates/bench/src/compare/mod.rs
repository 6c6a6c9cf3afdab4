//! `oxcd-bench compare`: etcd and oxcd, each as a 3-member cluster on loopback with the
//! same settings and the same data disk, one after the other, under the same matrix of
//! workloads; then resources (peak RSS, data size after loading keys, restart time) and
//! a markdown report with the oxcd/etcd ratio of every figure. The rounds are
//! [`crate::versus::Systems::each_round`]'s; its flags, its data dirs (one per system,
//! not per round), the first round's extra cases and its report are its own, which is
//! why it is not a [`crate::versus::Bench`].

pub mod go_load;
pub mod matrix;
pub mod report;

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::cluster::{self, Cluster, Settings};
use crate::versus::{self, Systems};
use matrix::Outcome;

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The etcd binary (Debian's etcd-server: /usr/bin/etcd).
    #[arg(long, default_value = "/usr/bin/etcd")]
    pub etcd: PathBuf,
    /// The oxcd binary (default: `oxcd` beside this program).
    #[arg(long)]
    pub oxcd: Option<PathBuf>,
    /// Parent of the members' data dirs (the same disk for both systems).
    #[arg(long, default_value = "/tmp/oxcd-compare")]
    pub dir: PathBuf,
    /// Where the markdown report goes (a .json with the raw figures goes beside it).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Multiplies every request count (0.1 for a quick look).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Keys loaded before measuring data size, memory and restart time.
    #[arg(long, default_value_t = 1_000_000)]
    pub load_keys: u64,
    /// Run only one system: etcd or oxcd.
    #[arg(long)]
    pub only: Option<String>,
    /// Skip the cases with client and peer TLS.
    #[arg(long)]
    pub skip_tls: bool,
    /// Skip the cases with auth on (run in every round, on a cluster of their own).
    #[arg(long)]
    pub skip_auth: bool,
    /// Runs the workload matrix this many times, the systems' order alternating (etcd
    /// first in odd rounds); load, resources and TLS cases in the first round only. The
    /// report adds every round's ratios and their median.
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Run only the core rows (puts, ranges, txns of puts), not the watch and lease rows.
    #[arg(long)]
    pub core_only: bool,
    /// The Go clientv3 load generator (`bench/go-load/build.sh` prints its path): the
    /// core rows run through it too, as rows of their own.
    #[arg(long)]
    pub go_load: Option<PathBuf>,
}

impl CompareArgs {
    fn matrix(&self) -> matrix::Matrix {
        matrix::Matrix {
            scale: self.scale,
            core_only: self.core_only,
            go_load: self.go_load.clone(),
        }
    }
}

/// Runs the comparison and writes the report.
pub async fn run(a: &CompareArgs) -> Result<(), String> {
    let settings = Settings {
        heartbeat_ms: 100,
        election_ms: 1000,
        snapshot_count: 100_000,
        quota_bytes: 8 << 30,
        tls: None,
    };
    // The same certificates for both systems.
    let tls = if a.skip_tls {
        None
    } else {
        Some(cluster::TlsFiles::make(&a.dir.join("pki"))?)
    };
    let oxcd = a
        .oxcd
        .clone()
        .unwrap_or_else(versus::oxcd_beside_this_program);
    let systems = Systems::new(&a.etcd, oxcd, a.only.as_deref())?;
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    let rounds = systems
        .each_round(a.rounds, async |round, name, binary| {
            let cases = if round == 0 {
                let outcome = measure(name, binary, a, &settings, tls.as_ref()).await?;
                let cases = outcome.cases.clone();
                outcomes.push((name.to_string(), outcome));
                cases
            } else {
                workloads_again(name, binary, a, &settings, round).await?
            };
            Ok(matrix::Cases(name.to_string(), cases))
        })
        .await?;
    outcomes.sort_by_key(|(name, _)| name != "etcd");
    let date = versus::today();
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("bench/results/{date}.md")));
    let mut md = report::markdown(&date, &settings, a, &outcomes);
    report::auth_cost_table(&mut md, &rounds);
    if rounds.len() > 1 {
        report::rounds_table(&mut md, &rounds);
    }
    versus::write_report(&out, &md, &outcomes)?;
    if rounds.len() > 1 {
        let path = out.with_extension("rounds.json");
        let json = serde_json::to_string_pretty(&rounds).map_err(|e| e.to_string())?;
        std::fs::write(&path, json).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The first round on one system: the workload matrix, the load and its resources, and
/// the TLS cases unless skipped.
async fn measure(
    name: &str,
    binary: &Path,
    a: &CompareArgs,
    settings: &Settings,
    tls: Option<&cluster::TlsFiles>,
) -> Result<Outcome, String> {
    let dir = a.dir.join(name);
    eprintln!(
        "== {name}: {} (data under {})",
        binary.display(),
        dir.display()
    );
    let mut outcome = on_fresh_cluster(binary, &dir, settings, async |c| {
        matrix::run(c, &a.matrix(), a.load_keys).await
    })
    .await?;
    if let Some(tls) = tls {
        eprintln!("== {name} with client and peer TLS");
        let s = Settings {
            tls: Some(tls.clone()),
            ..settings.clone()
        };
        let cases = on_fresh_cluster(binary, &dir, &s, async |c| {
            matrix::run_tls(c, a.scale).await
        })
        .await?;
        outcome.cases.extend(cases);
    }
    if !a.skip_auth {
        outcome
            .cases
            .extend(auth_cases(name, binary, a, settings).await?);
    }
    Ok(outcome)
}

/// The auth cases, on a fresh cluster.
async fn auth_cases(
    name: &str,
    binary: &Path,
    a: &CompareArgs,
    settings: &Settings,
) -> Result<Vec<matrix::Case>, String> {
    eprintln!("== {name} with auth on");
    on_fresh_cluster(binary, &a.dir.join(name), settings, async |c| {
        matrix::run_auth(c, a.scale).await
    })
    .await
}

/// A later round on one system: the workload matrix alone, on a fresh cluster.
async fn workloads_again(
    name: &str,
    binary: &Path,
    a: &CompareArgs,
    settings: &Settings,
    round: usize,
) -> Result<Vec<matrix::Case>, String> {
    eprintln!("== {name}, round {}", round + 1);
    let mut cases = on_fresh_cluster(binary, &a.dir.join(name), settings, async |c| {
        matrix::run_workloads(c, &a.matrix()).await
    })
    .await?;
    if !a.skip_auth {
        cases.extend(auth_cases(name, binary, a, settings).await?);
    }
    Ok(cases)
}

/// Starts `binary` as a new 3-member cluster in the emptied `dir`, runs `work` on it once
/// it serves, then stops it and removes its data.
async fn on_fresh_cluster<T>(
    binary: &Path,
    dir: &Path,
    settings: &Settings,
    work: impl AsyncFnOnce(&mut Cluster) -> Result<T, String>,
) -> Result<T, String> {
    let _ = std::fs::remove_dir_all(dir);
    let mut cluster = Cluster::start(binary, dir, settings)?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let out = work(&mut cluster).await;
    drop(cluster);
    let _ = std::fs::remove_dir_all(dir);
    out
}
