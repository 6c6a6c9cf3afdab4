//! A raft snapshot an etcd leader sent, kept as it arrived until the apply thread
//! installs it: etcd's bbolt file (`<index>.snap.db`, etcd's own name) and, beside it,
//! the v2 store the snapshot message carried (`<index>.snap.v2`).
//!
//! The peer service saves both and hands the snapshot to raft at once, as etcd's
//! learner does (`v3.5.16:server/etcdserver/api/rafthttp/http.go` `snapshotHandler`
//! saves the db, then steps the message): the leader sees the member in sync as soon as
//! the bytes are on disk. The import into oxcd's backend (seconds per GiB) runs when
//! the apply thread installs the snapshot, where etcd only renames its file.
//!
//! Invariants:
//! - The pair is whole and synced (both files and the directory) before raft hears of
//!   the snapshot; the v2 file is written last, so a v2 file means a whole pair.
//! - A crash before the install finds the pair at restart: raft hands the snapshot to
//!   the apply thread again, and the import runs then. A whole pair is never written
//!   again: the leader may send the same snapshot to the restarted member while the
//!   import reads the file (it once truncated the file under the import).
//! - The import leaves the snapshot as `<index>.snapdb` (what the apply thread
//!   installs for oxcd's own snapshots) and removes the pair; a pair the backend
//!   already covers is removed with [`remove_covered`].

use std::io::Write;
use std::path::{Path, PathBuf};

use oxcd_storage::snapshot::snapshot_db_path;

use super::etcd_import::{self, Import, ImportError};
use super::path_io::{PathIoError, io, sync_dir};
use super::v2store::{self, V2StoreError};

/// etcd's name for a received snapshot's bbolt file.
const DB_SUFFIX: &str = ".snap.db";
/// The v2 store saved beside it.
const V2_SUFFIX: &str = ".snap.v2";

/// Where the bbolt file of the snapshot at `index` is received.
pub fn db_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("{index:016x}{DB_SUFFIX}"))
}

/// Where the v2 store of the snapshot at `index` is saved.
fn v2_path(dir: &Path, index: u64) -> PathBuf {
    dir.join(format!("{index:016x}{V2_SUFFIX}"))
}

