//! How much of the log a member keeps in memory, and when it marks a snapshot on disk.
//!
//! Two compactions, as etcd 3.6 has them:
//! - **In memory**, every [`MEMORY_COMPACT_EVERY`] applied entries: entries more than
//!   the catch-up count behind the applied index are let go, unless a follower that is
//!   in touch still needs them (a leader keeps everything after the lowest match index
//!   of its active followers, or after the snapshot one is being sent). Nothing is
//!   written: the WAL still holds those entries until the next mark. Before this the log
//!   held every entry since the last mark, up to `--snapshot-count` (100,000 in the
//!   benchmarks): most of a member's memory.
//! - **On disk** ([`Core::compact`], when the state machine asks, every
//!   `--snapshot-count` entries made durable): a snapshot mark in the WAL, the log cut to
//!   the catch-up entries whatever the followers need (as before; a follower that far
//!   behind gets a snapshot), and the WAL segments a restart no longer reads deleted
//!   (etcd keeps `--max-wals`, 5, of them whether needed or not; 0 keeps all).
//!
//! Invariants: the log is cut only at or below the applied index; the snapshot raft-rs
//! sees is always at or after the log's start (its position is replaced by the backend
//! dump's when it is sent); entries let go are freed off the raft loop when there are
//! many of them.

use raft::ProgressState;
use raft::prelude::Entry;

use super::{Core, snapshot_of};
use crate::RaftError;
use crate::disk::LogDisk;
use crate::node::{EventSink, Transport};
use crate::persist;

/// Applied entries between two compactions of the log in memory (etcd 3.6's
/// `memorySnapshotCount`).
pub(super) const MEMORY_COMPACT_EVERY: u64 = 100;

/// Entries let go at once below which they are freed on the raft loop (a thread per
/// compaction costs more than freeing a few hundred entries).
const FREE_INLINE_UP_TO: usize = 10_000;

impl<D: LogDisk, T: Transport, E: EventSink> Core<D, T, E> {
    /// After the applied index moved: lets go of the entries no one needs any more, once
    /// every [`MEMORY_COMPACT_EVERY`] applied entries.
    pub(super) fn compact_memory(&mut self) {
        if self.applied < self.memory_compacted_at + MEMORY_COMPACT_EVERY {
            return;
        }
        self.memory_compacted_at = self.applied;
        let upto = self.last_unneeded();
        let let_go = {
            let mut core = self.log.wl();
            if upto <= core.start.0 {
                return;
            }
            let Some(meta) = core.snapshot_meta_at(self.applied) else {
                return;
            };
            let let_go = core.compact(upto);
            core.forget_confs_to(upto);
            core.snapshot = Some(snapshot_of(meta));
            let_go
        };
        free_elsewhere(let_go);
    }

    /// The last index the log may let go of: the catch-up entries below the applied
    /// index stay, and on a leader whatever an active follower has yet to receive.
    fn last_unneeded(&self) -> u64 {
        let mut upto = self.applied.saturating_sub(self.catch_up_entries);
        let raft = &self.node.raft;
        if raft.state == raft::StateRole::Leader {
            for (id, pr) in raft.prs().iter() {
                if *id == raft.id || !pr.recent_active {
                    continue;
                }
                let has = match pr.state {
                    ProgressState::Snapshot => pr.pending_snapshot,
                    _ => pr.matched,
                };
                upto = upto.min(has);
            }
        }
        upto
    }

    /// Marks a snapshot at `index` (which the state machine made durable) in the WAL,
    /// cuts the log to the catch-up entries below it, keeping no entry at or below
    /// `floor`, and purges old segments.
    pub(super) fn compact(&mut self, index: u64, floor: u64) -> Result<(), RaftError> {
        let (meta, drop_to) = {
            let core = self.log.rl();
            // At the start itself the mark is still written: the log in memory may
            // already have been cut there.
            if index < core.start.0 || index > self.applied {
                return Ok(());
            }
            let Some(meta) = core.snapshot_meta_at(index) else {
                return Ok(());
            };
            let keep_from = index.saturating_sub(self.catch_up_entries);
            (meta, keep_from.max(floor.min(index)))
        };
        self.disk
            .mark_snapshot(index, &persist::encode_snapshot_meta(&meta));
        self.disk.sync()?;
        let let_go = {
            let mut core = self.log.wl();
            let let_go = core.compact(drop_to);
            core.forget_confs_to(index);
            if core
                .snapshot
                .as_ref()
                .is_none_or(|s| s.get_metadata().index <= index)
            {
                core.snapshot = Some(snapshot_of(meta));
            }
            let_go
        };
        let entries = let_go.len();
        free_elsewhere(let_go);
        // A restart replays from the newest mark: segments wholly at or below it are not
        // needed again and all go, which never keeps more than `--max-wals`; 0 keeps
        // every segment, as etcd's "unlimited".
        let removed = if self.max_wals == 0 {
            0
        } else {
            self.disk.purge(index, 1)?
        };
        tracing::info!(
            index,
            dropped_entries = entries,
            removed_segments = removed,
            "raft: compacted log"
        );
        Ok(())
    }
}

