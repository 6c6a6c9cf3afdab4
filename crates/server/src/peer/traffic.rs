//! What flows between this member and each peer, for `/metrics` under etcd's names:
//! bytes sent and received, messages that could not be sent, and the round trip time a
//! probe measures every few seconds (etcd's prober runs every 4 s).
//!
//! Invariant: counting is a relaxed atomic addition on a peer's counts, which are made
//! once per peer and kept (a peer that left keeps its totals, as etcd's counters do).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oxcd_storage::timing::Histogram;

use crate::edge::metrics::text::{Exposition, Family, Kind};

/// How often the round trip to a connected peer is measured.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(4);

/// The counts of one peer.
#[derive(Debug)]
pub struct PeerCounts {
    /// Bytes of raft messages sent to it.
    pub sent_bytes: AtomicU64,
    /// Raft messages to it dropped: not connected, or its queue full.
    pub sent_failures: AtomicU64,
    /// Bytes of raft messages received from it.
    pub received_bytes: AtomicU64,
    /// Round trip times (etcd's buckets: 100 µs doubling to 3.28 s).
    pub rtt: Histogram,
}

impl Default for PeerCounts {
    fn default() -> PeerCounts {
        PeerCounts {
            sent_bytes: AtomicU64::new(0),
            sent_failures: AtomicU64::new(0),
            received_bytes: AtomicU64::new(0),
            rtt: Histogram::exponential(0.0001, 2.0, 16),
        }
    }
}

impl PeerCounts {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// The traffic with every peer.
#[derive(Debug, Default)]
pub struct PeerTraffic {
    peers: Mutex<BTreeMap<u64, Arc<PeerCounts>>>,
}

impl PeerTraffic {
    /// The counts of peer `id` (made on first use).
    pub fn of(&self, id: u64) -> Arc<PeerCounts> {
        self.peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(id)
            .or_default()
            .clone()
    }

    /// Adds the peer families to `e` (none before a peer is known, as etcd).
    pub fn add(&self, e: &mut Exposition) {
        let peers: Vec<(u64, Arc<PeerCounts>)> = self
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(id, c)| (*id, c.clone()))
            .collect();
        if peers.is_empty() {
            return;
        }
        let mut sent = Family::new(
            "etcd_network_peer_sent_bytes_total",
            Kind::Counter,
            "The total number of bytes sent to peers.",
        );
        let mut received = Family::new(
            "etcd_network_peer_received_bytes_total",
            Kind::Counter,
            "The total number of bytes received from peers.",
        );
        let mut failures = Family::new(
            "etcd_network_peer_sent_failures_total",
            Kind::Counter,
            "The total number of send failures from peers.",
        );
        let mut rtt = Family::new(
            "etcd_network_peer_round_trip_time_seconds",
            Kind::Histogram,
            "Round-Trip-Time histogram between peers",
        );
        let mut by_name: Vec<(String, Arc<PeerCounts>)> = peers
            .into_iter()
            .map(|(id, c)| (format!("{id:x}"), c))
            .collect();
        by_name.sort_by(|a, b| a.0.cmp(&b.0));
        let (mut any_sent, mut any_received, mut any_failed) = (false, false, false);
        for (name, c) in &by_name {
            let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
            if load(&c.sent_bytes) > 0 {
                sent.sample(&[("To", name)], load(&c.sent_bytes) as f64);
                any_sent = true;
            }
            if load(&c.received_bytes) > 0 {
                received.sample(&[("From", name)], load(&c.received_bytes) as f64);
                any_received = true;
            }
            if load(&c.sent_failures) > 0 {
                failures.sample(&[("To", name)], load(&c.sent_failures) as f64);
                any_failed = true;
            }
            rtt.histogram(&[("To", name)], &c.rtt.snapshot());
        }
        // A family with no sample is not written, as Go's client leaves it out.
        if any_sent {
            e.add(sent);
        }
        if any_received {
            e.add(received);
        }
        if any_failed {
            e.add(failures);
        }
        e.add(rtt);
    }
}
