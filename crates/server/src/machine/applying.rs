//! Applying committed entries: one backend transaction per batch, each entry through
//! the one dispatch ([`apply::apply_entry`]), then the batch published (its revision and
//! applied index to readers, which linearizable reads wait on, then its events to
//! watchers) and the waiters completed. An [`Applying`] is the whole apply state: it is
//! used by one thread at a time, the apply thread or (for small plain batches) the raft
//! thread ([`super::apply_lane`]).
//!
//! Backend commits are not synced on their own (the WAL is durable); every
//! [`DURABLE_EVERY`], before a log compaction and at shutdown the commit is made durable.
//! A backend failure stops the member: it never skips an entry.
//!
//! A snapshot from the leader replaces the whole state: the peer service has already
//! written it to `member/snap/<index>.snapdata` (or `.snapdb`), or, from an etcd
//! leader, saved etcd's files, imported here first ([`etcd_received`]); it is installed
//! in one backend transaction and entries at or below its index are skipped from then
//! on.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use oxcd_raft::node::RaftHandle;
use oxcd_raft::{Entry, Snapshot};
use oxcd_storage::snapshot::{list_snapshots, snapshot_db_path, snapshot_path};

use crate::backup::etcd_received;
use crate::domains::membership;
use crate::domains::version::release::Release;
use crate::edge::metrics::timing::ApplyTiming;
use crate::machine::applied::{Applied, Outcome};
use crate::machine::applier::Applier;
use crate::machine::apply;
use crate::machine::fatal::Fatal;
use crate::machine::member::Replicated;
use crate::machine::vocabulary::{LiveVocabulary, LogVocabulary, Vocabulary};
use crate::machine::waiters::Waiters;
use oxcd_raft::node::format;
use oxcd_storage::batch::BatchTx;
use oxcd_storage::schema::META_LOG_VOCABULARY;

/// How often the backend is made durable while writes flow.
pub const DURABLE_EVERY: Duration = Duration::from_millis(100);

/// What applying needs.
pub struct ApplyParts {
    /// The replicated state it applies to (and whose watch feed it publishes to).
    pub state: Replicated,
    /// The raft loop, told what was applied and when to compact.
    pub raft: RaftHandle,
    /// Waiters to complete.
    pub waiters: Arc<Waiters>,
    /// Compact the raft log every this many applied entries (`--snapshot-count`).
    pub snapshot_count: u64,
    /// Where received snapshots are kept until installed (`member/snap`).
    pub snap_dir: PathBuf,
    /// The release this member acts as: a cluster version above it stops the loop.
    pub release: Release,
    /// How long each operation took to apply (`etcd_server_apply_duration_seconds`).
    pub timing: Arc<ApplyTiming>,
    /// The vocabulary the log is written in, published as it switches.
    pub vocabulary: LiveVocabulary,
}

/// The apply state: what applies, and how far it got.
pub struct Applying {
    parts: ApplyParts,
    progress: Progress,
}

impl Applying {
    /// Readies `parts` to apply after what the backend holds: the checks a member meets
    /// before applying anything (its release against the backend and the cluster
    /// version), and the clean-up a crash may have left.
    pub fn start(parts: ApplyParts) -> Result<Applying, Fatal> {
        let applied = parts.state.store.consistent_index();
        let progress = Progress {
            applied,
            cluster_version_changed: false,
            term: 0,
            durable_at: Instant::now(),
            dirty: false,
            snapshot_index: applied,
            vocabulary: parts.vocabulary.log(),
        };
        if progress.vocabulary.since > 0 {
            // A crash between a switch and the compaction after it left entries from
            // before the switch in the log: they go now.
            let _ = parts.raft.compact_past(progress.vocabulary.since);
        }
        parts.remove_snapshot_files(applied);
        crate::domains::version::storage::check_boot(&parts.state.store, parts.release)?;
        parts.check_cluster_version()?;
        Ok(Applying { parts, progress })
    }

    /// Applies `entries` (in log order, after everything applied before) in one backend
    /// transaction.
    pub fn apply_entries(&mut self, entries: &[Entry]) -> Result<(), Fatal> {
        let tx = self.parts.state.store.backend().begin_batch()?;
        self.parts
            .apply_entries(&mut self.progress, entries, tx, Sync::WhenDue)
    }

    /// [`Self::apply_entries`] unless that would wait for the backend (another write
    /// transaction open, or a defragmentation holding writers): false, nothing done.
    /// The commit is never made durable here, even when due: the next batch the apply
    /// thread commits, or its timer, makes it durable.
    pub fn try_apply_entries(&mut self, entries: &[Entry]) -> Result<bool, Fatal> {
        let Some(tx) = self.parts.state.store.backend().try_begin_batch()? else {
            return Ok(false);
        };
        self.parts
            .apply_entries(&mut self.progress, entries, tx, Sync::Never)?;
        Ok(true)
    }

    /// Replaces the state with the leader's snapshot `snap`.
    pub fn install(&mut self, snap: &Snapshot) -> Result<(), Fatal> {
        self.parts.install(&mut self.progress, snap)
    }

