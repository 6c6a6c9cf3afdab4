//! `oxcd-bench overload`: a storm of large ranges against one member, on etcd and on
//! oxcd with the same settings and disk, one system after the other (issue 36's
//! overload row).
//!
//! Per system, a 3-member cluster:
//! 1. `--mib` MiB of values (`--value-kib` each) under `big/`;
//! 2. a calm window of `--secs`: one writer putting 100-byte values at 100/s and one
//!    lease client granting and revoking at 10/s, both on the leader, timed;
//! 3. the storm, as long: the same writer and lease client, and on the leader
//!    - `--rangers` clients each ranging over all of `big/` again and again (a refused
//!      range is retried after 50 ms, as a client backing off would);
//!    - `--slow-watchers` watch streams on `slow/`, 100 per connection, with 64 KiB
//!      HTTP/2 windows, that read nothing after their first answer, and a second writer
//!      putting 300-byte values under `slow/` at 100/s once they are open, so every event
//!      for them must wait in the member (over 256 bytes: a Rust h2 client that holds
//!      many smaller DATA frames unread takes them for a flood and closes its
//!      connection);
//!    - `--idle-conns` new connections opened at once, each sending the HTTP/2 preface
//!      and then nothing, held to the end.
//!
//!    The timed clients run on a runtime of their own in this process, so that the
//!    rangers' decoding does not delay them here. The leader's peak RSS is reset
//!    before (`/proc/<pid>/clear_refs`) and read after (VmHWM); the leader's term before
//!    and after tells whether an election happened. oxcd runs with
//!    `--max-inflight-range-bytes` of `--oxcd-bound-mib`; etcd has no such bound.

pub mod report;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::lease_client::LeaseClient;
use oxcd_api::etcdserverpb::{LeaseGrantRequest, LeaseRevokeRequest, PutRequest, RangeRequest};
use serde::Serialize;
use tonic::transport::Channel;

use crate::cluster::{Cluster, Settings, proc_status_bytes, reset_peak_rss};
use crate::stats::{Report, Samples};
use crate::versus::{self, Bench, Measured, Round};

#[derive(Debug, Clone, Args)]
pub struct OverloadArgs {
    #[command(flatten)]
    pub versus: versus::Flags,
    /// MiB of values loaded under `big/`: each range of the storm reads all of it.
    #[arg(long, default_value_t = 128)]
    pub mib: u64,
    /// KiB per value under `big/`.
    #[arg(long, default_value_t = 256)]
    pub value_kib: u64,
    /// Clients ranging over `big/` at once during the storm.
    #[arg(long, default_value_t = 16)]
    pub rangers: usize,
    /// Seconds of the calm window and of the storm each.
    #[arg(long, default_value_t = 30)]
    pub secs: u64,
    /// oxcd's `--max-inflight-range-bytes`, in MiB.
    #[arg(long, default_value_t = 512)]
    pub oxcd_bound_mib: u64,
    /// Watch streams that stop reading, during the storm.
    #[arg(long, default_value_t = 2000)]
    pub slow_watchers: usize,
    /// Connections opened at the storm's start and left idle.
    #[arg(long, default_value_t = 2000)]
    pub idle_conns: usize,
}

/// The background requests' figures in one window.
#[derive(Debug, Clone, Serialize)]
pub struct Window {
    pub puts: Report,
    /// Lease grant and revoke, each timed.
    pub leases: Report,
}

/// The storm's ranges.
#[derive(Debug, Clone, Serialize)]
pub struct Ranges {
    pub ok: u64,
    /// Refused with "etcdserver: too many requests".
    pub refused: u64,
    /// Failed otherwise, by message.
    pub errors: BTreeMap<String, u64>,
    /// MiB of values received.
    pub mib_served: f64,
    pub latency: Report,
}

