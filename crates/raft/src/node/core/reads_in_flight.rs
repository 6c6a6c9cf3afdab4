//! The ReadIndex requests this member issued and has not had answered, and when to ask
//! again.
//!
//! A ReadIndex travels as a message to the leader, and its answer as a message back:
//! either can be lost (a link that is still connecting, a peer restarting), and raft
//! asks only once. etcd resends an unanswered ReadIndex every 500 ms
//! (`readIndexRetryTime` in etcd's `server/etcdserver/v3_server.go`) until the request
//! times out; here it is asked again after [`RETRY_TICKS`] heartbeat ticks, 500 ms at
//! etcd's default 100 ms heartbeat, under the same context.
//!
//! Invariants:
//! - A request is asked again under its own context, so an answer to either asking
//!   finds the same waiters, and the later of two answers finds none (they were
//!   answered): each waiter is answered once.
//! - An index answered to a repeated asking was read by the leader after the reads
//!   arrived here, so it is as linearizable as the first asking's would have been.

use std::collections::HashMap;

use super::Done;

/// Heartbeat ticks an unanswered ReadIndex waits before it is asked again.
pub(super) const RETRY_TICKS: u64 = 5;

struct Asked {
    waiters: Vec<Done<u64>>,
    /// The tick at which it was last asked.
    at: u64,
}

/// The unanswered ReadIndex requests, by context counter.
#[derive(Default)]
pub(super) struct ReadsInFlight {
    asked: HashMap<u64, Asked>,
}

impl ReadsInFlight {
    /// Records that `ctx` was asked at `tick` for `waiters`.
    pub(super) fn insert(&mut self, ctx: u64, waiters: Vec<Done<u64>>, tick: u64) {
        self.asked.insert(ctx, Asked { waiters, at: tick });
    }

    /// The waiters of `ctx`, now answered (None: not ours, or answered before).
    pub(super) fn answered(&mut self, ctx: u64) -> Option<Vec<Done<u64>>> {
        self.asked.remove(&ctx).map(|a| a.waiters)
    }

    /// The contexts unanswered for [`RETRY_TICKS`] at `tick`, marked as asked again now.
    pub(super) fn due(&mut self, tick: u64) -> Vec<u64> {
        let mut due: Vec<u64> = self
            .asked
            .iter_mut()
            .filter(|(_, a)| tick.saturating_sub(a.at) >= RETRY_TICKS)
            .map(|(ctx, a)| {
                a.at = tick;
                *ctx
            })
            .collect();
        // In the order they were first asked: a replayed run sends the same messages.
        due.sort_unstable();
        due
    }

    /// Every unanswered waiter, forgotten here.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = Done<u64>> + '_ {
        self.asked.drain().flat_map(|(_, a)| a.waiters)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn waiter(log: &Arc<Mutex<Vec<u64>>>) -> Done<u64> {
        let log = log.clone();
        Box::new(move |r| {
            if let Ok(i) = r {
                log.lock().expect("log").push(i);
            }
        })
    }

    #[test]
    fn unanswered_reads_are_due_every_retry_ticks_until_answered() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut reads = ReadsInFlight::default();
        reads.insert(2, vec![waiter(&log)], 10);
        reads.insert(1, vec![waiter(&log), waiter(&log)], 8);
        assert!(reads.due(12).is_empty());
        assert_eq!(reads.due(13), vec![1]);
        assert_eq!(reads.due(15), vec![2]);
        assert!(reads.due(17).is_empty());
        assert_eq!(reads.due(20), vec![1, 2]);
        for w in reads.answered(1).expect("asked") {
            w(Ok(7));
        }
        assert!(reads.answered(1).is_none(), "answered once");
        assert_eq!(reads.due(30), vec![2]);
        assert_eq!(*log.lock().expect("log"), vec![7, 7]);
        assert_eq!(reads.drain().count(), 1);
        assert!(reads.due(100).is_empty());
    }

    /// A follower's read whose request or answer is lost is answered after it is asked
    /// again, once.
    #[test]
    fn a_read_lost_on_the_way_to_the_leader_or_back_is_asked_again() {
        use crate::node::Command;
        use crate::node::core::test_cluster::elected;
        use raft::prelude::MessageType;

        for lost in [MessageType::MsgReadIndex, MessageType::MsgReadIndexResp] {
            let mut c = elected();
            c.propose(3, false);
            let answers = Arc::new(Mutex::new(Vec::new()));
            let follower = &mut c.cores[1].0;
            follower
                .handle(Command::ReadIndex {
                    done: waiter(&answers),
                })
                .expect("read");
            c.lose_next.push(lost);
            c.settle(false);
            assert!(answers.lock().expect("answers").is_empty(), "{lost:?} lost");
            let commit = c.leader().raw().raft.raft_log.committed;
            for _ in 0..RETRY_TICKS {
                c.cores[1].0.tick();
            }
            c.settle(false);
            assert_eq!(*answers.lock().expect("answers"), vec![commit], "{lost:?}");
            for _ in 0..3 * RETRY_TICKS {
                c.cores[1].0.tick();
            }
            c.settle(false);
            assert_eq!(answers.lock().expect("answers").len(), 1, "answered once");
        }
    }
}
