//! When a leader tells its followers that the commit index moved.
//!
//! raft-rs, as etcd's raft, answers every advance of the commit index with an append to
//! every follower carrying nothing but the new index. For a single client's put that
//! is one message per follower per put, and on each follower a wake-up of the link's
//! reader and of the raft thread, to learn something the next append or heartbeat
//! carries anyway. The leader here skips that broadcast (raft-rs's
//! `skip_bcast_commit`) and tells the commit index:
//! - with the next append or heartbeat, which carry it, as before;
//! - at once to a follower whose forwarded proposal just committed: its client is
//!   waiting for that follower to apply it;
//! - otherwise after [`COMMIT_NOTICE_DELAY`], if nothing carried it by then: the owner
//!   of the core asks ([`super::Core::commit_owed`], [`super::Core::tell_commit`]).
//!   Under a steady load the next proposal's append carries it first; when the load
//!   stops, a follower's watchers and reads lag the leader by at most the delay.
//!
//! Invariants:
//! - Only when followers learn of a commit changes, never what is committed: raft's
//!   safety does not depend on it, and raft-rs still broadcasts at once while a
//!   configuration change is pending.
//! - A follower that can take messages is never left without the commit index it can
//!   use (the least of its match index and the leader's commit) for longer than the
//!   delay, unless its messages are lost, which the next heartbeat repairs as before.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use raft::prelude::{Message, MessageType};
use raft::{Progress, ProgressState, ProgressTracker};

/// How long a leader lets a commit index wait for the next append to carry it.
pub const COMMIT_NOTICE_DELAY: Duration = Duration::from_millis(1);

/// What each follower was told, and what it waits for.
#[derive(Debug, Default)]
pub(super) struct CommitNotice {
    /// The commit index the last append or heartbeat to each member carried.
    told: HashMap<u64, u64>,
    /// The last index of each proposal a member forwarded, in order, until it is told
    /// committed (a follower's clients wait for it to apply them).
    forwarded: HashMap<u64, VecDeque<u64>>,
}

impl CommitNotice {
    /// Notes the commit indexes `msgs` carry to their members.
    pub(super) fn sent(&mut self, msgs: &[Message]) {
        for m in msgs {
            if matches!(
                m.get_msg_type(),
                MessageType::MsgAppend | MessageType::MsgHeartbeat
            ) {
                let told = self.told.entry(m.to).or_default();
                *told = (*told).max(m.commit);
                if let Some(waiting) = self.forwarded.get_mut(&m.to) {
                    while waiting.front().is_some_and(|&i| i <= m.commit) {
                        waiting.pop_front();
                    }
                    if waiting.is_empty() {
                        self.forwarded.remove(&m.to);
                    }
                }
            }
        }
    }

    /// `member` forwarded a proposal that now ends at `last_index`.
    pub(super) fn forwarded(&mut self, member: u64, last_index: u64) {
        let waiting = self.forwarded.entry(member).or_default();
        // A leader's log only grows while it leads: indexes come in order.
        if waiting.back().is_none_or(|&i| i < last_index) {
            waiting.push_back(last_index);
        }
    }

    /// Forgets everything: leadership changed hands.
    pub(super) fn clear(&mut self) {
        self.told.clear();
        self.forwarded.clear();
    }

    /// The members to tell `committed` now: their forwarded proposals committed.
    pub(super) fn due_now(&self, committed: u64, prs: &ProgressTracker) -> Vec<u64> {
        let mut due: Vec<u64> = self
            .forwarded
            .iter()
            .filter(|&(&id, waiting)| {
                waiting.front().is_some_and(|&i| i <= committed) && self.can_tell(id, prs)
            })
            .map(|(&id, _)| id)
            .collect();
        due.sort_unstable();
        due
    }

    /// Whether a follower that can take messages has not been told a commit index it
    /// can use.
    pub(super) fn owed(&self, self_id: u64, committed: u64, prs: &ProgressTracker) -> bool {
        prs.iter()
            .any(|(&id, pr)| self.owes(self_id, id, pr, committed, prs))
    }

    /// The followers owed a commit index, in id order.
    pub(super) fn owed_to(&self, self_id: u64, committed: u64, prs: &ProgressTracker) -> Vec<u64> {
        let mut owed: Vec<u64> = prs
            .iter()
            .filter(|&(&id, pr)| self.owes(self_id, id, pr, committed, prs))
            .map(|(&id, _)| id)
            .collect();
        owed.sort_unstable();
        owed
    }

    fn owes(
        &self,
        self_id: u64,
        id: u64,
        pr: &Progress,
        committed: u64,
        prs: &ProgressTracker,
    ) -> bool {
        id != self_id
            && self.can_tell(id, prs)
            && pr.matched.min(committed) > self.told.get(&id).copied().unwrap_or(0)
    }

    /// A follower replicating and not paused: an append to it goes out now.
    fn can_tell(&self, id: u64, prs: &ProgressTracker) -> bool {
        prs.get(id)
            .is_some_and(|pr| pr.state == ProgressState::Replicate && !pr.is_paused())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(to: u64, commit: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.to = to;
        m.commit = commit;
        m
    }

    #[test]
    fn each_forwarded_proposal_is_due_once_committed_until_told() {
        // A leader (member 1) whose followers replicate up to its last index.
        let mut c = crate::node::core::test_cluster::elected();
        c.propose(10, false);
        let prs = c.leader().raw().raft.prs().clone();
        let last = c.leader().raw().raft.raft_log.last_index();
        for id in [2, 3] {
            assert_eq!(prs.get(id).map(|pr| pr.matched), Some(last));
        }
        let mut n = CommitNotice::default();
        n.forwarded(2, 5);
        n.forwarded(2, 7);
        assert!(n.due_now(4, &prs).is_empty());
        assert_eq!(n.due_now(5, &prs), vec![2]);
        n.sent(&[append(2, 5)]);
        assert!(n.due_now(6, &prs).is_empty(), "5 told, 7 not committed");
        assert_eq!(
            n.due_now(7, &prs),
            vec![2],
            "the second proposal is due too"
        );
        n.sent(&[append(2, 7)]);
        assert!(n.due_now(100, &prs).is_empty());
        // Owed: a follower holding entries above what it was told.
        assert!(n.owed(1, last, &prs));
        assert_eq!(n.owed_to(1, last, &prs), vec![2, 3]);
        n.sent(&[append(2, last), append(3, last)]);
        assert!(!n.owed(1, last, &prs));
    }
}
