//! Keepalives. On the leader (the only member that decides expiry) a keepalive restarts
//! the lease's clock at once and is answered from memory, as etcd answers it; every
//! [`CHECKPOINT_EVERY`] the leader replicates the ids it renewed in one raft entry, so
//! that every member, and so the next leader, knows when each lease was last renewed
//! (to within the checkpoint interval, well inside the election timeout the new leader
//! grants anyway). On a follower a keepalive goes through raft itself, batched: one
//! entry carries all the keepalives that arrived while earlier entries were in flight.
//!
//! Invariant: each keepalive is answered once, with the TTL its lease was renewed to (0
//! if the lease no longer exists) or with the error that kept its entry from applying.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::LeaseRenew;
use oxcd_api::oxcdpb::internal_request::Op;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::apply::Applied;
use crate::member::Member;

/// Entries of keepalives in flight at once; more keepalives wait and join the next.
const ENTRIES_IN_FLIGHT: usize = 4;

/// How often the leader replicates the leases it renewed.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// Keepalives in one entry at most.
const MAX_BATCH: usize = 8192;

struct Pending {
    id: i64,
    done: oneshot::Sender<Result<i64, EtcdError>>,
}

/// The batcher of one member's keepalives.
pub struct Renewals {
    queue: mpsc::UnboundedSender<Pending>,
    member: Weak<Member>,
    /// Leases renewed on the leader since its last checkpoint.
    renewed: Arc<Mutex<HashSet<i64>>>,
}

impl Renewals {
    /// Starts the batcher for `member`; it stops when this is dropped or the member is
    /// gone (it never keeps a stopped member's store open).
    pub fn start(member: &Arc<Member>) -> Renewals {
        let (queue, rx) = mpsc::unbounded_channel();
        let renewed = Arc::new(Mutex::new(HashSet::new()));
        tokio::spawn(batcher(Arc::downgrade(member), rx));
        tokio::spawn(checkpoints(Arc::downgrade(member), renewed.clone()));
        Renewals {
            queue,
            member: Arc::downgrade(member),
            renewed,
        }
    }

    /// Renews lease `id`: its TTL, or 0 if it does not exist.
    pub async fn renew(&self, id: i64) -> Result<i64, EtcdError> {
        let member = self.member.upgrade().ok_or(EtcdError::Stopped)?;
        if member.raft.status().leader() == member.id.member_id {
            let ttl = member.leases.renewed(id).unwrap_or(0);
            if ttl > 0 {
                self.renewed
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id);
            }
            return Ok(ttl);
        }
        drop(member);
        let (done, answer) = oneshot::channel();
        self.queue
            .send(Pending { id, done })
            .map_err(|_| EtcdError::Stopped)?;
        answer.await.map_err(|_| EtcdError::Stopped)?
    }
}

/// Replicates the leader's renewals every [`CHECKPOINT_EVERY`], until the member is gone.
async fn checkpoints(member: Weak<Member>, renewed: Arc<Mutex<HashSet<i64>>>) {
    let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(member) = member.upgrade() else {
            return;
        };
        let ids: Vec<i64> = {
            let mut set = renewed.lock().unwrap_or_else(|p| p.into_inner());
            set.drain().collect()
        };
        if ids.is_empty() {
            continue;
        }
        for chunk in ids.chunks(MAX_BATCH) {
            let op = Op::LeaseRenew(LeaseRenew {
                ids: chunk.to_vec(),
            });
            // Lost with a leader change: the next leader grants an election timeout.
            if let Err(e) = member.propose(op).await {
                tracing::debug!("lease checkpoint not replicated: {e}");
            }
        }
    }
}

async fn batcher(member: Weak<Member>, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let in_flight = Arc::new(Semaphore::new(ENTRIES_IN_FLIGHT));
    while let Some(first) = rx.recv().await {
        // While every slot is taken, keepalives pile up in the queue for the next entry.
        let Ok(slot) = in_flight.clone().acquire_owned().await else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let Some(member) = member.upgrade() else {
            return;
        };
        tokio::spawn(async move {
            let ids = batch.iter().map(|p| p.id).collect();
            let answers = match member.propose(Op::LeaseRenew(LeaseRenew { ids })).await {
                Ok(Applied::LeaseRenew(ttls)) if ttls.len() == batch.len() => {
                    ttls.into_iter().map(Ok).collect()
                }
                Ok(_) => vec![Err(EtcdError::Stopped); batch.len()],
                Err(e) => vec![Err(e); batch.len()],
            };
            for (p, a) in batch.into_iter().zip(answers) {
                let _ = p.done.send(a);
            }
            drop(slot);
        });
    }
}
