//! The raft core: one member's `RawNode`, its log and what surrounds them, driven by
//! its owner — the raft thread in a member ([`super::start`]), a seeded scheduler in the
//! simulation. It reads no clock (time passes when its owner calls [`Core::tick`]),
//! never waits, and reaches the world only through its [`LogDisk`], [`Transport`] and
//! [`EventSink`], so several cores can run in one thread and replay exactly.
//!
//! A turn ([`Core::turn`]): one ReadIndex for all reads that arrived, then the Ready —
//! send messages, hand committed entries to the state machine, append new entries and
//! the hard state to the disk with one sync, answer reads, advance.
//!
//! Invariants:
//! - Nothing that depends on a record is sent or acknowledged before the record is
//!   synced (`Ready::must_sync`).
//! - Committed entries and snapshots reach the [`EventSink`] in log order, once.
//! - The log is compacted only up to an index the state machine reported applied.
//!
//! Beside it: `retention` (how much of the log is kept, in memory and on disk),
//! `repeated_acks` (a follower's append responses that repeat the last are not sent),
//! `reads_in_flight` (unanswered ReadIndex requests, asked again until answered) and
//! `commit_notice` (when a leader tells followers the commit index; raft-rs's broadcast
//! of it is off).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;

use raft::prelude::{ConfChange, ConfState, Entry, Message, Snapshot, SnapshotMetadata};
use raft::{Config, RawNode};

mod commit_notice;
pub(super) use commit_notice::COMMIT_NOTICE_DELAY;
mod reads_in_flight;
mod repeated_acks;
mod retention;
#[cfg(test)]
mod test_cluster;

use super::{Event, NodeConfig, RaftStatus, format};
use crate::RaftError;
use crate::disk::LogDisk;
use crate::log_store::LogStore;
use crate::persist;

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

/// Where the core hands what the state machine must do, in order.
pub trait EventSink: Send + 'static {
    /// Hands over one event; an error means the state machine is gone.
    fn emit(&mut self, ev: Event) -> Result<(), RaftError>;

    /// Hands over committed entries ahead of a disk write and sync in the same turn: a
    /// sink that could apply them on the raft thread should hand them off instead, so
    /// the sync (and the acknowledgements waiting for it) is not held back.
    fn emit_ahead_of_sync(&mut self, ev: Event) -> Result<(), RaftError> {
        self.emit(ev)
    }
}

impl EventSink for SyncSender<Event> {
    fn emit(&mut self, ev: Event) -> Result<(), RaftError> {
        self.send(ev).map_err(|_| RaftError::Stopped)
    }
}

impl EventSink for Vec<Event> {
    fn emit(&mut self, ev: Event) -> Result<(), RaftError> {
        self.push(ev);
        Ok(())
    }
}

/// Called once with the outcome of a command.
pub type Done<T> = Box<dyn FnOnce(Result<T, RaftError>) + Send>;