/// Why a received snapshot could not be kept or imported.
#[derive(Debug, thiserror::Error)]
pub enum ReceivedError {
    /// A file could not be written, read or renamed.
    #[error(transparent)]
    Io(#[from] PathIoError),
    /// The saved v2 store does not read.
    #[error(transparent)]
    V2Store(#[from] V2StoreError),
    /// The bbolt file could not be imported.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// The imported backend could not be positioned as the snapshot.
    #[error(transparent)]
    Storage(#[from] oxcd_storage::StorageError),
    /// The imported backend's raft position or members could not be written.
    #[error(transparent)]
    Record(#[from] oxcd_mvcc::MvccError),
    /// The import's thread panicked.
    #[error("the import of etcd's snapshot panicked")]
    Panicked,
}

/// How much of a received database is written between two syncs of it.
const WRITE_BEHIND_BYTES: u64 = 8 << 20;

/// Syncs a database being received as it grows, a piece at a time, so that the sync at
/// its end finds little left. Left to the kernel, a GiB of dirty pages goes to the disk at
/// that one sync and stalls every other writer of the disk for seconds (the leader's WAL,
/// where members share one). A failed sync fails the save: after a failed fsync the
/// file's pages cannot be trusted, and a later fsync may not report it again.
pub struct WriteBehind {
    file: std::sync::Arc<std::fs::File>,
    path: PathBuf,
    synced: u64,
    running: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl WriteBehind {
    /// Syncs the file at `path` (being written through another handle) as it grows.
    pub fn new(path: &Path) -> Result<WriteBehind, PathIoError> {
        Ok(WriteBehind {
            file: std::sync::Arc::new(std::fs::File::open(path).map_err(io(path))?),
            path: path.to_path_buf(),
            synced: 0,
            running: None,
        })
    }

    /// `written` bytes have been handed to the file: starts a sync when another piece has
    /// been written since the last one began and that one is done.
    pub async fn wrote(&mut self, written: u64) -> Result<(), PathIoError> {
        if written.saturating_sub(self.synced) < WRITE_BEHIND_BYTES {
            return Ok(());
        }
        if let Some(running) = &self.running
            && !running.is_finished()
        {
            return Ok(());
        }
        self.finish().await?;
        self.synced = written;
        let file = self.file.clone();
        self.running = Some(tokio::task::spawn_blocking(move || file.sync_data()));
        Ok(())
    }

    /// Waits for the sync under way, if any; its error if it failed.
    pub async fn finish(&mut self) -> Result<(), PathIoError> {
        let Some(running) = self.running.take() else {
            return Ok(());
        };
        let synced = running
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        synced.map_err(io(&self.path))
    }
}

/// Completes the pair of the snapshot at `index` whose bbolt file is received and
/// synced: saves the snapshot message's v2 store `data` beside it, then syncs the
/// directory. From here the snapshot may be handed to raft.
pub fn save_v2(dir: &Path, index: u64, data: &[u8]) -> Result<(), ReceivedError> {
    let done = v2_path(dir, index);
    let tmp = done.with_extension("tmp");
    let mut file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
    file.write_all(data).map_err(io(&tmp))?;
    file.sync_all().map_err(io(&tmp))?;
    drop(file);
    std::fs::rename(&tmp, &done).map_err(io(&done))?;
    Ok(sync_dir(dir)?)
}

/// Whether the whole pair of the snapshot at `index` is in `dir`.
pub fn is_saved(dir: &Path, index: u64) -> bool {
    v2_path(dir, index).exists() && db_path(dir, index).exists()
}

/// Imports the pair of the snapshot at raft `(index, term)` with the configuration
/// `conf_state` (encoded) into `<index>.snapdb`, made durable, and removes the pair.
/// Runs at a lowered CPU priority ([`super::priority`]): a member that installs a
/// snapshot is catching up, and the members it shares a machine with come first.
pub fn import(
    dir: &Path,
    (index, term, conf_state): (u64, u64, &[u8]),
) -> Result<PathBuf, ReceivedError> {
    let started = std::time::Instant::now();
    let made = std::thread::scope(|s| {
        s.spawn(|| {
            super::priority::yield_to_requests();
            to_snapshot_db(dir, (index, term, conf_state))
        })
        .join()
        .unwrap_or(Err(ReceivedError::Panicked))
    })?;
    tracing::info!(
        index,
        took_ms = started.elapsed().as_millis() as u64,
        "imported etcd's snapshot database"
    );
    for path in [db_path(dir, index), v2_path(dir, index)] {
        let _ = std::fs::remove_file(path);
    }
    Ok(made)
}

fn to_snapshot_db(
    dir: &Path,
    (index, term, conf_state): (u64, u64, &[u8]),
) -> Result<PathBuf, ReceivedError> {
    let v2 = v2_path(dir, index);
    let cluster = v2store::read(&std::fs::read(&v2).map_err(io(&v2))?)?;
    let db = db_path(dir, index);
    let db_len = std::fs::metadata(&db).map_err(io(&db))?.len();
    let staging = dir.join(format!("{index:016x}.import"));
    let _ = std::fs::remove_file(&staging);
    let made = (|| {
        etcd_import::write(
            &db,
            db_len,
            &staging,
            Import {
                bump: 0,
                cluster: true,
            },
        )?;
        let backend = oxcd_storage::backend::Backend::open(&staging)?;
        etcd_import::record_etcd_snapshot(&backend, (index, term, conf_state), &cluster)?;
        drop(backend);
        let done = snapshot_db_path(dir, index);
        std::fs::rename(&staging, &done).map_err(io(&done))?;
        sync_dir(dir)?;
        Ok(done)
    })();
    let _ = std::fs::remove_file(&staging);
    made
}

/// Removes the received pairs (and pieces of them) at or below `applied`.
pub fn remove_covered(dir: &Path, applied: u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let hex = [DB_SUFFIX, V2_SUFFIX, ".snap.tmp"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix));
        if let Some(index) = hex.and_then(|h| u64::from_str_radix(h, 16).ok())
            && index <= applied
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_is_saved_only_once_its_v2_store_is() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(db_path(dir.path(), 7), b"bolt").expect("db");
        assert!(!is_saved(dir.path(), 7));
        save_v2(dir.path(), 7, b"{}").expect("v2");
        assert!(is_saved(dir.path(), 7));
        std::fs::write(db_path(dir.path(), 9), b"bolt").expect("db");
        remove_covered(dir.path(), 8);
        assert!(!is_saved(dir.path(), 7));
        assert!(db_path(dir.path(), 9).exists());
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            1,
            "only index 9's file is left"
        );
    }
}
