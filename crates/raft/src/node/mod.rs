//! The raft thread: it owns a member's [`core::Core`] over the WAL and drives it with
//! the wall clock and the commands [`RaftHandle`]s send.
//!
//! Each turn: wait for a command, a peer link's bytes ([`inlets`]) or the next tick,
//! step what the links brought, drain every queued command (so concurrent proposals and
//! reads batch into one Ready), tick if due, then the core's turn (one ReadIndex for
//! all reads that arrived, the Ready with one fdatasync).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use oxcd_storage::timing::WalStats;
use oxcd_storage::wal::{DEFAULT_SEGMENT_SIZE, Wal};
use raft::prelude::{Entry, Message, Snapshot};

use crate::RaftError;
use crate::log_store::LogStore;
use crate::persist::WalMetadata;

mod commit_clock;
pub mod core;
pub mod format;
pub mod inlets;
pub mod recovery;

use self::core::{Command, Core, Done};
pub use self::core::{EventSink, NoPeers, Transport};
pub use self::inlets::Inlet;

/// Entries kept in memory below a snapshot so a follower slightly behind can catch up
/// from the log rather than a snapshot (etcd's default for
/// `--experimental-snapshot-catchup-entries`).
pub const CATCH_UP_ENTRIES: u64 = 5000;
/// Upper bound on commands handled per turn, so ticks and Readies are never starved.
const MAX_COMMANDS_PER_TURN: usize = 4096;

/// What starts a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// This member's id.
    pub id: u64,
    /// The cluster id (recorded in the WAL at creation).
    pub cluster_id: u64,
    /// The voters to bootstrap a new cluster with (ignored when the WAL exists).
    pub voters: Vec<u64>,
    /// The bootstrap member list, kept in the WAL metadata (ignored when the WAL exists).
    pub members: Vec<u8>,
    /// For a new cluster, as etcd bootstraps one: the log starts with one committed
    /// conf change adding each initial voter, with this context (ignored when the WAL
    /// exists; empty: no such entries).
    pub bootstrap_contexts: Vec<(u64, Vec<u8>)>,
    /// The state machine's configuration at `applied`, when it keeps one: it replaces
    /// the WAL's (which knows only the bootstrap voters and snapshot marks), so conf
    /// changes applied before `applied` are not lost to raft when they are not replayed.
    pub conf_state: Option<raft::prelude::ConfState>,
    /// The WAL directory.
    pub wal_dir: PathBuf,
    /// Tick interval (`--heartbeat-interval`).
    pub heartbeat: Duration,
    /// Election timeout in ticks (`--election-timeout` / `--heartbeat-interval`).
    pub election_ticks: usize,
    /// Whether pre-vote is on (`--pre-vote`).
    pub pre_vote: bool,
    /// The state machine's applied index (its durable state); replay starts after it.
    pub applied: u64,
    /// The log's format after `applied` ([`format`]; None: the state machine writes one
    /// format and says none).
    pub format: Option<u8>,
    /// `--max-wals`: 0 keeps every WAL segment (etcd's "unlimited"); any other value lets
    /// a compaction delete every segment a restart no longer reads, fewer than etcd keeps.
    pub max_wals: usize,
    /// Entries kept below a snapshot ([`CATCH_UP_ENTRIES`] by default).
    pub catch_up_entries: u64,
    /// An election timeout of exactly `election_ticks`, not drawn at random from
    /// `[election_ticks, 2 * election_ticks)` (simulations, which must replay exactly).
    pub fixed_election_timeout: bool,
    /// Tells this start of the member from its others (see [`incarnation`]); its read
    /// requests carry it.
    pub incarnation: u64,
    /// `--unsafe-no-fsync`: the WAL is written without `fdatasync` (see
    /// [`Wal::set_unsafe_no_fsync`]).
    pub unsafe_no_fsync: bool,
    /// `--force-new-cluster`: with an existing WAL, start as a one-member cluster (see
    /// [`recovery::force_new_cluster`]); holds this member's conf change context, used
    /// if it must add itself.
    pub force_new_cluster: Option<Vec<u8>>,
}

