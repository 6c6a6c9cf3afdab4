//! Keepalives. On the leader (the only member that decides expiry) a keepalive restarts
//! the lease's clock at once and is answered from memory, as etcd answers it; every
//! [`CHECKPOINT_EVERY`] the leader replicates the ids it renewed in one raft entry, so
//! that every member, and so the next leader, knows when each lease was last renewed
//! (to within the checkpoint interval, well inside the election timeout the new leader
//! grants anyway). A follower forwards its keepalives to the leader in batches over the
//! peer connection (`Peer.RenewLeases`, as etcd's followers forward theirs), and the
//! leader renews them as its own. When the leader cannot be asked (unknown, unreachable,
//! or no longer leading) the batch goes through raft instead: one entry carries all the
//! keepalives that arrived while earlier batches were in flight.
//!
//! The leader renews from memory only while it plainly leads: a quorum heard from
//! within half an election timeout and no expiry of the lease already proposed.
//! Otherwise the keepalive goes through raft too, so a leader cut off from its
//! followers (which still believes it leads until its quorum check deposes it) cannot
//! acknowledge renewals that the next leader would never hear of.
//!
//! In etcd's vocabulary (a member of an etcd cluster) keepalives are etcd's: the leader
//! renews from memory and replicates nothing, and a follower forwards each keepalive to
//! the leader's `POST /leases` ([`crate::peer::etcd::leases`]).
//!
//! Invariant: each keepalive is answered once, with the TTL its lease was renewed to (0
//! if the lease no longer exists) or with the error that kept its entry from applying.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::peer_client::PeerClient;
use oxcd_api::oxcdpb::{LeaseRenew, PeerRenewLeasesRequest};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tonic::transport::Channel;

use crate::domains::lease::LeaseHandles;
use crate::domains::lease::MemoryRenewal;
use crate::machine::vocabulary::Vocabulary;
use crate::peer::PeerDialer;
use crate::peer::transport::Link;

/// Entries of keepalives in flight at once; more keepalives wait and join the next.
const ENTRIES_IN_FLIGHT: usize = 4;

/// How often the leader replicates the leases it renewed.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// Keepalives in one entry at most.
const MAX_BATCH: usize = 8192;

/// How long the leader has to answer forwarded keepalives before they go through raft.
const FORWARD_TIMEOUT: Duration = Duration::from_millis(500);

struct Pending {
    id: i64,
    done: oneshot::Sender<Result<i64, EtcdError>>,
}

/// The batcher of one member's keepalives.
pub struct Renewals {
    queue: mpsc::UnboundedSender<Pending>,
    lease: Weak<LeaseHandles>,
    /// Leases renewed on the leader since its last checkpoint.
    renewed: Arc<Mutex<HashSet<i64>>>,
    /// When each peer was last heard from (any raft message it sent us).
    heard: Mutex<HashMap<u64, Instant>>,
    /// How the leader is reached in etcd's vocabulary.
    dialer: PeerDialer,
}

impl Renewals {
    /// Starts the batcher over `lease`, forwarding to the leader with `dialer`; it stops
    /// when this is dropped or `lease` is gone (it never keeps a stopped member's store
    /// open).
    pub fn start(lease: &Arc<LeaseHandles>, dialer: PeerDialer) -> Renewals {
        let (queue, rx) = mpsc::unbounded_channel();
        let renewed = Arc::new(Mutex::new(HashSet::new()));
        let forwarder = Arc::new(Forwarder {
            dialer: dialer.clone(),
            channel: tokio::sync::Mutex::new(None),
        });
        tokio::spawn(batcher(Arc::downgrade(lease), rx, forwarder));
        tokio::spawn(checkpoints(Arc::downgrade(lease), renewed.clone()));
        Renewals {
            queue,
            lease: Arc::downgrade(lease),
            renewed,
            heard: Mutex::new(HashMap::new()),
            dialer,
        }
    }

    /// How this member reaches the leader's peer port.
    pub fn dialer(&self) -> &PeerDialer {
        &self.dialer
    }

    /// Renews lease `id`: its TTL, or 0 if it does not exist.
    pub async fn renew(&self, id: i64) -> Result<i64, EtcdError> {
        if let Some(ttls) = self.renew_as_leader(&[id]) {
            return Ok(ttls.first().copied().unwrap_or(0));
        }
        if let Some(lease) = self.lease.upgrade()
            && lease.vocabulary.get() == Vocabulary::Etcd
        {
            return forward_as_etcd(&lease, &self.dialer, id).await;
        }
        let (done, answer) = oneshot::channel();
        self.queue
            .send(Pending { id, done })
            .map_err(|_| EtcdError::Stopped)?;
        answer.await.map_err(|_| EtcdError::Stopped)?
    }

    /// Renews `ids` in memory if this member leads (its clients' keepalives and those
    /// its followers forward): each lease's TTL, 0 for one that is gone. None when this
    /// member is not the leader (or is stopped), or when one of the leases' expiry is
    /// already proposed: then the keepalives go through raft.
    pub fn renew_as_leader(&self, ids: &[i64]) -> Option<Vec<i64>> {
        let lease = self.lease.upgrade()?;
        let etcd = lease.vocabulary.get() == Vocabulary::Etcd;
        // In etcd's vocabulary nothing can be replicated instead: renewed from memory
        // while leading, as etcd's leader does.
        if !lease.role.is_leader() || !(etcd || self.quorum_heard(&lease)) {
            return None;
        }
        let mut ttls = Vec::with_capacity(ids.len());
        for id in ids {
            match lease.leases.renew_in_memory(*id) {
                MemoryRenewal::Renewed(ttl) => ttls.push(ttl),
                MemoryRenewal::Gone => ttls.push(0),
                MemoryRenewal::Expiring => return None,
            }
        }
        if etcd {
            // etcd replicates no keepalive: no checkpoint.
            return Some(ttls);
        }
        let mut renewed = self.renewed.lock().unwrap_or_else(|p| p.into_inner());
        for (id, ttl) in ids.iter().zip(&ttls) {
            if *ttl > 0 {
                renewed.insert(*id);
            }
        }
        Some(ttls)
    }

