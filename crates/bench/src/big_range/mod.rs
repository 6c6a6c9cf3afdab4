//! `oxcd-bench big-range`: the whole of a large keyspace read at once, on etcd and on
//! oxcd with the same settings and disk, one system after the other (issue 34's
//! RangeStream figures).
//!
//! Per system, one member:
//! 1. `--mib` MiB of values (`--value-kib` each) under `big/`, then `--small-keys` keys
//!    of 16-byte values under `small/`;
//! 2. on oxcd a RangeStream of `big/` (chunks), then a full Range of `big/` (one
//!    answer: the member builds it whole), each timed, the member's peak RSS reset before
//!    (`/proc/<pid>/clear_refs`) and read after (VmHWM), less its RSS before;
//! 3. a keys-only Range of `small/`, and on oxcd a keys-only RangeStream, timed (the
//!    best of `--repeats`).

pub mod report;

use std::path::Path;
use std::time::{Duration, Instant};

use clap::Args;
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::{PutRequest, RangeRequest, RequestOp, TxnRequest, request_op};
use serde::Serialize;
use tonic::transport::Channel;

use crate::cluster::{Cluster, Settings, proc_status_bytes, reset_peak_rss};
use crate::versus::{self, Bench, Measured, Round};

#[derive(Debug, Clone, Args)]
pub struct BigRangeArgs {
    #[command(flatten)]
    pub versus: versus::Flags,
    /// MiB of values loaded under `big/`.
    #[arg(long, default_value_t = 1024)]
    pub mib: u64,
    /// KiB per value under `big/`.
    #[arg(long, default_value_t = 64)]
    pub value_kib: u64,
    /// Keys under `small/` for the keys-only ranges.
    #[arg(long, default_value_t = 1_000_000)]
    pub small_keys: u64,
    /// Keys-only ranges per system (the best counts).
    #[arg(long, default_value_t = 3)]
    pub repeats: u32,
}

/// A read's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Read {
    pub secs: f64,
    /// Peak RSS during the read less the RSS before it, MiB.
    pub rss_growth_mib: f64,
    pub keys: u64,
    pub bytes: u64,
    /// What went wrong, if the read failed.
    pub error: Option<String>,
}

/// Everything measured on one system in one round.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub system: String,
    pub load_secs: f64,
    pub full_range: Read,
    /// oxcd only.
    pub full_stream: Option<Read>,
    pub keys_only_range: Read,
    /// oxcd only.
    pub keys_only_stream: Option<Read>,
}

impl Measured for Outcome {
    fn system(&self) -> &str {
        &self.system
    }
}

impl Bench for BigRangeArgs {
    const NAME: &'static str = "big-range";
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
    Settings::plain(16 << 30)
}

