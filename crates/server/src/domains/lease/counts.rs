//! What etcd 3.5 counts of leases (`server/lease/metrics.go`, and
//! `etcd_debugging_server_lease_expired_total` in `server/etcdserver/metrics.go`):
//! grants and revocations applied here, keepalives the leader renewed, the granted
//! TTLs, and the expired leases the leader revoked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use oxcd_storage::timing::{Histogram, HistogramSnapshot};

/// The member's lease counts since it started.
#[derive(Debug)]
pub struct LeaseCounts {
    granted: AtomicU64,
    revoked: AtomicU64,
    renewed: AtomicU64,
    expired: AtomicU64,
    /// Granted TTLs in seconds (etcd's buckets: 1 doubling 24 times).
    ttls: Histogram,
}

impl Default for LeaseCounts {
    fn default() -> LeaseCounts {
        LeaseCounts {
            granted: AtomicU64::new(0),
            revoked: AtomicU64::new(0),
            renewed: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            ttls: Histogram::exponential(1.0, 2.0, 24),
        }
    }
}

impl LeaseCounts {
    /// A grant of `ttl` seconds was applied.
    pub fn granted(&self, ttl: i64) {
        self.granted.fetch_add(1, Ordering::Relaxed);
        self.ttls
            .observe(Duration::from_secs(u64::try_from(ttl).unwrap_or(0)));
    }

    /// A revocation was applied.
    pub fn revoked(&self) {
        self.revoked.fetch_add(1, Ordering::Relaxed);
    }

    /// The leader renewed a lease.
    pub fn renewed(&self) {
        self.renewed.fetch_add(1, Ordering::Relaxed);
    }

    /// The leader revoked an expired lease.
    pub fn expired(&self) {
        self.expired.fetch_add(1, Ordering::Relaxed);
    }

    /// (granted, revoked, renewed, expired).
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        (
            self.granted.load(Ordering::Relaxed),
            self.revoked.load(Ordering::Relaxed),
            self.renewed.load(Ordering::Relaxed),
            self.expired.load(Ordering::Relaxed),
        )
    }

    /// The granted TTLs.
    pub fn ttls(&self) -> HistogramSnapshot {
        self.ttls.snapshot()
    }
}
