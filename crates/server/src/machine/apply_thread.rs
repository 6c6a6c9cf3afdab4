//! The apply thread: takes committed entries from the raft loop, applies them to the
//! MVCC store in one backend transaction per batch, then publishes the batch's revision
//! and events (to readers, then to watchers), completes the waiters and publishes the
//! applied index (which linearizable reads wait on).
//!
//! Backend commits are not synced on their own (the WAL is durable); every
//! [`DURABLE_EVERY`], before a log compaction and at shutdown the commit is made durable.
//! A backend failure stops the member: it never skips an entry.
//!
//! A snapshot from the leader replaces the whole state: the peer service has already
//! written it to `member/snap/<index>.snapdata`; it is installed in one backend
//! transaction and entries at or below its index are skipped from then on.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::InternalRequest;
use oxcd_mvcc::Store;
use oxcd_raft::node::{Event, RaftHandle};
use oxcd_raft::{Entry, EntryType, Snapshot};
use oxcd_storage::snapshot::{list_snapshots, snapshot_path};
use prost::Message as _;
use tokio::sync::watch;

use crate::domains::auth::AuthStore;
use crate::domains::lease::Lessor;
use crate::domains::membership::{self, Membership};
use crate::domains::watch::WatchHub;
use crate::machine::apply::{self, Applier, ApplyError};
use crate::machine::waiters::{Outcome, Waiters};

/// How often the backend is made durable while writes flow.
pub const DURABLE_EVERY: Duration = Duration::from_millis(100);

/// What the apply thread needs.
pub struct ApplyLoop {
    /// The store to apply to.
    pub store: Arc<Store>,
    /// Every lease and its keys.
    pub leases: Arc<Lessor>,
    /// Users, roles and the auth revision.
    pub auth: Arc<AuthStore>,
    /// The members and the ids removed.
    pub membership: Arc<Membership>,
    /// Where each committed batch's events go, after the commit.
    pub watch_hub: Arc<WatchHub>,
    /// The raft loop, told what was applied and when to compact.
    pub raft: RaftHandle,
    /// Committed entries from the raft loop.
    pub events: Receiver<Event>,
    /// Waiters to complete.
    pub waiters: Arc<Waiters>,
    /// Published applied index.
    pub applied: watch::Sender<u64>,
    /// Compact the raft log every this many applied entries (`--snapshot-count`).
    pub snapshot_count: u64,
    /// Where received snapshots are kept until installed (`member/snap`).
    pub snap_dir: PathBuf,
}

impl ApplyLoop {
    /// Runs the loop on its own thread until the raft loop's events end. Returns the
    /// fatal error that stopped it, if any.
    pub fn spawn(self) -> std::io::Result<JoinHandle<Result<(), String>>> {
        std::thread::Builder::new()
            .name("apply".into())
            .spawn(move || {
                let waiters = self.waiters.clone();
                let res = self.run();
                waiters.fail_all(EtcdError::Stopped);
                if let Err(e) = &res {
                    tracing::error!("apply loop stopped: {e}");
                }
                res
            })
    }

