//! The vocabulary a member's raft log is written in: oxcd's own entries
//! (`oxcdpb.InternalRequest`, conf changes with oxcd's context), or etcd 3.5's
//! (`InternalRaftRequest` and v2 requests, conf changes with etcd's type numbers and
//! JSON contexts) for a member inside an etcd cluster (issue 35). The two cannot be
//! told apart by their bytes, so the member records which one its log speaks
//! (`meta/oxcd_log_vocabulary`) when it joins, and applies and proposes in it.
//!
//! Invariant: every member of one cluster reads the log in the same vocabulary: an
//! etcd cluster's members all write etcd's, and an oxcd member joins it in etcd's.

use oxcd_mvcc::{MvccError, Store};
use oxcd_storage::schema::META_LOG_VOCABULARY;

/// The vocabulary of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Vocabulary {
    /// oxcd's own entries.
    #[default]
    Oxcd,
    /// etcd 3.5's entries.
    Etcd,
}

impl Vocabulary {
    /// How [`Vocabulary::Etcd`] is recorded (`meta/oxcd_log_vocabulary`).
    pub const RECORDED_ETCD: &'static [u8] = b"etcd";

    /// The vocabulary `store` recorded (oxcd's when none was).
    pub fn of(store: &Store) -> Result<Vocabulary, MvccError> {
        Ok(match store.read_meta(META_LOG_VOCABULARY)? {
            Some(v) if v == Self::RECORDED_ETCD => Vocabulary::Etcd,
            _ => Vocabulary::Oxcd,
        })
    }

    /// Records this vocabulary in `store`'s backend.
    pub fn record(self, store: &Store) -> Result<(), MvccError> {
        let value = match self {
            Vocabulary::Oxcd => None,
            Vocabulary::Etcd => Some(Self::RECORDED_ETCD),
        };
        store
            .backend()
            .set_local_meta(META_LOG_VOCABULARY, value)
            .map_err(MvccError::from)
    }
}
