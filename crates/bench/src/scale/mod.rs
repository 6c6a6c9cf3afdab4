//! `oxcd-bench scale`: a large database on etcd and on oxcd with the same settings and
//! disk, one system after the other, each also at a small size, so that each system's
//! large figures can be set beside its own small ones (issue 36's point 5).
//!
//! Per system and size, a one-member cluster with the quota raised, then:
//! 1. the fill: `keys` keys of `--value-bytes` each in txns of 100 puts, then every key
//!    written again, so the database holds two versions of each key (the key versions
//!    the compaction later removes half of); timed, with the database size (Status) and
//!    the data dir's disk usage after it;
//! 2. put and linearizable range at 1000 clients over 100 connections, as `compare`'s
//!    rows (random 8-byte keys of 256-byte values; one fill key read whole);
//! 3. the compaction at the current revision, physical (answered once done): removes
//!    one version of every fill key;
//! 4. a restart (SIGTERM, then the same flags) until the member serves a serializable
//!    count of every fill key;
//! 5. a learner's catch-up: MemberAdd as a learner, the learner started, MemberPromote
//!    asked every 100 ms until accepted (both systems accept once the learner is in
//!    sync with the leader); then it is removed and its data dir deleted;
//! 6. Maintenance.Snapshot saved as `etcdctl snapshot save` does, the member stopped and
//!    its data dir deleted (the disk holds one database at a time), the file restored
//!    by the system's offline tool (etcdutl, oxcdutl), then deleted.
//!
//! The disk must hold about three times the large database (the member and its learner,
//! then the member and the snapshot): 16 GiB asks for about 50 GB free.

pub mod report;

use std::path::Path;
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use crate::backup::offline_tool;
use crate::backup::restore::{self, Restore};
use crate::backup::snapshot::{self, Snapshot};
use crate::cluster::{Cluster, Settings, disk_usage, load_flags};
use crate::conns;
use crate::keys::{KeyArgs, KeyGen};
use crate::load;
use crate::stats::Report;
use crate::versus::{self, Bench, Measured, Round};
use crate::workloads::kv::{self, PutArgs, RangeArgs};
use crate::workloads::txn::{self, TxnPutArgs};

#[derive(Debug, Clone, Args)]
pub struct ScaleArgs {
    #[command(flatten)]
    pub versus: versus::Flags,
    /// The large database: GiB of key versions written (keys x 2 versions x value).
    #[arg(long, default_value_t = 16.0)]
    pub gib: f64,
    /// The small database each system is also measured at (0: none).
    #[arg(long, default_value_t = 1.0)]
    pub small_gib: f64,
    /// Bytes per value of the fill.
    #[arg(long, default_value_t = 1600)]
    pub value_bytes: usize,
    /// Requests of each latency row (put, range) at 1000 clients.
    #[arg(long, default_value_t = 30_000)]
    pub requests: u64,
    /// Gives up on a compaction, a restart or a catch-up after this many seconds.
    #[arg(long, default_value_t = 3600)]
    pub timeout_secs: u64,
}

/// Puts per txn of the fill.
const FILL_TXN_OPS: u64 = 100;
/// Bytes per fill key.
const FILL_KEY_BYTES: usize = 16;

impl ScaleArgs {
    /// The fill's distinct keys at `gib`: two versions of each.
    pub fn keys_at(&self, gib: f64) -> u64 {
        let bytes = gib * (1u64 << 30) as f64;
        let per_key = 2 * (self.value_bytes + FILL_KEY_BYTES) as u64;
        ((bytes / per_key as f64) as u64).div_ceil(FILL_TXN_OPS) * FILL_TXN_OPS
    }

    /// The members' settings at `gib`: the quota raised to hold the history with room,
    /// etcd 3.6's snapshot count on both (the WAL is purged as the fill goes).
    fn settings(&self, gib: f64) -> Settings {
        let bytes = (gib * (1u64 << 30) as f64) as u64;
        Settings {
            snapshot_count: 10_000,
            ..Settings::plain((8u64 << 30).max(bytes * 2))
        }
    }
}

/// Everything measured on one system at one size.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AtSize {
    pub gib: f64,
    pub keys: u64,
    /// Key versions written (two per key).
    pub key_versions: u64,
    pub load_secs: f64,
    /// Txns of the fill that failed.
    pub load_failed: u64,
    /// Status.dbSize after the fill.
    pub db_bytes: u64,
    /// The data dir's disk usage after the fill.
    pub data_dir_bytes: u64,
    pub put: Option<Report>,
    pub range: Option<Report>,
    pub compaction_secs: Option<f64>,
    /// Status.dbSizeInUse after the compaction.
    pub db_in_use_after_compaction: u64,
    pub restart_secs: Option<f64>,
    pub learner_catchup_secs: Option<f64>,
    pub snapshot: Snapshot,
    pub restore: Restore,
    /// What failed, step by step.
    pub errors: Vec<String>,
}

