//! `watch` (watcher creation latency, then event delivery under puts) and
//! `watch-latency` (from a put to its event on every watcher of the key): their flags
//! and their loops; and [`hold`], the watchers `put --watchers` keeps open.
//!
//! A server without the Watch service is reported as unsupported, not as a failure
//! of the run.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use oxcd_api::etcdserverpb::watch_request::RequestUnion;
use oxcd_api::etcdserverpb::{PutRequest, WatchCreateRequest, WatchRequest, WatchResponse};
use oxcd_client::Client;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic_prost::ProstCodec;

use crate::driver::{self, Plan};
use crate::keys::{KeyArgs, KeyGen, Put};
use crate::stats::{Report, Samples};
use crate::workloads::skim::Skimmed;

/// `watch`'s flags.
#[derive(Debug, Clone, Args)]
pub struct WatchArgs {
    /// Watch streams (spread over the connections).
    #[arg(long, default_value_t = 10)]
    pub streams: usize,
    /// Watchers per stream.
    #[arg(long, default_value_t = 10)]
    pub watch_per_stream: usize,
    /// How many distinct keys are watched.
    #[arg(long, default_value_t = 100)]
    pub watched_key_total: u64,
    /// Puts per second on the watched keys.
    #[arg(long, default_value_t = 100)]
    pub put_rate: u64,
    /// Total puts on the watched keys.
    #[arg(long, default_value_t = 1000)]
    pub put_total: u64,
    /// Key size in bytes.
    #[arg(long, default_value_t = 32)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 32)]
    pub val_size: usize,
}

/// `watch-latency`'s flags.
#[derive(Debug, Clone, Args)]
pub struct WatchLatencyArgs {
    /// Watch streams, all on one key.
    #[arg(long, default_value_t = 10)]
    pub streams: usize,
    /// Watchers per stream.
    #[arg(long, default_value_t = 10)]
    pub watchers_per_stream: usize,
    /// Puts per second.
    #[arg(long, default_value_t = 100)]
    pub put_rate: u64,
    /// Total puts.
    #[arg(long, default_value_t = 1000)]
    pub put_total: u64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 32)]
    pub val_size: usize,
}

/// What a watch run says when the server has no Watch service.
pub const UNSUPPORTED: &str = "unsupported: the server does not implement Watch";

/// How a stream's responses are read: fully, or skimmed.
trait Answer: prost::Message + Default + Send + 'static {
    /// Whether it confirms a create request.
    fn created(&self) -> bool;
}

impl Answer for WatchResponse {
    fn created(&self) -> bool {
        self.created
    }
}

impl Answer for Skimmed {
    fn created(&self) -> bool {
        self.created
    }
}

/// One open watch stream: its request sender and its responses.
struct Stream<R> {
    tx: mpsc::Sender<WatchRequest>,
    rx: tonic::Streaming<R>,
}

fn refusal(s: tonic::Status) -> String {
    if crate::workloads::unimplemented(&s) {
        UNSUPPORTED.to_string()
    } else {
        crate::driver::message(s)
    }
}

/// A request creating a watcher on `key`.
fn create_request(key: Vec<u8>) -> WatchRequest {
    WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
            key,
            ..WatchCreateRequest::default()
        })),
    }
}

/// Opens a stream with a first watcher on `key`. The create request is queued before
/// the call: etcd (grpc-go) answers the stream's headers only with its first message.
async fn open<R: Answer>(conn: &Client, key: Vec<u8>) -> Result<Stream<R>, String> {
    let (tx, rx) = mpsc::channel(1024);
    tx.send(create_request(key))
        .await
        .map_err(|_| "watch stream closed".to_string())?;
    let mut grpc = tonic::client::Grpc::new(conn.service());
    grpc.ready()
        .await
        .map_err(|e| format!("watch stream: {e}"))?;
    let path = PathAndQuery::from_static("/etcdserverpb.Watch/Watch");
    let codec = ProstCodec::<WatchRequest, R>::default();
    let resp = grpc
        .streaming(tonic::Request::new(ReceiverStream::new(rx)), path, codec)
        .await
        .map_err(refusal)?;
    let mut s = Stream {
        tx,
        rx: resp.into_inner(),
    };
    created(&mut s).await?;
    Ok(s)
}