    /// Makes the last commit durable if it is not yet.
    pub fn make_durable(&mut self) -> Result<(), Fatal> {
        if self.progress.dirty {
            self.parts.commit_durable(&mut self.progress)?;
        }
        Ok(())
    }

    /// Whether applying `count` more entries now is plain work: in the log's own
    /// vocabulary, with no durable commit or log compaction due.
    pub fn plain_now(&self, count: usize) -> bool {
        let p = &self.progress;
        let store = &self.parts.state.store;
        p.vocabulary.vocabulary == Vocabulary::Oxcd
            && p.durable_at.elapsed() < DURABLE_EVERY
            && (p.applied + count as u64).saturating_sub(p.snapshot_index)
                < self.parts.snapshot_count
            // While a snapshot is streamed every commit is synced.
            && !store.backend().commits_forced_durable()
            // A long range holding the key index would hold the write.
            && store.index_free()
    }
}

impl ApplyParts {
    /// Refuses to go on when the cluster version recorded (at start, in an installed
    /// snapshot, or applied) is above this member's release ([`Release::check_cluster`]).
    fn check_cluster_version(&self) -> Result<(), Fatal> {
        let recorded = crate::domains::version::cluster::read(&self.state.store);
        match recorded {
            Ok(v) => self.release.check_cluster(v.cluster.as_ref(), &v.downgrade),
            // Unreadable meta is the backend's fault, which the first apply meets too.
            Err(_) => Ok(()),
        }
    }

    fn apply_entries(
        &self,
        state: &mut Progress,
        entries: &[Entry],
        tx: BatchTx<'_>,
        sync: Sync,
    ) -> Result<(), Fatal> {
        // Events are recorded only while someone watches; a batch applied without them is
        // published as a gap, which a stream that started meanwhile reads from the history.
        let record_events = self.state.watch_hub.has_streams();
        let before = self.state.store.current_rev();
        let mut ctx = Applier::new(
            &self.state.store,
            &self.state.leases,
            &self.state.auth,
            &self.state.membership,
            &self.raft,
            &tx,
            record_events,
        );
        let mut outcomes: Vec<(u64, Outcome)> = Vec::new();
        let mut switched = false;
        for e in entries {
            if e.index <= state.applied {
                continue; // already in the backend (replayed after restart)
            }
            ctx.index = e.index;
            if let Some(to) = switch_in(e)? {
                // Recorded with the applied index it holds from: a restart replays what
                // follows in the vocabulary it was written in.
                if to.vocabulary == Vocabulary::Oxcd {
                    // Keepalives were not replicated: no member but the leader knows
                    // when a lease was last renewed. Every lease gets its whole TTL from
                    // here, as a new etcd leader gives it, so none expires early.
                    self.state.leases.promote_as_etcd(Duration::ZERO);
                }
                state.vocabulary = to;
                tx.put_meta(META_LOG_VOCABULARY, &to.recorded().unwrap_or_default())?;
                switched = true;
                tracing::info!(
                    index = e.index,
                    vocabulary = ?to.vocabulary,
                    "the log's vocabulary switches"
                );
            } else if let Some(outcome) =
                apply::apply_entry(&mut ctx, e, &self.timing, state.vocabulary.vocabulary)?
            {
                if let (_, Ok(Applied::ClusterVersion(Some(_)))) = &outcome {
                    state.cluster_version_changed = true;
                }
                outcomes.push(outcome);
            }
            state.applied = e.index;
            state.term = e.term;
        }
        // After a switch the log is compacted past it at once: a member that joins or
        // falls behind gets a snapshot, never entries from before the switch.
        let durable = sync == Sync::WhenDue
            && (switched
                || state.durable_at.elapsed() >= DURABLE_EVERY
                || state.applied.saturating_sub(state.snapshot_index) >= self.snapshot_count);
        let written = ctx.finish();
        tx.commit(state.applied, state.term, durable)?;
        // Readers (and linearizable reads waiting for this index) see the batch from here.
        self.state.store.publish(&written, state.applied);
        match written.events {
            Some(events) => self.state.watch_hub.publish(written.rev, events),
            None if written.rev > before => self.state.watch_hub.publish_gap(written.rev),
            None => {}
        }
        state.dirty = !durable;
        if durable {
            self.after_durable(state, switched);
        }
        // Raft reads it when it next wakes (waking it for this alone cost every member a
        // context switch per batch); stored before the waiters are answered, so that a
        // conf change proposed as soon as the one before it is answered finds raft
        // knowing that one applied.
        let _ = self
            .raft
            .applied_quietly(state.applied, Some(state.vocabulary.vocabulary.format()));
        for (id, outcome) in outcomes {
            self.waiters.complete(id, outcome);
        }
        // After the waiters of the entries before it: a proposer that sees the switch
        // and no answer knows its entry is not in the log (`Writes::settle_written`).
        if switched {
            self.vocabulary.set(state.vocabulary);
        }
        // A cluster version above this member's release stops it, but only once it has
        // applied everything committed: a member catching up replays versions the
        // cluster has since left (a downgrade's 3.6 before its 3.5), which etcd stops on.
        if state.cluster_version_changed && state.applied >= self.raft.status().commit() {
            state.cluster_version_changed = false;
            self.check_cluster_version()?;
        }
        Ok(())
    }

