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

use crate::domains::auth::caller::caller;
use crate::domains::lease::MAX_TTL;
use crate::domains::lease::renewals::Renewals;
use crate::machine::member::Member;
use crate::machine::quota::LEASE_OVERHEAD;
use oxcd_auth::Access;

/// Keepalives of one stream in flight at once.
const KEEPALIVES_IN_FLIGHT: usize = 256;

/// A stream's keepalive answers.
pub type KeepAlives =
    Pin<Box<dyn Stream<Item = Result<LeaseKeepAliveResponse, Status>> + Send + 'static>>;

/// The Lease service.
pub struct LeaseService {
    member: Arc<Member>,
    renewals: Arc<Renewals>,
    grants: AtomicU64,
}

impl LeaseService {
    /// A Lease service for `member`, renewing keepalives through `renewals`.
    pub fn new(member: Arc<Member>, renewals: Arc<Renewals>) -> LeaseService {
        LeaseService {
            renewals,
            member,
            grants: AtomicU64::new(0),
        }
    }

    /// A lease id of this member's choosing.
    fn new_id(&self) -> i64 {
        new_lease_id(&self.member, self.grants.fetch_add(1, Ordering::Relaxed))
    }

    /// The answers to a stream of keepalive `requests` (gRPC's or the gateway's).
    pub fn keep_alives(
        &self,
        requests: impl Stream<Item = Result<LeaseKeepAliveRequest, Status>> + Send + 'static,
    ) -> KeepAlives {
        let member = self.member.clone();
        let renewals = self.renewals.clone();
        // Keepalives run concurrently (a raft round each on a follower), in the task
        // that sends the answers: a client that stops reading stops its requests being
        // read. The first failure ends the stream with that error, as etcd's does.
        let answers = requests
            .map(move |r| {
                let member = member.clone();
                let renewals = renewals.clone();
                async move {
                    match r {
                        Ok(r) => keep_alive(&member, &renewals, r.id).await,
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

/// A lease id of `member`'s choosing for its `n`th grant (of one counter).
pub(crate) fn new_lease_id(member: &Member, n: u64) -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    member
        .leases
        .new_id(member.id.member_id ^ now ^ n.rotate_left(40))
}

/// One keepalive: the lease's TTL after renewal, 0 if it does not exist (as etcd).
async fn keep_alive(
    member: &Member,
    renewals: &Renewals,
    id: i64,
) -> Result<LeaseKeepAliveResponse, Status> {
    // The leader's clock is authoritative: a lease it considers expired is about to be
    // revoked and may not be renewed, as in etcd.
    let expired_here = member.is_leader() && member.leases.is_expired(id);
    let ttl = if expired_here {
        0
    } else {
        renewals.renew(id).await?
    };
    Ok(LeaseKeepAliveResponse {
        header: Some(member.header(member.store.current_rev())),
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
        let admitted = self.member.admit(LEASE_OVERHEAD).await?;
        let caller = caller(&self.member, &req).await?;
        let mut r = req.into_inner();
        if r.ttl > MAX_TTL {
            return Err(EtcdError::LeaseTtlTooLarge.into());
        }
        if r.id == 0 {
            r.id = self.new_id();
        }
        r.ttl = r.ttl.max(self.member.leases.min_ttl());
        let resp = self.member.propose_admitted(r, caller, admitted).await?;
        Ok(Response::new(resp))
    }

    async fn lease_revoke(
        &self,
        req: Request<LeaseRevokeRequest>,
    ) -> Result<Response<LeaseRevokeResponse>, Status> {
        // Checked when applied: the caller must be able to write every key of the lease.
        let caller = caller(&self.member, &req).await?;
        let resp = self.member.propose(req.into_inner(), caller).await?;
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
        let caller = caller(&self.member, &req).await?;
        let r = req.into_inner();
        self.member.read_barrier().await?;
        if r.keys && self.member.auth.enabled() {
            // As etcd: listing a lease's keys needs read permission on each of them.
            let caller = caller.as_ref().ok_or(EtcdError::UserEmpty)?;
            for key in self.member.leases.keys(r.id) {
                self.member
                    .auth
                    .check(Some(caller), &key, b"", Access::Read)?;
            }
        }
        let header = Some(self.member.header(self.member.store.current_rev()));
        let resp = match self.member.leases.time_to_live(r.id, r.keys) {
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
        self.member.read_barrier().await?;
        let leases = self
            .member
            .leases
            .ids()
            .into_iter()
            .map(|id| LeaseStatus { id })
            .collect();
        Ok(Response::new(LeaseLeasesResponse {
            header: Some(self.member.header(self.member.store.current_rev())),
            leases,
        }))
    }
}