/// Waits for the server's confirmation of a create request.
async fn created<R: Answer>(s: &mut Stream<R>) -> Result<(), String> {
    loop {
        match s.rx.next().await {
            Some(Ok(r)) if r.created() => return Ok(()),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(refusal(e)),
            None => return Err("watch stream closed".to_string()),
        }
    }
}

/// Creates another watcher on `key` and waits for the server's confirmation.
async fn create<R: Answer>(s: &mut Stream<R>, key: Vec<u8>) -> Result<(), String> {
    s.tx.send(create_request(key))
        .await
        .map_err(|_| "watch stream closed".to_string())?;
    created(s).await
}

/// Counts the events a stream delivers until it ends (the caller aborts it).
async fn count_events(mut s: Stream<Skimmed>, counter: Arc<AtomicU64>) {
    while let Some(Ok(r)) = s.rx.next().await {
        counter.fetch_add(r.events, Ordering::Relaxed);
    }
    drop(s.tx);
}

/// Watchers held open while another workload runs, counting what they receive.
pub struct Held {
    readers: Vec<tokio::task::JoinHandle<()>>,
    received: Arc<AtomicU64>,
}

impl Held {
    /// Closes the watchers; answers how many events they received.
    pub fn stop(self) -> u64 {
        for r in self.readers {
            r.abort();
        }
        self.received.load(Ordering::Relaxed)
    }
}

/// Opens `total` watchers, 100 per stream, on key numbers 0, 1, ... of `keys` (wrapping
/// at the key space), streams spread over `conns`.
pub async fn hold(keys: &KeyGen, total: u64, conns: &[Client]) -> Result<Held, String> {
    const PER_STREAM: u64 = 100;
    let received = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    let key = |n: u64| keys.key(keys.number_at(n));
    for (i, first) in (0..total).step_by(PER_STREAM as usize).enumerate() {
        let mut s = open::<Skimmed>(&conns[i % conns.len()], key(first)).await?;
        for n in first + 1..total.min(first + PER_STREAM) {
            create(&mut s, key(n)).await?;
        }
        readers.push(tokio::spawn(count_events(s, received.clone())));
    }
    Ok(Held { readers, received })
}

/// Puts `total` values at `rate` per second; `value(i)` makes the i-th value.
async fn put_paced(
    conn: &Client,
    total: u64,
    rate: u64,
    key: impl Fn(u64) -> Vec<u8>,
    value: impl Fn(u64) -> Vec<u8>,
) -> Samples {
    let mut s = Samples::default();
    let start = tokio::time::Instant::now();
    for i in 0..total {
        if rate > 0 {
            tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate as f64)).await;
        }
        let req = PutRequest {
            key: key(i),
            value: value(i),
            ..PutRequest::default()
        };
        let t = Instant::now();
        match conn.kv().put(req).await {
            Ok(_) => s.latencies.push(t.elapsed()),
            Err(e) => *s.errors.entry(crate::driver::message(e)).or_default() += 1,
        }
    }
    s.elapsed = start.elapsed();
    s
}

