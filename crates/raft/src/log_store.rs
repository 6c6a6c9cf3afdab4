//! The raft log as raft-rs reads it: an in-memory copy of what the WAL holds.
//!
//! Shared between the raft loop (which appends after each WAL sync) and raft-rs's
//! `RawNode` (which reads through the [`raft::Storage`] trait). Entries before
//! `first_index()` have been compacted into a snapshot held by the state machine.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use raft::prelude::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, StorageError};

/// The log's contents.
#[derive(Debug, Default)]
pub struct LogCore {
    /// Latest hard state.
    pub hard_state: HardState,
    /// The configuration: the state machine's at start (or the snapshot's), then each
    /// conf change's as the state machine applies it ([`LogCore::apply_conf`]).
    pub conf_state: ConfState,
    /// Configurations replaced since then: (the index of the change that replaced it,
    /// the configuration before it), in log order; what [`LogCore::conf_state_at`] reads.
    pub replaced_confs: Vec<(u64, ConfState)>,
    /// The entry just before the first one held: (index, term).
    pub start: (u64, u64),
    /// Entries `start.0 + 1 ..`, contiguous.
    pub entries: Vec<Entry>,
    /// The snapshot raft-rs should see when it needs one (set by the state machine).
    pub snapshot: Option<Snapshot>,
}

impl LogCore {
    /// Index of the last entry (or of the compaction point if none are held).
    pub fn last_index(&self) -> u64 {
        self.start.0 + self.entries.len() as u64
    }

    /// Appends entries from the leader or the local proposal, replacing any conflicting
    /// suffix; entries must connect to the log.
    pub fn append(&mut self, ents: &[Entry]) -> Result<(), raft::Error> {
        let Some(first) = ents.first() else {
            return Ok(());
        };
        self.cut_for(first.index)?;
        self.entries.extend_from_slice(ents);
        Ok(())
    }

    /// [`LogCore::append`] taking the entries by value (no copy: the log replayed at
    /// start can be most of a member's memory).
    pub fn append_owned(&mut self, ents: Vec<Entry>) -> Result<(), raft::Error> {
        let Some(first) = ents.first() else {
            return Ok(());
        };
        self.cut_for(first.index)?;
        self.entries.extend(ents);
        Ok(())
    }

    /// Checks that entries starting at `first` connect to the log and drops the
    /// conflicting suffix they replace.
    fn cut_for(&mut self, first: u64) -> Result<(), raft::Error> {
        if first <= self.start.0 || first > self.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Other(
                format!(
                    "append at {} does not connect to log {}..={}",
                    first,
                    self.start.0,
                    self.last_index()
                )
                .into(),
            )));
        }
        self.entries.truncate((first - self.start.0 - 1) as usize);
        Ok(())
    }

    /// The state machine applied the conf change at `index`, giving `conf`.
    pub fn apply_conf(&mut self, index: u64, conf: ConfState) {
        let before = std::mem::replace(&mut self.conf_state, conf);
        self.replaced_confs.push((index, before));
    }

    /// The configuration in force once the entry at `index` is applied (a snapshot at
    /// `index` carries it).
    pub fn conf_state_at(&self, index: u64) -> ConfState {
        self.replaced_confs
            .iter()
            .find(|(changed_at, _)| *changed_at > index)
            .map_or(&self.conf_state, |(_, before)| before)
            .clone()
    }

    /// Forgets the configurations replaced at or before `index` (a snapshot there holds
    /// what followed them).
    pub fn forget_confs_to(&mut self, index: u64) {
        self.replaced_confs
            .retain(|(changed_at, _)| *changed_at > index);
    }

    /// Lets go of entries up to and including `index` (which must be held): they are
    /// returned for the caller to free where it costs nothing (after a large load,
    /// freeing a gigabyte of entries under the log's lock held raft-rs and every write
    /// for tens of milliseconds).
    #[must_use = "the entries let go are to be dropped off the raft loop"]
    pub fn compact(&mut self, index: u64) -> Vec<Entry> {
        if index <= self.start.0 || index > self.last_index() {
            return Vec::new();
        }
        let n = (index - self.start.0) as usize;
        let term = self.entries[n - 1].term;
        let rest = self.entries.split_off(n);
        self.start = (index, term);
        std::mem::replace(&mut self.entries, rest)
    }

    /// Replaces the whole log with a snapshot's position.
    pub fn apply_snapshot(&mut self, meta: &SnapshotMetadata) {
        self.entries.clear();
        self.start = (meta.index, meta.term);
        self.conf_state = meta.get_conf_state().clone();
        self.replaced_confs.clear();
        if self.hard_state.commit < meta.index {
            self.hard_state.commit = meta.index;
        }
        if self.hard_state.term < meta.term {
            self.hard_state.term = meta.term;
        }
    }

    /// The position of a snapshot at `index`: its term and the configuration in force
    /// there (None if the log holds no term for `index`).
    pub fn snapshot_meta_at(&self, index: u64) -> Option<SnapshotMetadata> {
        let mut meta = SnapshotMetadata {
            index,
            term: self.term_of(index)?,
            ..Default::default()
        };
        meta.set_conf_state(self.conf_state_at(index));
        Some(meta)
    }

    /// The term of the entry at `index`, if known.
    pub fn term_of(&self, index: u64) -> Option<u64> {
        if index == self.start.0 {
            return Some(self.start.1);
        }
        if index < self.start.0 || index > self.last_index() {
            return None;
        }
        Some(self.entries[(index - self.start.0 - 1) as usize].term)
    }
}