/// A number for a start of a member that its earlier starts did not use: the wall clock
/// in nanoseconds.
pub fn incarnation() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// What the loop hands to the state machine, in order.
#[derive(Debug)]
pub enum Event {
    /// Committed entries to apply, in log order.
    Committed(Vec<Entry>),
    /// A snapshot from the leader replaces the state machine's state.
    Snapshot(Snapshot),
}

/// The raft thread; it returns the error that stopped it, if any.
pub type RaftThread = JoinHandle<Result<(), RaftError>>;

/// Who leads, in which term: what the raft loop publishes whenever either changes, for
/// components that act only on the leader (the lessor) to subscribe to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Leadership {
    /// The known leader (0: none).
    pub leader: u64,
    /// The current term.
    pub term: u64,
}

/// Live raft figures, readable from any thread.
#[derive(Debug)]
pub struct RaftStatus {
    leader: AtomicU64,
    term: AtomicU64,
    commit: AtomicU64,
    last_index: AtomicU64,
    leadership: tokio::sync::watch::Sender<Leadership>,
    /// Changes to a new leader seen (losing the leader is not one), as etcd counts them.
    leader_changes: AtomicU64,
    /// What the WAL reports: its write-and-fdatasync times, the bytes it wrote.
    pub wal: Arc<WalStats>,
    /// The state machine's last applied index and its log format, packed
    /// ([`AppliedHint`]); the raft loop reads it at its next command, tick or turn.
    applied_hint: AtomicU64,
}

/// An applied index and the log format after it, in one word, so that a reader never
/// sees the index of one report with the format of another.
///
/// Bits 0-47 hold the index, bits 48-55 the format, bit 56 whether a format is said.
/// An index past 48 bits is not packed (its report goes through the command channel).
struct AppliedHint;

impl AppliedHint {
    const INDEX_BITS: u32 = 48;
    const FORMAT_SAID: u64 = 1 << 56;

    fn pack(index: u64, format: Option<u8>) -> Option<u64> {
        if index >> Self::INDEX_BITS != 0 {
            return None;
        }
        Some(match format {
            Some(f) => index | (u64::from(f) << Self::INDEX_BITS) | Self::FORMAT_SAID,
            None => index,
        })
    }

    fn unpack(word: u64) -> (u64, Option<u8>) {
        let index = word & ((1 << Self::INDEX_BITS) - 1);
        let format = (word & Self::FORMAT_SAID != 0).then_some((word >> Self::INDEX_BITS) as u8);
        (index, format)
    }
}

impl Default for RaftStatus {
    fn default() -> RaftStatus {
        RaftStatus {
            leader: AtomicU64::new(0),
            term: AtomicU64::new(0),
            commit: AtomicU64::new(0),
            last_index: AtomicU64::new(0),
            leadership: tokio::sync::watch::Sender::new(Leadership::default()),
            leader_changes: AtomicU64::new(0),
            wal: Arc::default(),
            applied_hint: AtomicU64::new(0),
        }
    }
}

impl RaftStatus {
    /// Publishes the leader and term if either changed since the last publication.
    fn publish_leadership(&self) {
        let now = Leadership {
            leader: self.leader(),
            term: self.term(),
        };
        self.leadership.send_if_modified(|l| {
            let changed = *l != now;
            *l = now;
            changed
        });
    }

    /// The known leader (0: none).
    pub fn leader(&self) -> u64 {
        self.leader.load(Ordering::Acquire)
    }
    /// The current term.
    pub fn term(&self) -> u64 {
        self.term.load(Ordering::Acquire)
    }
    /// The commit index.
    pub fn commit(&self) -> u64 {
        self.commit.load(Ordering::Acquire)
    }
    /// The last log index.
    pub fn last_index(&self) -> u64 {
        self.last_index.load(Ordering::Acquire)
    }
    /// Leader changes seen since start.
    pub fn leader_changes(&self) -> u64 {
        self.leader_changes.load(Ordering::Relaxed)
    }
    /// Counts a leader change.
    pub(crate) fn count_leader_change(&self) {
        self.leader_changes.fetch_add(1, Ordering::Relaxed);
    }
    /// The last applied index (and format) the state machine left without a command.
    pub(crate) fn applied_hint(&self) -> (u64, Option<u8>) {
        AppliedHint::unpack(self.applied_hint.load(Ordering::Acquire))
    }
}

