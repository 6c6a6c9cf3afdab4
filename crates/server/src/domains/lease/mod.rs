//! Leases: the lessor's view of every lease, its keys and its local expiry clock.
//!
//! Replicated state is the lease table (id → granted TTL, written by the apply path in
//! the batch's transaction) and each key's `lease` field in MVCC. The [`Lessor`] keeps
//! both in memory for the apply path and the services, and rebuilds them from the
//! backend at start and after a snapshot.
//!
//! Expiry is local time, never replicated: every member restarts a lease's clock when it
//! applies its grant or a replicated keepalive (the leader's checkpoints of the
//! keepalives it renewed, or keepalives sent through raft), so whichever member leads
//! next knows the remaining TTL to within a checkpoint. Only the leader acts on it
//! ([`expiry`]): it proposes revocations, which every member applies alike.
//!
//! Invariants:
//! - `keys` of a lease and `key_lease` are inverse maps of the current MVCC state.
//! - The apply path changes the maps only while applying a log entry, in log order, so
//!   they are the same on every member at the same applied index.

pub mod apply;
pub mod counts;
pub mod expiry;
pub mod handles;
pub mod renewals;
pub mod service;
pub(crate) mod table;

pub use handles::LeaseHandles;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use oxcd_mvcc::Store;

/// etcd's largest TTL (seconds).
pub const MAX_TTL: i64 = 9_000_000_000;

/// How long the leader waits before proposing the revocation of a lease again.
const REVOKE_RETRY: Duration = Duration::from_secs(3);

/// One lease as a member knows it.
#[derive(Debug)]
struct Lease {
    /// Granted TTL in seconds.
    ttl: i64,
    /// The keys attached to it.
    keys: BTreeSet<Vec<u8>>,
    /// When it expires by this member's clock.
    expiry: Instant,
    /// The leader proposed its revocation and waits until then before trying again.
    revoking_until: Option<Instant>,
}

impl Lease {
    fn new(ttl: i64, now: Instant) -> Lease {
        Lease {
            ttl,
            keys: BTreeSet::new(),
            expiry: now + ttl_duration(ttl),
            revoking_until: None,
        }
    }

    /// Restarts its clock with the full TTL.
    fn restart(&mut self, now: Instant) {
        self.expiry = now + ttl_duration(self.ttl);
    }
}

fn ttl_duration(ttl: i64) -> Duration {
    Duration::from_secs(ttl.max(0) as u64)
}

#[derive(Debug, Default)]
struct Leases {
    by_id: HashMap<i64, Lease>,
    key_lease: HashMap<Vec<u8>, i64>,
}

/// What LeaseTimeToLive reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimeToLive {
    /// The granted TTL.
    pub granted: i64,
    /// Whole seconds left (truncated, as etcd).
    pub remaining: i64,
    /// The attached keys, in key order.
    pub keys: Vec<Vec<u8>>,
}

/// What the leader's in-memory renewal of a lease found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemoryRenewal {
    /// Renewed to this TTL.
    Renewed(i64),
    /// No such lease.
    Gone,
    /// Its expiry is proposed: renew through raft instead.
    Expiring,
}

/// Every lease of the member (see the module doc).
#[derive(Debug)]
pub struct Lessor {
    leases: Mutex<Leases>,
    /// What etcd's metrics count of leases.
    counts: counts::LeaseCounts,
    /// etcd's minimum TTL: 1.5 election timeouts, in whole seconds rounded up.
    min_ttl: i64,
}

impl Lessor {
    /// Loads every lease and its keys from `store`'s backend.
    pub fn load(store: &Store, min_ttl: i64) -> Result<Lessor, oxcd_mvcc::MvccError> {
        let lessor = Lessor::empty(min_ttl);
        lessor.reload(store)?;
        Ok(lessor)
    }

    /// A lessor without leases, for tools and benchmarks whose store holds none.
    pub fn empty(min_ttl: i64) -> Lessor {
        Lessor {
            leases: Mutex::new(Leases::default()),
            counts: counts::LeaseCounts::default(),
            min_ttl,
        }
    }

