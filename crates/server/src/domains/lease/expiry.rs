//! The leader's side of leases: on becoming leader it gives every lease a grace period
//! of one election timeout (keepalives could not get through without a leader), then
//! it proposes the revocation of every lease whose clock ran out, paced as etcd paces
//! them, so that thousands of leases expiring together do not crowd out client writes.
//! Followers never revoke: their clocks only matter if they become leader. In etcd's
//! vocabulary the revocation is etcd's plain `LeaseRevoke`, made as root.

use std::sync::Arc;
use std::time::Duration;

use oxcd_api::etcdserverpb::LeaseRevokeRequest;
use oxcd_api::oxcdpb::{LeaseExpire, RequestAuth};
use tokio::sync::watch;

use crate::domains::lease::LeaseHandles;
use crate::machine::vocabulary::Vocabulary;

/// How often the leader looks for expired leases (etcd: 500 ms).
const CHECK_EVERY: Duration = Duration::from_millis(500);

/// Revocations proposed per second at most (etcd's leaseRevokeRate).
pub const REVOKES_PER_SECOND: usize = 1000;

/// Runs until `stop` turns true.
pub async fn run(lease: Arc<LeaseHandles>, mut stop: watch::Receiver<bool>) {
    let mut leadership = lease.role.leadership();
    let me = lease.role.me();
    let per_check = REVOKES_PER_SECOND * CHECK_EVERY.as_millis() as usize / 1000;
    let mut leading = false;
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            changed = leadership.changed() => if changed.is_err() { return },
            _ = stop.wait_for(|s| *s) => return,
        }
        let leader = leadership.borrow_and_update().leader == me;
        if leader && !leading {
            match lease.vocabulary.get() {
                Vocabulary::Oxcd => lease.leases.promote(lease.election_timeout),
                Vocabulary::Etcd => lease.leases.promote_as_etcd(lease.election_timeout),
            }
        }
        leading = leader;
        if !leading {
            continue;
        }
        // Every keepalive applied so far is in the clocks just read; one applied after
        // this index voids the decision.
        let decided_at = lease.reads.applied_index();
        for id in lease.leases.take_expired(per_check) {
            let writes = lease.writes.clone();
            let leases = lease.leases.clone();
            let etcd_revoke =
                (lease.vocabulary.get() == Vocabulary::Etcd).then(|| root_caller(&lease));
            tokio::spawn(async move {
                let proposed = match etcd_revoke {
                    // etcd's leader revokes as root (`authStore.WithRoot`), unconditionally.
                    Some(caller) => writes
                        .propose(LeaseRevokeRequest { id }, caller)
                        .await
                        .map(drop),
                    None => writes
                        .propose(LeaseExpire { id, decided_at }, None)
                        .await
                        .map(drop),
                };
                match proposed {
                    Ok(_) => {
                        leases.counts().expired();
                        tracing::debug!(lease = %format!("{id:016x}"), "revoked expired lease")
                    }
                    // Revoked meanwhile, or renewed after the decision.
                    Err(oxcd_api::errors::EtcdError::LeaseNotFound) => {}
                    // Retried once the retry interval passes, if still leader.
                    Err(e) => {
                        tracing::warn!(lease = %format!("{id:016x}"), "failed to revoke expired lease: {e}")
                    }
                }
            });
        }
    }
}

/// The caller etcd's leader revokes an expired lease as: root at the current auth
/// revision while auth is on, nobody otherwise.
fn root_caller(lease: &LeaseHandles) -> Option<RequestAuth> {
    let auth = lease.callers.auth().state();
    auth.enabled.then(|| RequestAuth {
        username: "root".into(),
        revision: auth.revision,
    })
}
