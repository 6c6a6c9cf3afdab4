//! oxcd-storage: everything oxcd writes to disk.
//!
//! Owns: the write-ahead log ([`wal`]) that is the source of truth for the raft log, the
//! redb [`backend`] that holds the applied state, [`schema`] (every table and meta key in
//! one place), the [`tables`] registry, the apply path's shared write transaction
//! ([`batch`]), the storage version ([`storage_version`]), the data-dir lock ([`lock`]), and large sequential writes past the page
//! cache ([`direct`]), and the latency histograms of its disk paths ([`timing`]).
//!
//! Invariants:
//! - A WAL record is acknowledged only after `fdatasync` returned; replay yields exactly the
//!   acknowledged records, repairs a torn tail, and refuses (naming the file) any damage
//!   that could hide acknowledged data.
//! - The backend may lag the WAL but never lead it: the applied index is written in the
//!   same backend transaction as the data it describes.
//! - Synchronous code only; no async runtime here.

pub mod backend;
pub mod batch;
pub mod defrag;
pub mod direct;
pub mod lock;
pub mod schema;
pub mod snapshot;
pub mod storage_version;
pub mod tables;
pub mod timing;
pub mod wal;

/// Errors from storage. Every variant names the file involved where there is one.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// An I/O error on a named file.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory involved.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A WAL record failed its checksum or framing outside a repairable torn tail.
    #[error(
        "wal: corrupt record in {path} at offset {offset}: {reason}; refusing to start (the data after it would be lost)"
    )]
    CorruptWal {
        /// The segment file.
        path: String,
        /// Byte offset of the bad record.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// The backend database failed to open or is damaged.
    #[error("backend {path}: {reason}")]
    Backend {
        /// The database file.
        path: String,
        /// What redb said.
        reason: String,
    },
    /// The data directory is locked by another process.
    #[error(
        "data dir {path} is in use by another process (lock held on {lock_file}); is another oxcd or etcd running with it?"
    )]
    Locked {
        /// The data directory.
        path: String,
        /// The lock file.
        lock_file: String,
    },
}

impl StorageError {
    pub(crate) fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> StorageError {
        StorageError::Io {
            path: path.as_ref().display().to_string(),
            source,
        }
    }

    /// Whether this error means the disk is full.
    pub fn is_disk_full(&self) -> bool {
        match self {
            StorageError::Io { source, .. } => source.kind() == std::io::ErrorKind::StorageFull,
            StorageError::Backend { reason, .. } => reason.contains("No space left"),
            _ => false,
        }
    }
}

/// Result alias for storage operations.
pub type Result<T> = std::result::Result<T, StorageError>;