    fn commit_durable(&self, state: &mut Progress) -> Result<(), Fatal> {
        let tx = self.state.store.backend().begin_batch()?;
        tx.commit(state.applied, state.term, true)?;
        state.dirty = false;
        self.after_durable(state, false);
        Ok(())
    }

    /// Replaces the state with the snapshot raft accepted, from the file the peer service
    /// received it into.
    fn install(&self, state: &mut Progress, snap: &Snapshot) -> Result<(), Fatal> {
        let index = snap.get_metadata().index;
        if index <= state.applied {
            self.remove_snapshot_files(state.applied);
            return Ok(());
        }
        let started = Instant::now();
        let mut whole = snapshot_db_path(&self.snap_dir, index);
        if !whole.exists() && etcd_received::is_saved(&self.snap_dir, index) {
            // An etcd leader's: imported now (the peer service only saved it).
            let meta = snap.get_metadata();
            let conf_state = oxcd_raft::persist::encode_conf_state(meta.get_conf_state());
            whole = etcd_received::import(&self.snap_dir, (index, meta.term, &conf_state))
                .map_err(|source| Fatal::EtcdSnapshot { index, source })?;
        }
        let path = if whole.exists() {
            whole
        } else {
            snapshot_path(&self.snap_dir, index)
        };
        if !path.exists() {
            return Err(Fatal::SnapshotMissing {
                index,
                path,
                applied: state.applied,
            });
        }
        let (got, term) = self.state.store.install_snapshot(&path)?;
        if got != index {
            return Err(Fatal::SnapshotIndex { index, path, got });
        }
        self.state.leases.reload(&self.state.store)?;
        self.state.auth.reload(self.state.store.backend())?;
        self.state
            .membership
            .replace(membership::table::load(self.state.store.backend())?);
        self.check_cluster_version()?;
        state.vocabulary = LogVocabulary::of(&self.state.store)?;
        self.vocabulary.set(state.vocabulary);
        tracing::info!(
            index,
            term,
            revision = self.state.store.current_rev(),
            took_ms = started.elapsed().as_millis() as u64,
            "installed the leader's snapshot"
        );
        self.state
            .watch_hub
            .publish_gap(self.state.store.current_rev());
        state.applied = index;
        state.term = term;
        state.snapshot_index = index;
        state.dirty = false;
        state.durable_at = Instant::now();
        self.remove_snapshot_files(index);
        // Linearizable reads waiting for this index go on once every domain is reloaded.
        self.state.store.publish_index(index);
        let _ = self
            .raft
            .applied(index, Some(state.vocabulary.vocabulary.format()));
        Ok(())
    }

    /// Deletes received snapshot files the backend already covers.
    fn remove_snapshot_files(&self, applied: u64) {
        for (index, path) in list_snapshots(&self.snap_dir).unwrap_or_default() {
            if index <= applied {
                let _ = std::fs::remove_file(&path);
            }
        }
        etcd_received::remove_covered(&self.snap_dir, applied);
    }

    /// After a durable commit at `state.applied`: compact the raft log when due, or
    /// `now` (after a switch of vocabulary).
    fn after_durable(&self, state: &mut Progress, now: bool) {
        state.durable_at = Instant::now();
        if now || state.applied.saturating_sub(state.snapshot_index) >= self.snapshot_count {
            // The raft loop learns `applied` first (same channel, in order).
            let format = Some(state.vocabulary.vocabulary.format());
            let _ = self.raft.applied(state.applied, format);
            let _ = self.raft.compact(state.applied, state.vocabulary.since);
            state.snapshot_index = state.applied;
        }
    }
}

/// Whether a batch's commit may be made durable.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sync {
    /// When due (every [`DURABLE_EVERY`], before a log compaction, after a switch).
    WhenDue,
    /// Never: the batch is applied where a sync must not wait (the raft thread).
    Never,
}

/// How far applying got.
struct Progress {
    applied: u64,
    /// A cluster version was applied and not yet checked against the release.
    cluster_version_changed: bool,
    term: u64,
    durable_at: Instant,
    dirty: bool,
    snapshot_index: u64,
    /// The log's vocabulary after `applied`.
    vocabulary: LogVocabulary,
}

/// The vocabulary a switch entry `e` starts (None: `e` is no switch).
fn switch_in(e: &Entry) -> Result<Option<LogVocabulary>, Fatal> {
    if e.entry_type != oxcd_raft::EntryType::EntryNormal {
        return Ok(None);
    }
    let Some(format) = format::switched_to(&e.data) else {
        return Ok(None);
    };
    let vocabulary = Vocabulary::of_format(format).ok_or(Fatal::UnknownLogFormat {
        index: e.index,
        format,
    })?;
    Ok(Some(LogVocabulary {
        vocabulary,
        since: e.index,
    }))
}
