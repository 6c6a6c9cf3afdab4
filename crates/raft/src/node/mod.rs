//! The raft loop: one thread owns the `RawNode` and the WAL.
//!
//! Each turn: wait for a command or the next tick, drain every queued command (so
//! concurrent proposals and reads batch into one Ready), tick if due, issue one ReadIndex
//! for all reads that arrived, then handle the Ready: send messages, hand committed
//! entries to the state machine, append new entries and hard state to the WAL with one
//! fdatasync, answer reads, advance.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use oxcd_storage::wal::{DEFAULT_SEGMENT_SIZE, Wal};
use raft::prelude::{ConfState, Entry, Message, Snapshot, SnapshotMetadata};
use raft::{Config, RawNode};

use crate::RaftError;
use crate::log_store::{LogCore, LogStore};
use crate::persist::{self, WalMetadata};

/// Entries kept in memory below a snapshot so a follower slightly behind can catch up
/// from the log rather than a snapshot (etcd's default for
/// `--experimental-snapshot-catchup-entries`).
pub const CATCH_UP_ENTRIES: u64 = 5000;
/// Upper bound on commands handled per turn, so ticks and Readies are never starved.
const MAX_COMMANDS_PER_TURN: usize = 4096;

/// Sends raft messages to peers. Must not block for long: queue and return.
pub trait Transport: Send + 'static {
    /// Sends messages (in order per destination).
    fn send(&mut self, msgs: Vec<Message>);
}

impl Transport for Box<dyn Transport> {
    fn send(&mut self, msgs: Vec<Message>) {
        (**self).send(msgs)
    }
}

/// A transport for a member with no peers.
#[derive(Debug, Default)]
pub struct NoPeers;

impl Transport for NoPeers {
    fn send(&mut self, msgs: Vec<Message>) {
        if !msgs.is_empty() {
            tracing::warn!(
                count = msgs.len(),
                "raft: dropping messages: no peers configured"
            );
        }
    }
}

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
    /// Segments the WAL keeps at least (`--max-wals`).
    pub max_wals: usize,
    /// Entries kept below a snapshot ([`CATCH_UP_ENTRIES`] by default).
    pub catch_up_entries: u64,
}

/// What the loop hands to the state machine, in order.
#[derive(Debug)]
pub enum Event {
    /// Committed entries to apply, in log order.
    Committed(Vec<Entry>),
    /// A snapshot from the leader replaces the state machine's state.
    Snapshot(Snapshot),
}

type Done<T> = Box<dyn FnOnce(Result<T, RaftError>) + Send>;

/// The raft thread; it returns the error that stopped it, if any.
pub type RaftThread = JoinHandle<Result<(), RaftError>>;

enum Command {
    Propose { data: Vec<u8>, done: Done<()> },
    ReadIndex { done: Done<u64> },
    Step(Message),
    Applied(u64),
    Compact(u64),
    TransferLeader(u64),
    Unreachable(u64),
    SnapshotSent { to: u64, ok: bool },
    Campaign,
    Stop,
}

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
    applied: AtomicU64,
    leadership: tokio::sync::watch::Sender<Leadership>,
}

impl Default for RaftStatus {
    fn default() -> RaftStatus {
        RaftStatus {
            leader: AtomicU64::new(0),
            term: AtomicU64::new(0),
            commit: AtomicU64::new(0),
            last_index: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            leadership: tokio::sync::watch::Sender::new(Leadership::default()),
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
    /// The applied index the state machine reported.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Acquire)
    }
}

/// A handle to the raft loop; cheap to clone.
#[derive(Clone)]
pub struct RaftHandle {
    tx: Sender<Command>,
    status: Arc<RaftStatus>,
    id: u64,
    cluster_id: u64,
    members: Arc<Vec<u8>>,
}

impl RaftHandle {
    fn send(&self, cmd: Command) -> Result<(), RaftError> {
        self.tx.send(cmd).map_err(|_| RaftError::Stopped)
    }

    /// Proposes `data`; `done` learns whether raft accepted it into the log (not whether
    /// it committed: the state machine reports that when it applies the entry).
    pub fn propose(
        &self,
        data: Vec<u8>,
        done: impl FnOnce(Result<(), RaftError>) + Send + 'static,
    ) {
        let done: Done<()> = Box::new(done);
        if let Err(mpsc::SendError(Command::Propose { done, .. })) =
            self.tx.send(Command::Propose { data, done })
        {
            done(Err(RaftError::Stopped));
        }
    }

