//! The Lock service (`v3lockpb`), as etcd 3.5's `v3lock` runs concurrency's `Mutex`:
//! a lock request puts `name/<lease hex>` with the lease (or finds it already there)
//! and waits until every key under `name/` created before it is gone; the key is the
//! handle Unlock deletes. A request abandoned while it waits deletes its key.

use std::sync::Arc;

use oxcd_api::etcdserverpb::TxnRequest;
use oxcd_api::etcdserverpb::response_op::Response as OpResponse;
use oxcd_api::v3lockpb::lock_server::Lock;
use oxcd_api::v3lockpb::{LockRequest, LockResponse, UnlockRequest, UnlockResponse};
use tonic::{Request, Response, Status};

use super::recipes::{self, Cleanup, Undo, client_error};
use crate::edge::services::recipes::RecipeHandles;

/// What concurrency's Mutex answers when its session's key vanished while it waited.
const SESSION_EXPIRED: &str = "mutex: session is expired";

/// The Lock service.
pub struct LockService {
    handles: Arc<RecipeHandles>,
}

impl LockService {
    /// A Lock service for `member`.
    pub fn new(handles: Arc<RecipeHandles>) -> LockService {
        LockService { handles }
    }
}

/// The create revision of the first kv of the `i`th txn response, if it is a range
/// with a kv.
fn first_created_rev(responses: &[oxcd_api::etcdserverpb::ResponseOp], i: usize) -> Option<i64> {
    match responses.get(i)?.response.as_ref()? {
        OpResponse::ResponseRange(r) => r.kvs.first().map(|kv| kv.create_revision),
        _ => None,
    }
}

#[tonic::async_trait]
impl Lock for LockService {
    async fn lock(&self, req: Request<LockRequest>) -> Result<Response<LockResponse>, Status> {
        let caller = self.handles.callers.of(&req).await.map_err(client_error)?;
        let r = req.into_inner();
        let handles = &*self.handles;
        let lease = recipes::session_lease(handles, &caller, r.lease)
            .await
            .map_err(client_error)?;
        let prefix = recipes::prefix(&r.name);
        let key = recipes::session_key(&prefix, lease);
        // Put the key unless this lease already has it; read the holder in the same txn.
        let acquire = TxnRequest {
            compare: vec![recipes::created_at(&key, 0)],
            success: vec![
                recipes::put_op(&key, b"", lease),
                recipes::range_op(recipes::first_created(&prefix)),
            ],
            failure: vec![
                recipes::range_op(recipes::get_key(&key)),
                recipes::range_op(recipes::first_created(&prefix)),
            ],
        };
        let resp = recipes::txn(handles, &caller, acquire)
            .await
            .map_err(client_error)?;
        let my_rev = if resp.succeeded {
            recipes::rev_of(&resp.header)
        } else {
            first_created_rev(&resp.responses, 0)
                .ok_or_else(|| Status::internal("oxcd: lock key missing from its txn"))?
        };
        let owner = first_created_rev(&resp.responses, 1);
        if owner.is_none_or(|rev| rev == my_rev) {
            return Ok(Response::new(LockResponse {
                header: resp.header,
                key,
            }));
        }
        // Wait for the earlier holders; whoever gives up (the client, or a failure)
        // deletes the key, as the Mutex unlocks.
        let unlock = Cleanup::new(
            self.handles.clone(),
            &caller,
            Undo::Delete(delete_request(&key)),
        );
        if let Err(e) = recipes::wait_deletes(handles, &caller, &prefix, my_rev - 1).await {
            unlock.run().await;
            return Err(client_error(e));
        }
        let mine = match recipes::get(handles, &caller, &recipes::get_key(&key)).await {
            Ok(mine) => mine,
            Err(e) => {
                unlock.run().await;
                return Err(client_error(e));
            }
        };
        unlock.disarm();
        if mine.kvs.is_empty() {
            return Err(recipes::unknown(SESSION_EXPIRED));
        }
        Ok(Response::new(LockResponse {
            header: mine.header,
            key,
        }))
    }

    async fn unlock(
        &self,
        req: Request<UnlockRequest>,
    ) -> Result<Response<UnlockResponse>, Status> {
        let caller = self.handles.callers.of(&req).await.map_err(client_error)?;
        let r = req.into_inner();
        let resp = recipes::delete(&self.handles, &caller, &r.key)
            .await
            .map_err(client_error)?;
        Ok(Response::new(UnlockResponse {
            header: resp.header,
        }))
    }
}

fn delete_request(key: &[u8]) -> oxcd_api::etcdserverpb::DeleteRangeRequest {
    oxcd_api::etcdserverpb::DeleteRangeRequest {
        key: key.to_vec(),
        ..Default::default()
    }
}