fn prefix_end(p: &[u8]) -> Vec<u8> {
    let mut end = p.to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// Loads the values: puts of `value_kib` KiB, 8 at a time; then the small keys in txns
/// of 100.
async fn load(c: &KvClient<Channel>, a: &BigRangeArgs) -> Result<(), String> {
    let per = a.value_kib * 1024;
    let n = a.mib * 1024 * 1024 / per;
    let value = vec![b'v'; per as usize];
    let mut tasks = Vec::new();
    for w in 0..8u64 {
        let mut c = c.clone();
        let value = value.clone();
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
    let mut c = c.clone();
    let mut i = 0;
    while i < a.small_keys {
        let ops = (i..(i + 100).min(a.small_keys))
            .map(|k| RequestOp {
                request: Some(request_op::Request::RequestPut(PutRequest {
                    key: format!("small/{k:09}").into_bytes(),
                    value: vec![b's'; 16],
                    ..PutRequest::default()
                })),
            })
            .collect();
        c.txn(TxnRequest {
            success: ops,
            ..TxnRequest::default()
        })
        .await
        .map_err(|e| format!("txn: {}", e.message()))?;
        i += 100;
    }
    Ok(())
}

/// One read of `prefix` (Range or RangeStream), timed, with the member's RSS growth.
async fn read(
    c: &KvClient<Channel>,
    pid: u32,
    prefix: &[u8],
    keys_only: bool,
    stream: bool,
) -> Read {
    let r = RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        keys_only,
        ..RangeRequest::default()
    };
    let before = proc_status_bytes(pid, "VmRSS:").unwrap_or(0);
    let _ = reset_peak_rss(pid);
    let mut c = c.clone();
    let started = Instant::now();
    let result: Result<(u64, u64), String> = async {
        if stream {
            let mut s = c
                .range_stream(r)
                .await
                .map_err(|e| e.message().to_string())?
                .into_inner();
            let (mut keys, mut bytes) = (0u64, 0u64);
            while let Some(m) = s.message().await.map_err(|e| e.message().to_string())? {
                let rr = m.range_response.unwrap_or_default();
                keys += rr.kvs.len() as u64;
                bytes += rr.kvs.iter().map(|kv| kv.value.len() as u64).sum::<u64>();
            }
            Ok((keys, bytes))
        } else {
            let rr = c
                .range(r)
                .await
                .map_err(|e| e.message().to_string())?
                .into_inner();
            let bytes = rr.kvs.iter().map(|kv| kv.value.len() as u64).sum();
            Ok((rr.kvs.len() as u64, bytes))
        }
    }
    .await;
    let secs = started.elapsed().as_secs_f64();
    let peak = proc_status_bytes(pid, "VmHWM:").unwrap_or(0);
    let growth = peak.saturating_sub(before) as f64 / (1024.0 * 1024.0);
    match result {
        Ok((keys, bytes)) => Read {
            secs,
            rss_growth_mib: growth,
            keys,
            bytes,
            error: None,
        },
        Err(e) => Read {
            secs,
            rss_growth_mib: growth,
            keys: 0,
            bytes: 0,
            error: Some(e),
        },
    }
}

/// The best (fastest) of `n` reads.
async fn best_of(n: u32, c: &KvClient<Channel>, pid: u32, prefix: &[u8], stream: bool) -> Read {
    let mut best: Option<Read> = None;
    for _ in 0..n.max(1) {
        let r = read(c, pid, prefix, true, stream).await;
        if best
            .as_ref()
            .is_none_or(|b| r.error.is_none() && r.secs < b.secs)
        {
            best = Some(r);
        }
    }
    best.unwrap_or(Read {
        secs: 0.0,
        rss_growth_mib: 0.0,
        keys: 0,
        bytes: 0,
        error: Some("not run".into()),
    })
}

async fn measure(
    name: &str,
    binary: &Path,
    dir: &Path,
    a: &BigRangeArgs,
) -> Result<Outcome, String> {
    let cluster = Cluster::start_members(binary, dir, &settings(), 1)?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let member = &cluster.members[0];
    let pid = member.pid().ok_or("the member is not running")?;
    let channel = Channel::from_shared(member.client_url.clone())
        .map_err(|e| e.to_string())?
        .connect()
        .await
        .map_err(|e| e.to_string())?;
    let c = KvClient::new(channel)
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
    let started = Instant::now();
    load(&c, a).await?;
    let load_secs = started.elapsed().as_secs_f64();
    eprintln!("   loaded in {load_secs:.1} s");
    let oxcd = name == "oxcd";
    // The stream first: memory a unary answer leaves to the allocator would hide the
    // stream's own growth.
    let full_stream = if oxcd {
        let r = read(&c, pid, b"big/", false, true).await;
        eprintln!(
            "   full RangeStream: {:.2} s, +{:.0} MiB",
            r.secs, r.rss_growth_mib
        );
        Some(r)
    } else {
        None
    };
    let full_range = read(&c, pid, b"big/", false, false).await;
    eprintln!(
        "   full Range: {:.2} s, +{:.0} MiB",
        full_range.secs, full_range.rss_growth_mib
    );
    let keys_only_range = best_of(a.repeats, &c, pid, b"small/", false).await;
    eprintln!("   keys-only Range: {:.3} s", keys_only_range.secs);
    let keys_only_stream = if oxcd {
        let r = best_of(a.repeats, &c, pid, b"small/", true).await;
        eprintln!("   keys-only RangeStream: {:.3} s", r.secs);
        Some(r)
    } else {
        None
    };
    drop(cluster);
    Ok(Outcome {
        system: name.to_string(),
        load_secs,
        full_range,
        full_stream,
        keys_only_range,
        keys_only_stream,
    })
}
