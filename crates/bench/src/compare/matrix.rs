//! The comparison matrix: the same workloads, request counts and concurrency on each
//! system, then the load of many keys and the resource figures taken after it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::go_load::GoWork;
use crate::cluster::{Cluster, TlsFiles, dir_size, load_flags};
use crate::conns::Global;
use crate::keys::KeyArgs;
use crate::stats::Report;
use crate::versus::Measured;
use crate::workloads::auth::{self, AuthenticateArgs};
use crate::workloads::kv::{self, PutArgs, RangeArgs};
use crate::workloads::lease::{self, LeaseArgs};
use crate::workloads::txn::{self, TxnMixedArgs, TxnPutArgs};
use crate::workloads::watch::{self, WatchArgs, WatchLatencyArgs};

/// One workload's result on one system.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    pub name: String,
    pub report: Option<Report>,
    /// Why it did not run (e.g. the server lacks Watch).
    pub unsupported: Option<String>,
    /// CPU time per request of the three members together, in microseconds.
    pub members_cpu_us: Option<f64>,
    /// The part of it spent in the kernel (system calls: sockets, fsync, futexes).
    pub members_kernel_cpu_us: Option<f64>,
    /// CPU time per request of the load generator (this process), in microseconds.
    pub bench_cpu_us: Option<f64>,
}

/// One system's cases in one round of the matrix (in JSON: `[system, cases]`).
#[derive(Debug, Serialize)]
pub struct Cases(pub String, pub Vec<Case>);

impl Cases {
    /// The report of case `name`, when it ran.
    pub fn report(&self, name: &str) -> Option<&Report> {
        self.1
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.report.as_ref())
    }
}

impl Measured for Cases {
    fn system(&self) -> &str {
        &self.0
    }
}

/// Everything measured on one system.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub cases: Vec<Case>,
    /// Loading the keys (txns of 100 puts).
    pub load: Report,
    pub loaded_keys: u64,
    /// Largest member data dir after the load.
    pub data_bytes: u64,
    /// Largest member peak RSS over the whole run.
    pub peak_rss_bytes: u64,
    /// A follower's restart holding the loaded keys, until it serves them.
    pub restart_secs: f64,
    /// Largest member data dir after a compaction at the last revision and a
    /// defragmentation of every member, one after the other.
    pub data_bytes_defragmented: u64,
    /// The same two as the disk blocks the files take (`du`): a file extended ahead of
    /// its data (redb grows its file in powers of two) takes no blocks for the holes.
    pub data_blocks_bytes: u64,
    pub data_blocks_bytes_defragmented: u64,
}

/// Which rows of the matrix run, and through which load generators.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Multiplies every request count.
    pub scale: f64,
    /// Only the core rows ([`CORE_ROWS`]), not the watch and lease rows.
    pub core_only: bool,
    /// The Go clientv3 load generator (`bench/go-load`): the core rows run through it
    /// too, each as a row of its own named with [`GO_SUFFIX`].
    pub go_load: Option<PathBuf>,
}

/// The first rows of [`cases`]: puts, ranges and txns of puts.
pub const CORE_ROWS: usize = 5;

/// Ends the name of a row driven by the Go clientv3 load generator.
pub const GO_SUFFIX: &str = " [Go clientv3]";

/// [`load_flags`] without a user.
fn global(endpoints: &[String], clients: usize, conns: usize, tls: Option<&TlsFiles>) -> Global {
    load_flags(endpoints, clients, conns, tls, None)
}

fn scaled(n: u64, scale: f64) -> u64 {
    ((n as f64 * scale).round() as u64).max(1)
}

/// A workload of the matrix.
enum Work {
    Put(PutArgs),
    Range(RangeArgs),
    TxnPut(TxnPutArgs),
    TxnMixed(TxnMixedArgs),
    Watch(WatchArgs),
    WatchLatency(WatchLatencyArgs),
    LeaseKeepalive(LeaseArgs),
    /// Logins.
    Authenticate(AuthenticateArgs),
    /// New connections: each request dials (TLS handshake included) and makes one
    /// serializable range.
    Connect {
        total: u64,
    },
    /// A core row through the Go clientv3 load generator.
    Go(GoWork),
}