/// A handle to the raft loop; cheap to clone.
#[derive(Clone)]
pub struct RaftHandle {
    tx: Sender<Command>,
    waker: Arc<inlets::Waker>,
    inlets: Sender<Box<dyn Inlet>>,
    status: Arc<RaftStatus>,
    id: u64,
    cluster_id: u64,
}

impl RaftHandle {
    fn send(&self, cmd: Command) -> Result<(), RaftError> {
        match self.queue(cmd) {
            None => Ok(()),
            Some(_) => Err(RaftError::Stopped),
        }
    }

    /// Queues `cmd` for the raft thread and wakes it if it sleeps; the command back if
    /// the thread is gone.
    fn queue(&self, cmd: Command) -> Option<Command> {
        if let Err(mpsc::SendError(cmd)) = self.tx.send(cmd) {
            return Some(cmd);
        }
        self.waker.wake();
        None
    }

    /// Hands a peer link to the raft thread, which reads it from now on ([`inlets`]).
    pub fn add_inlet(&self, inlet: Box<dyn Inlet>) -> Result<(), RaftError> {
        self.inlets.send(inlet).map_err(|_| RaftError::Stopped)?;
        self.waker.wake();
        Ok(())
    }

    /// Proposes `data`; `done` learns whether raft accepted it into the log (not whether
    /// it committed: the state machine reports that when it applies the entry).
    /// `format`: the log format `data` is written in ([`format`]; None: not said).
    pub fn propose(
        &self,
        data: Vec<u8>,
        format: Option<u8>,
        done: impl FnOnce(Result<(), RaftError>) + Send + 'static,
    ) {
        let done: Done<()> = Box::new(done);
        if let Some(Command::Propose { done, .. }) =
            self.queue(Command::Propose { data, format, done })
        {
            done(Err(RaftError::Stopped));
        }
    }

    /// Proposes a membership change already encoded (etcd's `ConfChange`, which raft-rs
    /// cannot decode and never reads); `done` as for [`RaftHandle::propose_conf_change`].
    pub fn propose_conf_change_bytes(
        &self,
        data: Vec<u8>,
        format: Option<u8>,
        done: impl FnOnce(Result<(), RaftError>) + Send + 'static,
    ) {
        let done: Done<()> = Box::new(done);
        if let Some(Command::ProposeConfChangeBytes { done, .. }) =
            self.queue(Command::ProposeConfChangeBytes { data, format, done })
        {
            done(Err(RaftError::Stopped));
        }
    }

    /// Proposes a membership change; `done` learns whether raft accepted it into the
    /// log (the state machine applies it when committed; raft drops a second change
    /// proposed while one is pending, as an empty entry).
    pub fn propose_conf_change(
        &self,
        cc: raft::prelude::ConfChange,
        format: Option<u8>,
        done: impl FnOnce(Result<(), RaftError>) + Send + 'static,
    ) {
        let done: Done<()> = Box::new(done);
        if let Some(Command::ProposeConfChange { done, .. }) =
            self.queue(Command::ProposeConfChange { cc, format, done })
        {
            done(Err(RaftError::Stopped));
        }
    }

    /// On the leader: appends a switch of the log's format to `to` ([`format`]); `done`
    /// learns whether it was appended (a follower refuses).
    pub fn switch_format(&self, to: u8, done: impl FnOnce(Result<(), RaftError>) + Send + 'static) {
        let done: Done<()> = Box::new(done);
        if let Some(Command::SwitchFormat { done, .. }) =
            self.queue(Command::SwitchFormat { to, done })
        {
            done(Err(RaftError::Stopped));
        }
    }

