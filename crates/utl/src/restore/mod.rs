//! `snapshot restore`: a snapshot of etcd 3.4/3.5 or oxcd (a bbolt file, etcd's sha256
//! trailer optional) made into the data dir of a member of a new cluster, with
//! etcdutl 3.5.16's flags, checks and messages, in etcdutl's order:
//!
//! 1. the new cluster from the flags ([`cluster`]): peer URLs, `--initial-cluster`,
//!    etcd's bootstrap checks, ids as etcd derives them;
//! 2. the data dir must be absent or empty, a `--wal-dir` absent;
//! 3. the snapshot file ([`source`]): its trailer, then (once the directories exist)
//!    its sha256 unless `--skip-hash-check`, read on a thread of its own while
//! 4. the backend (`oxcd_server::backup::etcd_import`) is written: etcd's buckets translated row by row, the
//!    revision bumped if asked (a hash mismatch is the error, whatever else failed);
//! 5. the WAL, exactly as a brand-new member of that cluster creates it
//!    ([`oxcd_server::start::bootstrap::create_member_wal`]): its first start applies the
//!    bootstrap conf changes over the restored data, so the member list is the new
//!    cluster's and later `--initial-*` flags are ignored, as for etcd's restored member;
//! 6. everything synced and renamed into place ([`staging`]).
//!
//! Differences from etcdutl, on purpose: a failed restore leaves nothing behind (etcd
//! leaves `member/snap/db`); a file that is not bbolt, or a damaged one read with
//! `--skip-hash-check`, is a clear error (etcd panics). `--initial-memory-map-size` is
//! accepted and has no effect (oxcd's backend maps no memory).

pub mod cluster;
pub mod source;
pub mod staging;

use std::path::{Path, PathBuf};

use crate::log::{Field, info};
use oxcd_server::backup::etcd_import::{self, Import, Written};

/// What `snapshot restore` was asked to do.
#[derive(Debug, Clone)]
pub struct RestoreConfig {
    /// The snapshot file.
    pub snapshot: PathBuf,
    /// `--name`.
    pub name: String,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--wal-dir` (None: `<data-dir>/member/wal`).
    pub wal_dir: Option<PathBuf>,
    /// `--initial-advertise-peer-urls` (comma-separated).
    pub peer_urls: String,
    /// `--initial-cluster`.
    pub initial_cluster: String,
    /// `--initial-cluster-token`.
    pub initial_cluster_token: String,
    /// `--skip-hash-check`.
    pub skip_hash_check: bool,
    /// `--bump-revision` (with `--mark-compacted`; 0: none).
    pub bump_revision: u64,
}

/// What a restore made.
#[derive(Debug, Clone)]
pub struct Restored {
    /// The restored member's id.
    pub member_id: u64,
    /// The new cluster's id.
    pub cluster_id: u64,
    /// Rows of the key table and the revision the member will start at.
    pub written: Written,
}

/// Runs the restore `cfg` describes; the error is etcdutl's text (or oxcd's where
/// etcdutl has none).
pub fn restore(cfg: &RestoreConfig) -> Result<Restored, String> {
    let wal_dir = cfg
        .wal_dir
        .clone()
        .unwrap_or_else(|| cfg.data_dir.join("member").join("wal"));
    let flags = cluster::ClusterFlags {
        name: &cfg.name,
        peer_urls: &cfg.peer_urls,
        initial_cluster: &cfg.initial_cluster,
        token: &cfg.initial_cluster_token,
    };
    // Checked now, with the path the WAL will have; it is built elsewhere first.
    cluster::settings(&flags, &cfg.data_dir, &wal_dir)?;
    if cfg.data_dir.exists() && !dir_empty(&cfg.data_dir) {
        return Err(format!(
            "data-dir {:?} not empty or could not be read",
            cfg.data_dir.display().to_string()
        ));
    }
    if let Some(w) = &cfg.wal_dir
        && w.exists()
    {
        return Err(format!("wal-dir {:?} exists", w.display().to_string()));
    }
    let snap_dir = cfg.data_dir.join("member").join("snap");
    let where_ = [
        ("path", cfg.snapshot.display().to_string()),
        ("wal-dir", wal_dir.display().to_string()),
        ("data-dir", cfg.data_dir.display().to_string()),
        ("snap-dir", snap_dir.display().to_string()),
    ];
    let fields: Vec<(&str, Field<'_>)> = where_
        .iter()
        .map(|(k, v)| (*k, Field::Str(v.as_str())))
        .collect();
    info("snapshot/restore.rs", "restoring snapshot", &fields);

    let src = source::Source::open(&cfg.snapshot)?;
    let staging = staging::Staging::begin(&cfg.data_dir, cfg.wal_dir.as_deref())?;
    let written = std::thread::scope(|s| {
        // The sha256 is read on its own thread while the backend is written; a mismatch
        // still wins over anything the write found, as etcdutl checks it first.
        let verified = if src.has_hash_to_check(cfg.skip_hash_check) {
            Some(s.spawn(|| src.verify(cfg.skip_hash_check)))
        } else {
            src.verify(cfg.skip_hash_check)?;
            None
        };
        let written = etcd_import::write(
            &src.path,
            src.db_len,
            &staging.backend_path(),
            Import {
                bump: cfg.bump_revision,
                cluster: false,
            },
        )
        .map_err(|e| disk_full_said_plainly(e.to_string()));
        if let Some(v) = verified {
            v.join()
                .unwrap_or_else(|_| Err("restore: the hash check panicked".to_string()))?;
        }
        written
    })?;
    let settings = cluster::settings(&flags, &cfg.data_dir, &staging.wal_path())?;
    let cluster = oxcd_server::start::bootstrap::create_member_wal(&settings)
        .map_err(|e| disk_full_said_plainly(e.to_string()))?;
    for m in &cluster.members {
        info(
            "snapshot/restore.rs",
            "added member",
            &[
                (
                    "cluster-id",
                    Field::Str(&format!("{:x}", cluster.cluster_id)),
                ),
                ("local-member-id", Field::Str(&format!("{:x}", cluster.me))),
                ("added-peer-id", Field::Str(&format!("{:x}", m.id))),
                ("added-peer-peer-urls", Field::List(&m.peer_urls)),
            ],
        );
    }
    staging.commit().map_err(disk_full_said_plainly)?;
    info("snapshot/restore.rs", "restored snapshot", &fields);
    Ok(Restored {
        member_id: cluster.me,
        cluster_id: cluster.cluster_id,
        written,
    })
}

/// Whether `dir` is a directory with nothing in it (etcd's `fileutil.DirEmpty`: false
/// when it cannot be read).
fn dir_empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut rd| rd.next().is_none())
}

/// A full disk named as such, whatever layer hit it.
fn disk_full_said_plainly(e: String) -> String {
    let lower = e.to_lowercase();
    if lower.contains("no space left") && !e.starts_with("restore:") {
        format!("restore: no space left on device; nothing was restored ({e})")
    } else {
        e
    }
}