impl Work {
    /// The same work through the Go clientv3 load generator, for the core rows.
    fn in_go(&self) -> Option<GoWork> {
        Some(match self {
            Work::Put(a) if a.watchers == 0 => GoWork::Put {
                total: a.total,
                val_size: a.keys.val_size,
                space: a.keys.key_space_size,
            },
            Work::Range(a) => GoWork::Range {
                total: a.total,
                consistency: if a.consistency == "s" { "s" } else { "l" },
            },
            Work::TxnPut(a) => GoWork::TxnPut {
                total: a.total,
                ops: a.txn_ops as u64,
                val_size: a.keys.val_size,
                space: a.keys.key_space_size,
            },
            _ => return None,
        })
    }
}

fn range(total: u64, consistency: &str) -> Work {
    Work::Range(RangeArgs {
        key: "bench-range-key".into(),
        end: None,
        total,
        rate: 0,
        consistency: consistency.into(),
        limit: 0,
        keys_only: false,
        count_only: false,
    })
}

/// `total` puts of 256-byte values over 100 000 keys: the matrix's writes.
fn many_puts(total: u64) -> Work {
    many_puts_watched(total, 0)
}

/// [`many_puts`] with `watchers` watchers open on keys of the same space.
fn many_puts_watched(total: u64, watchers: u64) -> Work {
    Work::Put(PutArgs {
        keys: KeyArgs::new(8, 256, 100_000, false),
        total,
        rate: 0,
        watchers,
    })
}

/// The matrix `m` asks for: (name, clients, conns, work).
fn cases(m: &Matrix) -> Vec<(String, usize, usize, Work)> {
    let mut rows: Vec<(String, usize, usize, Work)> = all_cases(m.scale)
        .into_iter()
        .map(|(name, clients, conns, work)| (name.to_string(), clients, conns, work))
        .collect();
    if m.core_only {
        rows.truncate(CORE_ROWS);
    }
    if m.go_load.is_some() {
        let go: Vec<_> = rows
            .iter()
            .take(CORE_ROWS)
            .filter_map(|(name, clients, conns, work)| {
                let w = work.in_go()?;
                Some((format!("{name}{GO_SUFFIX}"), *clients, *conns, Work::Go(w)))
            })
            .collect();
        rows.extend(go);
    }
    rows
}

/// The whole matrix, the [`CORE_ROWS`] first: (name, clients, conns, work).
fn all_cases(scale: f64) -> Vec<(&'static str, usize, usize, Work)> {
    let s = |n| scaled(n, scale);
    vec![
        (
            "put, 1 client / 1 conn (to the leader)",
            1,
            1,
            many_puts(s(2_000)),
        ),
        (
            "put, 1000 clients / 100 conns",
            1000,
            100,
            many_puts(s(100_000)),
        ),
        (
            "range linearizable, 1000 clients / 100 conns",
            1000,
            100,
            range(s(100_000), "l"),
        ),
        (
            "range serializable, 1000 clients / 100 conns",
            1000,
            100,
            range(s(100_000), "s"),
        ),
        (
            "txn-put (4 puts), 1000 clients / 100 conns",
            1000,
            100,
            Work::TxnPut(TxnPutArgs {
                keys: KeyArgs::new(8, 256, 100_000, false),
                total: s(50_000),
                txn_ops: 4,
                rate: 0,
            }),
        ),
        (
            "txn-mixed (4 reads : 1 write), 1000 clients / 100 conns",
            1000,
            100,
            Work::TxnMixed(TxnMixedArgs {
                keys: KeyArgs::new(8, 256, 100_000, false),
                total: s(100_000),
                rw_ratio: 4.0,
                consistency: "l".into(),
                rate: 0,
            }),
        ),
        (
            "watch (100 streams x 10 watchers, 1000 puts/s)",
            1,
            10,
            Work::Watch(WatchArgs {
                streams: 100,
                watch_per_stream: 10,
                watched_key_total: 100,
                put_rate: 1000,
                put_total: s(5_000),
                key_size: 32,
                val_size: 32,
            }),
        ),
        (
            "watch unpaced (10 streams x 100 watchers on 1 key, 100 clients putting)",
            100,
            10,
            Work::Watch(WatchArgs {
                streams: 10,
                watch_per_stream: 100,
                watched_key_total: 1,
                put_rate: 0,
                // etcd's shape with ten times its 1,000 puts: the run then lasts seconds,
                // not a fifth of one, and the rate is the steady one, not the warm-up's.
                put_total: s(10_000),
                key_size: 32,
                val_size: 32,
            }),
        ),
        (
            "put, 1000 clients / 100 conns, 10,000 watchers open",
            1000,
            100,
            many_puts_watched(s(100_000), 10_000),
        ),
        (
            "watch-latency (10 streams x 10 watchers, 100 puts/s)",
            1,
            10,
            Work::WatchLatency(WatchLatencyArgs {
                streams: 10,
                watchers_per_stream: 10,
                put_rate: 100,
                put_total: s(1_000),
                val_size: 32,
            }),
        ),
        (
            "lease keepalive, 100 clients / 10 conns",
            100,
            10,
            Work::LeaseKeepalive(LeaseArgs { total: s(200_000) }),
        ),
    ]
}