    /// Each member's match index, as this member knows it when it leads (None: it
    /// does not lead).
    pub fn progress(
        &self,
        done: impl FnOnce(Result<Option<std::collections::BTreeMap<u64, u64>>, RaftError>)
        + Send
        + 'static,
    ) {
        let done: Done<Option<std::collections::BTreeMap<u64, u64>>> = Box::new(done);
        if let Some(Command::Progress { done }) = self.queue(Command::Progress { done }) {
            done(Err(RaftError::Stopped));
        }
    }

    /// Asks for a linearizable read index; `done` gets the commit index to wait for.
    pub fn read_index(&self, done: impl FnOnce(Result<u64, RaftError>) + Send + 'static) {
        let done: Done<u64> = Box::new(done);
        if let Some(Command::ReadIndex { done }) = self.queue(Command::ReadIndex { done }) {
            done(Err(RaftError::Stopped));
        }
    }

    /// The state machine reached the committed conf change at `index`: raft applies it.
    /// Waits for the raft thread and returns the configuration it gives. (Called from
    /// the apply thread, never from an async task.)
    pub fn apply_conf_change(
        &self,
        index: u64,
        cc: raft::prelude::ConfChange,
    ) -> Result<raft::prelude::ConfState, RaftError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let done: Done<raft::prelude::ConfState> = Box::new(move |r| {
            let _ = tx.send(r);
        });
        self.send(Command::ApplyConfChange { index, cc, done })?;
        rx.recv().map_err(|_| RaftError::Stopped)?
    }

    /// Delivers a message from a peer.
    pub fn step(&self, msg: Message) -> Result<(), RaftError> {
        self.send(Command::Step(msg))
    }

    /// Reports that the state machine applied everything up to `index`, the log's
    /// format after it being `format` (None: not said).
    pub fn applied(&self, index: u64, format: Option<u8>) -> Result<(), RaftError> {
        self.send(Command::Applied { index, format })
    }

    /// As [`RaftHandle::applied`], without waking the raft loop: it reads the report at
    /// its next command, tick or turn, before acting on any of them. For the report
    /// after each applied batch; a single writer (the state machine), whose indexes
    /// only grow. Raft learns it within a heartbeat interval at worst: what waits on the
    /// applied index there (a campaign or a new conf change after an unapplied one, the
    /// in-memory log's trimming) waits a tick or less.
    pub fn applied_quietly(&self, index: u64, format: Option<u8>) -> Result<(), RaftError> {
        match AppliedHint::pack(index, format) {
            Some(word) => {
                self.status.applied_hint.store(word, Ordering::Release);
                Ok(())
            }
            None => self.applied(index, format),
        }
    }

    /// Compacts the log up to `index`, which the state machine has made durable, keeping
    /// no entry at or below `floor` (0: none; see [`Command::Compact`]).
    pub fn compact(&self, index: u64, floor: u64) -> Result<(), RaftError> {
        self.send(Command::Compact { index, floor })
    }

    /// Compacts the log at the applied index if it still holds an entry at or below
    /// `floor` ([`Command::CompactPast`]).
    pub fn compact_past(&self, floor: u64) -> Result<(), RaftError> {
        self.send(Command::CompactPast { floor })
    }

    /// Asks the leader to hand leadership to `to`.
    pub fn transfer_leader(&self, to: u64) -> Result<(), RaftError> {
        self.send(Command::TransferLeader(to))
    }

    /// Reports that a message to `id` could not be delivered (raft then probes it).
    pub fn report_unreachable(&self, id: u64) {
        let _ = self.send(Command::Unreachable(id));
    }

    /// Reports how sending a snapshot to `to` ended (raft resumes replicating to it, or
    /// retries the snapshot later).
    pub fn report_snapshot(&self, to: u64, ok: bool) {
        let _ = self.send(Command::SnapshotSent { to, ok });
    }

    /// Starts an election now (used by tests and single-member bootstrap).
    pub fn campaign(&self) -> Result<(), RaftError> {
        self.send(Command::Campaign)
    }

    /// Stops the loop after a final WAL sync.
    pub fn stop(&self) {
        let _ = self.send(Command::Stop);
    }

    /// The leader and term, updated whenever either changes.
    pub fn leadership(&self) -> tokio::sync::watch::Receiver<Leadership> {
        self.status.leadership.subscribe()
    }

    /// Live figures.
    pub fn status(&self) -> &RaftStatus {
        &self.status
    }

    /// This member's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The cluster id.
    pub fn cluster_id(&self) -> u64 {
        self.cluster_id
    }
}

