//! The KV service: validate, then read (with the ReadIndex barrier unless serializable)
//! or propose and wait; fill the header.

use std::sync::Arc;

use oxcd_api::etcdserverpb::kv_server::Kv;
use oxcd_api::etcdserverpb::{
    CompactionRequest, CompactionResponse, DeleteRangeRequest, DeleteRangeResponse, PutRequest,
    PutResponse, RangeRequest, RangeResponse, TxnRequest, TxnResponse,
};
use oxcd_api::oxcdpb::internal_request::Op;
use tonic::{Request, Response, Status};

use crate::apply::{Applied, range};
use crate::member::Member;
use crate::validate;

/// The KV service.
pub struct KvService {
    member: Arc<Member>,
}

impl KvService {
    /// A KV service for `member`.
    pub fn new(member: Arc<Member>) -> KvService {
        KvService { member }
    }

    fn rev(h: &Option<oxcd_api::etcdserverpb::ResponseHeader>) -> i64 {
        h.as_ref().map(|h| h.revision).unwrap_or(0)
    }
}

fn unexpected() -> Status {
    Status::internal("oxcd: unexpected apply result")
}

#[tonic::async_trait]
impl Kv for KvService {
    async fn range(&self, req: Request<RangeRequest>) -> Result<Response<RangeResponse>, Status> {
        let r = req.into_inner();
        validate::range(&r)?;
        if !r.serializable {
            self.member.read_barrier().await?;
        }
        let mut resp = range::range(&*self.member.store, &r)?;
        resp.header = Some(self.member.header(Self::rev(&resp.header)));
        Ok(Response::new(resp))
    }

    async fn put(&self, req: Request<PutRequest>) -> Result<Response<PutResponse>, Status> {
        let r = req.into_inner();
        validate::put(&r)?;
        match self.member.propose(Op::Put(r)).await? {
            Applied::Put(mut resp) => {
                resp.header = Some(self.member.header(Self::rev(&resp.header)));
                Ok(Response::new(resp))
            }
            _ => Err(unexpected()),
        }
    }

    async fn delete_range(
        &self,
        req: Request<DeleteRangeRequest>,
    ) -> Result<Response<DeleteRangeResponse>, Status> {
        let r = req.into_inner();
        validate::delete_range(&r)?;
        match self.member.propose(Op::DeleteRange(r)).await? {
            Applied::DeleteRange(mut resp) => {
                resp.header = Some(self.member.header(Self::rev(&resp.header)));
                Ok(Response::new(resp))
            }
            _ => Err(unexpected()),
        }
    }

    async fn txn(&self, req: Request<TxnRequest>) -> Result<Response<TxnResponse>, Status> {
        let r = req.into_inner();
        validate::txn(&r, self.member.limits.max_txn_ops)?;
        match self.member.propose(Op::Txn(r)).await? {
            Applied::Txn(mut resp) => {
                resp.header = Some(self.member.header(Self::rev(&resp.header)));
                Ok(Response::new(resp))
            }
            _ => Err(unexpected()),
        }
    }

    async fn compact(
        &self,
        req: Request<CompactionRequest>,
    ) -> Result<Response<CompactionResponse>, Status> {
        let r = req.into_inner();
        match self.member.propose(Op::Compaction(r)).await? {
            Applied::Compaction(mut resp) => {
                resp.header = Some(self.member.header(Self::rev(&resp.header)));
                Ok(Response::new(resp))
            }
            _ => Err(unexpected()),
        }
    }
}