async fn run_work(
    work: &Work,
    clients: usize,
    conns: &[oxcd_client::Client],
) -> Result<Report, String> {
    Ok(match work {
        Work::Put(a) => kv::put(a, clients, conns).await?,
        Work::Range(a) => kv::range(a, clients, conns).await?,
        Work::TxnPut(a) => txn::txn_put(a, clients, conns).await,
        Work::TxnMixed(a) => txn::txn_mixed(a, clients, conns).await?,
        Work::Watch(a) => watch::watch(a, clients, conns).await?,
        Work::WatchLatency(a) => watch::watch_latency(a, conns).await?,
        Work::LeaseKeepalive(a) => lease::keepalive(a, clients, conns).await?,
        Work::Authenticate(a) => auth::authenticate(a, clients, conns).await,
        Work::Connect { .. } | Work::Go(_) => {
            return Err("Connect and Go run outside the Rust connections".into());
        }
    })
}

/// `total` new connections, `clients` at a time, each making one serializable range.
async fn connect_rate(
    endpoints: &[String],
    tls: Option<&TlsFiles>,
    total: u64,
    clients: usize,
) -> Report {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let opts = oxcd_client::ConnectOptions {
        dial_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
        tls: tls.map(TlsFiles::client),
        ..oxcd_client::ConnectOptions::default()
    };
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..clients.max(1) {
        let (next, opts, endpoints) = (next.clone(), opts.clone(), endpoints.to_vec());
        tasks.push(tokio::spawn(async move {
            let mut s = crate::stats::Samples::default();
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= total {
                    return s;
                }
                let ep = endpoints[n as usize % endpoints.len()].clone();
                let t = Instant::now();
                let req = oxcd_api::etcdserverpb::RangeRequest {
                    key: b"bench-range-key".to_vec(),
                    serializable: true,
                    ..Default::default()
                };
                let res = match oxcd_client::Client::connect(&[ep], &opts).await {
                    Ok(c) => c
                        .kv()
                        .range(req)
                        .await
                        .map(|_| ())
                        .map_err(|e| e.message().to_string()),
                    Err(e) => Err(e.to_string()),
                };
                match res {
                    Ok(()) => s.latencies.push(t.elapsed()),
                    Err(e) => *s.errors.entry(e).or_default() += 1,
                }
            }
        }));
    }
    let mut all = crate::stats::Samples::default();
    for t in tasks {
        if let Ok(s) = t.await {
            all.merge(s);
        }
    }
    all.elapsed = start.elapsed();
    Report::new("connect", all)
}

/// The cases run again with client and peer TLS: writes and linearizable reads under
/// load, and new connections (handshake and one request) per second.
fn tls_cases(scale: f64) -> Vec<(&'static str, usize, usize, Work)> {
    let s = |n| scaled(n, scale);
    vec![
        (
            "TLS: put, 1000 clients / 100 conns",
            1000,
            100,
            many_puts(s(100_000)),
        ),
        (
            "TLS: range linearizable, 1000 clients / 100 conns",
            1000,
            100,
            range(s(100_000), "l"),
        ),
        (
            "TLS: new connection + 1 range, 50 at a time",
            50,
            1,
            Work::Connect { total: s(5_000) },
        ),
    ]
}

