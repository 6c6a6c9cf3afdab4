//! The KV service's writes: validate, then propose and wait for the answer (the member
//! completes its header). Puts and txns meet the space quota first, before their caller
//! and content are checked, as in etcd. Range is served by [`super::range`].

use std::sync::Arc;

use oxcd_api::etcdserverpb::kv_server::Kv;
use oxcd_api::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use tonic::{Request, Response, Status};

use crate::domains::kv::KvHandles;
use crate::domains::kv::validate;
use crate::machine::quota;

/// The KV service.
pub struct KvService {
    kv: Arc<KvHandles>,
}

impl KvService {
    /// A KV service over `kv`.
    pub fn new(kv: Arc<KvHandles>) -> KvService {
        KvService { kv }
    }
}

/// How long `Compact` with `physical` waits for the rows to be deleted, at most.
const PHYSICAL_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

#[tonic::async_trait]
impl Kv for KvService {
    /// etcd 3.7's range in chunks ([`super::stream`]).
    async fn range_stream(
        &self,
        req: Request<RangeRequest>,
    ) -> Result<Response<super::stream::RangeChunks>, Status> {
        let caller = self.kv.callers.of(&req).await?;
        let chunks = super::stream::start(self.kv.clone(), caller, req.into_inner()).await?;
        Ok(Response::new(chunks))
    }

    /// Reached only by direct calls: the routes serve Range by hand
    /// ([`super::range`]), with the same answer.
    async fn range(&self, req: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        let caller = self.kv.callers.of(&req).await?;
        let out = super::range::answer(&self.kv, caller, req.into_inner(), false).await?;
        Ok(Response::new(out.resp))
    }

    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let admitted = self.kv.writes.admit(quota::put_cost(req.get_ref())).await?;
        let caller = self.kv.callers.of(&req).await?;
        let r = req.into_inner();
        validate::put(&r)?;
        let resp = self.kv.writes.propose_admitted(r, caller, admitted).await?;
        Ok(Response::new(resp))
    }

    async fn delete_range(
        &self,
        req: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        let caller = self.kv.callers.of(&req).await?;
        let r = req.into_inner();
        validate::delete_range(&r)?;
        Ok(Response::new(self.kv.writes.propose(r, caller).await?))
    }

    async fn txn(&self, req: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let admitted = self.kv.writes.admit(quota::txn_cost(req.get_ref())).await?;
        let caller = self.kv.callers.of(&req).await?;
        let r = req.into_inner();
        validate::txn(&r, self.kv.max_txn_ops)?;
        let resp = self.kv.writes.propose_admitted(r, caller, admitted).await?;
        Ok(Response::new(resp))
    }

    async fn compact(
        &self,
        req: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        let caller = self.kv.callers.of(&req).await?;
        let req = req.into_inner();
        let (rev, physical) = (req.revision, req.physical);
        let resp = Response::new(self.kv.writes.propose(req, caller).await?);
        if physical {
            // As etcd: a physical compaction answers once its rows are gone here.
            let done = self
                .kv
                .reads
                .blocking(move |store| store.wait_compacted(rev, PHYSICAL_WAIT))
                .await?;
            if !done {
                tracing::warn!(
                    compact_revision = rev,
                    "answered a physical compaction whose rows are still being deleted"
                );
            }
        }
        Ok(resp)
    }
}
