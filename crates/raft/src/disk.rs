//! Where the raft log is made durable: the [`LogDisk`] the raft core writes records to,
//! with two implementations — the member's WAL ([`oxcd_storage::wal::Wal`]) and
//! [`MemDisk`], a WAL in memory for simulations, which loses on a simulated crash
//! exactly the records a real one could lose (those not yet synced).
//!
//! Invariants:
//! - Records become durable only at [`LogDisk::sync`], all of them at once, in order.
//! - Replaying a disk ([`MemDisk::replay`]) gives what [`oxcd_storage::wal::Wal::open`]
//!   gives for the same durable records: the newest hard state and snapshot mark, and
//!   the entries after the mark, an overwritten suffix dropped.

use oxcd_storage::wal::{Replay, Wal};

use crate::RaftError;

/// The durable side of the raft log: records are buffered, then made durable together.
pub trait LogDisk: Send + 'static {
    /// Buffers an entry; appending at or below the last index replaces the suffix.
    fn append_entry(&mut self, index: u64, data: &[u8]);
    /// Buffers a hard state.
    fn set_hard_state(&mut self, data: &[u8]);
    /// Buffers the installation of a leader's snapshot: the log restarts after `index`.
    fn install_snapshot(&mut self, index: u64, data: &[u8]);
    /// Buffers a snapshot mark: entries up to `index` are held by the state machine.
    fn mark_snapshot(&mut self, index: u64, data: &[u8]);
    /// Makes every buffered record durable.
    fn sync(&mut self) -> Result<(), RaftError>;
    /// Drops what is no longer needed below `upto`, keeping at least `keep` files;
    /// returns how many files went.
    fn purge(&mut self, upto: u64, keep: usize) -> Result<usize, RaftError>;
}

impl LogDisk for Wal {
    fn append_entry(&mut self, index: u64, data: &[u8]) {
        Wal::append_entry(self, index, data)
    }
    fn set_hard_state(&mut self, data: &[u8]) {
        Wal::set_hard_state(self, data)
    }
    fn install_snapshot(&mut self, index: u64, data: &[u8]) {
        Wal::install_snapshot(self, index, data)
    }
    fn mark_snapshot(&mut self, index: u64, data: &[u8]) {
        Wal::mark_snapshot(self, index, data)
    }
    fn sync(&mut self) -> Result<(), RaftError> {
        Ok(Wal::sync(self)?)
    }
    fn purge(&mut self, upto: u64, keep: usize) -> Result<usize, RaftError> {
        Ok(Wal::purge(self, upto, keep)?)
    }
}

/// One WAL record.
#[derive(Debug, Clone)]
enum Record {
    Entry(u64, Vec<u8>),
    HardState(Vec<u8>),
    Install(u64, Vec<u8>),
    Mark(u64, Vec<u8>),
}

/// A WAL in memory: durable records and records buffered since the last sync.
#[derive(Debug, Clone, Default)]
pub struct MemDisk {
    metadata: Vec<u8>,
    durable: Vec<Record>,
    pending: Vec<Record>,
}

impl MemDisk {
    /// An empty disk whose WAL was created with `metadata`.
    pub fn new(metadata: Vec<u8>) -> MemDisk {
        MemDisk {
            metadata,
            ..MemDisk::default()
        }
    }

    /// A crash: everything not yet synced is gone.
    pub fn crash(&mut self) {
        self.pending.clear();
    }

    /// What opening this WAL would give: its durable records replayed.
    pub fn replay(&self) -> Replay {
        let mut replay = Replay {
            metadata: self.metadata.clone(),
            ..Replay::default()
        };
        for r in &self.durable {
            match r {
                Record::Entry(index, data) => {
                    replay.entries.retain(|(i, _)| i < index);
                    replay.entries.push((*index, data.clone()));
                }
                Record::HardState(data) => replay.hard_state = Some(data.clone()),
                Record::Install(index, data) => {
                    replay.entries.clear();
                    replay.snapshot = Some((*index, data.clone()));
                }
                Record::Mark(index, data) => replay.snapshot = Some((*index, data.clone())),
            }
        }
        if let Some((snap, _)) = &replay.snapshot {
            let snap = *snap;
            replay.entries.retain(|(i, _)| *i > snap);
        }
        replay
    }

    /// Rewrites the durable records as their replay (the same replay, fewer records),
    /// so that a long simulation's disk does not grow without bound.
    fn rewrite(&mut self) {
        let replay = self.replay();
        let mut kept = Vec::new();
        if let Some(hs) = replay.hard_state {
            kept.push(Record::HardState(hs));
        }
        if let Some((index, data)) = replay.snapshot {
            kept.push(Record::Mark(index, data));
        }
        kept.extend(replay.entries.into_iter().map(|(i, d)| Record::Entry(i, d)));
        self.durable = kept;
    }
}

impl LogDisk for MemDisk {
    fn append_entry(&mut self, index: u64, data: &[u8]) {
        self.pending.push(Record::Entry(index, data.to_vec()));
    }
    fn set_hard_state(&mut self, data: &[u8]) {
        self.pending.push(Record::HardState(data.to_vec()));
    }
    fn install_snapshot(&mut self, index: u64, data: &[u8]) {
        self.pending.push(Record::Install(index, data.to_vec()));
    }
    fn mark_snapshot(&mut self, index: u64, data: &[u8]) {
        self.pending.push(Record::Mark(index, data.to_vec()));
    }
    fn sync(&mut self) -> Result<(), RaftError> {
        if !self.pending.is_empty() {
            self.durable.append(&mut self.pending);
        }
        Ok(())
    }
    fn purge(&mut self, _upto: u64, _keep: usize) -> Result<usize, RaftError> {
        self.rewrite();
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_loses_only_what_was_not_synced() {
        let mut d = MemDisk::new(b"meta".to_vec());
        d.append_entry(1, b"a");
        d.append_entry(2, b"b");
        d.set_hard_state(b"hs1");
        d.sync().expect("sync");
        d.append_entry(3, b"c");
        d.crash();
        let r = d.replay();
        assert_eq!(r.metadata, b"meta");
        assert_eq!(r.entries, vec![(1, b"a".to_vec()), (2, b"b".to_vec())]);
        assert_eq!(r.hard_state.as_deref(), Some(&b"hs1"[..]));
    }

    #[test]
    fn replay_follows_the_wal_rules() {
        let mut d = MemDisk::default();
        for (i, e) in [(1, "a"), (2, "b"), (3, "c"), (2, "B")] {
            d.append_entry(i, e.as_bytes());
        }
        d.sync().expect("sync");
        assert_eq!(
            d.replay().entries,
            vec![(1, b"a".to_vec()), (2, b"B".to_vec())],
            "an overwrite drops the old suffix"
        );
        d.mark_snapshot(1, b"s1");
        d.sync().expect("sync");
        assert_eq!(d.replay().entries, vec![(2, b"B".to_vec())]);
        d.install_snapshot(10, b"s10");
        d.append_entry(11, b"k");
        d.sync().expect("sync");
        let r = d.replay();
        assert_eq!(r.snapshot, Some((10, b"s10".to_vec())));
        assert_eq!(r.entries, vec![(11, b"k".to_vec())]);
        d.purge(10, 1).expect("purge");
        let again = d.replay();
        assert_eq!((again.snapshot, again.entries), (r.snapshot, r.entries));
    }
}