/// What the core is asked to do.
pub enum Command {
    /// Propose `data`; `done` learns whether raft took it into the log.
    Propose {
        /// The entry's data.
        data: Vec<u8>,
        /// The log format it is written in (None: not said; see [`super::format`]).
        format: Option<u8>,
        /// Told whether raft accepted it.
        done: Done<()>,
    },
    /// Propose a membership change; `done` learns whether raft took it into the log
    /// (raft takes one at a time: another proposed before the last is applied becomes
    /// an empty entry).
    ProposeConfChange {
        /// The change.
        cc: ConfChange,
        /// The log format it is written in (None: not said).
        format: Option<u8>,
        /// Told whether raft accepted it.
        done: Done<()>,
    },
    /// Propose a membership change already encoded (etcd's `ConfChange`, with etcd's
    /// type numbers, which raft-rs cannot decode): raft never reads it, the state
    /// machine does when it is committed.
    ProposeConfChangeBytes {
        /// The entry's data.
        data: Vec<u8>,
        /// The log format it is written in (None: not said).
        format: Option<u8>,
        /// Told whether raft accepted it.
        done: Done<()>,
    },
    /// On the leader: append a switch of the log's format to `to` ([`super::format`]);
    /// refused on a follower.
    SwitchFormat {
        /// The format every later entry is written in.
        to: u8,
        /// Told whether the switch was appended.
        done: Done<()>,
    },
    /// The state machine reached the committed conf change at `index` and takes it:
    /// raft applies it; `done` gets the configuration it gives.
    ApplyConfChange {
        /// The entry's index.
        index: u64,
        /// The change.
        cc: ConfChange,
        /// Told the new configuration, or why raft refused the change.
        done: Done<ConfState>,
    },
    /// What the leader knows of each member's log: `done` gets each member's match
    /// index, or None when this member does not lead.
    Progress {
        /// Told the match indexes by member id.
        done: Done<Option<BTreeMap<u64, u64>>>,
    },
    /// A linearizable read: `done` gets the commit index to wait for.
    ReadIndex {
        /// Told the read index.
        done: Done<u64>,
    },
    /// A message from a peer.
    Step(Message),
    /// The state machine applied everything up to `index`, its log format there being
    /// `format` (None: it does not say).
    Applied {
        /// The last index applied.
        index: u64,
        /// The format of the log after it.
        format: Option<u8>,
    },
    /// Compact the log up to `index`, which the state machine made durable, keeping no
    /// entry at or below `floor` (the last format switch: what precedes it is not sent
    /// to a member that joins or falls behind; 0: none).
    Compact {
        /// Where the snapshot is taken.
        index: u64,
        /// Entries up to here are dropped even when catch-up entries would keep them.
        floor: u64,
    },
    /// Compact at the applied index if the log still holds an entry at or below `floor`
    /// (a format switch whose compaction a crash cut short); else nothing.
    CompactPast {
        /// The last entry that must not be held.
        floor: u64,
    },
    /// Hand leadership to this member.
    TransferLeader(u64),
    /// A message to this member could not be delivered.
    Unreachable(u64),
    /// How sending a snapshot to `to` ended.
    SnapshotSent {
        /// The member it was sent to.
        to: u64,
        /// Whether it was delivered.
        ok: bool,
    },
    /// Start an election now.
    Campaign,
    /// Stop after a final sync.
    Stop,
}

/// The context of a ReadIndex request: this member's id, this start of it, and a
/// counter. The leader keys pending reads by context and ignores a second request with a
/// context it already holds, then answers it once — so contexts must be unique across
/// the cluster and across restarts: a member restarted while the leader still held its
/// old read would otherwise take that read's (older) index for a new read. The
/// simulation found it (seed 1000050, five members).
fn read_ctx(member: u64, incarnation: u64, counter: u64) -> Vec<u8> {
    let mut ctx = Vec::with_capacity(24);
    ctx.extend_from_slice(&member.to_le_bytes());
    ctx.extend_from_slice(&incarnation.to_le_bytes());
    ctx.extend_from_slice(&counter.to_le_bytes());
    ctx
}

/// The counter of a context [`read_ctx`] made for this start of `member` (None: not
/// ours).
fn parse_read_ctx(member: u64, incarnation: u64, ctx: &[u8]) -> Option<u64> {
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            ctx.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    (word(0)? == member && word(1)? == incarnation).then_some(word(2)?)
}

/// What a proposal's caller is told of raft's answer.
fn proposed(r: Result<(), raft::Error>) -> Result<(), RaftError> {
    match r {
        Ok(()) => Ok(()),
        Err(raft::Error::ProposalDropped) => Err(RaftError::ProposalDropped),
        Err(e) => Err(RaftError::Raft(e)),
    }
}

/// A snapshot carrying only its position: the data travels separately, from the backend.
pub(crate) fn snapshot_of(meta: SnapshotMetadata) -> Snapshot {
    let mut s = Snapshot::default();
    s.set_metadata(meta);
    s
}

