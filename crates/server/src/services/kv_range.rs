//! KV.Range served by hand: a plain range (key order, no revision filters, values
//! wanted) sends the rows as the backend stores them, already encoded `mvccpb.KeyValue`
//! messages, instead of decoding every key-value and encoding it again. A range of
//! 150,000 values of 1 KB is then one copy out of the backend and one into the gRPC
//! buffer, with no key-value built. Every other KV method goes to the generated server.
//!
//! Invariants: [`RangeOut`] encodes to exactly the bytes of the `RangeResponse` it
//! stands for (fields in field order); the answer (rows, `more`, `count`, header
//! revision, errors) is the one `apply::range` gives for the same request.

use std::convert::Infallible;
use std::sync::Arc;

use oxcd_api::etcdserverpb::kv_server::KvServer;
use oxcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use oxcd_api::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader};
use oxcd_mvcc::{KeyRange, RangeOptions, Store};
use prost::Message;
use prost::bytes::{Buf, BufMut};
use prost::encoding::{self, DecodeContext, WireType};
use tonic::codegen::{Body, BoxFuture, Context, Poll, Service, StdError, http};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use super::kv::KvService;
use crate::apply::{ApplyError, range};
use crate::member::Member;
use crate::validate;

/// etcd's path of KV.Range.
const RANGE_PATH: &str = "/etcdserverpb.KV/Range";
/// `RangeResponse.kvs`' field number.
const KVS_FIELD: u32 = 2;

/// A range answer as it is sent.
#[derive(Debug, Default)]
pub struct RangeOut {
    /// Everything but the encoded rows (it holds decoded key-values on the general path).
    pub resp: RangeResponse,
    /// Rows already encoded as `kvs` fields, sent after `resp.kvs`.
    pub encoded: Vec<u8>,
}

impl From<RangeResponse> for RangeOut {
    fn from(resp: RangeResponse) -> RangeOut {
        RangeOut {
            resp,
            encoded: Vec::new(),
        }
    }
}

impl Message for RangeOut {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        let r = &self.resp;
        if let Some(h) = &r.header {
            encoding::message::encode(1, h, buf);
        }
        for kv in &r.kvs {
            encoding::message::encode(KVS_FIELD, kv, buf);
        }
        buf.put_slice(&self.encoded);
        if r.more {
            encoding::bool::encode(3, &r.more, buf);
        }
        if r.count != 0 {
            encoding::int64::encode(4, &r.count, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        // Never decoded: the server only sends it.
        encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        let r = &self.resp;
        r.header
            .as_ref()
            .map_or(0, |h| encoding::message::encoded_len(1, h))
            + encoding::message::encoded_len_repeated(KVS_FIELD, &r.kvs)
            + self.encoded.len()
            + if r.more {
                encoding::bool::encoded_len(3, &r.more)
            } else {
                0
            }
            + if r.count != 0 {
                encoding::int64::encoded_len(4, &r.count)
            } else {
                0
            }
    }

    fn clear(&mut self) {
        self.resp.clear();
        self.encoded.clear();
    }
}

/// Whether `r` wants the rows as stored: key order, every value, no revision filter.
fn plain(r: &RangeRequest) -> bool {
    let key_order = r.sort_target == SortTarget::Key as i32
        && (r.sort_order == SortOrder::None as i32 || r.sort_order == SortOrder::Ascend as i32);
    key_order
        && !r.keys_only
        && !r.count_only
        && r.min_mod_revision == 0
        && r.max_mod_revision == 0
        && r.min_create_revision == 0
        && r.max_create_revision == 0
}

/// A plain range with the rows as stored.
fn encoded(store: &Store, r: &RangeRequest) -> Result<RangeOut, ApplyError> {
    let take = if r.limit > 0 {
        r.limit as usize
    } else {
        usize::MAX
    };
    let opts = RangeOptions {
        // One more than asked, to learn whether there is more.
        limit: if r.limit > 0 { r.limit as usize + 1 } else { 0 },
        rev: r.revision,
        count_only: false,
    };
    let mut rows = Vec::new();
    let read = store.range_encoded(KeyRange::new(&r.key, &r.range_end), opts, take, |row| {
        encoding::encode_key(KVS_FIELD, WireType::LengthDelimited, &mut rows);
        encoding::encode_varint(row.len() as u64, &mut rows);
        rows.extend_from_slice(row);
    })?;
    Ok(RangeOut {
        resp: RangeResponse {
            header: Some(ResponseHeader {
                revision: read.rev,
                ..Default::default()
            }),
            kvs: Vec::new(),
            more: read.found > take,
            count: read.count as i64,
        },
        encoded: rows,
    })
}

/// Answers a range request: validated, behind the read barrier unless serializable;
/// with the rows as stored when `as_stored` and the request is plain.
pub(crate) async fn answer(
    member: &Member,
    r: RangeRequest,
    as_stored: bool,
) -> Result<RangeOut, Status> {
    validate::range(&r)?;
    if !r.serializable {
        member.read_barrier().await?;
    }
    let read = if as_stored && plain(&r) {
        encoded(&member.store, &r)
    } else {
        range::range(&*member.store, &r).map(RangeOut::from)
    };
    let mut out = read.map_err(ApplyError::into_read_error)?;
    let rev = out.resp.header.as_ref().map_or(0, |h| h.revision);
    out.resp.header = Some(member.header(rev));
    Ok(out)
}

/// The KV service: Range by hand, the rest by the generated server.
#[derive(Clone)]
pub struct KvRoutes {
    generated: KvServer<KvService>,
    member: Arc<Member>,
    max_decoding: usize,
}

impl KvRoutes {
    /// The KV service of `member`, refusing requests over `max_decoding` bytes.
    pub fn new(member: Arc<Member>, max_decoding: usize) -> KvRoutes {
        KvRoutes {
            generated: KvServer::new(KvService::new(member.clone()))
                .max_decoding_message_size(max_decoding),
            member,
            max_decoding,
        }
    }
}

impl NamedService for KvRoutes {
    const NAME: &'static str = "etcdserverpb.KV";
}

impl<B> Service<http::Request<B>> for KvRoutes
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() != RANGE_PATH {
            return self.generated.call(req);
        }
        let ranges = Ranges(self.member.clone());
        let max = self.max_decoding;
        Box::pin(async move {
            let codec = ProstCodec::<RangeOut, RangeRequest>::default();
            let mut grpc = Grpc::new(codec).apply_max_message_size_config(Some(max), None);
            Ok(grpc.unary(ranges, req).await)
        })
    }
}