/// Everything measured on one system in one round.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub system: String,
    pub load_secs: f64,
    pub calm: Window,
    pub storm: Window,
    pub ranges: Ranges,
    /// Slow watch streams opened (created answered).
    pub slow_watchers: usize,
    /// Idle connections opened.
    pub idle_conns: usize,
    /// The leader's peak RSS during the storm, MiB.
    pub peak_rss_mib: f64,
    /// The leader's RSS before the storm, MiB.
    pub rss_before_mib: f64,
    pub term_before: u64,
    pub term_after: u64,
    /// Whether the member ranged over was still running after the storm.
    pub survived: bool,
}

impl Measured for Outcome {
    fn system(&self) -> &str {
        &self.system
    }
}

impl Bench for OverloadArgs {
    const NAME: &'static str = "overload";
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

fn rss_mib(pid: u32, field: &str) -> Option<f64> {
    proc_status_bytes(pid, field).map(|b| b as f64 / (1024.0 * 1024.0))
}

async fn channel(url: &str) -> Result<Channel, String> {
    Channel::from_shared(url.to_string())
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| format!("{url}: {e}"))
}

fn kv(ch: Channel) -> KvClient<Channel> {
    KvClient::new(ch)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX)
}

/// Puts of `value_kib` KiB under `big/`, 8 at a time.
async fn load(c: &KvClient<Channel>, a: &OverloadArgs) -> Result<(), String> {
    let per = a.value_kib * 1024;
    let n = (a.mib * 1024 * 1024 / per).max(1);
    let value = vec![b'v'; per as usize];
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let (mut c, value) = (c.clone(), value.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = w;
            while i < n {
                c.put(PutRequest {
                    key: format!("big/{i:09}").into_bytes(),
                    value: value.clone(),
                    ..PutRequest::default()
                })
                .await
                .map_err(|e| format!("put: {}", e.message()))?;
                i += 8;
            }
            Ok::<(), String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(())
}

/// Runs `step` every `every` until `stop`, timing each; failures by message.
async fn paced<F, Fut>(every: Duration, stop: Arc<AtomicBool>, mut step: F) -> Samples
where
    F: FnMut(u64) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut s = Samples::default();
    let started = Instant::now();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let t = Instant::now();
        match step(n).await {
            Ok(()) => s.latencies.push(t.elapsed()),
            Err(e) => *s.errors.entry(e).or_default() += 1,
        }
        n += 1;
    }
    s.elapsed = started.elapsed();
    s
}

/// The writer and the lease client for `secs`, and `storm` meanwhile.
async fn window<T>(
    url: &str,
    secs: u64,
    storm: impl Future<Output = T>,
) -> Result<(Window, T), String> {
    // The timed clients run on a runtime of their own: the storm's clients decode
    // answers of 128 MiB on this runtime's workers, and a put's answer must not wait
    // behind them in this process.
    let timed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| format!("a runtime for the timed clients: {e}"))?;
    let stop = Arc::new(AtomicBool::new(false));
    let puts = {
        let (url, stop) = (url.to_string(), stop.clone());
        timed.spawn(async move {
            let c = kv(channel(&url).await?);
            Ok::<_, String>(
                paced(Duration::from_millis(10), stop, |n| {
                    let mut c = c.clone();
                    async move {
                        c.put(PutRequest {
                            key: format!("small/{}", n % 1000).into_bytes(),
                            value: vec![b's'; 100],
                            ..PutRequest::default()
                        })
                        .await
                        .map(drop)
                        .map_err(|e| e.message().to_string())
                    }
                })
                .await,
            )
        })
    };
    let leases = {
        let (url, stop) = (url.to_string(), stop.clone());
        timed.spawn(async move {
            let c = LeaseClient::new(channel(&url).await?);
            Ok::<_, String>(
                paced(Duration::from_millis(100), stop, |_| {
                    let mut c = c.clone();
                    async move {
                        let id = c
                            .lease_grant(LeaseGrantRequest { ttl: 60, id: 0 })
                            .await
                            .map_err(|e| e.message().to_string())?
                            .into_inner()
                            .id;
                        c.lease_revoke(LeaseRevokeRequest { id })
                            .await
                            .map(drop)
                            .map_err(|e| e.message().to_string())
                    }
                })
                .await,
            )
        })
    };
    let (out, ()) = tokio::join!(storm, tokio::time::sleep(Duration::from_secs(secs)));
    stop.store(true, Ordering::Relaxed);
    let puts = puts.await.map_err(|e| e.to_string())??;
    let leases = leases.await.map_err(|e| e.to_string())??;
    timed.shutdown_background();
    Ok((
        Window {
            puts: Report::new("put", puts),
            leases: Report::new("lease grant+revoke", leases),
        },
        out,
    ))
}

