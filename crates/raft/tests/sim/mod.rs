//! A deterministic simulation of oxcd's raft core: members' [`Core`]s in one thread, a
//! seeded scheduler deciding every tick, message, fault, client request and membership
//! change. Time is logical milliseconds. Faults: message delay, loss, duplication and
//! reordering; partitions (one-way too); crashes that lose every record not yet synced
//! and the state machine's work since its last durable commit; restarts from what the
//! disk kept. Membership: learners added, promoted and removed, voters added and removed,
//! while all of that goes on; a new member starts empty and catches up from the log or a
//! snapshot; a removed member stops (as etcd's peers refuse it).
//!
//! The cluster bootstraps as etcd's does: every initial member's log starts with one
//! committed conf change per initial voter, which the state machine applies like any
//! other, so a member that joins later learns the first configuration from the log.
//!
//! Checked after every step: at most one leader per term; an index committed anywhere
//! never holds another entry; members that applied the same index hold the same state
//! (configuration included); a read index covers everything committed before the read
//! was asked. At the end, faults heal and the cluster must elect a leader, commit a new
//! entry on every member and converge.

pub mod machine;
pub mod rng;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use oxcd_raft::disk::MemDisk;
use oxcd_raft::log_store::LogStore;
use oxcd_raft::node::core::{Command, Core};
use oxcd_raft::node::{Event, NodeConfig, RaftStatus, Transport, recovery};
use protobuf::Message as _;
use raft::StateRole;
use raft::prelude::{ConfChange, ConfChangeType, ConfState, Entry, EntryType};
use raft::prelude::{Message, MessageType};

use machine::{Machine, fnv};
use rng::Rng;

/// What a run does: its size and how often each fault strikes.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Members at bootstrap.
    pub members: u64,
    /// Simulated milliseconds with faults.
    pub millis: u64,
    /// Per message, per million: lost.
    pub drop_ppm: u64,
    /// Per message, per million: delivered twice.
    pub dup_ppm: u64,
    /// A message takes 1 to this many milliseconds (so messages overtake each other).
    pub max_delay: u64,
    /// Per millisecond, per million: a member crashes.
    pub crash_ppm: u64,
    /// Per millisecond, per million: the network splits at random (or heals).
    pub partition_ppm: u64,
    /// Per millisecond, per million: a client proposes to a member.
    pub propose_ppm: u64,
    /// Per millisecond, per million: a client asks a member for a read index.
    pub read_ppm: u64,
    /// Per millisecond, per million: a membership change is proposed.
    pub conf_change_ppm: u64,
    /// Entries a state machine applies between log compactions.
    pub compact_every: u64,
    /// Per millisecond, per million: a member is asked to switch the log's format (only
    /// a leader does).
    pub switch_ppm: u64,
}

impl Plan {
    /// The plan of the CI runs: every fault, often.
    pub fn rough(members: u64) -> Plan {
        Plan {
            members,
            millis: 3_000,
            drop_ppm: 50_000,
            dup_ppm: 20_000,
            max_delay: 8,
            crash_ppm: 1_500,
            partition_ppm: 1_500,
            propose_ppm: 300_000,
            read_ppm: 100_000,
            conf_change_ppm: 0,
            compact_every: 40,
            switch_ppm: 1_500,
        }
    }

    /// [`Plan::rough`] with membership changes.
    pub fn reconfiguring(members: u64) -> Plan {
        Plan {
            conf_change_ppm: 4_000,
            ..Plan::rough(members)
        }
    }
}

/// What a run saw.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Tally {
    /// Entries with data committed.
    pub committed: u64,
    /// Leaders elected (one per term with a leader).
    pub leaders: u64,
    /// Crashes.
    pub crashes: u64,
    /// Snapshots installed from a leader.
    pub snapshots: u64,
    /// Read indexes answered and checked.
    pub reads: u64,
    /// Messages delivered.
    pub delivered: u64,
    /// Conf changes applied (by the first member to apply each).
    pub conf_changes: u64,
    /// Members added (as learners or voters).
    pub added: u64,
    /// Learners promoted.
    pub promoted: u64,
    /// Members removed.
    pub removed: u64,
    /// Log format switches committed.
    pub switches: u64,
}

