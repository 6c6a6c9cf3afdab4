//! The role handle: whether this member leads, who does, each member's progress when
//! this one leads, and the hand-over of leadership. Follows raft's leadership watch: nothing polls.

use std::collections::BTreeMap;
use std::time::Duration;

use oxcd_api::errors::EtcdError;
use oxcd_raft::node::{Leadership, RaftHandle, RaftStatus};
use tokio::sync::{oneshot, watch};

/// This member's view of who leads. Cheap to clone.
#[derive(Clone)]
pub struct Role {
    me: u64,
    raft: RaftHandle,
}

impl Role {
    /// The role of member `me`, as its raft loop `raft` reports it.
    pub fn new(me: u64, raft: RaftHandle) -> Role {
        Role { me, raft }
    }

    /// This member's id.
    pub fn me(&self) -> u64 {
        self.me
    }

    /// Whether this member leads now.
    pub fn is_leader(&self) -> bool {
        self.raft.status().leader() == self.me
    }

    /// The leader's id now (0: none known).
    pub fn leader(&self) -> u64 {
        self.raft.status().leader()
    }

    /// The raft term now.
    pub fn term(&self) -> u64 {
        self.raft.status().term()
    }

    /// What the raft loop publishes of itself (indexes, term, leader, its WAL's
    /// counters).
    pub fn status(&self) -> &RaftStatus {
        self.raft.status()
    }

    /// The commit index now.
    pub fn commit(&self) -> u64 {
        self.raft.status().commit()
    }

    /// Asks raft to hand leadership to member `to` (this member leading); Err when the
    /// raft loop has stopped.
    pub fn transfer_leader(&self, to: u64) -> Result<(), EtcdError> {
        self.raft
            .transfer_leader(to)
            .map_err(|_| EtcdError::Stopped)
    }

    /// Who leads, in which term: a watch raft sends to whenever either changes.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.raft.leadership()
    }

    /// Waits, at most `within`, until the leader (0: none) is one `wanted` accepts;
    /// whether it is.
    pub async fn wait_for_leader(
        &self,
        within: Duration,
        mut wanted: impl FnMut(u64) -> bool,
    ) -> bool {
        let mut leadership = self.leadership();
        tokio::time::timeout(within, leadership.wait_for(|l| wanted(l.leader)))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Each member's match index when this member leads: Err(NotLeader) when it does
    /// not (only the leader tracks the others' logs).
    pub async fn progress(&self) -> Result<BTreeMap<u64, u64>, EtcdError> {
        let (tx, rx) = oneshot::channel();
        self.raft.progress(move |r| {
            let _ = tx.send(r);
        });
        rx.await
            .map_err(|_| EtcdError::Stopped)?
            .map_err(|_| EtcdError::Stopped)?
            .ok_or(EtcdError::NotLeader)
    }
}
