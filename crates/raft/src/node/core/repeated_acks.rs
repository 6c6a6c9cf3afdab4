//! A follower's append responses that tell its leader nothing new are not sent.
//!
//! After each entry commits, the leader sends every follower an append carrying no
//! entries, only the new commit index, and raft-rs answers it with the same response it
//! sent for the entry: same term, same index. The leader drops such a response unread
//! (its match index does not move), but on the way it cost a send here, and a read and a
//! raft turn on the leader: for a single client's put, one exchange in four on each
//! peer link.
//!
//! Invariants:
//! - Only an accepting append response is ever held back, and only when the last one
//!   sent to the same member carried the same term and index within the same tick:
//!   a rejection, a response after a new term, a new index or the next tick is always
//!   sent, and a heartbeat from a member clears what was sent to it: the append a
//!   leader sends after a heartbeat is it asking again (it lost the first response,
//!   a link broke), and its answer always goes.
//! - Nothing else is filtered: votes, heartbeats, snapshots, read index messages go out
//!   as raft made them.

use std::collections::HashMap;

use raft::prelude::{Message, MessageType};

/// The last accepting append response sent to each member.
#[derive(Debug, Default)]
pub(super) struct RepeatedAcks {
    last_sent: HashMap<u64, Sent>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    term: u64,
    index: u64,
    tick: u64,
}

impl RepeatedAcks {
    /// Forgets what was sent to `member`: its next response goes out whatever it says.
    pub(super) fn forget(&mut self, member: u64) {
        self.last_sent.remove(&member);
    }

    /// Removes from `msgs` the responses that repeat what was sent at `tick`.
    pub(super) fn filter(&mut self, msgs: &mut Vec<Message>, tick: u64) {
        msgs.retain(|m| self.keep(m, tick));
    }

    fn keep(&mut self, m: &Message, tick: u64) -> bool {
        if m.get_msg_type() != MessageType::MsgAppendResponse {
            return true;
        }
        if m.reject || m.request_snapshot != 0 {
            self.last_sent.remove(&m.to);
            return true;
        }
        let now = Sent {
            term: m.term,
            index: m.index,
            tick,
        };
        if self.last_sent.get(&m.to) == Some(&now) {
            return false;
        }
        self.last_sent.insert(m.to, now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(to: u64, term: u64, index: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppendResponse);
        m.to = to;
        m.term = term;
        m.index = index;
        m
    }

    fn kept(acks: &mut RepeatedAcks, msgs: Vec<Message>, tick: u64) -> Vec<(u64, u64, u64)> {
        let mut msgs = msgs;
        acks.filter(&mut msgs, tick);
        msgs.iter().map(|m| (m.to, m.term, m.index)).collect()
    }

    #[test]
    fn only_a_repeat_within_the_tick_is_held_back() {
        let mut acks = RepeatedAcks::default();
        assert_eq!(kept(&mut acks, vec![ack(1, 2, 10)], 0), [(1, 2, 10)]);
        // The answer to the commit-only append: the same term and index.
        assert_eq!(kept(&mut acks, vec![ack(1, 2, 10)], 0), []);
        // Another member, a new index, a new term, the next tick: all sent.
        assert_eq!(kept(&mut acks, vec![ack(3, 2, 10)], 0), [(3, 2, 10)]);
        assert_eq!(kept(&mut acks, vec![ack(1, 2, 11)], 0), [(1, 2, 11)]);
        assert_eq!(kept(&mut acks, vec![ack(1, 3, 11)], 0), [(1, 3, 11)]);
        assert_eq!(kept(&mut acks, vec![ack(1, 3, 11)], 1), [(1, 3, 11)]);
    }

    #[test]
    fn after_a_heartbeat_the_repeat_goes() {
        let mut acks = RepeatedAcks::default();
        assert_eq!(kept(&mut acks, vec![ack(1, 2, 10)], 0), [(1, 2, 10)]);
        acks.forget(1);
        assert_eq!(kept(&mut acks, vec![ack(1, 2, 10)], 0), [(1, 2, 10)]);
    }

    #[test]
    fn rejections_and_other_messages_always_go_and_reset_the_memory() {
        let mut acks = RepeatedAcks::default();
        assert_eq!(kept(&mut acks, vec![ack(1, 2, 10)], 0), [(1, 2, 10)]);
        let mut reject = ack(1, 2, 10);
        reject.reject = true;
        let mut heartbeat = ack(1, 2, 10);
        heartbeat.set_msg_type(MessageType::MsgHeartbeatResponse);
        assert_eq!(
            kept(&mut acks, vec![reject, heartbeat, ack(1, 2, 10)], 0),
            [(1, 2, 10), (1, 2, 10), (1, 2, 10)]
        );
    }
}