/// Watch streams on `slow/` that read their created answer and then nothing: 100 per
/// connection, 64 KiB windows. Returns what must be held open (the streams and their
/// request senders) and how many opened.
async fn slow_watchers(url: &str, n: usize) -> Result<(Vec<Box<dyn Send>>, usize), String> {
    use oxcd_api::etcdserverpb::watch_request::RequestUnion;
    use oxcd_api::etcdserverpb::{WatchCreateRequest, WatchRequest, WatchResponse};
    use tonic::codegen::http::uri::PathAndQuery;
    let mut held: Vec<Box<dyn Send>> = Vec::new();
    let mut opened = 0;
    let per_conn = 100;
    for c in 0..n.div_ceil(per_conn) {
        let ch = Channel::from_shared(url.to_string())
            .map_err(|e| e.to_string())?
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(65_535)
            .connect()
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        for _ in 0..per_conn.min(n - c * per_conn) {
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            let create = WatchRequest {
                request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                    key: b"slow/".to_vec(),
                    range_end: b"slow0".to_vec(),
                    ..WatchCreateRequest::default()
                })),
            };
            tx.send(create).await.map_err(|_| "watch stream closed")?;
            let mut grpc = tonic::client::Grpc::new(ch.clone());
            grpc.ready().await.map_err(|e| format!("watch: {e}"))?;
            let resp = grpc
                .streaming(
                    tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx)),
                    PathAndQuery::from_static("/etcdserverpb.Watch/Watch"),
                    tonic_prost::ProstCodec::<WatchRequest, WatchResponse>::default(),
                )
                .await
                .map_err(|e| format!("watch: {e:?}"))?;
            let mut stream = resp.into_inner();
            stream
                .message()
                .await
                .map_err(|e| format!("watch: {e:?}"))?;
            held.push(Box::new((tx, stream)));
            opened += 1;
        }
        held.push(Box::new(ch));
    }
    Ok((held, opened))
}

/// `n` connections, each sent the HTTP/2 client preface and an empty SETTINGS frame,
/// then nothing. Returns the sockets (held open by the caller).
async fn idle_conns(url: &str, n: usize) -> Result<Vec<tokio::net::TcpStream>, String> {
    use tokio::io::AsyncWriteExt;
    let addr = url.trim_start_matches("http://").to_string();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = tokio::net::TcpStream::connect(&addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        s.write_all(&hello)
            .await
            .map_err(|e| format!("preface: {e}"))?;
        out.push(s);
    }
    Ok(out)
}

