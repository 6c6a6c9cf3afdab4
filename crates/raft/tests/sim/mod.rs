//! A deterministic simulation of oxcd's raft core: N members' [`Core`]s in one thread,
//! a seeded scheduler deciding every tick, message, fault and client request. Time is
//! logical milliseconds. Faults: message delay, loss, duplication and reordering;
//! partitions; crashes that lose every record not yet synced and the state machine's
//! work since its last durable commit; restarts from what the disk kept.
//!
//! Checked after every step: at most one leader per term; an index committed anywhere
//! never holds another entry; members that applied the same index hold the same state;
//! a read index covers everything committed before the read was asked. At the end,
//! faults heal and the cluster must elect a leader, commit a new entry everywhere and
//! converge.

pub mod machine;
pub mod rng;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use oxcd_raft::disk::MemDisk;
use oxcd_raft::log_store::LogStore;
use oxcd_raft::node::core::{Command, Core};
use oxcd_raft::node::{Event, NodeConfig, RaftStatus, Transport, recovery};
use raft::StateRole;
use raft::prelude::{Message, MessageType};

use machine::{Machine, fnv};
use rng::Rng;

/// What a run does: its size and how often each fault strikes.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Members.
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
    /// Entries a state machine applies between log compactions.
    pub compact_every: u64,
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
            compact_every: 40,
        }
    }
}

/// What a run saw.
#[derive(Debug, Default, Clone)]
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
    id: u64,
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
    members: Vec<Member>,
    net: Vec<InFlight>,
    seq: u64,
    /// `cut[a][b]`: messages from a to b are lost.
    cut: Vec<Vec<bool>>,
    /// Index → hash of the entry committed there.
    committed: HashMap<u64, u64>,
    /// Index → the state of a machine that applied up to it.
    states: HashMap<u64, u64>,
    /// Term → its leader.
    leaders: HashMap<u64, u64>,
    reads: Vec<Read>,
    highest_committed: u64,
    proposals: u64,
    /// Members that applied the entry proposed after healing.
    applied_final: HashSet<u64>,
    /// Where the run is: the seed and the step, for failure messages.
    pub tally: Tally,
    seed: u64,
}

impl Sim {
    /// A cluster of `plan.members` fresh members, driven by `seed`.
    pub fn new(seed: u64, plan: Plan) -> Sim {
        let n = plan.members as usize;
        let mut sim = Sim {
            rng: Rng::new(seed),
            now: 0,
            members: Vec::new(),
            net: Vec::new(),
            seq: 0,
            cut: vec![vec![false; n + 1]; n + 1],
            committed: HashMap::new(),
            states: HashMap::new(),
            leaders: HashMap::new(),
            reads: Vec::new(),
            highest_committed: 0,
            proposals: 0,
            applied_final: HashSet::new(),
            tally: Tally::default(),
            seed,
            plan,
        };
        for id in 1..=sim.plan.members {
            let cfg = sim.node_config(id, 0);
            let (_, meta) = recovery::fresh(&cfg);
            let disk = MemDisk::new(meta.encode());
            sim.members.push(Member {
                id,
                core: None,
                disk: Some(disk),
                machine: Machine::default(),
                durable: Machine::default(),
                snap_files: BTreeMap::new(),
                last_compact: 0,
                next_tick: 0,
                restart_at: 0,
            });
            sim.start(id);
        }
        sim
    }

    fn fail(&self, what: String) -> ! {
        panic!(
            "simulation seed {} failed at {} ms: {what}\nreplay: OXCD_SIM_SEED={} cargo test -p oxcd-raft --test simulation replay",
            self.seed, self.now, self.seed
        );
    }

    fn node_config(&mut self, id: u64, applied: u64) -> NodeConfig {
        NodeConfig {
            id,
            cluster_id: 1,
            voters: (1..=self.plan.members).collect(),
            members: Vec::new(),
            wal_dir: PathBuf::from(format!("sim/{id}")),
            heartbeat: std::time::Duration::from_millis(10),
            // Each start draws its own timeout: members must not time out in lockstep.
            election_ticks: 10 + self.rng.below(10) as usize,
            pre_vote: true,
            applied,
            max_wals: 5,
            catch_up_entries: 10,
            fixed_election_timeout: true,
            incarnation: self.rng.next(),
        }
    }