    /// etcd's minimum TTL for an election timeout of `election_ticks` heartbeats:
    /// `(3 * ticks / 2) * heartbeat`, rounded up to whole seconds.
    pub fn min_ttl_for(heartbeat: Duration, election_ticks: u32) -> i64 {
        let min = heartbeat * (3 * election_ticks / 2);
        min.as_millis().div_ceil(1000) as i64
    }

    /// Replaces the in-memory state with the backend's (after a snapshot is installed).
    /// Every lease's clock restarts with its full TTL.
    pub fn reload(&self, store: &Store) -> Result<(), oxcd_mvcc::MvccError> {
        let now = Instant::now();
        let mut fresh = Leases::default();
        for (id, ttl) in table::load(store.backend())? {
            fresh.by_id.insert(id, Lease::new(ttl, now));
        }
        for (key, id) in store.leased_keys()? {
            // A key naming a lease that no longer exists cannot happen (revocation deletes
            // the keys in the same transaction); skip it rather than invent a lease.
            if let Some(l) = fresh.by_id.get_mut(&id) {
                l.keys.insert(key.clone());
                fresh.key_lease.insert(key, id);
            }
        }
        *self.lock() = fresh;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Leases> {
        // Updates are single map operations: a panic elsewhere leaves them consistent.
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The smallest TTL a grant gets.
    pub fn min_ttl(&self) -> i64 {
        self.min_ttl
    }

    /// Whether lease `id` exists.
    pub fn exists(&self, id: i64) -> bool {
        self.lock().by_id.contains_key(&id)
    }

    /// What LeaseTimeToLive reports of `id`, if it exists.
    pub fn time_to_live(&self, id: i64, with_keys: bool) -> Option<TimeToLive> {
        let leases = self.lock();
        let l = leases.by_id.get(&id)?;
        let left = l.expiry.saturating_duration_since(Instant::now());
        Some(TimeToLive {
            granted: l.ttl,
            remaining: left.as_secs() as i64,
            keys: if with_keys {
                l.keys.iter().cloned().collect()
            } else {
                Vec::new()
            },
        })
    }

    /// The keys attached to lease `id`, in key order (none if it does not exist).
    pub fn keys(&self, id: i64) -> Vec<Vec<u8>> {
        self.lock()
            .by_id
            .get(&id)
            .map(|l| l.keys.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every lease id, in id order.
    pub fn ids(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.lock().by_id.keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Whether `id` exists and its clock has run out here.
    pub fn is_expired(&self, id: i64) -> bool {
        self.lock()
            .by_id
            .get(&id)
            .is_some_and(|l| l.expiry <= Instant::now())
    }

    /// On becoming leader: no lease expires sooner than `grace` from now, so clients
    /// whose keepalives could not get through while there was no leader can renew.
    pub fn promote(&self, grace: Duration) {
        let floor = Instant::now() + grace;
        for l in self.lock().by_id.values_mut() {
            l.expiry = l.expiry.max(floor);
            l.revoking_until = None;
        }
    }

    /// On becoming leader of an etcd cluster, as etcd's lessor `Promote`s: no member
    /// knows when a lease was last renewed (etcd replicates no keepalive), so every lease
    /// gets its whole TTL again, plus `extend` for the leaderless time.
    pub fn promote_as_etcd(&self, extend: Duration) {
        let now = Instant::now();
        for l in self.lock().by_id.values_mut() {
            l.expiry = now + extend + Duration::from_secs(l.ttl.max(0) as u64);
            l.revoking_until = None;
        }
    }

    /// Up to `max` leases whose clock ran out and whose revocation is not already under
    /// way, earliest first; each is marked as being revoked for a while.
    pub fn take_expired(&self, max: usize) -> Vec<i64> {
        let now = Instant::now();
        let mut leases = self.lock();
        let mut due: Vec<(Instant, i64)> = leases
            .by_id
            .iter()
            .filter(|(_, l)| l.expiry <= now && l.revoking_until.is_none_or(|t| t <= now))
            .map(|(id, l)| (l.expiry, *id))
            .collect();
        due.sort_unstable();
        due.truncate(max);
        for (_, id) in &due {
            if let Some(l) = leases.by_id.get_mut(id) {
                l.revoking_until = Some(now + REVOKE_RETRY);
            }
        }
        due.into_iter().map(|(_, id)| id).collect()
    }

    /// The apply path granted lease `id` with `ttl`: its clock starts now.
    pub(crate) fn granted(&self, id: i64, ttl: i64) {
        self.counts.granted(ttl);
        self.lock()
            .by_id
            .insert(id, Lease::new(ttl, Instant::now()));
    }

    /// The apply path renewed `id`: its clock restarts with the full TTL. Returns the TTL,
    /// or `None` if the lease does not exist.
    pub(crate) fn renewed(&self, id: i64) -> Option<i64> {
        let mut leases = self.lock();
        let l = leases.by_id.get_mut(&id)?;
        l.restart(Instant::now());
        l.revoking_until = None;
        Some(l.ttl)
    }

    /// The leader renews `id` in memory (its clients' keepalives and those its followers
    /// forward): the clock restarts with the full TTL. A lease whose expiry is already
    /// proposed is left alone: its keepalive must go through raft, where one applied
    /// after the decision voids it, so that no acknowledged keepalive is undone by an
    /// expiry in flight (etcd's leader makes such a keepalive wait for the revocation).
    pub(crate) fn renew_in_memory(&self, id: i64) -> MemoryRenewal {
        let mut leases = self.lock();
        let Some(l) = leases.by_id.get_mut(&id) else {
            return MemoryRenewal::Gone;
        };
        if l.revoking_until.is_some() {
            return MemoryRenewal::Expiring;
        }
        l.restart(Instant::now());
        self.counts.renewed();
        MemoryRenewal::Renewed(l.ttl)
    }

    /// The keys of `id` in key order, if it exists (what a revocation deletes).
    pub(crate) fn keys_of(&self, id: i64) -> Option<Vec<Vec<u8>>> {
        self.lock()
            .by_id
            .get(&id)
            .map(|l| l.keys.iter().cloned().collect())
    }

    /// What etcd's metrics count of leases.
    pub fn counts(&self) -> &counts::LeaseCounts {
        &self.counts
    }

    /// The apply path revoked `id` (its keys are deleted).
    pub(crate) fn revoked(&self, id: i64) {
        self.counts.revoked();
        let mut leases = self.lock();
        if let Some(l) = leases.by_id.remove(&id) {
            for k in l.keys {
                leases.key_lease.remove(&k);
            }
        }
    }

    /// The apply path wrote `key` with `lease` (0: none): it moves to that lease.
    pub(crate) fn attach(&self, key: &[u8], lease: i64) {
        let mut leases = self.lock();
        let prev = leases.key_lease.get(key).copied().unwrap_or(0);
        if prev == lease {
            return;
        }
        if let Some(l) = leases.by_id.get_mut(&prev) {
            l.keys.remove(key);
        }
        if lease == 0 {
            leases.key_lease.remove(key);
        } else if let Some(l) = leases.by_id.get_mut(&lease) {
            l.keys.insert(key.to_vec());
            leases.key_lease.insert(key.to_vec(), lease);
        }
    }

    /// The apply path deleted `keys`: they leave their leases.
    pub(crate) fn detach(&self, keys: &[Vec<u8>]) {
        let mut leases = self.lock();
        for k in keys {
            if let Some(prev) = leases.key_lease.remove(k)
                && let Some(l) = leases.by_id.get_mut(&prev)
            {
                l.keys.remove(k);
            }
        }
    }

    /// A fresh lease id for a grant proposed by this member: positive, not in use here.
    pub fn new_id(&self, seed: u64) -> i64 {
        let leases = self.lock();
        let mut x = seed;
        loop {
            // splitmix64: spreads ids over the whole positive range.
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            let id = ((z ^ (z >> 31)) & (i64::MAX as u64)) as i64;
            if id != 0 && !leases.by_id.contains_key(&id) {
                return id;
            }
        }
    }
}

#[cfg(test)]
mod tests;