impl Tally {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Tally) {
        self.committed += other.committed;
        self.leaders += other.leaders;
        self.crashes += other.crashes;
        self.snapshots += other.snapshots;
        self.reads += other.reads;
        self.delivered += other.delivered;
        self.conf_changes += other.conf_changes;
        self.added += other.added;
        self.promoted += other.promoted;
        self.removed += other.removed;
        self.switches += other.switches;
    }
}

/// Messages a core sent, collected after each turn.
#[derive(Default)]
pub struct Outbox(Vec<Message>);

impl Transport for Outbox {
    fn send(&mut self, msgs: Vec<Message>) {
        self.0.extend(msgs);
    }
}

type SimCore = Core<MemDisk, Outbox, Vec<Event>>;

/// A read asked of a member, and what was committed when it was asked.
struct Read {
    member: u64,
    committed_before: u64,
    answer: Arc<Mutex<Option<Result<u64, String>>>>,
}

struct Member {
    core: Option<SimCore>,
    /// The disk while the member is down.
    disk: Option<MemDisk>,
    machine: Machine,
    durable: Machine,
    /// Snapshots received (the server's `snap/<index>.snapdata` files), durable.
    snap_files: BTreeMap<u64, Vec<u8>>,
    last_compact: u64,
    next_tick: u64,
    restart_at: u64,
}

struct InFlight {
    at: u64,
    seq: u64,
    msg: Message,
}

/// A running simulation.
pub struct Sim {
    plan: Plan,
    rng: Rng,
    now: u64,
    members: BTreeMap<u64, Member>,
    removed: HashSet<u64>,
    next_id: u64,
    net: Vec<InFlight>,
    seq: u64,
    /// (from, to): messages between them are lost.
    cut: HashSet<(u64, u64)>,
    /// Index → hash of the entry committed there.
    committed: HashMap<u64, u64>,
    /// Index → the state of a machine that applied up to it, who held it first and how
    /// (for the failure message).
    states: HashMap<u64, (u64, u64, String)>,
    /// Conf changes already counted, by index.
    conf_seen: HashSet<u64>,
    /// Term → its leader.
    leaders: HashMap<u64, u64>,
    reads: Vec<Read>,
    highest_committed: u64,
    proposals: u64,
    /// Members that applied the entry proposed after healing.
    applied_final: HashSet<u64>,
    tally: Tally,
    seed: u64,
}

/// The disk of an initial member: its WAL as the server creates it, with etcd's
/// bootstrap (a committed conf change per initial voter).
fn bootstrap_disk(cfg: &NodeConfig) -> MemDisk {
    let (log, meta) = recovery::fresh(cfg);
    let mut disk = MemDisk::new(meta.encode());
    // A memory disk's sync cannot fail.
    let _ = recovery::write_fresh(&mut disk, &log);
    disk
}

impl Sim {
    /// A cluster of `plan.members` members, driven by `seed`.
    pub fn new(seed: u64, plan: Plan) -> Sim {
        let mut sim = Sim {
            rng: Rng::new(seed),
            now: 0,
            members: BTreeMap::new(),
            removed: HashSet::new(),
            next_id: plan.members + 1,
            net: Vec::new(),
            seq: 0,
            cut: HashSet::new(),
            committed: HashMap::new(),
            states: HashMap::new(),
            conf_seen: HashSet::new(),
            leaders: HashMap::new(),
            reads: Vec::new(),
            highest_committed: 0,
            proposals: 0,
            applied_final: HashSet::new(),
            tally: Tally::default(),
            seed,
            plan,
        };
        let voters: Vec<u64> = (1..=sim.plan.members).collect();
        for id in voters.clone() {
            let mut cfg = sim.node_config(id, &Machine::default());
            cfg.bootstrap_contexts = voters.iter().map(|v| (*v, Vec::new())).collect();
            sim.join(id, bootstrap_disk(&cfg));
        }
        sim
    }