/// Frees entries the log let go: many of them on a short-lived thread of their own (a
/// compaction after a large load lets go of a gigabyte, whose freeing would hold up the
/// raft loop; freed here if no thread can be started), a few on the spot.
fn free_elsewhere(entries: Vec<Entry>) {
    if entries.len() <= FREE_INLINE_UP_TO {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("raft-log-free".into())
        .spawn(move || drop(entries));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Command;
    use crate::node::core::test_cluster::{Outbox, core_over, elected, node_config};

    /// Segments in `dir` after a single member wrote 600 entries to a WAL of 4 KiB
    /// segments, applied them and compacted at the last one, with `max_wals`.
    fn segments_left(dir: &std::path::Path, max_wals: usize) -> usize {
        use oxcd_storage::wal::Wal;
        let mut cfg = node_config(1);
        cfg.voters = vec![1];
        cfg.max_wals = max_wals;
        let wal = Wal::create(&dir.join("wal"), b"m", 4096).expect("create");
        let mut core = core_over(&cfg, wal, &Outbox::default());
        core.turn().expect("elected");
        for i in 0..600 {
            core.handle(Command::Propose {
                data: format!("put {i}").into_bytes(),
                format: None,
                done: Box::new(|r| r.expect("proposed")),
            })
            .expect("propose");
            core.turn().expect("turn");
        }
        core.turn().expect("turn");
        let applied = core.raw().raft.raft_log.committed;
        core.handle(Command::Applied {
            index: applied,
            format: None,
        })
        .expect("applied");
        core.handle(Command::Compact {
            index: applied,
            floor: 0,
        })
        .expect("compact");
        let mut wal = core.into_disk();
        wal.finish_purges();
        wal.segment_count()
    }

    /// A compaction deletes every segment a restart no longer reads, whatever
    /// `--max-wals` (a maximum); 0 keeps them all, as etcd's "unlimited".
    #[test]
    fn a_compaction_deletes_the_segments_below_the_mark_unless_max_wals_is_0() {
        let dir = tempfile::tempdir().expect("tempdir");
        let all = segments_left(&dir.path().join("a"), 0);
        assert!(
            all > 5,
            "600 entries fill more than 5 segments of 4 KiB: {all}"
        );
        assert_eq!(segments_left(&dir.path().join("b"), 5), 1);
    }

    /// A log in memory keeps the catch-up entries and what an active follower still
    /// needs, and no more; a slow follower catches up from entries, not a snapshot.
    #[test]
    fn memory_holds_catch_up_entries_and_what_followers_need() {
        let mut c = elected();
        c.propose(1000, false);
        for id in 1..=3 {
            let (first, last) = c.log_of(id);
            assert!(
                last - first < 10 + MEMORY_COMPACT_EVERY,
                "member {id} holds {first}..={last}"
            );
        }
        // Member 3 falls behind: the leader keeps what it has not received.
        let (_, behind) = c.log_of(3);
        c.propose(1000, true);
        let (first, last) = c.log_of(1);
        assert!(
            first <= behind + 1,
            "the leader let go of {behind}: holds {first}.."
        );
        assert!(last >= behind + 1000);
        let (first, _) = c.log_of(2);
        assert!(
            first > behind + 800,
            "the other follower keeps no more than its own"
        );
        // It catches up from entries, and the leader lets them go afterwards.
        c.settle(false);
        c.propose(MEMORY_COMPACT_EVERY as usize, false);
        assert_eq!(c.snapshots_sent, 0);
        for id in 1..=3 {
            let (first, last) = c.log_of(id);
            assert!(
                last - first < 10 + MEMORY_COMPACT_EVERY,
                "member {id} holds {first}..={last}"
            );
        }
        // The disk still holds every entry since the last mark.
        let replay = c.cores[0].0.disk_mut().replay();
        assert!(replay.entries.len() > 2000);
    }
}