/// Starts the raft loop on its own thread. Returns the handle, the stream of events for
/// the state machine, and the thread (which returns the error that stopped it, if any).
pub fn start(
    cfg: NodeConfig,
    transport: impl Transport,
) -> Result<(RaftHandle, Receiver<Event>, RaftThread), RaftError> {
    let (events_tx, events_rx) = event_channel();
    let (handle, thread) = start_with_sink(cfg, transport, events_tx)?;
    Ok((handle, events_rx, thread))
}

/// The channel [`start`] hands events over: bounded, so a slow state machine slows raft
/// down instead of growing memory.
pub fn event_channel() -> (SyncSender<Event>, Receiver<Event>) {
    mpsc::sync_channel(1024)
}

/// [`start`] with the state machine's own [`EventSink`], which the raft thread calls with
/// every event (a sink may apply committed entries on the raft thread itself).
pub fn start_with_sink(
    cfg: NodeConfig,
    transport: impl Transport,
    sink: impl EventSink,
) -> Result<(RaftHandle, RaftThread), RaftError> {
    let (mut wal, log, meta) = open_log(&cfg)?;
    let status = Arc::new(RaftStatus::default());
    wal.report_to(status.wal.clone());
    let mut core = Core::new(&cfg, wal, log, transport, sink, status.clone())?;
    let (tx, rx) = mpsc::channel();
    let (inlets_tx, inlets_rx) = mpsc::channel();
    let (mut inlets, waker) = inlets::Inlets::new(inlets_rx)?;
    let handle = RaftHandle {
        tx,
        waker,
        inlets: inlets_tx,
        status,
        id: cfg.id,
        cluster_id: meta.cluster_id,
    };
    let heartbeat = cfg.heartbeat;
    let thread = std::thread::Builder::new()
        .name("raft".into())
        .spawn(move || {
            let res = run(&mut core, &rx, &mut inlets, heartbeat);
            if let Err(e) = &res {
                tracing::error!("raft loop stopped: {e}");
            }
            core.fail_all(RaftError::Stopped, rx.try_iter());
            res
        })
        .map_err(|e| RaftError::Decode(format!("spawn raft thread: {e}")))?;
    Ok((handle, thread))
}

/// Creates the WAL a new member started from `cfg` begins with (its metadata and, with
/// `cfg.bootstrap_contexts`, the committed bootstrap conf changes), synced, without
/// starting the node: what [`start`] does when `cfg.wal_dir` holds no WAL. For tools
/// that prepare a member's data dir (`oxcdutl snapshot restore`): the member started on
/// it later applies the bootstrap entries over whatever its backend holds.
pub fn create_wal(cfg: &NodeConfig) -> Result<(), RaftError> {
    create_fresh(cfg).map(drop)
}

fn create_fresh(cfg: &NodeConfig) -> Result<(Wal, LogStore, WalMetadata), RaftError> {
    let (core, meta) = recovery::fresh(cfg);
    let mut wal = Wal::create(&cfg.wal_dir, &meta.encode(), DEFAULT_SEGMENT_SIZE)?;
    recovery::write_fresh(&mut wal, &core)?;
    Ok((wal, LogStore::new(core), meta))
}

/// Opens (or creates) the WAL and rebuilds the in-memory log from it.
fn open_log(cfg: &NodeConfig) -> Result<(Wal, LogStore, WalMetadata), RaftError> {
    let (mut wal, log, meta) = open_or_create_log(cfg)?;
    if cfg.unsafe_no_fsync {
        wal.set_unsafe_no_fsync();
    }
    Ok((wal, log, meta))
}