    fn fail(&self, what: String) -> ! {
        panic!(
            "simulation seed {} failed at {} ms: {what}\nreplay: OXCD_SIM_SEED={} cargo test -p oxcd-raft --test simulation a_seed_replays",
            self.seed, self.now, self.seed
        );
    }

    fn node_config(&mut self, id: u64, durable: &Machine) -> NodeConfig {
        NodeConfig {
            id,
            cluster_id: 1,
            // The configuration comes from the log, as in etcd.
            voters: Vec::new(),
            members: Vec::new(),
            bootstrap_contexts: Vec::new(),
            conf_state: Some(durable.conf.clone()),
            wal_dir: PathBuf::from(format!("sim/{id}")),
            heartbeat: std::time::Duration::from_millis(10),
            // Each start draws its own timeout: members must not time out in lockstep.
            election_ticks: 10 + self.rng.below(10) as usize,
            pre_vote: true,
            unsafe_no_fsync: false,
            applied: durable.applied,
            format: Some(durable.format),
            max_wals: 5,
            catch_up_entries: 10,
            fixed_election_timeout: true,
            incarnation: self.rng.next(),
            force_new_cluster: None,
        }
    }

    /// Adds member `id` with `disk` and starts it.
    fn join(&mut self, id: u64, disk: MemDisk) {
        self.members.insert(
            id,
            Member {
                core: None,
                disk: Some(disk),
                machine: Machine::default(),
                durable: Machine::default(),
                snap_files: BTreeMap::new(),
                last_compact: 0,
                next_tick: 0,
                restart_at: 0,
            },
        );
        self.start(id);
    }

    fn member(&mut self, id: u64) -> Option<&mut Member> {
        self.members.get_mut(&id)
    }

    /// Starts member `id` from its disk and its durable state machine.
    fn start(&mut self, id: u64) {
        let Some(durable) = self.members.get(&id).map(|m| m.durable.clone()) else {
            return;
        };
        let cfg = self.node_config(id, &durable);
        let Some(disk) = self.member(id).and_then(|m| m.disk.take()) else {
            return;
        };
        let log = match recovery::recover(&cfg, disk.replay(), "sim") {
            Ok((log, _)) => log,
            Err(e) => self.fail(format!("member {id} cannot recover its log: {e}")),
        };
        let status = Arc::new(RaftStatus::default());
        let core = match Core::new(
            &cfg,
            disk,
            LogStore::new(log),
            Outbox::default(),
            Vec::new(),
            status,
        ) {
            Ok(c) => c,
            Err(e) => self.fail(format!("member {id} cannot start: {e}")),
        };
        let now = self.now;
        if let Some(m) = self.member(id) {
            m.machine = durable;
            m.core = Some(core);
            m.next_tick = now + 1;
        }
    }

    /// Crashes member `id`: what it did not sync is lost.
    fn crash(&mut self, id: u64) {
        let restart_in = self.rng.between(20, 400);
        let now = self.now;
        let Some(m) = self.member(id) else {
            return;
        };
        let Some(core) = m.core.take() else {
            return;
        };
        let mut disk = core.into_disk();
        disk.crash();
        m.disk = Some(disk);
        m.restart_at = now + restart_in;
        self.tally.crashes += 1;
        // Reads it was asked die with it.
        self.reads.retain(|r| r.member != id);
    }

    /// Member `id` was removed from the cluster: it stops for good.
    fn remove(&mut self, id: u64) {
        if self.members.remove(&id).is_some() {
            self.removed.insert(id);
            self.tally.removed += 1;
            self.reads.retain(|r| r.member != id);
        }
    }

    fn ids(&self) -> Vec<u64> {
        self.members.keys().copied().collect()
    }