/// One member's raft: the node, its log, its disk, and the reads waiting on it.
pub struct Core<D: LogDisk, T: Transport, E: EventSink> {
    node: RawNode<LogStore>,
    log: LogStore,
    disk: D,
    transport: T,
    events: E,
    status: Arc<RaftStatus>,
    max_wals: usize,
    catch_up_entries: u64,
    pending_reads: Vec<Done<u64>>,
    reads_in_flight: reads_in_flight::ReadsInFlight,
    incarnation: u64,
    next_read_ctx: u64,
    applied: u64,
    /// The applied index at the last compaction of the log in memory ([`retention`]).
    memory_compacted_at: u64,
    /// The log format after `applied`, as the state machine last said (None: unknown).
    applied_format: Option<u8>,
    /// The format the log ends in, while this member leads: (its term, the format).
    leader_format: Option<(u64, Option<u8>)>,
    /// Ticks since start: the window in which a repeated append response is held back.
    ticks: u64,
    /// The append responses last sent ([`repeated_acks`]).
    repeated_acks: repeated_acks::RepeatedAcks,
    /// What followers were told of the commit index ([`commit_notice`]).
    commit_notice: commit_notice::CommitNotice,
}

impl<D: LogDisk, T: Transport, E: EventSink> Core<D, T, E> {
    /// Steps a proposal (this member's, or one a follower forwarded). A leader appends
    /// conf change entries itself, with raft-rs's rules (one pending at a time; a second
    /// becomes an empty entry) but without decoding them: an etcd `ConfChange` carries
    /// type numbers raft-rs's decoder refuses (etcd's AddLearnerNode is 3), and the
    /// entry must stay etcd's bytes. Joint configurations are never entered by these
    /// (etcd 3.5 proposes single changes only), so raft-rs's joint checks have nothing to
    /// refuse. Anything else, and any proposal on a follower, goes through raft-rs.
    fn step_proposal(&mut self, mut m: Message) -> Result<(), raft::Error> {
        if self.node.raft.state == raft::StateRole::Leader {
            self.check_formats(&m)?;
        }
        let raft = &mut self.node.raft;
        let conf_changes = m
            .get_entries()
            .iter()
            .any(|e| e.get_entry_type() == raft::prelude::EntryType::EntryConfChange);
        if !conf_changes || raft.state != raft::StateRole::Leader {
            return self.node.step(m);
        }
        if raft.prs().get(raft.id).is_none() || raft.lead_transferee.is_some() {
            return Err(raft::Error::ProposalDropped);
        }
        let last = raft.raft_log.last_index();
        for (i, e) in m.mut_entries().iter_mut().enumerate() {
            if e.get_entry_type() != raft::prelude::EntryType::EntryConfChange {
                continue;
            }
            if raft.has_pending_conf() {
                tracing::info!("raft: ignoring a conf change: possible unapplied conf change");
                *e = Entry::default();
            } else {
                raft.pending_conf_index = last + i as u64 + 1;
            }
        }
        if !raft.append_entry(m.mut_entries()) {
            return Err(raft::Error::ProposalDropped);
        }
        raft.bcast_append();
        Ok(())
    }

    /// Steps this member's own proposal of `e`, as raft-rs's `propose` builds it. On the
    /// leader, one written in another format than its log's is refused as such, for the
    /// proposer to write it again.
    fn propose_own(&mut self, e: Entry) -> Result<(), RaftError> {
        if self.node.raft.state == raft::StateRole::Leader
            && let Some(written) = format::written_in(&e)
            && self.tail_format() != Some(written)
        {
            return Err(RaftError::FormatSwitched {
                data: e.data.to_vec(),
            });
        }
        let mut m = Message::default();
        m.set_msg_type(raft::prelude::MessageType::MsgPropose);
        m.from = self.node.raft.id;
        m.set_entries(vec![e].into());
        proposed(self.step_proposal(m))
    }

    /// On the leader: refuses a proposal written in another format than the one its log
    /// ends in ([`format`]): written before a switch, it would be read after it in the
    /// wrong format. Entries that say no format pass.
    fn check_formats(&mut self, m: &Message) -> Result<(), raft::Error> {
        for e in m.get_entries() {
            let Some(written) = format::written_in(e) else {
                continue;
            };
            let tail = self.tail_format();
            if tail != Some(written) {
                tracing::info!(
                    written,
                    log = ?tail,
                    "raft: dropping a proposal written in another format than the log's"
                );
                return Err(raft::Error::ProposalDropped);
            }
        }
        Ok(())
    }

