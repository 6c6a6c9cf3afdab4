//! Why a member stops: the faults its raft or apply thread cannot recover from, typed,
//! as each thread reports its end to `serve` (over a channel; see [`crate::start::serve`]).
//! Nothing here is an answer to a client: a request's refusal is an `EtcdError`.

use std::path::PathBuf;

use oxcd_mvcc::MvccError;
use oxcd_raft::RaftError;

use crate::domains::membership::ChangeRefused;

/// What stopped the apply thread, or the raft thread, on its own.
#[derive(Debug, thiserror::Error)]
pub enum Fatal {
    /// The backend failed or holds damaged data.
    #[error("apply: {0}")]
    Backend(#[from] MvccError),
    /// A committed conf change (or its context) does not decode.
    #[error("conf change at index {index}: {what} does not decode: {reason}")]
    ConfChangeUndecodable {
        /// Its log index.
        index: u64,
        /// What did not decode.
        what: &'static str,
        /// The decoder's words.
        reason: String,
    },
    /// A committed entry in etcd's vocabulary that etcd could not apply either (etcd
    /// panics on it).
    #[error("etcd entry at index {index} cannot be read: {source}")]
    EtcdEntryUnreadable {
        /// Its log index.
        index: u64,
        /// Why.
        source: crate::machine::etcd_entries::UnreadableEntry,
    },
    /// Raft could not take a committed conf change (it stopped, or its log is damaged).
    #[error("conf change at index {index}: {source}")]
    ConfChangeRaft {
        /// Its log index.
        index: u64,
        /// Raft's error.
        source: RaftError,
    },
    /// The membership refused a change it had validated: members would diverge.
    #[error("conf change at index {index}: {source}")]
    ConfChangeRefused {
        /// Its log index.
        index: u64,
        /// The refusal.
        source: ChangeRefused,
    },
    /// Raft holds a snapshot the backend should have received but its file is gone.
    #[error(
        "raft holds a snapshot at index {index} but {} is missing and the backend is at index {applied}: the backend lost data",
        path.display()
    )]
    SnapshotMissing {
        /// The snapshot's index.
        index: u64,
        /// Where its file should be.
        path: PathBuf,
        /// The backend's applied index.
        applied: u64,
    },
    /// The snapshot an etcd leader sent could not be imported (it stays on disk: a
    /// restart tries again).
    #[error("cannot import the snapshot at index {index} an etcd member sent: {source}")]
    EtcdSnapshot {
        /// The snapshot's index.
        index: u64,
        /// Why.
        source: crate::backup::etcd_received::ReceivedError,
    },
    /// A received snapshot's file holds another index than raft's snapshot.
    #[error("snapshot file {} holds index {got}, raft expected {index}", path.display())]
    SnapshotIndex {
        /// Raft's snapshot index.
        index: u64,
        /// The file.
        path: PathBuf,
        /// The index the file holds.
        got: u64,
    },
    /// The cluster version is above the release this member acts as (etcd's
    /// `MustDetectDowngrade`): serving would apply entries it may not understand.
    #[error(
        "invalid downgrade; server version is lower than determined cluster version (current-server-version {server}, determined-cluster-version {cluster})"
    )]
    ServerTooOld {
        /// This member's server version.
        server: String,
        /// The cluster version it applied.
        cluster: String,
    },
    /// A downgrade is enabled to a release other than this (3.5) member's (etcd 3.5's
    /// `mustDetectDowngrade`).
    #[error(
        "invalid downgrade; server version is not allowed to join when downgrade is enabled (current-server-version {server}, target-cluster-version {target})"
    )]
    NotDowngradeTarget {
        /// This member's server version.
        server: String,
        /// The downgrade's target.
        target: String,
    },
    /// The backend was written by a newer release than this member's (etcd 3.6's
    /// schema validation).
    #[error("version \"{version}\" is not supported")]
    StorageTooNew {
        /// The backend's storage version, `X.Y`.
        version: String,
    },
    /// A thread panicked while applying a batch: the apply state cannot be trusted.
    #[error("a thread panicked while applying a batch")]
    ApplyInterrupted,
    /// The raft loop stopped on an error.
    #[error("raft: {0}")]
    Raft(RaftError),
    /// A switch entry names a vocabulary this member does not know.
    #[error(
        "the switch at index {index} names log format {format}, which this member does not know"
    )]
    UnknownLogFormat {
        /// The switch entry's index.
        index: u64,
        /// The format it names.
        format: u8,
    },
    /// The vocabulary a snapshot recorded cannot be read.
    #[error("installed snapshot: {0}")]
    Vocabulary(#[from] crate::machine::vocabulary::VocabularyError),
}

impl From<oxcd_storage::StorageError> for Fatal {
    fn from(e: oxcd_storage::StorageError) -> Fatal {
        Fatal::Backend(MvccError::Storage(e))
    }
}