    /// Asks for a linearizable read index; `done` gets the commit index to wait for.
    pub fn read_index(&self, done: impl FnOnce(Result<u64, RaftError>) + Send + 'static) {
        let done: Done<u64> = Box::new(done);
        if let Err(mpsc::SendError(Command::ReadIndex { done })) =
            self.tx.send(Command::ReadIndex { done })
        {
            done(Err(RaftError::Stopped));
        }
    }

    /// Delivers a message from a peer.
    pub fn step(&self, msg: Message) -> Result<(), RaftError> {
        self.send(Command::Step(msg))
    }

    /// Reports that the state machine applied everything up to `index`.
    pub fn applied(&self, index: u64) -> Result<(), RaftError> {
        self.status.applied.fetch_max(index, Ordering::AcqRel);
        self.send(Command::Applied(index))
    }

    /// Compacts the log up to `index`, which the state machine has made durable.
    pub fn compact(&self, index: u64) -> Result<(), RaftError> {
        self.send(Command::Compact(index))
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

    /// The bootstrap member list recorded in the WAL (the caller's encoding).
    pub fn members(&self) -> &[u8] {
        &self.members
    }
}

/// Starts the raft loop on its own thread. Returns the handle, the stream of events for
/// the state machine, and the thread (which returns the error that stopped it, if any).
pub fn start(
    cfg: NodeConfig,
    transport: impl Transport,
) -> Result<(RaftHandle, Receiver<Event>, RaftThread), RaftError> {
    let (wal, log, meta) = open_log(&cfg)?;
    // A snapshot installed in the WAL but not yet in the backend (a crash in between):
    // the state machine installs it first, from the file it was received into.
    let (snap_start, pending_install) = {
        let core = log.rl();
        let pending = (cfg.applied < core.start.0)
            .then(|| core.snapshot.clone())
            .flatten();
        (core.start.0, pending)
    };
    let applied = cfg.applied.max(snap_start);
    let status = Arc::new(RaftStatus::default());
    let raft_cfg = Config {
        id: cfg.id,
        election_tick: cfg.election_ticks.max(2),
        heartbeat_tick: 1,
        applied,
        max_size_per_msg: 1 << 20,
        max_inflight_msgs: 256,
        check_quorum: true,
        pre_vote: cfg.pre_vote,
        read_only_option: raft::ReadOnlyOption::Safe,
        ..Default::default()
    };
    raft_cfg.validate()?;
    let node = RawNode::new(&raft_cfg, log.clone(), &crate::logger::raft_logger())?;
    {
        let core = log.rl();
        status.term.store(core.hard_state.term, Ordering::Release);
        status
            .commit
            .store(core.hard_state.commit, Ordering::Release);
        status
            .last_index
            .store(core.last_index(), Ordering::Release);
        status.applied.store(applied, Ordering::Release);
    }
    let (tx, rx) = mpsc::channel();
    // Bounded: a slow state machine slows raft down instead of growing memory.
    let (events_tx, events_rx) = mpsc::sync_channel(1024);
    let handle = RaftHandle {
        tx,
        status: status.clone(),
        id: cfg.id,
        cluster_id: meta.cluster_id,
        members: Arc::new(meta.members.clone()),
    };
    let single_voter = log.rl().conf_state.voters == [cfg.id];
    let mut l = Loop {
        node,
        log,
        wal,
        transport,
        events: events_tx,
        status,
        rx,
        heartbeat: cfg.heartbeat,
        max_wals: cfg.max_wals,
        catch_up_entries: cfg.catch_up_entries,
        pending_reads: Vec::new(),
        reads_in_flight: HashMap::new(),
        next_read_ctx: 1,
        applied,
    };
    if let Some(snap) = pending_install {
        l.emit(Event::Snapshot(snap))?;
    }
    let thread = std::thread::Builder::new()
        .name("raft".into())
        .spawn(move || {
            if single_voter {
                // Alone in the cluster: no reason to wait an election timeout.
                let _ = l.node.campaign();
            }
            let res = l.run();
            if let Err(e) = &res {
                tracing::error!("raft loop stopped: {e}");
            }
            l.fail_all(RaftError::Stopped);
            res
        })
        .map_err(|e| RaftError::Decode(format!("spawn raft thread: {e}")))?;
    Ok((handle, events_rx, thread))
}

/// Opens (or creates) the WAL and rebuilds the in-memory log from it.
fn open_log(cfg: &NodeConfig) -> Result<(Wal, LogStore, WalMetadata), RaftError> {
    if !Wal::exists(&cfg.wal_dir) {
        let cs = ConfState {
            voters: cfg.voters.clone(),
            ..Default::default()
        };
        let meta = WalMetadata {
            member_id: cfg.id,
            cluster_id: cfg.cluster_id,
            initial_conf: cs.clone(),
            members: cfg.members.clone(),
        };
        let wal = Wal::create(&cfg.wal_dir, &meta.encode(), DEFAULT_SEGMENT_SIZE)?;
        let core = LogCore {
            conf_state: cs,
            ..Default::default()
        };
        return Ok((wal, LogStore::new(core), meta));
    }
    let (wal, mut replay) = Wal::open(&cfg.wal_dir, DEFAULT_SEGMENT_SIZE)?;
    let meta = WalMetadata::decode(&replay.metadata)?;
    if meta.member_id != cfg.id {
        return Err(RaftError::Decode(format!(
            "WAL in {} belongs to member {:x}, not {:x}",
            cfg.wal_dir.display(),
            meta.member_id,
            cfg.id
        )));
    }
    let mut core = LogCore {
        conf_state: meta.initial_conf.clone(),
        ..Default::default()
    };
    if let Some((_, b)) = &replay.snapshot {
        let sm = persist::decode_snapshot_meta(b)?;
        core.apply_snapshot(&sm);
        core.snapshot = Some(snapshot_of(sm));
    }
    if let Some(b) = &replay.hard_state {
        core.hard_state = persist::decode_hard_state(b)?;
        // A snapshot is committed state; the hard state synced with it may be older.
        core.hard_state.commit = core.hard_state.commit.max(core.start.0);
        if core.hard_state.term < core.start.1 {
            core.hard_state.term = core.start.1;
            core.hard_state.vote = 0;
        }
    }
    // Each record's bytes are dropped as soon as it is decoded, and the decoded entries
    // move into the log: one copy of the log in memory at a time.
    let raw = std::mem::take(&mut replay.entries);
    let mut entries = Vec::with_capacity(raw.len());
    for (index, data) in raw {
        entries.push(persist::decode_entry(index, &data)?);
    }
    core.append_owned(entries)?;
    // The state machine may have applied (durably) entries whose commit index was not
    // yet synced in a hard state: they were committed, so the commit index is at least it.
    if cfg.applied > core.hard_state.commit {
        if cfg.applied > core.last_index() {
            return Err(RaftError::Decode(format!(
                "the backend has applied index {} but the WAL in {} ends at {}: the WAL is missing entries",
                cfg.applied,
                cfg.wal_dir.display(),
                core.last_index()
            )));
        }
        core.hard_state.commit = cfg.applied;
    }
    Ok((wal, LogStore::new(core), meta))
}

/// The context of a ReadIndex request: this member's id and a counter. The leader keys
/// pending reads by context and ignores a second request with a context it already
/// holds, so contexts must be unique across the cluster, not only per member.
fn read_ctx(member: u64, counter: u64) -> Vec<u8> {
    let mut ctx = Vec::with_capacity(16);
    ctx.extend_from_slice(&member.to_le_bytes());
    ctx.extend_from_slice(&counter.to_le_bytes());
    ctx
}

/// The counter of a context [`read_ctx`] made for `member` (None: not ours).
fn parse_read_ctx(member: u64, ctx: &[u8]) -> Option<u64> {
    let id = u64::from_le_bytes(ctx.get(..8)?.try_into().ok()?);
    let counter = u64::from_le_bytes(ctx.get(8..16)?.try_into().ok()?);
    (id == member).then_some(counter)
}

/// A snapshot carrying only its position: the data travels separately, from the backend.
fn snapshot_of(meta: SnapshotMetadata) -> Snapshot {
    let mut s = Snapshot::default();
    s.set_metadata(meta);
    s
}

struct Loop<T: Transport> {
    node: RawNode<LogStore>,
    log: LogStore,
    wal: Wal,
    transport: T,
    events: SyncSender<Event>,
    status: Arc<RaftStatus>,
    rx: Receiver<Command>,
    heartbeat: Duration,
    max_wals: usize,
    catch_up_entries: u64,
    pending_reads: Vec<Done<u64>>,
    reads_in_flight: HashMap<u64, Vec<Done<u64>>>,
    next_read_ctx: u64,
    applied: u64,
}

impl<T: Transport> Loop<T> {
    fn run(&mut self) -> Result<(), RaftError> {
        let mut next_tick = Instant::now() + self.heartbeat;
        loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            let mut stop = false;
            match self.rx.recv_timeout(wait) {
                Ok(cmd) => stop |= self.handle(cmd)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => stop = true,
            }
            for _ in 0..MAX_COMMANDS_PER_TURN {
                match self.rx.try_recv() {
                    Ok(cmd) => stop |= self.handle(cmd)?,
                    Err(_) => break,
                }
            }
            let now = Instant::now();
            if now >= next_tick {
                self.node.tick();
                next_tick = now + self.heartbeat;
            }
            // Without a leader a read cannot be confirmed: keep it until one is elected
            // (the caller's timeout bounds the wait).
            if !self.pending_reads.is_empty() && self.status.leader() != 0 {
                let ctx = self.next_read_ctx;
                self.next_read_ctx += 1;
                self.reads_in_flight
                    .insert(ctx, std::mem::take(&mut self.pending_reads));
                self.node.read_index(read_ctx(self.node.raft.id, ctx));
            }
            self.on_ready()?;
            if stop {
                self.wal.sync()?;
                return Ok(());
            }
        }
    }