    /// Peer `id` sent this member a raft message just now.
    pub fn heard_from(&self, id: u64) {
        self.heard
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Instant::now());
    }

    /// Whether a quorum (this member included) was heard from within half an election
    /// timeout. A leader cut off from its followers still believes it leads until its
    /// quorum check deposes it (up to two election timeouts), and meanwhile a new leader
    /// can be elected that never hears of the keepalives it renews in memory: so the
    /// leader renews from memory only while its followers are plainly there, and sends
    /// keepalives through raft otherwise (where a deposed leader cannot acknowledge
    /// them). A keepalive it acknowledges is then at most half an election timeout
    /// (plus the checkpoint interval) newer than what a new leader knows, which the new
    /// leader's grace of one election timeout covers.
    fn quorum_heard(&self, lease: &LeaseHandles) -> bool {
        let voters = lease.roster.voters();
        let need = voters.len() / 2 + 1;
        let window = lease.election_timeout / 2;
        let now = Instant::now();
        let heard = self.heard.lock().unwrap_or_else(|p| p.into_inner());
        let recent = heard
            .iter()
            .filter(|(id, t)| {
                **id != lease.role.me() && voters.contains(id) && now.duration_since(**t) <= window
            })
            .count();
        1 + recent >= need
    }
}

/// A keepalive forwarded to the leader as an etcd member forwards it (`POST /leases`):
/// the TTL, 0 for a lease the leader does not have.
async fn forward_as_etcd(
    lease: &LeaseHandles,
    dialer: &PeerDialer,
    id: i64,
) -> Result<i64, EtcdError> {
    use crate::peer::etcd::leases::{ask_leader, renew_at};
    let leader_urls = || lease.roster.peer_urls_of(lease.role.leader());
    let ttl = ask_leader(leader_urls, lease.request_timeout, |url, left| async move {
        renew_at(dialer, &url, id, left).await
    })
    .await?;
    Ok(ttl.unwrap_or(0))
}

/// A follower's way to the leader for forwarded keepalives: one channel, kept while the
/// same member leads and answers.
struct Forwarder {
    dialer: PeerDialer,
    /// The leader's member id and a channel to it.
    channel: tokio::sync::Mutex<Option<(u64, Channel)>>,
}

impl Forwarder {
    /// Asks the leader to renew `ids`: their TTLs, or None if the leader is unknown,
    /// this member, unreachable, slow, or no longer leading.
    async fn renew(&self, lease: &LeaseHandles, ids: &[i64]) -> Option<Vec<i64>> {
        let leader = lease.role.leader();
        let ids_here = lease.reads.ids();
        if leader == 0 || leader == ids_here.member_id {
            return None;
        }
        let link = Link {
            me: ids_here.member_id,
            cluster_id: ids_here.cluster_id,
            url: lease.roster.peer_urls_of(leader).into_iter().next()?,
            dialer: self.dialer.clone(),
        };
        let channel = {
            let mut cached = self.channel.lock().await;
            match &*cached {
                Some((id, c)) if *id == leader => c.clone(),
                _ => {
                    let c = link.connect().await.ok()?;
                    *cached = Some((leader, c.clone()));
                    c
                }
            }
        };
        let mut client = PeerClient::new(channel);
        let call = client.renew_leases(link.request(PeerRenewLeasesRequest { ids: ids.to_vec() }));
        match tokio::time::timeout(FORWARD_TIMEOUT, call).await {
            Ok(Ok(r)) if r.get_ref().ttls.len() == ids.len() => Some(r.into_inner().ttls),
            Ok(Err(s)) if s.code() == tonic::Code::FailedPrecondition => None,
            _ => {
                // Unreachable or slow: dial again next time.
                *self.channel.lock().await = None;
                None
            }
        }
    }
}

/// Replicates the leader's renewals every [`CHECKPOINT_EVERY`], until the member is gone.
async fn checkpoints(lease: Weak<LeaseHandles>, renewed: Arc<Mutex<HashSet<i64>>>) {
    let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(lease) = lease.upgrade() else {
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
            let renew = LeaseRenew {
                ids: chunk.to_vec(),
            };
            // Lost with a leader change: the next leader grants an election timeout.
            if let Err(e) = lease.writes.propose(renew, None).await {
                tracing::debug!("lease checkpoint not replicated: {e}");
            }
        }
    }
}

async fn batcher(
    lease: Weak<LeaseHandles>,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    forwarder: Arc<Forwarder>,
) {
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
        let Some(lease) = lease.upgrade() else {
            return;
        };
        let forwarder = forwarder.clone();
        tokio::spawn(async move {
            let ids: Vec<i64> = batch.iter().map(|p| p.id).collect();
            let answers = match forwarder.renew(&lease, &ids).await {
                Some(ttls) => ttls.into_iter().map(Ok).collect(),
                None => match lease.writes.propose(LeaseRenew { ids }, None).await {
                    Ok(ttls) if ttls.len() == batch.len() => ttls.into_iter().map(Ok).collect(),
                    Ok(_) => vec![Err(EtcdError::Stopped); batch.len()],
                    Err(e) => vec![Err(e); batch.len()],
                },
            };
            for (p, a) in batch.into_iter().zip(answers) {
                let _ = p.done.send(a);
            }
            drop(slot);
        });
    }
}