/// Answers one Range call.
struct Ranges(Arc<Member>);

impl UnaryService<RangeRequest> for Ranges {
    type Response = RangeOut;
    type Future = BoxFuture<Response<RangeOut>, Status>;

    fn call(&mut self, req: Request<RangeRequest>) -> Self::Future {
        let member = self.0.clone();
        Box::pin(async move {
            answer(&member, req.into_inner(), true)
                .await
                .map(Response::new)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::mvccpb::KeyValue;

    fn kv(key: &str, value: &str, rev: i64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.into(),
            create_revision: rev,
            mod_revision: rev,
            version: 1,
            lease: 0,
        }
    }

    #[test]
    fn stored_rows_encode_as_the_plain_response() {
        let kvs = vec![kv("a", "1", 2), kv("b", "22", 3)];
        let header = Some(ResponseHeader {
            cluster_id: 9,
            member_id: 8,
            revision: 3,
            raft_term: 2,
        });
        let plain = RangeResponse {
            header,
            kvs: kvs.clone(),
            more: true,
            count: 5,
        };
        let mut rows = Vec::new();
        for kv in &kvs {
            let stored = kv.encode_to_vec();
            encoding::encode_key(KVS_FIELD, WireType::LengthDelimited, &mut rows);
            encoding::encode_varint(stored.len() as u64, &mut rows);
            rows.extend_from_slice(&stored);
        }
        let out = RangeOut {
            resp: RangeResponse {
                kvs: Vec::new(),
                ..plain.clone()
            },
            encoded: rows,
        };
        assert_eq!(out.encode_to_vec(), plain.encode_to_vec());
        assert_eq!(out.encoded_len(), plain.encoded_len());
        let general = RangeOut::from(plain.clone());
        assert_eq!(general.encode_to_vec(), plain.encode_to_vec());
        let empty = RangeOut::from(RangeResponse::default());
        assert_eq!(
            empty.encode_to_vec(),
            RangeResponse::default().encode_to_vec()
        );
    }
}
