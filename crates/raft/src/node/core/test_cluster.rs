//! A three-member cluster of cores in one thread, for the core's unit tests: messages
//! are delivered by the test, which can hold back those to member 3 or lose the next
//! message of a type.

use std::sync::{Arc, Mutex};

use raft::prelude::{Message, MessageType};

use super::{Core, LogDisk, Transport};
use crate::disk::MemDisk;
use crate::log_store::LogStore;
use crate::node::{Command, Event, NodeConfig, RaftStatus, recovery};

/// Messages a core sent, for the test to deliver or hold.
#[derive(Clone, Default)]
pub(crate) struct Outbox(pub(crate) Arc<Mutex<Vec<Message>>>);

impl Transport for Outbox {
    fn send(&mut self, msgs: Vec<Message>) {
        self.0.lock().expect("outbox").extend(msgs);
    }
}

pub(crate) type TestCore = Core<MemDisk, Outbox, Vec<Event>>;

pub(crate) fn node_config(id: u64) -> NodeConfig {
    NodeConfig {
        id,
        cluster_id: 1,
        voters: vec![1, 2, 3],
        members: Vec::new(),
        bootstrap_contexts: Vec::new(),
        conf_state: None,
        wal_dir: std::path::PathBuf::from(format!("test/{id}")),
        heartbeat: std::time::Duration::from_millis(10),
        election_ticks: 10,
        pre_vote: false,
        applied: 0,
        format: None,
        max_wals: 5,
        catch_up_entries: 10,
        fixed_election_timeout: true,
        incarnation: id,
        unsafe_no_fsync: false,
        force_new_cluster: None,
    }
}

/// A fresh core of `cfg` over `disk`, sending into `outbox`.
pub(crate) fn core_over<D: LogDisk>(
    cfg: &NodeConfig,
    disk: D,
    outbox: &Outbox,
) -> Core<D, Outbox, Vec<Event>> {
    let (log, _) = recovery::fresh(cfg);
    Core::new(
        cfg,
        disk,
        LogStore::new(log),
        outbox.clone(),
        Vec::new(),
        Arc::new(RaftStatus::default()),
    )
    .expect("core")
}

pub(crate) struct Cluster {
    pub(crate) cores: Vec<(TestCore, Outbox)>,
    /// Messages to member 3 kept back while it is slow.
    held: Vec<Message>,
    /// Messages of these types are lost, the next one of each type once.
    pub(crate) lose_next: Vec<MessageType>,
    pub(crate) snapshots_sent: usize,
}

impl Cluster {
    pub(crate) fn new() -> Cluster {
        let cores = (1..=3)
            .map(|id| {
                let outbox = Outbox::default();
                let core = core_over(&node_config(id), MemDisk::new(Vec::new()), &outbox);
                (core, outbox)
            })
            .collect();
        Cluster {
            cores,
            held: Vec::new(),
            lose_next: Vec::new(),
            snapshots_sent: 0,
        }
    }

    /// Turns every core, applies what each committed and delivers messages until
    /// none are left (those to member 3 are held while `slow_3`).
    pub(crate) fn settle(&mut self, slow_3: bool) {
        for _ in 0..1000 {
            let mut mail = std::mem::take(&mut self.held);
            if slow_3 {
                self.held = mail;
                mail = Vec::new();
            }
            for (core, outbox) in &mut self.cores {
                core.turn().expect("turn");
                let applied: Vec<u64> = std::mem::take(core.events_mut())
                    .into_iter()
                    .filter_map(|ev| match ev {
                        Event::Committed(ents) => ents.last().map(|e| e.index),
                        Event::Snapshot(s) => Some(s.get_metadata().index),
                    })
                    .collect();
                if let Some(&index) = applied.last() {
                    core.handle(Command::Applied {
                        index,
                        format: None,
                    })
                    .expect("applied");
                }
                mail.append(&mut outbox.0.lock().expect("outbox"));
            }
            if mail.is_empty() {
                return;
            }
            for m in mail {
                if let Some(i) = self.lose_next.iter().position(|&t| t == m.get_msg_type()) {
                    self.lose_next.remove(i);
                    continue;
                }
                if m.get_msg_type() == MessageType::MsgSnapshot {
                    self.snapshots_sent += 1;
                }
                if slow_3 && m.to == 3 {
                    self.held.push(m);
                } else {
                    let to = (m.to - 1) as usize;
                    self.cores[to].0.handle(Command::Step(m)).expect("step");
                }
            }
        }
        panic!("the cluster did not settle");
    }

    pub(crate) fn leader(&mut self) -> &mut TestCore {
        let (core, _) = self
            .cores
            .iter_mut()
            .find(|(c, _)| c.raw().raft.state == raft::StateRole::Leader)
            .expect("a leader");
        core
    }

    pub(crate) fn propose(&mut self, n: usize, slow_3: bool) {
        for i in 0..n {
            let data = format!("put {i}").into_bytes();
            self.leader()
                .handle(Command::Propose {
                    data,
                    format: None,
                    done: Box::new(|r| r.expect("proposed")),
                })
                .expect("propose");
            self.settle(slow_3);
        }
    }

    /// (first index held, last index) of member `id`'s log in memory.
    pub(crate) fn log_of(&self, id: u64) -> (u64, u64) {
        let core = self.cores[(id - 1) as usize].0.log().rl();
        (core.start.0 + 1, core.last_index())
    }
}

/// A cluster whose member 1 was elected (fixed timeouts, ticked in order).
pub(crate) fn elected() -> Cluster {
    let mut c = Cluster::new();
    while !c
        .cores
        .iter()
        .any(|(core, _)| core.raw().raft.state == raft::StateRole::Leader)
    {
        c.cores[0].0.tick();
        c.settle(false);
    }
    c
}