/// The WAL as [`open_log`] finds it, before `--unsafe-no-fsync` applies.
fn open_or_create_log(cfg: &NodeConfig) -> Result<(Wal, LogStore, WalMetadata), RaftError> {
    if !Wal::exists(&cfg.wal_dir) {
        return create_fresh(cfg);
    }
    // Entries the state machine applied more than the catch-up count ago are not held
    // again: a restart's memory is the log the member runs with.
    let keep_from = (cfg.applied + 1).saturating_sub(cfg.catch_up_entries);
    let (mut wal, replay) = Wal::open_from(&cfg.wal_dir, DEFAULT_SEGMENT_SIZE, keep_from)?;
    let (mut core, meta) = recovery::recover(cfg, replay, &cfg.wal_dir.display().to_string())?;
    if let Some(context) = &cfg.force_new_cluster {
        let added = recovery::force_new_cluster(&mut core, cfg, context.clone())?;
        for e in &added {
            crate::disk::LogDisk::append_entry(&mut wal, e.index, &crate::persist::encode_entry(e));
        }
        crate::disk::LogDisk::set_hard_state(
            &mut wal,
            &crate::persist::encode_hard_state(&core.hard_state),
        );
        crate::disk::LogDisk::sync(&mut wal)?;
        tracing::warn!(
            removed = added.len(),
            commit = core.hard_state.commit,
            "forcing a new cluster: every other member is removed"
        );
    }
    Ok((wal, LogStore::new(core), meta))
}

fn run<T: Transport, E: EventSink>(
    core: &mut Core<Wal, T, E>,
    rx: &Receiver<Command>,
    inlets: &mut inlets::Inlets,
    heartbeat: Duration,
) -> Result<(), RaftError> {
    let mut next_tick = Instant::now() + heartbeat;
    let mut commit_clock = commit_clock::CommitClock::default();
    let mut from_inlets = Vec::new();
    let mut events = inlets::Events::default();
    loop {
        let wake = commit_clock
            .deadline()
            .map_or(next_tick, |d| d.min(next_tick));
        let wait = wake.saturating_duration_since(Instant::now());
        let mut stop = false;
        let first = inlets.wait(rx, wait, &mut events, &mut from_inlets);
        for m in from_inlets.drain(..) {
            core.handle(Command::Step(m))?;
        }
        match first {
            inlets::Woken::Command(cmd) => stop |= take(core, &mut commit_clock, cmd)?,
            inlets::Woken::Nothing => {}
            inlets::Woken::Disconnected => stop = true,
        }
        for _ in 0..MAX_COMMANDS_PER_TURN {
            match rx.try_recv() {
                Ok(cmd) => stop |= take(core, &mut commit_clock, cmd)?,
                Err(_) => break,
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            core.tick();
            inlets.tick(now);
            next_tick = now + heartbeat;
        }
        // Told before the turn when it can be: the notice then leaves with the turn's
        // first messages, before its sync.
        if commit_clock.due(now) || commit_clock.tell_at_once(core.commit_owed()) {
            core.tell_commit();
            commit_clock.told();
        }
        core.turn()?;
        if commit_clock.after_turn(core.commit_owed(), now) {
            core.tell_commit();
            core.turn()?;
        }
        if stop {
            return core.sync();
        }
    }
}

/// Hands `cmd` to the core; a proposal is noted on the commit clock. True means stop.
fn take<T: Transport, E: EventSink>(
    core: &mut Core<Wal, T, E>,
    commit_clock: &mut commit_clock::CommitClock,
    cmd: Command,
) -> Result<bool, RaftError> {
    if matches!(cmd, Command::Propose { .. }) {
        commit_clock.proposal(Instant::now());
    }
    core.handle(cmd)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod applied_hint_tests {
    use super::AppliedHint;

    #[test]
    fn a_hint_unpacks_as_packed() {
        for (index, format) in [
            (0, None),
            (7, Some(0)),
            (7, Some(255)),
            ((1 << 48) - 1, Some(3)),
        ] {
            let word = AppliedHint::pack(index, format).expect("fits");
            assert_eq!(AppliedHint::unpack(word), (index, format));
        }
        assert_eq!(AppliedHint::pack(1 << 48, None), None);
    }
}
