//! The Lease service. Grants and revocations go through raft; keepalives are answered
//! by the leader from memory and replicated in checkpoints (a follower forwards them to
//! the leader, or sends them through raft when it cannot; [`crate::domains::lease::renewals`]),
//! so that every member, and so the next leader, knows when each lease was last renewed.
//! TimeToLive and Leases are answered by any member after the ReadIndex barrier, from its
//! own lessor.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::{Stream, StreamExt};
use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::lease_server::Lease;
use oxcd_api::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, LeaseKeepAliveRequest, LeaseKeepAliveResponse,
    LeaseLeasesRequest, LeaseLeasesResponse, LeaseRevokeRequest, LeaseRevokeResponse, LeaseStatus,
    LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
};
use tonic::{Request, Response, Status, Streaming};

use crate::domains::lease::MAX_TTL;
use crate::domains::lease::renewals::Renewals;
use crate::domains::lease::{LeaseHandles, Lessor};
use crate::machine::quota::LEASE_OVERHEAD;
use crate::machine::vocabulary::Vocabulary;
use oxcd_auth::Access;

/// Keepalives of one stream in flight at once.
const KEEPALIVES_IN_FLIGHT: usize = 256;

/// A stream's keepalive answers.
pub type KeepAlives =
    Pin<Box<dyn Stream<Item = Result<LeaseKeepAliveResponse, Status>> + Send + 'static>>;

/// The Lease service.
pub struct LeaseService {
    lease: Arc<LeaseHandles>,
    renewals: Arc<Renewals>,
    grants: AtomicU64,
}

impl LeaseService {
    /// A Lease service over `lease`, renewing keepalives through `renewals`.
    pub fn new(lease: Arc<LeaseHandles>, renewals: Arc<Renewals>) -> LeaseService {
        LeaseService {
            renewals,
            lease,
            grants: AtomicU64::new(0),
        }
    }

    /// A lease id of this member's choosing.
    fn new_id(&self) -> i64 {
        new_lease_id(
            &self.lease.leases,
            self.lease.role.me(),
            self.grants.fetch_add(1, Ordering::Relaxed),
        )
    }

    /// The answers to a stream of keepalive `requests` (gRPC's or the gateway's).
    pub fn keep_alives(
        &self,
        requests: impl Stream<Item = Result<LeaseKeepAliveRequest, Status>> + Send + 'static,
    ) -> KeepAlives {
        let lease = self.lease.clone();
        let renewals = self.renewals.clone();
        // Keepalives run concurrently (a raft round each on a follower), in the task
        // that sends the answers: a client that stops reading stops its requests being
        // read. The first failure ends the stream with that error, as etcd's does.
        let answers = requests
            .map(move |r| {
                let lease = lease.clone();
                let renewals = renewals.clone();
                async move {
                    match r {
                        Ok(r) => keep_alive(&lease, &renewals, r.id).await,
                        Err(status) => Err(status),
                    }
                }
            })
            .buffer_unordered(KEEPALIVES_IN_FLIGHT)
            .scan(false, |failed, answer| {
                let end = std::mem::replace(failed, answer.is_err());
                futures::future::ready((!end).then_some(answer))
            });
        Box::pin(answers)
    }
}

/// A lease id of this member's choosing for its `n`th grant (of one counter).
pub(crate) fn new_lease_id(leases: &Lessor, me: u64, n: u64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    leases.new_id(me ^ now ^ n.rotate_left(40))
}

/// One keepalive: the lease's TTL after renewal, 0 if it does not exist (as etcd).
async fn keep_alive(
    lease: &LeaseHandles,
    renewals: &Renewals,
    id: i64,
) -> Result<LeaseKeepAliveResponse, Status> {
    // The leader's clock is authoritative: a lease it considers expired is about to be
    // revoked and may not be renewed, as in etcd.
    let expired_here = lease.role.is_leader() && lease.leases.is_expired(id);
    let ttl = if expired_here {
        0
    } else {
        renewals.renew(id).await?
    };
    Ok(LeaseKeepAliveResponse {
        header: Some(lease.reads.header_now()),
        id,
        ttl,
    })
}