    /// The format the leader's log ends in: the state machine's at `applied`, then the
    /// switches after it (all still held: compaction stops at `applied`). Cached for the
    /// term; a leader's log changes only by its own appends.
    fn tail_format(&mut self) -> Option<u8> {
        let term = self.node.raft.term;
        if let Some((t, f)) = self.leader_format
            && t == term
        {
            return f;
        }
        let f = {
            let core = self.log.rl();
            let from = self.applied.saturating_sub(core.start.0) as usize;
            format::after(
                self.applied_format,
                core.entries.get(from..).unwrap_or_default(),
            )
        };
        self.leader_format = Some((term, f));
        f
    }

    /// Appends a switch to format `to`, on the leader.
    fn switch_format(&mut self, to: u8) -> Result<(), RaftError> {
        if self.node.raft.state != raft::StateRole::Leader {
            return Err(RaftError::ProposalDropped);
        }
        let from = self.tail_format();
        if from == Some(to) {
            return Ok(());
        }
        proposed(self.node.propose(Vec::new(), format::switch_data(to)))?;
        tracing::info!(?from, to, "raft: the log's format switches");
        self.leader_format = Some((self.node.raft.term, Some(to)));
        Ok(())
    }

    /// A core over `log` (rebuilt from `disk`), publishing its figures in `status`. A
    /// snapshot the disk installed but the state machine did not (a crash in between) is
    /// handed to `events` first. A member alone in its configuration campaigns at once.
    pub fn new(
        cfg: &NodeConfig,
        disk: D,
        log: LogStore,
        transport: T,
        mut events: E,
        status: Arc<RaftStatus>,
    ) -> Result<Self, RaftError> {
        let (snap_start, pending_install) = {
            let core = log.rl();
            let pending = (cfg.applied < core.start.0)
                .then(|| core.snapshot.clone())
                .flatten();
            (core.start.0, pending)
        };
        let applied = cfg.applied.max(snap_start);
        let election_tick = cfg.election_ticks.max(2);
        let mut raft_cfg = Config {
            id: cfg.id,
            election_tick,
            heartbeat_tick: 1,
            applied,
            max_size_per_msg: 1 << 20,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: cfg.pre_vote,
            read_only_option: raft::ReadOnlyOption::Safe,
            skip_bcast_commit: true,
            ..Default::default()
        };
        if cfg.fixed_election_timeout {
            // raft-rs draws the timeout from [min, max) with a generator of its own: a
            // range of one value is the only way to keep it out of a replayed run.
            raft_cfg.min_election_tick = election_tick;
            raft_cfg.max_election_tick = election_tick + 1;
        }
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
        }
        if let Some(snap) = pending_install {
            events.emit(Event::Snapshot(snap))?;
        }
        let single_voter = log.rl().conf_state.voters == [cfg.id];
        let mut core = Core {
            node,
            log,
            disk,
            transport,
            events,
            status,
            max_wals: cfg.max_wals,
            catch_up_entries: cfg.catch_up_entries,
            pending_reads: Vec::new(),
            reads_in_flight: Default::default(),
            incarnation: cfg.incarnation,
            next_read_ctx: 1,
            applied,
            memory_compacted_at: applied,
            applied_format: cfg.format,
            leader_format: None,
            ticks: 0,
            repeated_acks: Default::default(),
            commit_notice: Default::default(),
        };
        if single_voter {
            // Alone in the cluster: no reason to wait an election timeout.
            let _ = core.node.campaign();
        }
        Ok(core)
    }

    /// One tick of the logical clock (`--heartbeat-interval`).
    pub fn tick(&mut self) {
        self.take_applied_hint();
        self.ticks += 1;
        self.node.tick();
        if self.status.leader() != 0 {
            for ctx in self.reads_in_flight.due(self.ticks) {
                self.node
                    .read_index(read_ctx(self.node.raft.id, self.incarnation, ctx));
            }
        }
    }

    /// The state machine applied everything up to `index`, the log's format after it
    /// being `format` (None: not said).
    fn on_applied(&mut self, index: u64, format: Option<u8>) {
        // A state machine restored from a snapshot may be ahead of what this member has
        // seen committed; raft learns it as the commit index catches up. Its format is
        // as of `index`: the leader's scan from the clamped index meets the switches in
        // between again, and the last one still decides.
        if index >= self.applied && format.is_some() && format != self.applied_format {
            self.applied_format = format;
            self.leader_format = None;
        }
        let index = index.min(self.node.raft.raft_log.committed);
        if index > self.applied {
            self.applied = index;
            self.node.advance_apply_to(index);
            self.compact_memory();
        }
    }

    /// Takes what the state machine reported without a command
    /// ([`super::RaftHandle::applied_quietly`]) before anything acts on the applied index.
    fn take_applied_hint(&mut self) {
        let (index, format) = self.status.applied_hint();
        self.on_applied(index, format);
    }

    /// Handles one command; true means stop.
    pub fn handle(&mut self, cmd: Command) -> Result<bool, RaftError> {
        self.take_applied_hint();
        match cmd {
            Command::Propose { data, format, done } => {
                let e = Entry {
                    data: data.into(),
                    context: format::context_of(format).into(),
                    ..Default::default()
                };
                done(self.propose_own(e))
            }
            Command::ProposeConfChange { cc, format, done } => {
                let mut e = Entry::default();
                e.set_entry_type(raft::prelude::EntryType::EntryConfChange);
                e.data = protobuf::Message::write_to_bytes(&cc)
                    .map_err(|e| RaftError::Decode(format!("conf change: {e}")))?
                    .into();
                e.context = format::context_of(format).into();
                done(self.propose_own(e))
            }
            Command::ProposeConfChangeBytes { data, format, done } => {
                let mut e = Entry::default();
                e.set_entry_type(raft::prelude::EntryType::EntryConfChange);
                e.data = data.into();
                e.context = format::context_of(format).into();
                done(self.propose_own(e))
            }
            Command::SwitchFormat { to, done } => done(self.switch_format(to)),
            Command::ApplyConfChange { index, cc, done } => {
                match self.node.apply_conf_change(&cc) {
                    Ok(conf) => {
                        self.log.wl().apply_conf(index, conf.clone());
                        done(Ok(conf));
                    }
                    Err(e) => done(Err(RaftError::Raft(e))),
                }
            }
            Command::ReadIndex { done } => self.pending_reads.push(done),
            Command::Progress { done } => done(Ok(self.progress())),
            Command::Step(m) => {
                if m.get_msg_type() == raft::prelude::MessageType::MsgHeartbeat {
                    // An append that follows a heartbeat is the leader asking again.
                    self.repeated_acks.forget(m.from);
                }
                let stepped = if m.get_msg_type() == raft::prelude::MessageType::MsgPropose {
                    let from = m.from;
                    let stepped = self.step_proposal(m);
                    if stepped.is_ok()
                        && from != self.node.raft.id
                        && self.node.raft.state == raft::StateRole::Leader
                    {
                        let last = self.node.raft.raft_log.last_index();
                        self.commit_notice.forwarded(from, last);
                    }
                    stepped
                } else {
                    self.node.step(m)
                };
                if let Err(e) = stepped {
                    tracing::debug!("raft: step: {e}");
                }
            }
            Command::Applied { index, format } => self.on_applied(index, format),
            Command::Compact { index, floor } => self.compact(index, floor)?,
            Command::CompactPast { floor } => {
                if self.log.rl().start.0 < floor {
                    self.compact(self.applied, floor)?;
                }
            }
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

    /// Issues one ReadIndex for the reads that arrived, then handles the Ready.
    pub fn turn(&mut self) -> Result<(), RaftError> {
        self.take_applied_hint();
        // Without a leader a read cannot be confirmed: keep it until one is elected
        // (the caller's timeout bounds the wait).
        if !self.pending_reads.is_empty() && self.status.leader() != 0 {
            let ctx = self.next_read_ctx;
            self.next_read_ctx += 1;
            self.reads_in_flight
                .insert(ctx, std::mem::take(&mut self.pending_reads), self.ticks);
            self.node
                .read_index(read_ctx(self.node.raft.id, self.incarnation, ctx));
        }
        if self.node.raft.state == raft::StateRole::Leader {
            let committed = self.node.raft.raft_log.committed;
            for id in self.commit_notice.due_now(committed, self.node.raft.prs()) {
                self.send_commit(id);
            }
        }
        self.on_ready()
    }

    /// Whether a follower waits to hear of a commit index that no append or heartbeat
    /// carried yet: its owner calls [`Core::tell_commit`] after
    /// `COMMIT_NOTICE_DELAY` if this stays true (the `commit_notice` module).
    pub fn commit_owed(&self) -> bool {
        let raft = &self.node.raft;
        raft.state == raft::StateRole::Leader
            && self
                .commit_notice
                .owed(raft.id, raft.raft_log.committed, raft.prs())
    }

    /// Sends the commit index to every follower still owed it (with the next turn).
    pub fn tell_commit(&mut self) {
        let raft = &self.node.raft;
        if raft.state != raft::StateRole::Leader {
            return;
        }
        let owed = self
            .commit_notice
            .owed_to(raft.id, raft.raft_log.committed, raft.prs());
        for id in owed {
            self.send_commit(id);
        }
    }

    /// Sends follower `id` (in the progress tracker) an append carrying the commit
    /// index, unless one raft already queued this turn carries it.
    fn send_commit(&mut self, id: u64) {
        let raft = &mut self.node.raft;
        let committed = raft.raft_log.committed;
        let queued = raft.msgs.iter().any(|m| {
            m.to == id
                && m.get_msg_type() == raft::prelude::MessageType::MsgAppend
                && m.commit >= committed
        });
        if !queued {
            raft.send_append(id);
        }
    }

    /// Each member's match index as the leader tracks it (None: not the leader).
    pub fn progress(&self) -> Option<BTreeMap<u64, u64>> {
        (self.node.raft.state == raft::StateRole::Leader).then(|| {
            self.node
                .raft
                .prs()
                .iter()
                .map(|(id, pr)| (*id, pr.matched))
                .collect()
        })
    }

    /// Makes everything buffered durable (before stopping).
    pub fn sync(&mut self) -> Result<(), RaftError> {
        self.disk.sync()
    }

    /// The raft-rs node, for reading its state.
    pub fn raw(&self) -> &RawNode<LogStore> {
        &self.node
    }

    /// The log as raft-rs reads it.
    pub fn log(&self) -> &LogStore {
        &self.log
    }

    /// The disk, to change it (a simulated crash).
    pub fn disk_mut(&mut self) -> &mut D {
        &mut self.disk
    }

    /// The transport, to collect what was sent.
    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.transport
    }

    /// The event sink, to collect what was handed over.
    pub fn events_mut(&mut self) -> &mut E {
        &mut self.events
    }

    /// Takes the disk out of a core that will not be used again.
    pub fn into_disk(self) -> D {
        self.disk
    }

    /// Hands `msgs` to the transport, less the append responses that repeat the last.
    fn send(&mut self, mut msgs: Vec<Message>) {
        self.repeated_acks.filter(&mut msgs, self.ticks);
        self.commit_notice.sent(&msgs);
        if !msgs.is_empty() {
            self.transport.send(msgs);
        }
    }

    fn emit(&mut self, ev: Event) -> Result<(), RaftError> {
        self.events.emit(ev)
    }

    fn emit_committed(&mut self, committed: Vec<Entry>) -> Result<(), RaftError> {
        if committed.is_empty() {
            return Ok(());
        }
        self.emit(Event::Committed(committed))
    }

    /// [`Self::emit_committed`] for entries handed over before this turn's disk work.
    fn emit_committed_ahead(
        &mut self,
        committed: Vec<Entry>,
        disk_work: bool,
    ) -> Result<(), RaftError> {
        if committed.is_empty() {
            return Ok(());
        }
        if disk_work {
            self.events.emit_ahead_of_sync(Event::Committed(committed))
        } else {
            self.events.emit(Event::Committed(committed))
        }
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
            self.send(rd.take_messages());
        }
        let mut installed_snapshot = None;
        if !rd.snapshot().is_empty() {
            let snap = rd.snapshot().clone();
            let meta = snap.get_metadata().clone();
            self.disk
                .install_snapshot(meta.index, &persist::encode_snapshot_meta(&meta));
            self.disk.sync()?;
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
        let disk_work = !rd.entries().is_empty() || rd.must_sync();
        // A leader hands committed entries over before its own sync, so that applying
        // them (and answering their clients) overlaps it. A follower hands them over
        // after its sync and its acknowledgements, in this turn, where the state machine
        // can apply them without a hand-off: the leader waits on the acknowledgements,
        // not on a follower's apply (the commit of a proposal a follower forwarded is
        // told on its own, not with new entries; see `commit_notice`).
        let held_committed = if disk_work && self.node.raft.state != raft::StateRole::Leader {
            rd.take_committed_entries()
        } else {
            self.emit_committed_ahead(rd.take_committed_entries(), disk_work)?;
            Vec::new()
        };
        for e in rd.entries() {
            self.disk.append_entry(e.index, &persist::encode_entry(e));
        }
        // Ready::must_sync (etcd's MustSync): new entries, a snapshot, a new term or a
        // vote must be durable before anything that depends on them is sent; a hard
        // state that only moved the commit index is written with the next sync (on
        // restart the commit index is recomputed from the leader), so a commit-only
        // Ready costs no sync.
        if let Some(hs) = rd.hs() {
            self.disk.set_hard_state(&persist::encode_hard_state(hs));
        }
        if rd.must_sync() {
            self.disk.sync()?;
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
                if leader != 0 {
                    self.status.count_leader_change();
                }
                self.commit_notice.clear();
                if old != 0 {
                    // Reads in flight asked the old leader: they will not be answered.
                    self.fail_in_flight_reads(|| RaftError::LeaderChanged);
                }
            }
        }
        self.status.publish_leadership();
        for rs in rd.take_read_states() {
            let ctx = parse_read_ctx(self.node.raft.id, self.incarnation, &rs.request_ctx);
            if let Some(waiters) = ctx.and_then(|c| self.reads_in_flight.answered(c)) {
                for w in waiters {
                    w(Ok(rs.index));
                }
            }
        }
        if !rd.persisted_messages().is_empty() {
            self.send(rd.take_persisted_messages());
        }
        self.emit_committed(held_committed)?;
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
            self.disk.set_hard_state(&persist::encode_hard_state(&hs));
        }
        self.status
            .commit
            .store(self.log.rl().hard_state.commit, Ordering::Release);
        if !light.messages().is_empty() {
            self.send(light.take_messages());
        }
        self.emit_committed(light.take_committed_entries())
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
            // The snapshot's format is the state machine's to say once installed.
            self.applied_format = None;
            self.leader_format = None;
        }
    }

    fn fail_in_flight_reads(&mut self, err: impl Fn() -> RaftError) {
        for w in self.reads_in_flight.drain() {
            w(Err(err()));
        }
    }

    /// Fails every waiting read and every proposal or read among `leftover` commands.
    pub fn fail_all(&mut self, err: RaftError, leftover: impl IntoIterator<Item = Command>) {
        let msg = err.to_string();
        for w in self.pending_reads.drain(..) {
            w(Err(RaftError::Decode(msg.clone())));
        }
        self.fail_in_flight_reads(|| RaftError::Decode(msg.clone()));
        for cmd in leftover {
            match cmd {
                Command::Propose { done, .. } => done(Err(RaftError::Stopped)),
                Command::ReadIndex { done } => done(Err(RaftError::Stopped)),
                Command::Progress { done } => done(Err(RaftError::Stopped)),
                Command::ProposeConfChange { done, .. } => done(Err(RaftError::Stopped)),
                Command::ProposeConfChangeBytes { done, .. } => done(Err(RaftError::Stopped)),
                Command::SwitchFormat { done, .. } => done(Err(RaftError::Stopped)),
                Command::ApplyConfChange { done, .. } => done(Err(RaftError::Stopped)),
                _ => {}
            }
        }
    }
}
