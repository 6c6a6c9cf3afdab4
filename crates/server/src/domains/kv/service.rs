//! The KV service: validate, then read (with the ReadIndex barrier unless serializable)
//! or propose and wait; fill the header. Puts and txns meet the space quota first, before
//! their caller and content are checked, as in etcd.

use std::sync::Arc;

use oxcd_api::etcdserverpb::kv_server::Kv;
use oxcd_api::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, ResponseHeader, TxnRequest, TxnResponse,
};
use oxcd_api::oxcdpb::RequestAuth;
use oxcd_api::oxcdpb::internal_request::Op;
use tonic::{Request, Response, Status};

use crate::domains::auth::caller::caller;
use crate::domains::kv::validate;
use crate::machine::applied::Applied;
use crate::machine::member::Member;
use crate::machine::quota;

/// The KV service.
pub struct KvService {
    member: Arc<Member>,
}

impl KvService {
    /// A KV service for `member`.
    pub fn new(member: Arc<Member>) -> KvService {
        KvService { member }
    }

    fn rev(h: &Option<ResponseHeader>) -> i64 {
        h.as_ref().map(|h| h.revision).unwrap_or(0)
    }

    /// Proposes `op`, takes the response it must produce (`pick`) and gives it this
    /// member's header at the revision the apply path set.
    async fn write<T>(
        &self,
        op: Op,
        caller: Option<RequestAuth>,
        pick: impl FnOnce(Applied) -> Option<T>,
        header: impl FnOnce(&mut T) -> &mut Option<ResponseHeader>,
    ) -> Result<Response<T>, Status> {
        let applied = self.member.propose_as(op, caller).await?;
        let mut resp = pick(applied).ok_or_else(unexpected)?;
        let h = header(&mut resp);
        *h = Some(self.member.header(Self::rev(h)));
        Ok(Response::new(resp))
    }
}

/// How long `Compact` with `physical` waits for the rows to be deleted, at most.
const PHYSICAL_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

fn unexpected() -> Status {
    Status::internal("oxcd: unexpected apply result")
}

#[tonic::async_trait]
impl Kv for KvService {
    /// Reached only by direct calls: the routes serve Range by hand
    /// ([`super::range`]), with the same answer.
    async fn range(&self, req: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        let caller = caller(&self.member, &req).await?;
        let out = super::range::answer(&self.member, caller, req.into_inner(), false).await?;
        Ok(Response::new(out.resp))
    }

    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let cost = quota::put_cost(req.get_ref());
        self.member.check_space(cost).await?;
        let caller = caller(&self.member, &req).await?;
        let r = req.into_inner();
        validate::put(&r)?;
        let pick = |a| match a {
            Applied::Put(x) => Some(x),
            _ => None,
        };
        self.write(Op::Put(r), caller, pick, |x| &mut x.header)
            .await
    }

    async fn delete_range(
        &self,
        req: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        let caller = caller(&self.member, &req).await?;
        let r = req.into_inner();
        validate::delete_range(&r)?;
        let pick = |a| match a {
            Applied::DeleteRange(x) => Some(x),
            _ => None,
        };
        self.write(Op::DeleteRange(r), caller, pick, |x| &mut x.header)
            .await
    }

    async fn txn(&self, req: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let cost = quota::txn_cost(req.get_ref());
        self.member.check_space(cost).await?;
        let caller = caller(&self.member, &req).await?;
        let r = req.into_inner();
        validate::txn(&r, self.member.limits.max_txn_ops)?;
        let pick = |a| match a {
            Applied::Txn(x) => Some(x),
            _ => None,
        };
        self.write(Op::Txn(r), caller, pick, |x| &mut x.header)
            .await
    }

    async fn compact(
        &self,
        req: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        let caller = caller(&self.member, &req).await?;
        let pick = |a| match a {
            Applied::Compaction(x) => Some(x),
            _ => None,
        };
        let req = req.into_inner();
        let (rev, physical) = (req.revision, req.physical);
        let resp = self
            .write(Op::Compaction(req), caller, pick, |x| &mut x.header)
            .await?;
        if physical {
            // As etcd: a physical compaction answers once its rows are gone here.
            let done = self
                .member
                .read_blocking(move |store| store.wait_compacted(rev, PHYSICAL_WAIT))
                .await
                .map_err(Status::internal)?;
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