/// The user the auth cases run as: read and write on every key through a role of its
/// own (not root, whose requests skip the permission check), with a simple token.
const BENCH_USER: &str = "bench";
const BENCH_PASSWORD: &str = "benchpw";

/// The cases run again with auth on, as [`BENCH_USER`]: writes and linearizable reads
/// under load (each checked against the user's grants), and logins (passwords hashed at
/// both systems' default bcrypt cost, 10).
fn auth_cases(scale: f64) -> Vec<(&'static str, usize, usize, Work)> {
    let s = |n| scaled(n, scale);
    vec![
        (
            "auth: put, 1000 clients / 100 conns",
            1000,
            100,
            many_puts(s(100_000)),
        ),
        (
            "auth: range linearizable, 1000 clients / 100 conns",
            1000,
            100,
            range(s(100_000), "l"),
        ),
        (
            "auth: authenticate (bcrypt cost 10), 20 clients / 4 conns",
            20,
            4,
            Work::Authenticate(AuthenticateArgs {
                name: BENCH_USER.into(),
                password: BENCH_PASSWORD.into(),
                total: s(400),
                rate: 0,
            }),
        ),
    ]
}

/// Runs the workload matrix alone (no load, no resources): a further round of it.
pub async fn run_workloads(cluster: &mut Cluster, m: &Matrix) -> Result<Vec<Case>, String> {
    seed_range_key(cluster).await?;
    run_cases(cluster, cases(m), None, m.go_load.as_deref()).await
}