/// `rangers` clients ranging over `big/` until `deadline`.
async fn storm(url: &str, rangers: usize, deadline: Instant) -> Result<Ranges, String> {
    const REFUSED: &str = "etcdserver: too many requests";
    let mut tasks = Vec::new();
    for _ in 0..rangers {
        // A connection each, as separate clients (LIST callers) would have.
        let c = kv(channel(url).await?);
        tasks.push(tokio::spawn(async move {
            let mut s = Samples::default();
            let mut bytes = 0u64;
            while Instant::now() < deadline {
                let t = Instant::now();
                let r = c
                    .clone()
                    .range(RangeRequest {
                        key: b"big/".to_vec(),
                        range_end: b"big0".to_vec(),
                        ..RangeRequest::default()
                    })
                    .await;
                match r {
                    Ok(r) => {
                        s.latencies.push(t.elapsed());
                        let r = r.into_inner();
                        bytes += r.kvs.iter().map(|kv| kv.value.len() as u64).sum::<u64>();
                    }
                    Err(e) => {
                        *s.errors.entry(e.message().to_string()).or_default() += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
            (s, bytes)
        }));
    }
    let started = Instant::now();
    let mut all = Samples::default();
    let mut bytes = 0;
    for t in tasks {
        let (s, b) = t.await.map_err(|e| e.to_string())?;
        all.merge(s);
        bytes += b;
    }
    all.elapsed = started.elapsed();
    let refused = all.errors.remove(REFUSED).unwrap_or(0);
    let errors = all.errors.clone();
    let latency = Report::new("range", all);
    Ok(Ranges {
        ok: latency.ok,
        refused,
        errors,
        mib_served: bytes as f64 / (1024.0 * 1024.0),
        latency,
    })
}

async fn measure(
    name: &str,
    binary: &Path,
    dir: &Path,
    a: &OverloadArgs,
) -> Result<Outcome, String> {
    let extra = match name {
        "oxcd" => vec![format!(
            "--max-inflight-range-bytes={}",
            a.oxcd_bound_mib << 20
        )],
        _ => Vec::new(),
    };
    let cluster = Cluster::start_members_with(binary, dir, &settings(), 3, &extra)?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let (leader, _, term_before) = cluster.leader().await?;
    let member = &cluster.members[leader];
    let pid = member.pid().ok_or("the leader is not running")?;
    let url = member.client_url.clone();
    let ch = channel(&url).await?;
    let started = Instant::now();
    load(&kv(ch.clone()), a).await?;
    let load_secs = started.elapsed().as_secs_f64();
    eprintln!("   loaded {} MiB in {load_secs:.1} s", a.mib);
    let (calm, ()) = window(&url, a.secs, async {}).await?;
    eprintln!(
        "   calm: put p99 {:.2} ms, lease p99 {:.2} ms",
        calm.puts.latency_ms.p99, calm.leases.latency_ms.p99
    );
    let rss_before_mib = rss_mib(pid, "VmRSS:").unwrap_or(0.0);
    let _ = reset_peak_rss(pid);
    let deadline = Instant::now() + Duration::from_secs(a.secs);
    let all = async {
        let (watchers, conns) = tokio::join!(
            slow_watchers(&url, a.slow_watchers),
            idle_conns(&url, a.idle_conns)
        );
        let feeder = async {
            let c = kv(ch.clone());
            let mut n = 0u64;
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            while Instant::now() < deadline {
                tick.tick().await;
                let put = PutRequest {
                    key: format!("slow/{}", n % 100).into_bytes(),
                    value: vec![b'w'; 300],
                    ..PutRequest::default()
                };
                let _ = c.clone().put(put).await;
                n += 1;
            }
        };
        let (ranges, ()) = tokio::join!(storm(&url, a.rangers, deadline), feeder);
        (watchers, conns, ranges)
    };
    let (storm_window, (watchers, conns, ranges)) = window(&url, a.secs, all).await?;
    let ranges = ranges?;
    let (held, slow_watchers) = watchers?;
    let conns = conns?;
    let idle_conns = conns.len();
    let peak_rss_mib = rss_mib(pid, "VmHWM:").unwrap_or(0.0);
    let survived = rss_mib(pid, "VmRSS:").is_some();
    let term_after = match cluster.leader().await {
        Ok((_, _, t)) => t,
        Err(_) => 0,
    };
    eprintln!(
        "   storm: ranges {} ok, {} refused, {:?}; put p99 {:.2} ms (max {:.1}); lease p99 \
         {:.2} ms; peak RSS {peak_rss_mib:.0} MiB; term {term_before} -> {term_after}; \
         {slow_watchers} slow watchers, {idle_conns} idle connections",
        ranges.ok,
        ranges.refused,
        ranges.errors,
        storm_window.puts.latency_ms.p99,
        storm_window.puts.latency_ms.max,
        storm_window.leases.latency_ms.p99,
    );
    drop((held, conns));
    drop(cluster);
    Ok(Outcome {
        system: name.to_string(),
        load_secs,
        calm,
        storm: storm_window,
        ranges,
        slow_watchers,
        idle_conns,
        peak_rss_mib,
        rss_before_mib,
        term_before,
        term_after,
        survived,
    })
}