    fn up(&self) -> Vec<u64> {
        self.members
            .iter()
            .filter(|(_, m)| m.core.is_some())
            .map(|(id, _)| *id)
            .collect()
    }

    /// Runs the plan's faulty period, then heals and checks the cluster recovers.
    pub fn run(&mut self) -> Tally {
        while self.now < self.plan.millis {
            self.faults();
            self.clients();
            self.reconfigure();
            self.step();
        }
        self.heal();
        let quiet_until = self.now + 3_000;
        while self.now < quiet_until {
            self.clients();
            self.step();
        }
        self.settle();
        self.tally.clone()
    }

    fn faults(&mut self) {
        let plan = self.plan.clone();
        for id in self.ids() {
            let Some(m) = self.members.get(&id) else {
                continue;
            };
            if m.core.is_none() && self.now >= m.restart_at {
                self.start(id);
            } else if m.core.is_some() && self.rng.chance(plan.crash_ppm) {
                self.crash(id);
            }
        }
        if self.rng.chance(plan.partition_ppm) {
            self.cut.clear();
            if !self.rng.chance(400_000) {
                // A random side against the rest, sometimes one way only.
                let ids = self.ids();
                let side: HashMap<u64, bool> = ids
                    .iter()
                    .map(|id| (*id, self.rng.chance(500_000)))
                    .collect();
                let one_way = self.rng.chance(200_000);
                for a in &ids {
                    for b in &ids {
                        if side[a] != side[b] && (!one_way || side[a]) {
                            self.cut.insert((*a, *b));
                        }
                    }
                }
            }
        }
    }

    fn clients(&mut self) {
        let up = self.up();
        if up.is_empty() {
            return;
        }
        if self.rng.chance(self.plan.propose_ppm) {
            let id = up[self.rng.below(up.len() as u64) as usize];
            self.proposals += 1;
            let format = self.members.get(&id).map_or(1, |m| m.machine.format);
            let data = machine::write_data(format, self.proposals);
            self.command(
                id,
                Command::Propose {
                    data,
                    format: Some(format),
                    done: Box::new(|_| {}),
                },
            );
        }
        if self.rng.chance(self.plan.switch_ppm) {
            let id = up[self.rng.below(up.len() as u64) as usize];
            let to = self.members.get(&id).map_or(2, |m| 3 - m.machine.format);
            self.command(
                id,
                Command::SwitchFormat {
                    to,
                    done: Box::new(|_| {}),
                },
            );
        }
        if self.rng.chance(self.plan.read_ppm) {
            let id = up[self.rng.below(up.len() as u64) as usize];
            let answer = Arc::new(Mutex::new(None));
            let slot = answer.clone();
            self.reads.push(Read {
                member: id,
                committed_before: self.highest_committed,
                answer,
            });
            self.command(
                id,
                Command::ReadIndex {
                    done: Box::new(move |r| {
                        if let Ok(mut s) = slot.lock() {
                            *s = Some(r.map_err(|e| e.to_string()));
                        }
                    }),
                },
            );
        }
    }