    /// Handles one command; true means stop.
    fn handle(&mut self, cmd: Command) -> Result<bool, RaftError> {
        match cmd {
            Command::Propose { data, done } => match self.node.propose(Vec::new(), data) {
                Ok(()) => done(Ok(())),
                Err(raft::Error::ProposalDropped) => done(Err(RaftError::ProposalDropped)),
                Err(e) => done(Err(RaftError::Raft(e))),
            },
            Command::ReadIndex { done } => self.pending_reads.push(done),
            Command::Step(m) => {
                if let Err(e) = self.node.step(m) {
                    tracing::debug!("raft: step: {e}");
                }
            }
            Command::Applied(index) => {
                // A state machine restored from a snapshot may be ahead of what this
                // member has seen committed; raft learns it as the commit index catches up.
                let index = index.min(self.node.raft.raft_log.committed);
                if index > self.applied {
                    self.applied = index;
                    self.node.advance_apply_to(index);
                }
            }
            Command::Compact(index) => self.compact(index)?,
            Command::TransferLeader(to) => self.node.transfer_leader(to),
            Command::Unreachable(id) => self.node.report_unreachable(id),
            Command::SnapshotSent { to, ok } => {
                let status = if ok {
                    raft::SnapshotStatus::Finish
                } else {
                    raft::SnapshotStatus::Failure
                };
                self.node.report_snapshot(to, status);
            }
            Command::Campaign => {
                let _ = self.node.campaign();
            }
            Command::Stop => return Ok(true),
        }
        Ok(false)
    }

