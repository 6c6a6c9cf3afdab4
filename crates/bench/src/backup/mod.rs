//! `oxcd-bench backup`: snapshot save, restore and defragmentation under writes, on etcd
//! and on oxcd with the same settings and disk, one system after the other.
//!
//! Per system: a cluster of `--members` (one by default,
//! [`crate::cluster`]) filled with `--data-mb` of unique keys, half of them
//! written again and the history compacted, so the database holds about 1.5x the live
//! data and a defragmentation has that much to reclaim. Then, on the leader:
//! 1. [`snapshot`]: Maintenance.Snapshot saved as `etcdctl snapshot save` does, its
//!    sha256 trailer checked;
//! 2. [`restore`]: that file restored by the system's offline tool (etcdutl, oxcdutl);
//! 3. [`defrag`]: Maintenance.Defragment amid background writers, every put timed.

pub mod defrag;
pub mod report;
pub mod restore;
pub mod snapshot;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use crate::cluster::{Cluster, Settings};
use crate::load::{self, Fill};
use crate::versus::{self, Bench, Measured, Round};
use defrag::Defrag;
use restore::Restore;
use snapshot::Snapshot;

#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    #[command(flatten)]
    pub versus: versus::Flags,
    /// Members of each cluster (the leader is the one measured).
    #[arg(long, default_value_t = 1)]
    pub members: usize,
    /// MiB of live values: written once, then the first half written again and the
    /// history compacted.
    #[arg(long, default_value_t = 1024)]
    pub data_mb: u64,
    /// Size of each fill value, in bytes (incompressible).
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
    /// Concurrent puts of the fill.
    #[arg(long, default_value_t = 64)]
    pub fill_clients: usize,
    /// Connections of the fill.
    #[arg(long, default_value_t = 8)]
    pub fill_conns: usize,
    /// Background writers during the defragmentation (closed loop, one put at a time
    /// each).
    #[arg(long, default_value_t = 100)]
    pub writers: usize,
    /// Connections the background writers share.
    #[arg(long, default_value_t = 4)]
    pub write_conns: usize,
    /// The background writers' puts per second, all together (a cap; 0: as fast as
    /// answered).
    #[arg(long, default_value_t = 2000)]
    pub write_rate: u64,
    /// The background writers' value size, in bytes.
    #[arg(long, default_value_t = 256)]
    pub write_value_size: usize,
    /// Seconds the writers run before the defragmentation.
    #[arg(long, default_value_t = 5)]
    pub baseline_secs: u64,
    /// Gives up on a compaction or a defragmentation after this many seconds.
    #[arg(long, default_value_t = 1800)]
    pub timeout_secs: u64,
}

impl BackupArgs {
    pub fn settings(&self) -> Settings {
        Settings {
            heartbeat_ms: 100,
            election_ms: 1000,
            snapshot_count: 100_000,
            // Room for the history on top of the data, whatever its size.
            quota_bytes: (8 << 30).max(self.data_mb << 22),
            tls: None,
        }
    }

    /// Puts of the first fill.
    pub fn fill_puts(&self) -> u64 {
        (self.data_mb * 1024 * 1024).div_ceil(self.value_size.max(1) as u64)
    }

    fn load(&self) -> defrag::Load {
        defrag::Load {
            clients: self.writers,
            conns: self.write_conns,
            rate: self.write_rate,
            value_size: self.write_value_size,
            baseline: Duration::from_secs(self.baseline_secs),
            timeout: Duration::from_secs(self.timeout_secs),
        }
    }
}

/// The offline tool of `system` beside its server binary.
pub fn offline_tool(system: &str, binary: &Path) -> PathBuf {
    let name = if system == "etcd" {
        "etcdutl"
    } else {
        "oxcdutl"
    };
    binary.with_file_name(name)
}

/// Everything measured on one system in one round.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub system: String,
    pub members: usize,
    /// Every key written once.
    pub fill: Fill,
    /// The first half written again.
    pub overwrite: Fill,
    /// Live fill keys after the compaction.
    pub live_keys: i64,
    pub compacted_revision: i64,
    /// The compaction call (physical: answered once done).
    pub compaction_secs: f64,
    /// The leader's database size (Status) after the compaction.
    pub db_bytes_filled: u64,
    pub snapshot: Snapshot,
    pub restore: Restore,
    pub defrag: Defrag,
}