fn named(rows: Vec<(&'static str, usize, usize, Work)>) -> Vec<(String, usize, usize, Work)> {
    rows.into_iter()
        .map(|(name, clients, conns, work)| (name.to_string(), clients, conns, work))
        .collect()
}

/// Runs the TLS cases on a cluster that serves TLS.
pub async fn run_tls(cluster: &mut Cluster, scale: f64) -> Result<Vec<Case>, String> {
    seed_range_key(cluster).await?;
    run_cases(cluster, named(tls_cases(scale)), None, None).await
}

/// Turns auth on (root, and [`BENCH_USER`] with its role) and runs the auth cases.
pub async fn run_auth(cluster: &mut Cluster, scale: f64) -> Result<Vec<Case>, String> {
    seed_range_key(cluster).await?;
    let endpoints = cluster.endpoints();
    let admin = crate::conns::open(&global(&endpoints, 1, 1, cluster.tls.as_ref())).await?;
    let c = &admin[0];
    fn failed(what: &'static str) -> impl Fn(oxcd_client::Error) -> String {
        move |e| format!("auth setup: {what}: {e}")
    }
    c.user_add("root", "rootpw", false)
        .await
        .map_err(failed("root"))?;
    c.role_add("root").await.map_err(failed("root role"))?;
    c.user_grant_role("root", "root")
        .await
        .map_err(failed("root's role"))?;
    c.user_add(BENCH_USER, BENCH_PASSWORD, false)
        .await
        .map_err(failed("user"))?;
    c.role_add(BENCH_USER).await.map_err(failed("role"))?;
    c.role_grant_permission(
        BENCH_USER,
        b"\0",
        b"\0",
        oxcd_client::PermissionType::ReadWrite,
    )
    .await
    .map_err(failed("grant"))?;
    c.user_grant_role(BENCH_USER, BENCH_USER)
        .await
        .map_err(failed("user's role"))?;
    c.auth_enable().await.map_err(failed("enable"))?;
    let user = format!("{BENCH_USER}:{BENCH_PASSWORD}");
    run_cases(cluster, named(auth_cases(scale)), Some(&user), None).await
}

async fn seed_range_key(cluster: &Cluster) -> Result<(), String> {
    let endpoints = cluster.endpoints();
    let seed = crate::conns::open(&global(&endpoints, 1, 1, cluster.tls.as_ref())).await?;
    let put = oxcd_api::etcdserverpb::PutRequest {
        key: b"bench-range-key".to_vec(),
        value: vec![b'v'; 256],
        ..Default::default()
    };
    seed[0]
        .kv()
        .put(put)
        .await
        .map(|_| ())
        .map_err(|e| format!("seeding the range key: {e}"))
}

async fn run_cases(
    cluster: &Cluster,
    cases: Vec<(String, usize, usize, Work)>,
    user: Option<&str>,
    go_load: Option<&std::path::Path>,
) -> Result<Vec<Case>, String> {
    let endpoints = cluster.endpoints();
    let mut out = Vec::new();
    for (name, clients, n_conns, work) in cases {
        // Connections are opened (and logged in, with auth on: a bcrypt check each)
        // before the CPU count starts; logins have a case of their own.
        let conns = match &work {
            Work::Connect { .. } | Work::Go(_) => Vec::new(),
            _ => {
                let g = load_flags(&endpoints, clients, n_conns, cluster.tls.as_ref(), user);
                crate::conns::open(&g).await?
            }
        };
        // One connection goes to the leader, as the Rust rows' does.
        let go_endpoints = match (&work, n_conns) {
            (Work::Go(_), 1) => vec![endpoints[cluster.leader().await?.0].clone()],
            _ => endpoints.clone(),
        };
        let cpu_before = CpuReading::of(cluster);
        let mut go_cpu = None;
        let result = match &work {
            Work::Connect { total } => {
                Ok(connect_rate(&endpoints, cluster.tls.as_ref(), *total, clients).await)
            }
            Work::Go(w) => {
                let binary = go_load.ok_or("a Go row without the Go load generator")?;
                let run = w.run(binary, &go_endpoints, clients, n_conns).await?;
                go_cpu = Some(run.cpu);
                Ok(run.report)
            }
            _ => run_work(&work, clients, &conns).await,
        };
        let case = match result {
            Ok(r) => {
                let requests = (r.ok + r.failed) as f64;
                let per_request = |d: Duration| d.as_secs_f64() * 1e6 / requests.max(1.0);
                let used = CpuReading::of(cluster).since(&cpu_before);
                let (members, kernel, mut bench) = (used.members, used.kernel, used.bench);
                if go_cpu.is_some() {
                    bench = go_cpu;
                }
                eprintln!(
                    "  {name}: {:.0} req/s, p99 {:.2} ms, {} failed",
                    r.qps, r.latency_ms.p99, r.failed
                );
                Case {
                    name: name.clone(),
                    members_cpu_us: members.map(per_request),
                    members_kernel_cpu_us: kernel.map(per_request),
                    bench_cpu_us: bench.map(per_request),
                    report: Some(r),
                    unsupported: None,
                }
            }
            Err(e) if is_unsupported(&e) => {
                eprintln!("  {name}: {e}");
                Case {
                    name: name.clone(),
                    report: None,
                    unsupported: Some(e),
                    members_cpu_us: None,
                    members_kernel_cpu_us: None,
                    bench_cpu_us: None,
                }
            }
            Err(e) => return Err(format!("{name}: {e}")),
        };
        out.push(case);
    }
    Ok(out)
}

fn is_unsupported(e: &str) -> bool {
    e.starts_with("unsupported")
}

/// CPU time used so far (or between two readings, [`CpuReading::since`]); None where
/// a member is not running.
struct CpuReading {
    /// By the members together, user and kernel.
    members: Option<Duration>,
    /// The members' kernel part.
    kernel: Option<Duration>,
    /// By this process.
    bench: Option<Duration>,
}

impl CpuReading {
    /// Reads each member's CPU time once (user and kernel together) and this process's.
    fn of(cluster: &Cluster) -> CpuReading {
        let split: Option<Vec<(Duration, Duration)>> =
            cluster.members.iter().map(|m| m.cpu_split()).collect();
        CpuReading {
            members: split.as_ref().map(|s| s.iter().map(|(u, k)| *u + *k).sum()),
            kernel: split.as_ref().map(|s| s.iter().map(|(_, k)| *k).sum()),
            bench: crate::cluster::cpu_time_of("self"),
        }
    }

    /// What was used from `before` to this reading.
    fn since(&self, before: &CpuReading) -> CpuReading {
        let diff = |a: Option<Duration>, b: Option<Duration>| Some(b?.saturating_sub(a?));
        CpuReading {
            members: diff(before.members, self.members),
            kernel: diff(before.kernel, self.kernel),
            bench: diff(before.bench, self.bench),
        }
    }
}

/// Runs the matrix, the load and the resource measurements on `cluster`.
pub async fn run(cluster: &mut Cluster, m: &Matrix, load_keys: u64) -> Result<Outcome, String> {
    let endpoints = cluster.endpoints();
    let out = run_workloads(cluster, m).await?;
    // Load: txns of 100 sequential keys (etcd's --max-txn-ops is 128).
    let per_txn = 100u64;
    let load_args = TxnPutArgs {
        keys: KeyArgs::new(16, 128, load_keys.max(1), true),
        total: load_keys.div_ceil(per_txn).max(1),
        txn_ops: per_txn as usize,
        rate: 0,
    };
    let conns = crate::conns::open(&global(&endpoints, 100, 10, cluster.tls.as_ref())).await?;
    let t = Instant::now();
    let load = txn::txn_put(&load_args, 100, &conns).await;
    eprintln!(
        "  loaded {load_keys} keys in {:.1} s ({} txns failed)",
        t.elapsed().as_secs_f64(),
        load.failed
    );
    drop(conns);
    // Let the followers apply everything before sizing and restarting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (data_bytes, data_blocks_bytes) = data_dir_sizes(cluster);
    let rss = |c: &Cluster| c.members.iter().filter_map(|m| m.peak_rss()).max();
    let rss_before_restart = rss(cluster).unwrap_or(0);
    let follower = cluster.a_follower().await?;
    // Every load key starts with "0" (16-digit zero-padded numbers below 10^15).
    let restart = cluster
        .restart_time(follower, b"0", b"1", load_keys as i64)
        .await?;
    eprintln!(
        "  follower restart with the keys: {:.2} s",
        restart.as_secs_f64()
    );
    let peak_rss_bytes = rss(cluster).unwrap_or(0).max(rss_before_restart);
    compact_and_defragment(cluster).await?;
    let (data_bytes_defragmented, data_blocks_bytes_defragmented) = data_dir_sizes(cluster);
    Ok(Outcome {
        cases: out,
        load,
        loaded_keys: load_keys,
        data_bytes,
        peak_rss_bytes,
        restart_secs: restart.as_secs_f64(),
        data_bytes_defragmented,
        data_blocks_bytes,
        data_blocks_bytes_defragmented,
    })
}

/// The largest member data dir: its files' lengths, and the disk blocks they take.
fn data_dir_sizes(cluster: &Cluster) -> (u64, u64) {
    let largest = |f: fn(&std::path::Path) -> u64| {
        cluster
            .members
            .iter()
            .map(|m| f(&m.data_dir))
            .max()
            .unwrap_or(0)
    };
    (largest(dir_size), largest(crate::cluster::disk_usage))
}

/// Compacts at the last revision (physically) and defragments every member in turn.
async fn compact_and_defragment(cluster: &Cluster) -> Result<(), String> {
    let endpoints = cluster.endpoints();
    let first = endpoints.first().ok_or("a cluster with no member")?;
    let admin = crate::load::connect(first, Duration::from_secs(600)).await?;
    let status = admin.status().await.map_err(|e| format!("Status: {e}"))?;
    let revision = status.header.map(|h| h.revision).unwrap_or_default();
    let t = Instant::now();
    admin
        .compact(revision, true)
        .await
        .map_err(|e| format!("compaction at {revision}: {e}"))?;
    eprintln!(
        "  compacted at {revision} in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    for url in &endpoints {
        let member = crate::load::connect(url, Duration::from_secs(600)).await?;
        let t = Instant::now();
        member
            .maintenance()
            .defragment(oxcd_api::etcdserverpb::DefragmentRequest {})
            .await
            .map_err(|e| format!("defragmenting {url}: {}", e.message()))?;
        eprintln!("  defragmented {url} in {:.1} s", t.elapsed().as_secs_f64());
    }
    Ok(())
}
