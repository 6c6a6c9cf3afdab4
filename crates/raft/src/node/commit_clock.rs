//! The raft thread's side of telling followers a commit index: when a leader waits for
//! the next append to carry it, and when it tells at once (the core's
//! `commit_notice` says what is owed; this says when, since the core reads no clock).
//!
//! Waiting pays only under a steady stream of proposals, where the next append comes
//! before the wait ends and carries the index for free. When proposals come further
//! apart than [`COMMIT_NOTICE_DELAY`] (a paced writer, an idle cluster), or only two
//! came close (a paced writer catching up), waiting would only delay the followers'
//! watchers and reads, so the index is told at once, as etcd does.
//!
//! Invariants:
//! - A commit index owed to a follower is told within [`COMMIT_NOTICE_DELAY`] of the
//!   turn that found it owed, plus the raft thread's wake-up granularity (its
//!   `epoll_wait` counts whole milliseconds: up to 1 ms more).
//! - The raft thread never waits past the deadline: [`CommitClock::deadline`] bounds
//!   its sleep.

use std::time::Instant;

use super::core::COMMIT_NOTICE_DELAY;

/// When the commit index owed to followers is told.
#[derive(Debug, Default)]
pub(super) struct CommitClock {
    /// Since when a commit index has been owed and left for the next append to carry.
    owed_since: Option<Instant>,
    /// When this member's last proposal arrived.
    last_proposal: Option<Instant>,
    /// How many proposals in a row came within the delay of the one before (up to 2).
    close_gaps: u8,
}

impl CommitClock {
    /// A proposal arrived at `now`.
    pub(super) fn proposal(&mut self, now: Instant) {
        let close = self
            .last_proposal
            .is_some_and(|last| now.saturating_duration_since(last) < COMMIT_NOTICE_DELAY);
        self.close_gaps = if close {
            (self.close_gaps + 1).min(2)
        } else {
            0
        };
        self.last_proposal = Some(now);
    }

    /// When the raft thread must wake to tell an owed commit index (None: nothing owed).
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.owed_since.map(|at| at + COMMIT_NOTICE_DELAY)
    }

    /// Whether the wait for an append to carry the owed index is over at `now`.
    pub(super) fn due(&self, now: Instant) -> bool {
        self.deadline().is_some_and(|d| now >= d)
    }

    /// Whether an `owed` index is to be told now, without waiting (no steady stream).
    pub(super) fn tell_at_once(&self, owed: bool) -> bool {
        owed && self.close_gaps < 2
    }

    /// After a turn at `now`: whether to tell the `owed` index at once (no steady stream
    /// of proposals to carry it). Starts or ends the wait otherwise.
    pub(super) fn after_turn(&mut self, owed: bool, now: Instant) -> bool {
        if !owed {
            self.owed_since = None;
            return false;
        }
        // Two close gaps in a row: a stream, not a writer catching up on its pace.
        if self.tell_at_once(owed) {
            self.owed_since = None;
            return true;
        }
        self.owed_since.get_or_insert(now);
        false
    }

    /// The owed index was told.
    pub(super) fn told(&mut self) {
        self.owed_since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn an_owed_index_waits_only_under_a_steady_stream_of_proposals() {
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let mut c = CommitClock::default();
        c.proposal(at(0));
        assert!(c.after_turn(true, at(100)), "one proposal: told at once");
        c.proposal(at(300));
        assert!(c.tell_at_once(true) && !c.tell_at_once(false));
        assert!(c.after_turn(true, at(350)), "one close gap: told at once");
        c.proposal(at(600));
        assert!(
            !c.after_turn(true, at(700)),
            "steady: wait for the next append"
        );
        assert_eq!(c.deadline(), Some(at(700) + COMMIT_NOTICE_DELAY));
        assert!(!c.after_turn(true, at(800)), "still waiting, same deadline");
        assert_eq!(c.deadline(), Some(at(700) + COMMIT_NOTICE_DELAY));
        assert!(!c.due(at(800)));
        assert!(c.due(at(700) + COMMIT_NOTICE_DELAY));
        c.told();
        assert_eq!(c.deadline(), None);
        assert!(!c.after_turn(false, at(2000)), "an append carried it");
        c.proposal(at(50_000));
        assert!(
            c.after_turn(true, at(50_100)),
            "a paced writer: told at once"
        );
        assert_eq!(c.deadline(), None);
    }
}