impl Measured for Outcome {
    fn system(&self) -> &str {
        &self.system
    }
}

/// What [`versus::run`] runs for this subcommand.
impl Bench for BackupArgs {
    const NAME: &'static str = "backup";
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

/// One system, one round, on a fresh cluster under `dir`.
async fn measure(name: &str, binary: &Path, dir: &Path, a: &BackupArgs) -> Result<Outcome, String> {
    let cluster = Cluster::start_members(binary, dir, &a.settings(), a.members)?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let (li, _, _) = cluster.leader().await?;
    let url = cluster.members[li].client_url.clone();
    let puts = a.fill_puts();
    eprintln!(
        "   fill: {puts} puts of {} B, then the first {} again ({} concurrent, {} conns)",
        a.value_size,
        puts / 2,
        a.fill_clients,
        a.fill_conns
    );
    let (vs, fc, fconns) = (a.value_size, a.fill_clients, a.fill_conns);
    let fill = load::fill(&url, 0..puts, 0, vs, fc, fconns).await?;
    let overwrite = load::fill(&url, 0..puts / 2, 1, vs, fc, fconns).await?;
    let admin = load::connect(&url, Duration::from_secs(a.timeout_secs)).await?;
    let (_, revision) = load::fill_keys(&admin, false).await?;
    let start = Instant::now();
    if let Err(e) = admin.compact(revision, true).await {
        // A compaction applied inside the apply loop (oxcd's before 2026-11-27) can
        // outlast the request timeout though it goes on: a linearizable read answers
        // once it is applied.
        if !e.to_string().contains("request timed out") {
            return Err(format!("compaction at {revision}: {e}"));
        }
        eprintln!("   compaction at {revision}: {e}; waiting for it to be applied");
        let deadline = Instant::now() + Duration::from_secs(a.timeout_secs);
        while let Err(e) = admin.get("compaction-applied").await {
            if Instant::now() >= deadline {
                return Err(format!("compaction at {revision} never applied: {e}"));
            }
        }
    }
    let compaction_secs = start.elapsed().as_secs_f64();
    let (live_keys, _) = load::fill_keys(&admin, false).await?;
    let db_bytes_filled = defrag::db_size(&admin).await?;
    eprintln!(
        "   filled in {:.1} + {:.1} s, compacted at {revision} in {compaction_secs:.1} s; \
         database {:.1} MiB",
        fill.secs,
        overwrite.secs,
        versus::table::mib(db_bytes_filled)
    );

    let work = dir.join("backup");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let file = work.join("snapshot.db");
    let snapshot = snapshot::save(&url, &file).await;
    eprintln!(
        "   snapshot: {} bytes in {:.2} s, sha256 {}{}",
        snapshot.file_bytes,
        snapshot.secs,
        if snapshot.sha256_ok { "ok" } else { "wrong" },
        snapshot
            .error
            .as_deref()
            .map(|e| format!(", error: {e}"))
            .unwrap_or_default()
    );
    let tool = offline_tool(name, binary);
    let restore = if snapshot.error.is_some() {
        Restore::not_measured(&tool, "no snapshot")
    } else {
        restore::run(
            &tool,
            &file,
            &work.join("restored"),
            &dir.join("restore.log"),
        )
        .await
    };
    let _ = std::fs::remove_file(&file);
    eprintln!(
        "   restore: {}",
        match (restore.secs, &restore.note) {
            (Some(s), _) => format!("{s:.2} s"),
            (None, note) => note.clone().unwrap_or_default(),
        }
    );

    let defrag = defrag::under_writes(&url, &a.load()).await?;
    eprintln!(
        "   defrag: {} ({:.1} → {:.1} MiB); no put succeeded for {:.1} ms at most; \
         longest write during it {:.1} ms",
        match (defrag.secs, &defrag.error) {
            (Some(s), _) => format!("{s:.2} s"),
            (None, e) => format!("failed: {}", e.as_deref().unwrap_or_default()),
        },
        versus::table::mib(defrag.db_bytes_before),
        versus::table::mib(defrag.db_bytes_after),
        defrag.stall_ms,
        defrag.during.max_ms
    );
    drop(cluster);
    Ok(Outcome {
        system: name.to_string(),
        members: a.members.max(1),
        fill,
        overwrite,
        live_keys,
        compacted_revision: revision,
        compaction_secs,
        db_bytes_filled,
        snapshot,
        restore,
        defrag,
    })
}
