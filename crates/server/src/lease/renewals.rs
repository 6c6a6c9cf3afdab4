//! Keepalives batched into raft entries: every keepalive goes through raft (so every
//! member knows when each lease was last renewed), but one entry carries all the
//! keepalives that arrived while the previous entries were in flight, so a member under
//! many keepalives proposes few entries.
//!
//! Invariant: each keepalive is answered once, with the TTL its lease was renewed to (0
//! if the lease no longer exists) or with the error that kept its entry from applying.

use std::sync::{Arc, Weak};

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::LeaseRenew;
use oxcd_api::oxcdpb::internal_request::Op;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::apply::Applied;
use crate::member::Member;

/// Entries of keepalives in flight at once; more keepalives wait and join the next.
const ENTRIES_IN_FLIGHT: usize = 4;

/// Keepalives in one entry at most.
const MAX_BATCH: usize = 8192;

struct Pending {
    id: i64,
    done: oneshot::Sender<Result<i64, EtcdError>>,
}

/// The batcher of one member's keepalives.
pub struct Renewals {
    queue: mpsc::UnboundedSender<Pending>,
}

impl Renewals {
    /// Starts the batcher for `member`; it stops when this is dropped or the member is
    /// gone (it never keeps a stopped member's store open).
    pub fn start(member: &Arc<Member>) -> Renewals {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(batcher(Arc::downgrade(member), rx));
        Renewals { queue }
    }

    /// Renews lease `id` through raft: its TTL, or 0 if it does not exist.
    pub async fn renew(&self, id: i64) -> Result<i64, EtcdError> {
        let (done, answer) = oneshot::channel();
        self.queue
            .send(Pending { id, done })
            .map_err(|_| EtcdError::Stopped)?;
        answer.await.map_err(|_| EtcdError::Stopped)?
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