/// The shared log handle given to raft-rs.
#[derive(Debug, Clone, Default)]
pub struct LogStore {
    core: Arc<RwLock<LogCore>>,
}

impl LogStore {
    /// A store over `core`.
    pub fn new(core: LogCore) -> LogStore {
        LogStore {
            core: Arc::new(RwLock::new(core)),
        }
    }

    /// Reads the log. A poisoned lock is recovered: every mutation is a single call.
    pub fn rl(&self) -> RwLockReadGuard<'_, LogCore> {
        self.core.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the log.
    pub fn wl(&self) -> RwLockWriteGuard<'_, LogCore> {
        self.core.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl raft::Storage for LogStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        let core = self.rl();
        Ok(RaftState {
            hard_state: core.hard_state.clone(),
            conf_state: core.conf_state.clone(),
        })
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        let core = self.rl();
        if low <= core.start.0 {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > core.last_index() + 1 {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let lo = (low - core.start.0 - 1) as usize;
        let hi = (high - core.start.0 - 1) as usize;
        let mut ents = core.entries[lo..hi].to_vec();
        raft::util::limit_size(&mut ents, max_size.into());
        Ok(ents)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let core = self.rl();
        if idx < core.start.0 {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        core.term_of(idx)
            .ok_or(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.rl().start.0 + 1)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(self.rl().last_index())
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        let core = self.rl();
        match &core.snapshot {
            Some(s) if s.get_metadata().index >= request_index => Ok(s.clone()),
            _ => Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::Storage;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            index,
            term,
            ..Default::default()
        }
    }

    #[test]
    fn append_truncate_compact() {
        let store = LogStore::default();
        store
            .wl()
            .append(&[entry(1, 1), entry(2, 1), entry(3, 1)])
            .expect("append");
        store.wl().append(&[entry(2, 2)]).expect("overwrite");
        assert_eq!(store.last_index().expect("last"), 2);
        assert_eq!(store.term(2).expect("term"), 2);
        assert!(store.wl().append(&[entry(5, 2)]).is_err(), "gap refused");
        let _ = store.wl().compact(1);
        assert_eq!(store.first_index().expect("first"), 2);
        assert_eq!(
            store.initial_state().expect("state").conf_state,
            ConfState::default()
        );
        assert_eq!(store.term(1).expect("term at start"), 1);
        assert!(matches!(
            store.entries(1, 2, None, GetEntriesContext::empty(false)),
            Err(raft::Error::Store(StorageError::Compacted))
        ));
        assert_eq!(
            store
                .entries(2, 3, None, GetEntriesContext::empty(false))
                .expect("entries")
                .len(),
            1
        );
    }

    #[test]
    fn the_configuration_at_an_index_is_the_one_applied_by_then() {
        let conf = |voters: &[u64]| ConfState {
            voters: voters.to_vec(),
            ..Default::default()
        };
        let mut core = LogCore {
            conf_state: conf(&[1]),
            ..Default::default()
        };
        core.apply_conf(5, conf(&[1, 2]));
        core.apply_conf(9, conf(&[1, 2, 3]));
        assert_eq!(core.conf_state_at(4), conf(&[1]));
        assert_eq!(core.conf_state_at(5), conf(&[1, 2]));
        assert_eq!(core.conf_state_at(8), conf(&[1, 2]));
        assert_eq!(core.conf_state_at(9), conf(&[1, 2, 3]));
        assert_eq!(core.conf_state_at(100), conf(&[1, 2, 3]));
        core.forget_confs_to(5);
        assert_eq!(core.conf_state_at(6), conf(&[1, 2]));
        assert_eq!(core.conf_state, conf(&[1, 2, 3]));
    }
}