/// Runs `watch`: opens the watchers, then `clients` concurrent writers put on the
/// watched keys (at `put_rate` in all, 0: unlimited), as etcd's `benchmark watch`.
pub async fn watch(a: &WatchArgs, clients: usize, conns: &[Client]) -> Result<Report, String> {
    let keys = KeyGen::new(&KeyArgs::new(
        a.key_size,
        a.val_size,
        a.watched_key_total,
        false,
    ));
    let mut creation = Samples::default();
    let mut watchers_per_key: BTreeMap<u64, u64> = BTreeMap::new();
    let mut streams = Vec::new();
    let start = Instant::now();
    for i in 0..a.streams.max(1) {
        let mut stream = None;
        for j in 0..a.watch_per_stream.max(1) as u64 {
            let k = keys.number((i as u64) << 32 | j);
            let t = Instant::now();
            match stream.as_mut() {
                None => stream = Some(open::<Skimmed>(&conns[i % conns.len()], keys.key(k)).await?),
                Some(s) => create(s, keys.key(k)).await?,
            }
            creation.latencies.push(t.elapsed());
            *watchers_per_key.entry(k).or_default() += 1;
        }
        streams.extend(stream);
    }
    creation.elapsed = start.elapsed();
    let received = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = streams
        .into_iter()
        .map(|s| tokio::spawn(count_events(s, received.clone())))
        .collect();
    let plan = Plan {
        total: a.put_total,
        clients: clients.max(1),
        rate: a.put_rate,
    };
    let put_start = Instant::now();
    let puts = driver::run(plan, conns, Put(keys.clone())).await;
    let expected: u64 = (0..a.put_total)
        .map(|i| watchers_per_key.get(&keys.number(i)).copied().unwrap_or(0))
        .sum();
    let deadline = Instant::now() + Duration::from_secs(60);
    while received.load(Ordering::Relaxed) < expected && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let delivery = put_start.elapsed();
    for r in readers {
        r.abort();
    }
    let mut report = Report::new("watch (creation)", creation);
    let got = received.load(Ordering::Relaxed);
    report
        .extra
        .insert("puts ok".into(), puts.latencies.len() as f64);
    report
        .extra
        .insert("events expected".into(), expected as f64);
    report.extra.insert("events received".into(), got as f64);
    report.extra.insert(
        "events/sec".into(),
        got as f64 / delivery.as_secs_f64().max(1e-9),
    );
    Ok(report)
}

/// Runs `watch-latency`.
pub async fn watch_latency(a: &WatchLatencyArgs, conns: &[Client]) -> Result<Report, String> {
    const KEY: &[u8] = b"watch-latency-key";
    let epoch = Instant::now();
    let (lat_tx, mut lat_rx) = mpsc::unbounded_channel::<Duration>();
    let mut readers = Vec::new();
    for i in 0..a.streams.max(1) {
        let mut s = open::<WatchResponse>(&conns[i % conns.len()], KEY.to_vec()).await?;
        for _ in 1..a.watchers_per_stream {
            create(&mut s, KEY.to_vec()).await?;
        }
        let lat_tx = lat_tx.clone();
        readers.push(tokio::spawn(async move {
            while let Some(Ok(r)) = s.rx.next().await {
                let now = epoch.elapsed();
                for ev in r.events {
                    let sent = ev
                        .kv
                        .as_ref()
                        .and_then(|kv| {
                            std::str::from_utf8(&kv.value[..20.min(kv.value.len())]).ok()
                        })
                        .and_then(|v| v.trim().parse::<u64>().ok());
                    if let Some(ns) = sent {
                        let _ = lat_tx.send(now.saturating_sub(Duration::from_nanos(ns)));
                    }
                }
            }
        }));
    }
    drop(lat_tx);
    let val_size = a.val_size.max(20);
    let puts = put_paced(
        &conns[0],
        a.put_total,
        a.put_rate,
        |_| KEY.to_vec(),
        |_| {
            let mut v = format!("{:020}", epoch.elapsed().as_nanos()).into_bytes();
            v.resize(val_size, b' ');
            v
        },
    )
    .await;
    let expected = puts.latencies.len() as u64 * (a.streams.max(1) * a.watchers_per_stream) as u64;
    let mut s = Samples::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while (s.latencies.len() as u64) < expected {
        match tokio::time::timeout_at(deadline, lat_rx.recv()).await {
            Ok(Some(d)) => s.latencies.push(d),
            _ => break,
        }
    }
    let missing = expected.saturating_sub(s.latencies.len() as u64);
    if missing > 0 {
        s.errors
            .insert("event not delivered within 10 s".into(), missing);
    }
    s.elapsed = puts.elapsed;
    for r in readers {
        r.abort();
    }
    Ok(Report::new("watch-latency", s))
}