#[tonic::async_trait]
impl Lease for LeaseService {
    async fn lease_grant(
        &self,
        req: Request<LeaseGrantRequest>,
    ) -> Result<Response<LeaseGrantResponse>, Status> {
        // The space quota first, as in etcd (before the caller and the TTL).
        let admitted = self.lease.writes.admit(LEASE_OVERHEAD).await?;
        let caller = self.lease.callers.of(&req).await?;
        let mut r = req.into_inner();
        if r.ttl > MAX_TTL {
            return Err(EtcdError::LeaseTtlTooLarge.into());
        }
        if r.id == 0 {
            r.id = self.new_id();
        }
        r.ttl = r.ttl.max(self.lease.leases.min_ttl());
        let resp = self
            .lease
            .writes
            .propose_admitted(r, caller, admitted)
            .await?;
        Ok(Response::new(resp))
    }

    async fn lease_revoke(
        &self,
        req: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        // Checked when applied: the caller must be able to write every key of the lease.
        let caller = self.lease.callers.of(&req).await?;
        let resp = self.lease.writes.propose(req.into_inner(), caller).await?;
        Ok(Response::new(resp))
    }

    async fn lease_keep_alive(
        &self,
        req: Request<Streaming<LeaseKeepAliveRequest>>,
    ) -> Result<Response<KeepAlives>, Status> {
        Ok(Response::new(self.keep_alives(req.into_inner())))
    }

    async fn lease_time_to_live(
        &self,
        req: Request<LeaseTimeToLiveRequest>,
    ) -> Result<Response<LeaseTimeToLiveResponse>, Status> {
        let caller = self.lease.callers.of(&req).await?;
        let r = req.into_inner();
        self.lease.reads.barrier().await?;
        if r.keys && self.lease.callers.auth().enabled() {
            // As etcd: listing a lease's keys needs read permission on each of them.
            let caller = caller.as_ref().ok_or(EtcdError::UserEmpty)?;
            for key in self.lease.leases.keys(r.id) {
                self.lease
                    .callers
                    .auth()
                    .check(Some(caller), &key, b"", Access::Read)?;
            }
        }
        let header = Some(self.lease.reads.header_now());
        if self.lease.vocabulary.get() == Vocabulary::Etcd && !self.lease.role.is_leader() {
            // etcd replicates no keepalive: only the leader's clock is right.
            let mut resp =
                forward_time_to_live(&self.lease, self.renewals.dialer(), r.id, r.keys).await?;
            resp.header = header;
            return Ok(Response::new(resp));
        }
        let resp = match self.lease.leases.time_to_live(r.id, r.keys) {
            Some(t) => LeaseTimeToLiveResponse {
                header,
                id: r.id,
                ttl: t.remaining,
                granted_ttl: t.granted,
                keys: t.keys,
            },
            None => LeaseTimeToLiveResponse {
                header,
                id: r.id,
                ttl: -1,
                granted_ttl: 0,
                keys: Vec::new(),
            },
        };
        Ok(Response::new(resp))
    }

    async fn lease_leases(
        &self,
        _req: Request<LeaseLeasesRequest>,
    ) -> Result<Response<LeaseLeasesResponse>, Status> {
        self.lease.reads.barrier().await?;
        let leases = self
            .lease
            .leases
            .ids()
            .into_iter()
            .map(|id| LeaseStatus { id })
            .collect();
        Ok(Response::new(LeaseLeasesResponse {
            header: Some(self.lease.reads.header_now()),
            leases,
        }))
    }
}

/// A TimeToLive asked of the leader as an etcd member asks it (`POST /leases/internal`);
/// a lease the leader does not have answers TTL -1, as etcd's does.
async fn forward_time_to_live(
    lease: &LeaseHandles,
    dialer: &crate::peer::PeerDialer,
    id: i64,
    keys: bool,
) -> Result<LeaseTimeToLiveResponse, EtcdError> {
    use crate::peer::etcd::leases::{ask_leader, time_to_live_at};
    let leader_urls = || lease.roster.peer_urls_of(lease.role.leader());
    let resp = ask_leader(leader_urls, lease.request_timeout, |url, left| async move {
        time_to_live_at(dialer, &url, id, keys, left).await
    })
    .await?;
    Ok(resp.unwrap_or(LeaseTimeToLiveResponse {
        header: None,
        id,
        ttl: -1,
        granted_ttl: 0,
        keys: Vec::new(),
    }))
}