    /// Now and then, a membership change proposed to the member that leads, chosen from
    /// the configuration it has applied: add a learner or a voter (started empty at
    /// once), promote a learner, remove a learner or, above three voters, a voter.
    fn reconfigure(&mut self) {
        if !self.rng.chance(self.plan.conf_change_ppm) {
            return;
        }
        let Some((leader, conf)) = self.members.iter().find_map(|(id, m)| {
            let core = m.core.as_ref()?;
            (core.raw().raft.state == StateRole::Leader).then(|| (*id, m.machine.conf.clone()))
        }) else {
            return;
        };
        let mut cc = ConfChange::default();
        let size = conf.voters.len() + conf.learners.len();
        match self.rng.below(5) {
            0 | 1 if size < 6 => {
                cc.set_change_type(if self.rng.chance(700_000) {
                    ConfChangeType::AddLearnerNode
                } else {
                    ConfChangeType::AddNode
                });
                cc.node_id = self.next_id;
                self.next_id += 1;
            }
            2 if !conf.learners.is_empty() => {
                cc.set_change_type(ConfChangeType::AddNode);
                cc.node_id = conf.learners[self.rng.below(conf.learners.len() as u64) as usize];
            }
            3 if !conf.learners.is_empty() => {
                cc.set_change_type(ConfChangeType::RemoveNode);
                cc.node_id = conf.learners[self.rng.below(conf.learners.len() as u64) as usize];
            }
            4 if conf.voters.len() > 3 => {
                cc.set_change_type(ConfChangeType::RemoveNode);
                cc.node_id = conf.voters[self.rng.below(conf.voters.len() as u64) as usize];
            }
            _ => return,
        }
        self.command(
            leader,
            Command::ProposeConfChange {
                cc,
                format: None,
                done: Box::new(|_| {}),
            },
        );
    }

    fn command(&mut self, id: u64, cmd: Command) {
        let Some(core) = self.member(id).and_then(|m| m.core.as_mut()) else {
            return;
        };
        if let Err(e) = core.handle(cmd) {
            let e = e.to_string();
            self.fail(format!("member {id}: {e}"));
        }
    }

    /// One millisecond: deliveries, ticks, every member's turn, the checks.
    fn step(&mut self) {
        self.now += 1;
        self.deliver();
        for id in self.ids() {
            let now = self.now;
            let tick_every = 10 + self.rng.below(3);
            if let Some(m) = self.member(id)
                && let Some(core) = m.core.as_mut()
                && now >= m.next_tick
            {
                core.tick();
                m.next_tick = now + tick_every;
            }
            // A leader's owner tells an owed commit index after a delay of its own
            // choosing; until then the next append or heartbeat carries it.
            let tell = self.rng.chance(300_000);
            if let Some(m) = self.member(id)
                && let Some(core) = m.core.as_mut()
                && tell
                && core.commit_owed()
            {
                core.tell_commit();
            }
        }
        for id in self.ids() {
            self.turn(id);
        }
        self.check_leaders();
        self.check_reads();
    }

    fn deliver(&mut self) {
        let now = self.now;
        let mut due = Vec::new();
        let mut i = 0;
        while i < self.net.len() {
            if self.net[i].at <= now {
                due.push(self.net.swap_remove(i));
            } else {
                i += 1;
            }
        }
        due.sort_by_key(|f| (f.at, f.seq));
        for f in due {
            let (from, to) = (f.msg.from, f.msg.to);
            let is_snapshot = f.msg.get_msg_type() == MessageType::MsgSnapshot;
            // A removed member's messages are refused, as etcd's peers refuse them.
            let arrives = !self.cut.contains(&(from, to))
                && !self.removed.contains(&from)
                && self.members.get(&to).is_some_and(|m| m.core.is_some());
            if is_snapshot {
                self.command(from, Command::SnapshotSent { to, ok: arrives });
            }
            if !arrives {
                continue;
            }
            if is_snapshot {
                let snap = f.msg.get_snapshot();
                let index = snap.get_metadata().index;
                let data = snap.data.to_vec();
                if let Some(m) = self.member(to) {
                    m.snap_files.insert(index, data);
                }
            }
            self.tally.delivered += 1;
            self.command(to, Command::Step(f.msg));
        }
    }

    /// A member's turn: its Ready handled, its messages sent, its events applied.
    fn turn(&mut self, id: u64) {
        let Some(core) = self.member(id).and_then(|m| m.core.as_mut()) else {
            return;
        };
        if let Err(e) = core.turn() {
            let e = e.to_string();
            self.fail(format!("member {id}: turn: {e}"));
        }
        let sent = std::mem::take(&mut core.transport_mut().0);
        let events = std::mem::take(core.events_mut());
        for msg in sent {
            self.send(id, msg);
        }
        for ev in events {
            if !self.members.contains_key(&id) {
                return;
            }
            self.apply(id, ev);
        }
    }

