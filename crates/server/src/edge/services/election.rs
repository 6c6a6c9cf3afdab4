//! The Election service (`v3electionpb`), as etcd 3.5's `v3election` runs concurrency's
//! `Election`: a campaign puts `name/<lease hex>` with its value (or proclaims the new
//! value if the key is already there) and waits until it is the key under `name/`
//! created first; the leader is that key. Proclaim and Resign act only while the key
//! still has the create revision the leader was elected with. Observe is in
//! `observe.rs`.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use oxcd_api::etcdserverpb::TxnRequest;
use oxcd_api::etcdserverpb::response_op::Response as OpResponse;
use oxcd_api::v3electionpb::election_server::Election;
use oxcd_api::v3electionpb::{
    CampaignRequest, CampaignResponse, LeaderKey, LeaderRequest, LeaderResponse, ProclaimRequest,
    ProclaimResponse, ResignRequest, ResignResponse,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::recipes::{self, Caller, Cleanup, Undo, client_error, unknown};
use crate::edge::services::recipes::RecipeHandles;

/// concurrency's `ErrElectionNotLeader`.
const NOT_LEADER: &str = "election: not leader";
/// concurrency's `ErrElectionNoLeader`.
const NO_LEADER: &str = "election: no leader";
/// v3election's `ErrMissingLeaderKey`.
const MISSING_LEADER_KEY: &str = "\"leader\" field must be provided";

/// Leader responses queued for an observer that reads slowly (etcd hands them over
/// one at a time).
const QUEUED_LEADERS: usize = 1;

type Leaders = Pin<Box<dyn Stream<Item = Result<LeaderResponse, Status>> + Send + 'static>>;

/// The Election service.
pub struct ElectionService {
    handles: Arc<RecipeHandles>,
}

impl ElectionService {
    /// An Election service for `member`.
    pub fn new(handles: Arc<RecipeHandles>) -> ElectionService {
        ElectionService { handles }
    }
}

/// The txn resigning `key` if it still has create revision `rev`.
fn resign_txn(key: &[u8], rev: i64) -> TxnRequest {
    TxnRequest {
        compare: vec![recipes::created_at(key, rev)],
        success: vec![recipes::delete_op(key)],
        failure: Vec::new(),
    }
}

/// Puts `value` at the leader's key with `lease` if the key still has create revision
/// `rev`; Err "election: not leader" otherwise.
async fn proclaim(
    handles: &RecipeHandles,
    caller: &Caller,
    key: &[u8],
    rev: i64,
    lease: i64,
    value: &[u8],
) -> Result<Option<oxcd_api::etcdserverpb::ResponseHeader>, Status> {
    let txn = TxnRequest {
        compare: vec![recipes::created_at(key, rev)],
        success: vec![recipes::put_op(key, value, lease)],
        failure: Vec::new(),
    };
    let resp = recipes::txn(handles, caller, txn)
        .await
        .map_err(client_error)?;
    if !resp.succeeded {
        return Err(unknown(NOT_LEADER));
    }
    Ok(resp.header)
}

#[tonic::async_trait]
impl Election for ElectionService {
    async fn campaign(
        &self,
        req: Request<CampaignRequest>,
    ) -> Result<Response<CampaignResponse>, Status> {
        let caller = self.handles.callers.of(&req).await.map_err(client_error)?;
        let r = req.into_inner();
        let handles = &*self.handles;
        let lease = recipes::session_lease(handles, &caller, r.lease)
            .await
            .map_err(client_error)?;
        let prefix = recipes::prefix(&r.name);
        let key = recipes::session_key(&prefix, lease);
        let enter = TxnRequest {
            compare: vec![recipes::created_at(&key, 0)],
            success: vec![recipes::put_op(&key, &r.value, lease)],
            failure: vec![recipes::range_op(recipes::get_key(&key))],
        };
        let resp = recipes::txn(handles, &caller, enter)
            .await
            .map_err(client_error)?;
        let mut rev = recipes::rev_of(&resp.header);
        if !resp.succeeded {
            let kv = match resp.responses.first().and_then(|o| o.response.as_ref()) {
                Some(OpResponse::ResponseRange(g)) => g.kvs.first(),
                _ => None,
            }
            .ok_or_else(|| Status::internal("oxcd: campaign key missing from its txn"))?;
            rev = kv.create_revision;
            if kv.value != r.value
                && let Err(e) = proclaim(handles, &caller, &key, rev, lease, &r.value).await
            {
                Cleanup::new(
                    self.handles.clone(),
                    &caller,
                    Undo::Txn(resign_txn(&key, rev)),
                )
                .run()
                .await;
                return Err(e);
            }
        }
        // A campaign abandoned by its client resigns; one that fails otherwise leaves
        // its key (as etcd).
        let resign = Cleanup::new(
            self.handles.clone(),
            &caller,
            Undo::Txn(resign_txn(&key, rev)),
        );
        let waited = recipes::wait_deletes(handles, &caller, &prefix, rev - 1).await;
        resign.disarm();
        waited.map_err(client_error)?;
        Ok(Response::new(CampaignResponse {
            header: resp.header,
            leader: Some(LeaderKey {
                name: r.name,
                key,
                rev,
                lease,
            }),
        }))
    }

    async fn proclaim(
        &self,
        req: Request<ProclaimRequest>,
    ) -> Result<Response<ProclaimResponse>, Status> {
        let caller = self.handles.callers.of(&req).await.map_err(client_error)?;
        let r = req.into_inner();
        let leader = r.leader.ok_or_else(|| unknown(MISSING_LEADER_KEY))?;
        let lease = recipes::session_lease(&self.handles, &caller, leader.lease)
            .await
            .map_err(client_error)?;
        let (key, rev) = (&leader.key, leader.rev);
        let header = proclaim(&self.handles, &caller, key, rev, lease, &r.value).await?;
        Ok(Response::new(ProclaimResponse { header }))
    }

    async fn leader(
        &self,
        req: Request<LeaderRequest>,
    ) -> Result<Response<LeaderResponse>, Status> {
        let caller = self.handles.callers.of(&req).await.map_err(client_error)?;
        let prefix = recipes::prefix(&req.into_inner().name);
        let mut resp = recipes::get(&self.handles, &caller, &recipes::first_created(&prefix))
            .await
            .map_err(client_error)?;
        if resp.kvs.is_empty() {
            return Err(unknown(NO_LEADER));
        }
        Ok(Response::new(LeaderResponse {
            header: resp.header,
            kv: Some(resp.kvs.swap_remove(0)),
        }))
    }

    async fn observe(&self, req: Request<LeaderRequest>) -> Result<Response<Leaders>, Status> {
        let caller = self.handles.callers.of(&req).await.map_err(client_error)?;
        let (tx, rx) = tokio::sync::mpsc::channel(QUEUED_LEADERS);
        let prefix = recipes::prefix(&req.into_inner().name);
        tokio::spawn(super::observe::run(
            self.handles.clone(),
            caller,
            prefix,
            tx,
        ));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn resign(
        &self,
        req: Request<ResignRequest>,
    ) -> Result<Response<ResignResponse>, Status> {
        let caller = self.handles.callers.of(&req).await.map_err(client_error)?;
        let r = req.into_inner();
        let leader = r.leader.ok_or_else(|| unknown(MISSING_LEADER_KEY))?;
        // The session concurrency's Resign runs in grants a lease when given none.
        recipes::session_lease(&self.handles, &caller, leader.lease)
            .await
            .map_err(client_error)?;
        let resp = recipes::txn(&self.handles, &caller, resign_txn(&leader.key, leader.rev))
            .await
            .map_err(client_error)?;
        Ok(Response::new(ResignResponse {
            header: resp.header,
        }))
    }
}