    fn compact(&mut self, index: u64) -> Result<(), RaftError> {
        let (meta, drop_to) = {
            let core = self.log.rl();
            if index <= core.start.0 || index > self.applied {
                return Ok(());
            }
            let Some(term) = core.term_of(index) else {
                return Ok(());
            };
            let mut meta = SnapshotMetadata {
                index,
                term,
                ..Default::default()
            };
            meta.set_conf_state(core.conf_state.clone());
            (meta, index.saturating_sub(self.catch_up_entries))
        };
        self.wal
            .mark_snapshot(index, &persist::encode_snapshot_meta(&meta));
        self.wal.sync()?;
        {
            let mut core = self.log.wl();
            core.compact(drop_to);
            core.snapshot = Some(snapshot_of(meta));
        }
        let removed = self.wal.purge(index, self.max_wals)?;
        tracing::info!(index, removed_segments = removed, "raft: compacted log");
        Ok(())
    }

    fn emit(&self, ev: Event) -> Result<(), RaftError> {
        self.events.send(ev).map_err(|_| RaftError::Stopped)
    }

    fn on_ready(&mut self) -> Result<(), RaftError> {
        if !self.node.has_ready() {
            return Ok(());
        }
        let mut rd = self.node.ready();
        // The leader is published with the term below, once the term is durable: a
        // Status read in between saw a leader at term 0 (CI, 2026-11-26).
        let soft_state = rd.ss().map(|ss| (ss.leader_id, ss.raft_state));
        if !rd.messages().is_empty() {
            self.transport.send(rd.take_messages());
        }
        let mut installed_snapshot = None;
        if !rd.snapshot().is_empty() {
            let snap = rd.snapshot().clone();
            let meta = snap.get_metadata().clone();
            self.wal
                .install_snapshot(meta.index, &persist::encode_snapshot_meta(&meta));
            self.wal.sync()?;
            {
                let mut core = self.log.wl();
                core.apply_snapshot(&meta);
                core.snapshot = Some(snap.clone());
            }
            tracing::info!(
                index = meta.index,
                term = meta.term,
                "raft: installed a snapshot from the leader"
            );
            installed_snapshot = Some(meta.index);
            self.emit(Event::Snapshot(snap))?;
        }
        let committed = rd.take_committed_entries();
        if !committed.is_empty() {
            self.emit(Event::Committed(committed))?;
        }
        for e in rd.entries() {
            self.wal.append_entry(e.index, &persist::encode_entry(e));
        }
        // Ready::must_sync (etcd's MustSync): new entries, a snapshot, a new term or a
        // vote must be durable before anything that depends on them is sent; a hard
        // state that only moved the commit index is written with the next sync (on
        // restart the commit index is recomputed from the leader), so a commit-only
        // Ready costs no fdatasync.
        if let Some(hs) = rd.hs() {
            self.wal.set_hard_state(&persist::encode_hard_state(hs));
        }
        if rd.must_sync() {
            self.wal.sync()?;
        }
        {
            let mut core = self.log.wl();
            core.append(rd.entries())?;
            if let Some(hs) = rd.hs() {
                core.hard_state = hs.clone();
            }
            self.status
                .term
                .store(core.hard_state.term, Ordering::Release);
            self.status
                .last_index
                .store(core.last_index(), Ordering::Release);
        }
        if let Some((leader, role)) = soft_state {
            let old = self.status.leader.swap(leader, Ordering::AcqRel);
            if old != leader {
                tracing::info!(
                    leader = format!("{leader:x}"),
                    ?role,
                    "raft: leader changed"
                );
                if old != 0 {
                    // Reads in flight asked the old leader: they will not be answered.
                    self.fail_in_flight_reads(|| RaftError::LeaderChanged);
                }
            }
        }
        self.status.publish_leadership();
        for rs in rd.take_read_states() {
            let ctx = parse_read_ctx(self.node.raft.id, &rs.request_ctx);
            if let Some(waiters) = ctx.and_then(|c| self.reads_in_flight.remove(&c)) {
                for w in waiters {
                    w(Ok(rs.index));
                }
            }
        }
        if !rd.persisted_messages().is_empty() {
            self.transport.send(rd.take_persisted_messages());
        }
        // advance_append: the state machine reports what it applied itself (Command::Applied).
        let mut light = self.node.advance_append(rd);
        if let Some(index) = installed_snapshot {
            self.snapshot_applied(index);
        }
        if let Some(commit) = light.commit_index() {
            let hs = {
                let mut core = self.log.wl();
                core.hard_state.commit = commit;
                core.hard_state.clone()
            };
            // Synced with the next batch: a lost commit index is recomputed on restart.
            self.wal.set_hard_state(&persist::encode_hard_state(&hs));
        }
        self.status
            .commit
            .store(self.log.rl().hard_state.commit, Ordering::Release);
        if !light.messages().is_empty() {
            self.transport.send(light.take_messages());
        }
        let committed = light.take_committed_entries();
        if !committed.is_empty() {
            self.emit(Event::Committed(committed))?;
        }
        Ok(())
    }

