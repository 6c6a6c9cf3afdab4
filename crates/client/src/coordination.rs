//! Distributed locks and leader election through the server's `v3lock` and
//! `v3election` services (the server runs etcd's recipes), and [`LeaseKeeper`], which
//! keeps a lease alive in the background as clientv3's sessions do.
//!
//! Waiting calls (`lock`, `campaign`) are not bounded by the request timeout: they
//! return when the lock or the leadership is held, or fail when the lease is gone.
//! Invariant of the keeper: it renews at a third of the TTL the server last granted and
//! stops for good once the server says the lease is gone (TTL 0).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use oxcd_api::v3electionpb::election_client::ElectionClient;
use oxcd_api::v3electionpb::{
    CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest,
    ProclaimResponse, ResignRequest, ResignResponse,
};
use oxcd_api::v3lockpb::lock_client::LockClient;
use oxcd_api::v3lockpb::{LockRequest, LockResponse, UnlockRequest, UnlockResponse};

use crate::client::Service;
use crate::{Client, Error};

fn answer<T>(r: Result<tonic::Response<T>, tonic::Status>) -> Result<T, Error> {
    r.map(tonic::Response::into_inner).map_err(Error::Status)
}

impl Client {
    /// The Lock service.
    pub fn lock_service(&self) -> LockClient<Service> {
        LockClient::new(self.service())
    }

    /// The Election service.
    pub fn election_service(&self) -> ElectionClient<Service> {
        ElectionClient::new(self.service())
    }

    /// Waits for the lock `name` and holds it with lease `lease`; the response's key
    /// unlocks it.
    pub async fn lock(&self, name: impl Into<Vec<u8>>, lease: i64) -> Result<LockResponse, Error> {
        let req = LockRequest {
            name: name.into(),
            lease,
        };
        answer(self.lock_service().lock(req).await)
    }

    /// Releases the lock held under `key`.
    pub async fn unlock(&self, key: impl Into<Vec<u8>>) -> Result<UnlockResponse, Error> {
        let req = UnlockRequest { key: key.into() };
        self.bounded(self.lock_service().unlock(req)).await
    }

    /// Waits until this candidate (lease `lease`, proposing `value`) leads election
    /// `name`.
    pub async fn campaign(
        &self,
        name: impl Into<Vec<u8>>,
        lease: i64,
        value: impl Into<Vec<u8>>,
    ) -> Result<CampaignResponse, Error> {
        let req = CampaignRequest {
            name: name.into(),
            lease,
            value: value.into(),
        };
        answer(self.election_service().campaign(req).await)
    }

    /// Sets the leader's value, if `leader` still leads.
    pub async fn proclaim(
        &self,
        leader: LeaderKey,
        value: impl Into<Vec<u8>>,
    ) -> Result<ProclaimResponse, Error> {
        let req = ProclaimRequest {
            leader: Some(leader),
            value: value.into(),
        };
        self.bounded(self.election_service().proclaim(req)).await
    }

    /// The current leader of election `name`.
    pub async fn leader(&self, name: impl Into<Vec<u8>>) -> Result<LeaderResponse, Error> {
        let req = LeaderRequest { name: name.into() };
        self.bounded(self.election_service().leader(req)).await
    }

    /// Every leader of election `name` from the current one on, as they change.
    pub async fn observe(
        &self,
        name: impl Into<Vec<u8>>,
    ) -> Result<tonic::Streaming<LeaderResponse>, Error> {
        let req = LeaderRequest { name: name.into() };
        answer(self.election_service().observe(req).await)
    }

    /// Gives up the leadership `leader` holds.
    pub async fn resign(&self, leader: LeaderKey) -> Result<ResignResponse, Error> {
        let req = ResignRequest {
            leader: Some(leader),
        };
        self.bounded(self.election_service().resign(req)).await
    }

    /// Keeps lease `id` alive in the background until the keeper is dropped or the
    /// lease is gone.
    pub fn keep_lease_alive(&self, id: i64, ttl: i64) -> LeaseKeeper {
        let last_ttl = Arc::new(AtomicI64::new(ttl));
        let task = tokio::spawn(keep(self.clone(), id, last_ttl.clone()));
        LeaseKeeper { id, last_ttl, task }
    }
}

/// A lease kept alive by a background task; dropping it stops the renewals.
pub struct LeaseKeeper {
    id: i64,
    last_ttl: Arc<AtomicI64>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaseKeeper {
    /// The lease.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The TTL the server granted at the last renewal; 0 once the lease is gone.
    pub fn ttl(&self) -> i64 {
        self.last_ttl.load(Ordering::Relaxed)
    }

    /// Whether renewals go on (false once the lease is gone).
    pub fn alive(&self) -> bool {
        !self.task.is_finished()
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Renews at a third of the TTL; a failed renewal is retried every half second.
async fn keep(client: Client, id: i64, last_ttl: Arc<AtomicI64>) {
    loop {
        let ttl = last_ttl.load(Ordering::Relaxed).max(1);
        let pause = Duration::from_millis((ttl as u64 * 1000 / 3).max(500));
        tokio::time::sleep(pause).await;
        loop {
            match client.lease_keep_alive_once(id).await {
                Ok(r) if r.ttl <= 0 => {
                    last_ttl.store(0, Ordering::Relaxed);
                    return;
                }
                Ok(r) => {
                    last_ttl.store(r.ttl, Ordering::Relaxed);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }
}
