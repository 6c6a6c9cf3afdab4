//! `oxcd-bench gateway`: etcd's JSON gateway and `/metrics` under load, on etcd and on
//! oxcd with the same settings and disk, one system after the other.
//!
//! Per system: a cluster of `--members` (one by default), then on the leader's client
//! URL, each for `--secs`:
//! 1. put: `--clients` HTTP clients, each on its own keep-alive connection, POST
//!    `/v3/kv/put` one after the other (keys spread over 1,000 per client);
//! 2. range: the same clients POST `/v3/kv/range` of one key;
//! 3. scrape: `/metrics` fetched `--scrapes` times one after the other (after the load,
//!    so both systems describe the same amount of traffic).

pub mod http;
pub mod report;

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use clap::Args;
use serde::Serialize;

use crate::cluster::{Cluster, Settings};
use crate::stats::{Report, Samples};
use crate::versus::{self, Bench, Measured, Round};
use http::HttpConn;

#[derive(Debug, Clone, Args)]
pub struct GatewayArgs {
    #[command(flatten)]
    pub versus: versus::Flags,
    /// Members of each cluster (the leader is the one loaded).
    #[arg(long, default_value_t = 1)]
    pub members: usize,
    /// Concurrent HTTP clients, each with its own connection.
    #[arg(long, default_value_t = 100)]
    pub clients: usize,
    /// Seconds each workload runs.
    #[arg(long, default_value_t = 10)]
    pub secs: u64,
    /// Value size of the puts, in bytes.
    #[arg(long, default_value_t = 256)]
    pub value_size: usize,
    /// `/metrics` scrapes, one after the other.
    #[arg(long, default_value_t = 200)]
    pub scrapes: usize,
}

/// One workload's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    pub ok: u64,
    pub failed: u64,
    pub secs: f64,
    pub per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// The first failure's text, if any.
    pub first_error: Option<String>,
}

impl Run {
    fn of(r: &Report, first_error: Option<String>) -> Run {
        let secs = r.total_secs;
        Run {
            ok: r.ok,
            failed: r.failed,
            secs,
            per_sec: if secs > 0.0 { r.ok as f64 / secs } else { 0.0 },
            p50_ms: r.latency_ms.p50,
            p99_ms: r.latency_ms.p99,
            first_error,
        }
    }
}

/// Everything measured on one system in one round.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub system: String,
    pub put: Run,
    pub range: Run,
    pub scrape: Run,
    /// The size of the last scrape, in bytes.
    pub scrape_bytes: usize,
}

impl Measured for Outcome {
    fn system(&self) -> &str {
        &self.system
    }
}

/// What [`versus::run`] runs for this subcommand.
impl Bench for GatewayArgs {
    const NAME: &'static str = "gateway";
    type Outcome = Outcome;

    fn flags(&self) -> &versus::Flags {
        &self.versus
    }

    async fn measure(&self, system: &str, binary: &Path, dir: &Path) -> Result<Outcome, String> {
        measure(system, binary, dir, self).await
    }

    fn markdown(
        &self,
        date: &str,
        versions: &[(String, String, String)],
        rounds: &[Round<Outcome>],
    ) -> String {
        report::markdown(date, self, versions, rounds)
    }
}

fn settings() -> Settings {
    Settings::plain(8 << 30)
}

/// `clients` clients, each on its own connection to `host`, POSTing what `body(client,
/// i)` gives to `path` for `secs`.
async fn load(
    host: &str,
    clients: usize,
    secs: u64,
    path: &'static str,
    body: impl Fn(usize, u64) -> Vec<u8> + Send + Sync + Clone + 'static,
) -> Result<Run, String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let mut conn = HttpConn::connect(host)
            .await
            .map_err(|e| format!("connect {host}: {e}"))?;
        let body = body.clone();
        tasks.push(tokio::spawn(async move {
            let mut s = Samples::default();
            let mut first_error = None;
            let mut i = 0u64;
            while Instant::now() < deadline {
                let b = body(c, i);
                let t = Instant::now();
                match conn.post(path, &b).await {
                    Ok((200, _)) => s.latencies.push(t.elapsed()),
                    Ok((code, answer)) => {
                        let e = format!("{code}: {}", String::from_utf8_lossy(&answer));
                        first_error.get_or_insert(e.clone());
                        *s.errors.entry(e).or_default() += 1;
                    }
                    Err(e) => {
                        first_error.get_or_insert(e.to_string());
                        *s.errors.entry(e.to_string()).or_default() += 1;
                        break;
                    }
                }
                i += 1;
            }
            (s, first_error)
        }));
    }
    let mut all = Samples::default();
    let mut first = None;
    for t in tasks {
        let (s, e) = t.await.map_err(|e| e.to_string())?;
        all.merge(s);
        first = first.or(e);
    }
    all.elapsed = started.elapsed();
    Ok(Run::of(&Report::new(path, all), first))
}

/// `n` scrapes of `/metrics`, one after the other; with the size of the last.
async fn scrape(host: &str, n: usize) -> Result<(Run, usize), String> {
    let mut conn = HttpConn::connect(host)
        .await
        .map_err(|e| format!("connect {host}: {e}"))?;
    let mut s = Samples::default();
    let mut bytes = 0;
    let mut first_error = None;
    let started = Instant::now();
    for _ in 0..n {
        let t = Instant::now();
        match conn.get("/metrics").await {
            Ok((200, body)) => {
                s.latencies.push(t.elapsed());
                bytes = body.len();
            }
            Ok((code, _)) => {
                first_error.get_or_insert(format!("status {code}"));
                *s.errors.entry(format!("status {code}")).or_default() += 1;
            }
            Err(e) => return Err(format!("scrape: {e}")),
        }
    }
    s.elapsed = started.elapsed();
    Ok((Run::of(&Report::new("metrics", s), first_error), bytes))
}

/// One system, one round, on a fresh cluster under `dir`.
async fn measure(
    name: &str,
    binary: &Path,
    dir: &Path,
    a: &GatewayArgs,
) -> Result<Outcome, String> {
    let cluster = Cluster::start_members(binary, dir, &settings(), a.members)?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let (li, _, _) = cluster.leader().await?;
    let url = cluster.members[li].client_url.clone();
    let host = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: not a plain http URL"))?
        .to_string();
    let value = STANDARD.encode(vec![b'v'; a.value_size]);
    let put = load(&host, a.clients, a.secs, "/v3/kv/put", move |c, i| {
        let key = STANDARD.encode(format!("gw/{c}/{}", i % 1000));
        format!(r#"{{"key":"{key}","value":"{value}"}}"#).into_bytes()
    })
    .await?;
    eprintln!(
        "   put: {:.0}/s, p99 {:.2} ms ({} failed)",
        put.per_sec, put.p99_ms, put.failed
    );
    let key = STANDARD.encode("gw/0/0");
    let range = load(&host, a.clients, a.secs, "/v3/kv/range", move |_, _| {
        format!(r#"{{"key":"{key}"}}"#).into_bytes()
    })
    .await?;
    eprintln!(
        "   range: {:.0}/s, p99 {:.2} ms ({} failed)",
        range.per_sec, range.p99_ms, range.failed
    );
    let (scrape, scrape_bytes) = scrape(&host, a.scrapes).await?;
    eprintln!(
        "   /metrics: p50 {:.2} ms, p99 {:.2} ms, {scrape_bytes} bytes",
        scrape.p50_ms, scrape.p99_ms
    );
    drop(cluster);
    Ok(Outcome {
        system: name.to_string(),
        put,
        range,
        scrape,
        scrape_bytes,
    })
}