    /// Raft counts a snapshot as applied once it is durable, as `RawNode::advance` would:
    /// the state machine installs it in order, before any later entry, and raft must
    /// never look below it for entries (an election reads `applied + 1..=commit`, and the
    /// log now starts after the snapshot). The state machine's own reports for indexes
    /// below it are then ignored.
    fn snapshot_applied(&mut self, index: u64) {
        if index > self.applied {
            self.applied = index;
            self.node.advance_apply_to(index);
        }
    }

    fn fail_in_flight_reads(&mut self, err: impl Fn() -> RaftError) {
        for (_, ws) in self.reads_in_flight.drain() {
            for w in ws {
                w(Err(err()));
            }
        }
    }

    fn fail_reads(&mut self, err: impl Fn() -> RaftError) {
        for w in self.pending_reads.drain(..) {
            w(Err(err()));
        }
        for (_, ws) in self.reads_in_flight.drain() {
            for w in ws {
                w(Err(err()));
            }
        }
    }

    fn fail_all(&mut self, err: RaftError) {
        let msg = err.to_string();
        self.fail_reads(|| RaftError::Decode(msg.clone()));
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Command::Propose { done, .. } => done(Err(RaftError::Stopped)),
                Command::ReadIndex { done } => done(Err(RaftError::Stopped)),
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