    fn member(&mut self, id: u64) -> &mut Member {
        &mut self.members[(id - 1) as usize]
    }

    /// Starts member `id` from its disk and its durable state machine.
    fn start(&mut self, id: u64) {
        let applied = self.member(id).durable.applied;
        let cfg = self.node_config(id, applied);
        let m = self.member(id);
        let Some(disk) = m.disk.take() else {
            return;
        };
        m.machine = m.durable;
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
        let m = self.member(id);
        m.core = Some(core);
        m.next_tick = now + 1;
    }

    /// Crashes member `id`: what it did not sync is lost.
    fn crash(&mut self, id: u64) {
        let restart_in = self.rng.between(20, 400);
        let now = self.now;
        let m = self.member(id);
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

    fn up(&self) -> Vec<u64> {
        self.members
            .iter()
            .filter(|m| m.core.is_some())
            .map(|m| m.id)
            .collect()
    }

    /// Runs the plan's faulty period, then heals and checks the cluster recovers.
    pub fn run(&mut self) -> Tally {
        while self.now < self.plan.millis {
            self.faults();
            self.clients();
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
        for id in 1..=plan.members {
            let m = &self.members[(id - 1) as usize];
            if m.core.is_none() && self.now >= m.restart_at {
                self.start(id);
            } else if m.core.is_some() && self.rng.chance(plan.crash_ppm) {
                self.crash(id);
            }
        }
        if self.rng.chance(plan.partition_ppm) {
            let n = plan.members as usize;
            let heal = self.rng.chance(400_000);
            for a in 1..=n {
                for b in 1..=n {
                    self.cut[a][b] = false;
                }
            }
            if !heal {
                // A random side against the rest, sometimes one way only.
                let side: Vec<bool> = (0..=n).map(|_| self.rng.chance(500_000)).collect();
                let one_way = self.rng.chance(200_000);
                for a in 1..=n {
                    for b in 1..=n {
                        if side[a] != side[b] && (!one_way || side[a]) {
                            self.cut[a][b] = true;
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
            let data = format!("p{}", self.proposals).into_bytes();
            self.command(
                id,
                Command::Propose {
                    data,
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

    fn command(&mut self, id: u64, cmd: Command) {
        let Some(core) = self.member(id).core.as_mut() else {
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
        for id in 1..=self.plan.members {
            let now = self.now;
            let tick_every = 10 + self.rng.below(3);
            let m = self.member(id);
            if let Some(core) = m.core.as_mut()
                && now >= m.next_tick
            {
                core.tick();
                m.next_tick = now + tick_every;
            }
        }
        for id in 1..=self.plan.members {
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
            let arrives = !self.cut[from as usize][to as usize]
                && self.members[(to - 1) as usize].core.is_some();
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
                self.member(to).snap_files.insert(index, data);
            }
            self.tally.delivered += 1;
            self.command(to, Command::Step(f.msg));
        }
    }

    /// A member's turn: its Ready handled, its messages sent, its events applied.
    fn turn(&mut self, id: u64) {
        let Some(core) = self.member(id).core.as_mut() else {
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
            self.apply(id, ev);
        }
    }

    fn send(&mut self, from: u64, mut msg: Message) {
        if msg.get_msg_type() == MessageType::MsgSnapshot {
            // As the server's transport: the state machine as it is now, under the
            // position it is at (not the older one of the log's snapshot).
            let m = &self.members[(from - 1) as usize];
            let Some(core) = m.core.as_ref() else {
                return;
            };
            let applied = m.machine.applied;
            let Some(term) = core.log().rl().term_of(applied) else {
                self.command(
                    from,
                    Command::SnapshotSent {
                        to: msg.to,
                        ok: false,
                    },
                );
                return;
            };
            let snap = msg.mut_snapshot();
            let meta = snap.mut_metadata();
            meta.index = applied;
            meta.term = term;
            snap.data = m.machine.encode().into();
        }
        if self.rng.chance(self.plan.drop_ppm) {
            if msg.get_msg_type() == MessageType::MsgSnapshot {
                self.command(
                    from,
                    Command::SnapshotSent {
                        to: msg.to,
                        ok: false,
                    },
                );
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
                    let m = &self.members[(id - 1) as usize];
                    if e.index <= m.machine.applied {
                        continue;
                    }
                    if e.index != m.machine.applied + 1 {
                        self.fail(format!(
                            "member {id} was handed entry {} after applying {}",
                            e.index, m.machine.applied
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
                    }
                    self.highest_committed = self.highest_committed.max(e.index);
                    if e.data.as_ref() == b"final" {
                        self.applied_final.insert(id);
                    }
                    let m = self.member(id);
                    m.machine.apply(&e);
                    let state = m.machine.hash;
                    self.check_state(id, e.index, state);
                }
            }
            Event::Snapshot(snap) => {
                let index = snap.get_metadata().index;
                let data = if snap.data.is_empty() {
                    // Installed in the WAL before a crash: the state machine reads the
                    // file it was received into.
                    self.member(id).snap_files.get(&index).cloned()
                } else {
                    Some(snap.data.to_vec())
                };
                let Some(machine) = data.as_deref().and_then(Machine::decode) else {
                    self.fail(format!("member {id} has no data for snapshot {index}"));
                };
                if machine.applied != index {
                    self.fail(format!(
                        "member {id}: snapshot {index} holds a state at {}",
                        machine.applied
                    ));
                }
                self.tally.snapshots += 1;
                let m = self.member(id);
                m.machine = machine;
                // A snapshot is installed durably.
                m.durable = machine;
                self.check_state(id, index, machine.hash);
            }
        }
        self.after_apply(id);
    }

    /// What the server's apply loop does after applying: report, commit durably now
    /// and then, compact the log behind what is durable.
    fn after_apply(&mut self, id: u64) {
        let durable_now = self.rng.chance(300_000);
        let compact_every = self.plan.compact_every;
        let m = self.member(id);
        let applied = m.machine.applied;
        if durable_now {
            m.durable = m.machine;
        }
        let durable = m.durable.applied;
        let compact = durable >= m.last_compact + compact_every;
        if compact {
            m.last_compact = durable;
        }
        self.command(id, Command::Applied(applied));
        if compact {
            self.command(id, Command::Compact(durable));
        }
    }

    fn check_state(&mut self, id: u64, index: u64, state: u64) {
        if let Some(old) = self.states.insert(index, state)
            && old != state
        {
            self.fail(format!(
                "member {id} holds another state than a member that applied index {index}"
            ));
        }
    }

    fn check_leaders(&mut self) {
        for m in &self.members {
            let Some(core) = m.core.as_ref() else {
                continue;
            };
            let raft = &core.raw().raft;
            if raft.state != StateRole::Leader {
                continue;
            }
            let term = raft.term;
            match self.leaders.get(&term) {
                Some(other) if *other != m.id => {
                    let other = *other;
                    self.fail(format!(
                        "members {other} and {} both lead term {term}",
                        m.id
                    ));
                }
                Some(_) => {}
                None => {
                    self.leaders.insert(term, m.id);
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

    /// Every member up, the network whole and reliable.
    fn heal(&mut self) {
        for id in 1..=self.plan.members {
            if self.member(id).core.is_none() {
                self.start(id);
            }
        }
        for row in &mut self.cut {
            row.iter_mut().for_each(|c| *c = false);
        }
        self.plan.drop_ppm = 0;
        self.plan.dup_ppm = 0;
    }

    /// After the quiet period: a leader, a new entry committed everywhere, one state.
    fn settle(&mut self) {
        let leader = self.members.iter().find_map(|m| {
            let raft = &m.core.as_ref()?.raw().raft;
            (raft.state == StateRole::Leader).then_some(m.id)
        });
        let Some(leader) = leader else {
            self.fail("no leader 3 s after the faults healed".into());
        };
        self.command(
            leader,
            Command::Propose {
                data: b"final".to_vec(),
                done: Box::new(|_| {}),
            },
        );
        let until = self.now + 2_000;
        while self.now < until {
            self.step();
        }
        let applied: Vec<(u64, u64, u64)> = self
            .members
            .iter()
            .map(|m| (m.id, m.machine.applied, m.machine.hash))
            .collect();
        let first = applied[0];
        if applied.iter().any(|a| (a.1, a.2) != (first.1, first.2)) {
            self.fail(format!(
                "members did not converge after healing: (id, applied, state) {applied:?}"
            ));
        }
        if self.applied_final.len() as u64 != self.plan.members {
            self.fail(format!(
                "the entry proposed after healing reached only members {:?}",
                self.applied_final
            ));
        }
    }
}