/// One system's round: the small size (if asked), then the large one.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub system: String,
    pub small: Option<AtSize>,
    pub large: AtSize,
}

impl Measured for Outcome {
    fn system(&self) -> &str {
        &self.system
    }
}

impl Bench for ScaleArgs {
    const NAME: &'static str = "scale";
    type Outcome = Outcome;

    fn flags(&self) -> &versus::Flags {
        &self.versus
    }

    async fn measure(&self, system: &str, binary: &Path, dir: &Path) -> Result<Outcome, String> {
        let small = if self.small_gib > 0.0 {
            Some(at_size(system, binary, &dir.join("small"), self, self.small_gib).await?)
        } else {
            None
        };
        let large = at_size(system, binary, &dir.join("large"), self, self.gib).await?;
        Ok(Outcome {
            system: system.to_string(),
            small,
            large,
        })
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

fn fill_keys(keys: u64, value_bytes: usize) -> KeyArgs {
    KeyArgs::new(FILL_KEY_BYTES, value_bytes, keys, true)
}

/// Writes every fill key once, in txns of [`FILL_TXN_OPS`] puts: the failed txns.
async fn fill_once(url: &str, keys: u64, value_bytes: usize) -> Result<u64, String> {
    let conns = conns::open(&load_flags(&[url.to_string()], 16, 4, None, None)).await?;
    let args = TxnPutArgs {
        keys: fill_keys(keys, value_bytes),
        total: keys / FILL_TXN_OPS,
        txn_ops: FILL_TXN_OPS as usize,
        rate: 0,
    };
    let r = txn::txn_put(&args, 16, &conns).await;
    if r.failed > 0 {
        eprintln!("   fill: {} txns failed: {:?}", r.failed, r.errors);
    }
    Ok(r.failed)
}

/// The leader's Status: (revision, dbSize, dbSizeInUse).
async fn status(c: &oxcd_client::Client) -> Result<(i64, u64, u64), String> {
    let s = c.status().await.map_err(|e| format!("status: {e}"))?;
    let rev = s.header.as_ref().map(|h| h.revision).unwrap_or_default();
    Ok((rev, s.db_size as u64, s.db_size_in_use as u64))
}

/// The latency rows at 1000 clients over 100 connections.
async fn latency_rows(url: &str, a: &ScaleArgs, keys: u64) -> Result<(Report, Report), String> {
    let conns = conns::open(&load_flags(&[url.to_string()], 1000, 100, None, None)).await?;
    let put = PutArgs {
        keys: KeyArgs::new(8, 256, 100_000, false),
        total: a.requests,
        rate: 0,
        watchers: 0,
    };
    let put = kv::put(&put, 1000, &conns).await?;
    let middle = KeyGen::new(&fill_keys(keys, a.value_bytes)).key(keys / 2);
    let range = RangeArgs {
        key: String::from_utf8_lossy(&middle).into_owned(),
        end: None,
        total: a.requests,
        rate: 0,
        consistency: "l".into(),
        limit: 0,
        keys_only: false,
        count_only: false,
    };
    let range = kv::range(&range, 1000, &conns).await?;
    Ok((put, range))
}

/// Adds a learner, starts it and asks for its promotion until accepted: the seconds
/// from the MemberAdd to the accepted promotion. The learner is then removed (a
/// failure to remove it goes to `errors`), stopped, and its data dir deleted.
async fn learner_catchup(
    cluster: &mut Cluster,
    timeout: Duration,
    errors: &mut Vec<String>,
) -> Result<f64, String> {
    let url = cluster.members[0].client_url.clone();
    let admin = load::connect(&url, Duration::from_secs(60)).await?;
    let i = cluster.prepare_member("learner")?;
    let peer = cluster.members[i].peer_url.clone();
    let t0 = Instant::now();
    let added = admin
        .member_add(vec![peer.clone()], true)
        .await
        .map_err(|e| format!("MemberAdd of the learner: {e}"))?;
    let id = added.member.as_ref().map(|m| m.id).unwrap_or_default();
    let initial = cluster.initial_cluster();
    cluster.join(i, &initial)?;
    let deadline = t0 + timeout;
    let promoted = loop {
        match admin.member_promote(id).await {
            Ok(_) => break Ok(t0.elapsed().as_secs_f64()),
            Err(e) if Instant::now() > deadline => {
                break Err(format!("learner not promoted within {timeout:?}: {e}"));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    // etcd refuses to remove a voter until the leader has heard from the rest for a
    // while ("etcdserver: unhealthy cluster"), and the new voter may still be opening
    // the database it received: asked again for up to five minutes.
    let removing = Instant::now();
    while let Err(e) = admin.member_remove(id).await {
        if removing.elapsed() > Duration::from_secs(300) {
            errors.push(format!("MemberRemove of the promoted learner: {e}"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let m = &mut cluster.members[i];
    m.stop();
    let _ = std::fs::remove_dir_all(&m.data_dir);
    promoted
}

/// One system at `gib`, on a fresh one-member cluster under `dir`.
async fn at_size(
    system: &str,
    binary: &Path,
    dir: &Path,
    a: &ScaleArgs,
    gib: f64,
) -> Result<AtSize, String> {
    let keys = a.keys_at(gib);
    let timeout = Duration::from_secs(a.timeout_secs);
    let mut out = AtSize {
        gib,
        keys,
        key_versions: 2 * keys,
        ..AtSize::default()
    };
    let mut cluster = Cluster::start_members(binary, dir, &a.settings(gib), 1)?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let url = cluster.members[0].client_url.clone();
    let admin = load::connect(&url, timeout).await?;
    eprintln!(
        "   {system} at {gib} GiB: {keys} keys of {} B, written twice in txns of {FILL_TXN_OPS}",
        a.value_bytes
    );
    let t = Instant::now();
    out.load_failed = fill_once(&url, keys, a.value_bytes).await?;
    out.load_failed += fill_once(&url, keys, a.value_bytes).await?;
    out.load_secs = t.elapsed().as_secs_f64();
    // etcd commits its backend every 100 ms: its size is read once the last commit is in.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (revision, db, _) = status(&admin).await?;
    out.db_bytes = db;
    out.data_dir_bytes = disk_usage(&cluster.members[0].data_dir);
    eprintln!(
        "   loaded in {:.1} s: database {:.0} MiB, data dir {:.0} MiB",
        out.load_secs,
        versus::table::mib(out.db_bytes),
        versus::table::mib(out.data_dir_bytes)
    );

    match latency_rows(&url, a, keys).await {
        Ok((put, range)) => {
            eprintln!(
                "   put p99 {:.1} ms ({:.0}/s), range p99 {:.1} ms ({:.0}/s)",
                put.latency_ms.p99, put.qps, range.latency_ms.p99, range.qps
            );
            out.put = Some(put);
            out.range = Some(range);
        }
        Err(e) => out.errors.push(format!("latency rows: {e}")),
    }

    let t = Instant::now();
    match admin.compact(revision, true).await {
        Ok(_) => {
            let secs = t.elapsed().as_secs_f64();
            out.compaction_secs = Some(secs);
            tokio::time::sleep(Duration::from_secs(2)).await;
            out.db_in_use_after_compaction = status(&admin).await.map(|s| s.2).unwrap_or(0);
            eprintln!("   compaction at {revision}: {secs:.1} s");
        }
        Err(e) => out.errors.push(format!("compaction at {revision}: {e}")),
    }
    drop(admin);

    // Every fill key is a 16-digit decimal below 10^15: all of them lie in ["0", "1").
    match cluster
        .restart_time(0, b"0", b"1", keys as i64)
        .await
        .map(|d| d.as_secs_f64())
    {
        Ok(s) => {
            eprintln!("   restart until serving: {s:.2} s");
            out.restart_secs = Some(s);
        }
        Err(e) => out.errors.push(format!("restart: {e}")),
    }

    match learner_catchup(&mut cluster, timeout, &mut out.errors).await {
        Ok(s) => {
            eprintln!("   learner caught up in {s:.1} s");
            out.learner_catchup_secs = Some(s);
        }
        Err(e) => out.errors.push(format!("learner: {e}")),
    }

    let file = dir.join("snapshot.db");
    out.snapshot = snapshot::save(&url, &file).await;
    eprintln!(
        "   snapshot save: {:.0} MiB in {:.1} s{}",
        versus::table::mib(out.snapshot.file_bytes),
        out.snapshot.secs,
        out.snapshot
            .error
            .as_deref()
            .map(|e| format!(", error: {e}"))
            .unwrap_or_default()
    );
    // One database on disk at a time beside the snapshot.
    let data_dir = cluster.members[0].data_dir.clone();
    drop(cluster);
    let _ = std::fs::remove_dir_all(&data_dir);
    let tool = offline_tool(system, binary);
    out.restore = if out.snapshot.error.is_some() {
        Restore::not_measured(&tool, "no snapshot")
    } else {
        restore::run(
            &tool,
            &file,
            &dir.join("restored"),
            &dir.join("restore.log"),
        )
        .await
    };
    let _ = std::fs::remove_file(&file);
    eprintln!(
        "   restore: {}",
        match (out.restore.secs, &out.restore.note) {
            (Some(s), _) => format!("{s:.1} s"),
            (None, note) => note.clone().unwrap_or_default(),
        }
    );
    Ok(out)
}