    fn run(self) -> Result<(), String> {
        let mut state = State {
            applied: self.store.consistent_index(),
            term: 0,
            durable_at: Instant::now(),
            dirty: false,
            snapshot_index: self.store.consistent_index(),
        };
        self.remove_snapshot_files(state.applied);
        loop {
            match self.events.recv_timeout(DURABLE_EVERY) {
                Ok(Event::Committed(mut entries)) => {
                    // Take whatever else is already queued: one backend commit for all.
                    let mut snapshot = None;
                    while entries.len() < 10_000 {
                        match self.events.try_recv() {
                            Ok(Event::Committed(more)) => entries.extend(more),
                            Ok(Event::Snapshot(s)) => {
                                snapshot = Some(s);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.apply_entries(&mut state, &entries)?;
                    if let Some(s) = snapshot {
                        self.install(&mut state, &s)?;
                    }
                }
                Ok(Event::Snapshot(s)) => self.install(&mut state, &s)?,
                Err(RecvTimeoutError::Timeout) => {
                    if state.dirty {
                        self.commit_durable(&mut state)?;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    if state.dirty {
                        self.commit_durable(&mut state)?;
                    }
                    return Ok(());
                }
            }
        }
    }

    fn apply_entries(&self, state: &mut State, entries: &[Entry]) -> Result<(), String> {
        let tx = self
            .store
            .backend()
            .begin_batch()
            .map_err(|e| e.to_string())?;
        // Events are recorded only while someone watches; a batch applied without them is
        // published as a gap, which a stream that started meanwhile reads from the history.
        let record_events = self.watch_hub.has_streams();
        let before = self.store.current_rev();
        let mut ctx = Applier::new(
            &self.store,
            &self.leases,
            &self.auth,
            &self.membership,
            &tx,
            record_events,
        );
        let mut outcomes: Vec<(u64, Outcome)> = Vec::new();
        for e in entries {
            if e.index <= state.applied {
                continue; // already in the backend (replayed after restart)
            }
            ctx.index = e.index;
            if e.entry_type == EntryType::EntryNormal && !e.data.is_empty() {
                match InternalRequest::decode(e.data.as_ref()) {
                    Ok(InternalRequest {
                        id,
                        op: Some(op),
                        auth,
                    }) => match apply::apply(&mut ctx, &op, auth.as_ref()) {
                        Ok(applied) => outcomes.push((id, Ok(applied))),
                        Err(ApplyError::Request(err)) => outcomes.push((id, Err(err))),
                        Err(fatal @ ApplyError::Fatal(_)) => return Err(fatal.to_string()),
                    },
                    // Same bytes on every member, so every member skips it alike.
                    Ok(InternalRequest { op: None, .. }) => {
                        tracing::warn!(index = e.index, "empty request in log")
                    }
                    Err(err) => tracing::error!(index = e.index, "undecodable log entry: {err}"),
                }
            } else if e.entry_type == EntryType::EntryConfChange {
                let (id, outcome) =
                    membership::apply::apply_conf_change(&self.membership, &self.raft, &tx, e)?;
                outcomes.push((id, outcome));
            }
            state.applied = e.index;
            state.term = e.term;
        }
        let durable = state.durable_at.elapsed() >= DURABLE_EVERY
            || state.applied.saturating_sub(state.snapshot_index) >= self.snapshot_count;
        let written = ctx.finish();
        tx.commit(state.applied, state.term, durable)
            .map_err(|e| e.to_string())?;
        self.store.publish(&written, state.applied);
        match written.events {
            Some(events) => self.watch_hub.publish(written.rev, events),
            None if written.rev > before => self.watch_hub.publish_gap(written.rev),
            None => {}
        }
        state.dirty = !durable;
        if durable {
            self.after_durable(state);
        }
        for (id, outcome) in outcomes {
            self.waiters.complete(id, outcome);
        }
        self.applied.send_replace(state.applied);
        let _ = self.raft.applied(state.applied);
        Ok(())
    }

    fn commit_durable(&self, state: &mut State) -> Result<(), String> {
        let tx = self
            .store
            .backend()
            .begin_batch()
            .map_err(|e| e.to_string())?;
        tx.commit(state.applied, state.term, true)
            .map_err(|e| e.to_string())?;
        state.dirty = false;
        self.after_durable(state);
        Ok(())
    }

    /// Replaces the state with the snapshot raft accepted, from the file the peer service
    /// received it into.
    fn install(&self, state: &mut State, snap: &Snapshot) -> Result<(), String> {
        let index = snap.get_metadata().index;
        if index <= state.applied {
            self.remove_snapshot_files(state.applied);
            return Ok(());
        }
        let path = snapshot_path(&self.snap_dir, index);
        if !path.exists() {
            return Err(format!(
                "raft holds a snapshot at index {index} but {} is missing and the backend is at index {}: the backend lost data",
                path.display(),
                state.applied
            ));
        }
        let started = Instant::now();
        let (got, term) = self
            .store
            .install_snapshot(&path)
            .map_err(|e| e.to_string())?;
        if got != index {
            return Err(format!(
                "snapshot file {} holds index {got}, raft expected {index}",
                path.display()
            ));
        }
        self.leases.reload(&self.store).map_err(|e| e.to_string())?;
        self.auth
            .reload(self.store.backend())
            .map_err(|e| e.to_string())?;
        self.membership
            .replace(membership::table::load(self.store.backend()).map_err(|e| e.to_string())?);
        tracing::info!(
            index,
            term,
            revision = self.store.current_rev(),
            took_ms = started.elapsed().as_millis() as u64,
            "installed the leader's snapshot"
        );
        self.watch_hub.publish_gap(self.store.current_rev());
        state.applied = index;
        state.term = term;
        state.snapshot_index = index;
        state.dirty = false;
        state.durable_at = Instant::now();
        self.remove_snapshot_files(index);
        self.applied.send_replace(index);
        let _ = self.raft.applied(index);
        Ok(())
    }

    /// Deletes received snapshot files the backend already covers.
    fn remove_snapshot_files(&self, applied: u64) {
        for (index, path) in list_snapshots(&self.snap_dir).unwrap_or_default() {
            if index <= applied {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// After a durable commit at `state.applied`: compact the raft log when due.
    fn after_durable(&self, state: &mut State) {
        state.durable_at = Instant::now();
        if state.applied.saturating_sub(state.snapshot_index) >= self.snapshot_count {
            // The raft loop learns `applied` first (same channel, in order).
            let _ = self.raft.applied(state.applied);
            let _ = self.raft.compact(state.applied);
            state.snapshot_index = state.applied;
        }
    }
}

struct State {
    applied: u64,
    term: u64,
    durable_at: Instant,
    dirty: bool,
    snapshot_index: u64,
}
