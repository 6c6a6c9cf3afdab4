//! Which peers this member is connected to, and since when (etcd's `ActiveSince`): the
//! strict reconfiguration checks refuse a change that would lose quorum because a
//! member is down or unreachable. A peer counts as connected from the moment a raft
//! stream to it is open until that stream ends or a dial fails.
//!
//! Invariant: a peer has an entry exactly while a stream to it is open.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Connection times of this member's peers.
#[derive(Debug, Default)]
pub struct PeerHealth {
    since: Mutex<HashMap<u64, Instant>>,
}

impl PeerHealth {
    /// A stream to `id` opened now (an open one keeps its earlier time).
    pub fn connected(&self, id: u64) {
        self.lock().entry(id).or_insert_with(Instant::now);
    }

    /// The stream to `id` ended, or it could not be reached.
    pub fn disconnected(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Since when a stream to `id` has been open (None: not connected).
    pub fn active_since(&self, id: u64) -> Option<Instant> {
        self.lock().get(&id).copied()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        self.since.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_active_from_its_first_connection_until_it_drops() {
        let h = PeerHealth::default();
        assert_eq!(h.active_since(2), None);
        h.connected(2);
        let first = h.active_since(2).expect("connected");
        h.connected(2);
        assert_eq!(h.active_since(2), Some(first));
        h.disconnected(2);
        assert_eq!(h.active_since(2), None);
    }
}
