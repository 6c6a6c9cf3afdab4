//! oxcd-raft: the raft-rs driver. Knows nothing of MVCC or the etcd API.
//!
//! Owns: the raft log as raft-rs sees it ([`log_store::LogStore`], an in-memory copy of the
//! WAL's entries), its durable form ([`persist`]: WAL records, written to a
//! [`disk::LogDisk`]), the raft core ([`node::core::Core`]: proposals, ticks, peer
//! messages, ReadIndex batching, log compaction, the Ready handling) and the single
//! thread that drives it in a member ([`node::start`]), publishing the leader and term
//! ([`node::RaftHandle::leadership`]) for components that act only on the leader.
//!
//! Invariants:
//! - Entries and hard state are fdatasync'ed to the WAL (one sync per Ready) before raft
//!   is told they are persisted; nothing is acknowledged before that.
//! - Committed entries reach the state machine in log order exactly once per process
//!   life, starting after the applied index the state machine reported at start.
//! - The log is compacted only up to an index the state machine has made durable.
//! - Transport, disk and time are the core's owner's: the core sends through a
//!   [`node::Transport`], writes to a [`disk::LogDisk`] and hands events to a
//!   [`node::EventSink`]; it ticks when told. The raft thread ticks on the wall clock
//!   (`--heartbeat-interval`); a simulation runs many cores in one thread, seeded.

pub mod disk;
pub mod log_store;
pub mod logger;
pub mod node;
pub mod persist;

pub use raft::prelude::{
    ConfChange, ConfChangeType, ConfState, Entry, EntryType, HardState, Message, MessageType,
    Snapshot, SnapshotMetadata,
};

/// Errors from the raft driver.
#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    /// The WAL or another file failed.
    #[error(transparent)]
    Storage(#[from] oxcd_storage::StorageError),
    /// raft-rs refused.
    #[error("raft: {0}")]
    Raft(#[from] raft::Error),
    /// A WAL record did not decode as what it should hold.
    #[error("wal: {0}")]
    Decode(String),
    /// The proposal was dropped (no leader, or leadership is being transferred).
    #[error("proposal dropped")]
    ProposalDropped,
    /// The raft loop has stopped.
    #[error("raft stopped")]
    Stopped,
    /// The raft thread's epoll or eventfd could not be made.
    #[error("raft thread's wait ({what}): {source}")]
    Wait {
        /// Which part failed.
        what: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// The leader changed while a read was waiting.
    #[error("leader changed")]
    LeaderChanged,
    /// The proposal was written in another format than the one the leader's log now ends
    /// in (a switch came first, [`node::format`]): write it again in the new format.
    #[error("the log's format switched before the proposal")]
    FormatSwitched {
        /// The proposal's data, given back.
        data: Vec<u8>,
    },
}