    /// Tells `from` its snapshot to `to` did not arrive (raft retries later).
    fn snapshot_failed(&mut self, from: u64, to: u64) {
        self.command(from, Command::SnapshotSent { to, ok: false });
    }

    fn send(&mut self, from: u64, mut msg: Message) {
        if msg.get_msg_type() == MessageType::MsgSnapshot {
            // As the server's transport: the state machine as it is now, under the
            // position it is at (not the older one of the log's snapshot).
            let Some(m) = self.members.get(&from) else {
                return;
            };
            let Some(core) = m.core.as_ref() else {
                return;
            };
            let applied = m.machine.applied;
            let Some(term) = core.log().rl().term_of(applied) else {
                self.snapshot_failed(from, msg.to);
                return;
            };
            let conf = m.machine.conf.clone();
            let data = m.machine.encode();
            let snap = msg.mut_snapshot();
            let meta = snap.mut_metadata();
            meta.index = applied;
            meta.term = term;
            meta.set_conf_state(conf);
            snap.data = data.into();
        }
        if self.rng.chance(self.plan.drop_ppm) {
            if msg.get_msg_type() == MessageType::MsgSnapshot {
                self.snapshot_failed(from, msg.to);
            }
            return;
        }
        let copies = if self.rng.chance(self.plan.dup_ppm) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            self.seq += 1;
            let at = self.now + self.rng.between(1, self.plan.max_delay);
            self.net.push(InFlight {
                at,
                seq: self.seq,
                msg: msg.clone(),
            });
        }
    }

    fn apply(&mut self, id: u64, ev: Event) {
        match ev {
            Event::Committed(entries) => {
                for e in entries {
                    if !self.apply_entry(id, &e) {
                        return;
                    }
                }
            }
            Event::Snapshot(snap) => {
                let index = snap.get_metadata().index;
                let data = if snap.data.is_empty() {
                    // Installed in the WAL before a crash: the state machine reads the
                    // file it was received into.
                    self.member(id)
                        .and_then(|m| m.snap_files.get(&index).cloned())
                } else {
                    Some(snap.data.to_vec())
                };
                let Some(machine) = data.as_deref().and_then(Machine::decode) else {
                    self.fail(format!("member {id} has no data for snapshot {index}"));
                };
                if machine.applied != index || &machine.conf != snap.get_metadata().get_conf_state()
                {
                    self.fail(format!(
                        "member {id}: snapshot {index} holds a state at {} with another configuration",
                        machine.applied
                    ));
                }
                self.tally.snapshots += 1;
                let hash = machine.hash;
                if let Some(m) = self.member(id) {
                    m.machine = machine.clone();
                    // A snapshot is installed durably.
                    m.durable = machine;
                }
                self.check_state(id, index, hash);
            }
        }
        self.after_apply(id);
    }

    /// Applies one committed entry on member `id`; false when the member is gone.
    fn apply_entry(&mut self, id: u64, e: &Entry) -> bool {
        let Some(applied) = self.members.get(&id).map(|m| m.machine.applied) else {
            return false;
        };
        if e.index <= applied {
            return true;
        }
        if e.index != applied + 1 {
            self.fail(format!(
                "member {id} was handed entry {} after applying {applied}",
                e.index
            ));
        }
        let identity = fnv(fnv(0, &e.term.to_le_bytes()), &e.data);
        if let Some(old) = self.committed.insert(e.index, identity)
            && old != identity
        {
            self.fail(format!(
                "index {} committed twice with different entries (member {id})",
                e.index
            ));
        }
        if !e.data.is_empty() && e.index > self.highest_committed {
            self.tally.committed += 1;
            if oxcd_raft::node::format::switched_to(&e.data).is_some() {
                self.tally.switches += 1;
            }
        }
        self.highest_committed = self.highest_committed.max(e.index);
        if e.data.as_ref() == b"final" {
            self.applied_final.insert(id);
        }
        let misread = self.member(id).and_then(|m| m.machine.apply(e).err());
        if let Some(what) = misread {
            self.fail(format!("member {id}: {what}"));
        }
        let removed_self =
            e.get_entry_type() == EntryType::EntryConfChange && self.apply_conf_change(id, e);
        let Some(state) = self.members.get(&id).map(|m| m.machine.hash) else {
            return false;
        };
        self.check_state(id, e.index, state);
        if removed_self {
            // This member applied its own removal: it stops (etcd's "the member has
            // been permanently removed from the cluster").
            self.remove(id);
            return false;
        }
        true
    }

    /// The state machine takes a committed conf change: raft applies it, the machine
    /// keeps the configuration it gives; the first time a change applies anywhere, an
    /// added member is started (empty, as an operator starts it once `member add`
    /// answers) and a removed one is stopped. True when member `id` removed itself.
    fn apply_conf_change(&mut self, id: u64, e: &Entry) -> bool {
        let Ok(cc) = ConfChange::parse_from_bytes(&e.data) else {
            self.fail(format!(
                "member {id}: conf change {} does not decode",
                e.index
            ));
        };
        let answer = Arc::new(Mutex::new(None));
        let slot = answer.clone();
        self.command(
            id,
            Command::ApplyConfChange {
                index: e.index,
                cc: cc.clone(),
                done: Box::new(move |r| {
                    if let Ok(mut s) = slot.lock() {
                        *s = Some(r.map_err(|e| e.to_string()));
                    }
                }),
            },
        );
        let conf = match answer.lock().map(|mut a| a.take()) {
            Ok(Some(Ok(conf))) => conf,
            // Refused by raft (the same way on every member): the configuration stays.
            Ok(Some(Err(_))) => return false,
            _ => self.fail(format!("member {id}: conf change {} unanswered", e.index)),
        };
        let first_time = self.conf_seen.insert(e.index) && e.index > self.plan.members;
        let node = cc.node_id;
        let kind = cc.get_change_type();
        if first_time {
            self.tally.conf_changes += 1;
            let known = self.members.contains_key(&node) || self.removed.contains(&node);
            match kind {
                ConfChangeType::AddNode if self.was_learner(id, node) => self.tally.promoted += 1,
                ConfChangeType::AddNode | ConfChangeType::AddLearnerNode if !known => {
                    self.tally.added += 1;
                    let cfg = self.node_config(node, &Machine::default());
                    let (_, meta) = recovery::fresh(&cfg);
                    self.join(node, MemDisk::new(meta.encode()));
                }
                _ => {}
            }
        }
        if let Some(m) = self.member(id) {
            m.machine.set_conf(conf);
        }
        if kind == ConfChangeType::RemoveNode {
            if node == id {
                return true;
            }
            // etcd's peers stop talking to a member once they apply its removal.
            self.remove(node);
        }
        false
    }

    fn was_learner(&self, by: u64, node: u64) -> bool {
        self.members
            .get(&by)
            .is_some_and(|m| m.machine.conf.learners.contains(&node))
    }

    /// What the server's apply loop does after applying: report, commit durably now
    /// and then, compact the log behind what is durable.
    fn after_apply(&mut self, id: u64) {
        let durable_now = self.rng.chance(300_000);
        let compact_every = self.plan.compact_every;
        let Some(m) = self.member(id) else {
            return;
        };
        let applied = m.machine.applied;
        if durable_now {
            m.durable = m.machine.clone();
        }
        let durable = m.durable.applied;
        let compact = durable >= m.last_compact + compact_every;
        if compact {
            m.last_compact = durable;
        }
        let (format, floor) = (m.machine.format, m.durable.format_since);
        self.command(
            id,
            Command::Applied {
                index: applied,
                format: Some(format),
            },
        );
        if compact {
            self.command(
                id,
                Command::Compact {
                    index: durable,
                    floor,
                },
            );
        }
    }

    fn check_state(&mut self, id: u64, index: u64, state: u64) {
        let how = self
            .members
            .get(&id)
            .map(|m| format!("{:?} writes {}", m.machine.conf, m.machine.writes))
            .unwrap_or_default();
        match self.states.get(&index) {
            Some((old, first, first_how)) if *old != state => {
                self.fail(format!(
                    "member {id} holds another state than member {first} at index {index}: {how} vs {first_how}"
                ));
            }
            Some(_) => {}
            None => {
                self.states.insert(index, (state, id, how));
            }
        }
    }

    fn check_leaders(&mut self) {
        let leading: Vec<(u64, u64)> = self
            .members
            .iter()
            .filter_map(|(id, m)| {
                let raft = &m.core.as_ref()?.raw().raft;
                (raft.state == StateRole::Leader).then_some((*id, raft.term))
            })
            .collect();
        for (id, term) in leading {
            match self.leaders.get(&term) {
                Some(other) if *other != id => {
                    let other = *other;
                    self.fail(format!("members {other} and {id} both lead term {term}"));
                }
                Some(_) => {}
                None => {
                    self.leaders.insert(term, id);
                    self.tally.leaders += 1;
                }
            }
        }
    }

    fn check_reads(&mut self) {
        let mut open = Vec::new();
        for r in std::mem::take(&mut self.reads) {
            let answer = r.answer.lock().map(|mut a| a.take()).unwrap_or(None);
            match answer {
                None => open.push(r),
                Some(Err(_)) => {}
                Some(Ok(index)) => {
                    if index < r.committed_before {
                        self.fail(format!(
                            "member {} answered read index {index}, but {} was committed before the read",
                            r.member, r.committed_before
                        ));
                    }
                    self.tally.reads += 1;
                }
            }
        }
        self.reads = open;
    }

    /// Every member up, the network whole and reliable, no more membership changes.
    fn heal(&mut self) {
        for id in self.ids() {
            if self.members.get(&id).is_some_and(|m| m.core.is_none()) {
                self.start(id);
            }
        }
        self.cut.clear();
        self.plan.drop_ppm = 0;
        self.plan.dup_ppm = 0;
    }

    /// After the quiet period: a leader, a new entry committed on every member, one
    /// state, one configuration — which every member is in.
    fn settle(&mut self) {
        let leader = self.members.iter().find_map(|(id, m)| {
            let raft = &m.core.as_ref()?.raw().raft;
            (raft.state == StateRole::Leader).then_some(*id)
        });
        let Some(leader) = leader else {
            self.fail("no leader 3 s after the faults healed".into());
        };
        self.command(
            leader,
            Command::Propose {
                data: b"final".to_vec(),
                format: None,
                done: Box::new(|_| {}),
            },
        );
        let until = self.now + 2_000;
        while self.now < until {
            self.step();
        }
        let states: Vec<(u64, u64, u64)> = self
            .members
            .iter()
            .map(|(id, m)| (*id, m.machine.applied, m.machine.hash))
            .collect();
        let first = states[0];
        if states.iter().any(|s| (s.1, s.2) != (first.1, first.2)) {
            self.fail(format!(
                "members did not converge after healing: (id, applied, state) {states:?}"
            ));
        }
        let missing: Vec<u64> = self
            .ids()
            .into_iter()
            .filter(|id| !self.applied_final.contains(id))
            .collect();
        if !missing.is_empty() {
            self.fail(format!(
                "the entry proposed after healing did not reach members {missing:?}"
            ));
        }
        let conf: ConfState = self
            .members
            .values()
            .next()
            .map(|m| m.machine.conf.clone())
            .unwrap_or_default();
        let mut in_conf: Vec<u64> = conf.voters.iter().chain(&conf.learners).copied().collect();
        in_conf.sort_unstable();
        if in_conf != self.ids() {
            self.fail(format!(
                "the configuration {conf:?} is not the running members {:?}",
                self.ids()
            ));
        }
    }
}
