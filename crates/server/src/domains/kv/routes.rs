//! The KV service on the gRPC router: Range served by hand ([`super::range`] builds its
//! answer's body around the rows as stored), every other method by the generated server
//! over [`super::service::KvService`].

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http_body::Frame;
use oxcd_api::etcdserverpb::kv_server::KvServer;
use oxcd_api::etcdserverpb::{RangeRequest, RangeResponse};
use tonic::codegen::{Body, BoxFuture, Context, Poll, Service, StdError, http};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

use super::range::{Frames, RangeOut, answer};
use super::service::KvService;
use crate::domains::kv::KvHandles;
use crate::machine::range_budget::Charge;

/// The Range method's path.
const RANGE_PATH: &str = "/etcdserverpb.KV/Range";

/// The KV service: Range by hand, the rest by the generated server.
#[derive(Clone)]
pub struct KvRoutes {
    generated: KvServer<KvService>,
    kv: Arc<KvHandles>,
    max_decoding: usize,
}

impl KvRoutes {
    /// The KV service over `kv` (Range) and `service` (the rest), refusing requests
    /// over `max_decoding` bytes.
    pub fn new(kv: Arc<KvHandles>, service: Arc<KvService>, max_decoding: usize) -> KvRoutes {
        KvRoutes {
            generated: KvServer::from_arc(service).max_decoding_message_size(max_decoding),
            kv,
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
        let answered = Arc::new(Mutex::new(None));
        let ranges = Ranges {
            kv: self.kv.clone(),
            answered: answered.clone(),
        };
        let max = self.max_decoding;
        Box::pin(async move {
            // tonic decodes the request and answers errors; a successful answer's body
            // is built here around the rows.
            let codec = ProstCodec::<RangeResponse, RangeRequest>::default();
            let mut grpc = Grpc::new(codec).apply_max_message_size_config(Some(max), None);
            let resp = grpc.unary(ranges, req).await;
            let out = answered
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let Some(out) = out else {
                return Ok(resp);
            };
            Ok(match out.into_frames() {
                Ok(frames) => {
                    let (parts, _) = resp.into_parts();
                    http::Response::from_parts(
                        parts,
                        tonic::body::Body::new(RangeBody::new(frames)),
                    )
                }
                Err(status) => status.into_http(),
            })
        })
    }
}

/// Answers one Range call: a successful answer is left in `answered` (the response
/// tonic builds for it is empty and replaced).
struct Ranges {
    kv: Arc<KvHandles>,
    answered: Arc<Mutex<Option<RangeOut>>>,
}

impl UnaryService<RangeRequest> for Ranges {
    type Response = RangeResponse;
    type Future = BoxFuture<Response<RangeResponse>, Status>;

    fn call(&mut self, req: Request<RangeRequest>) -> Self::Future {
        let kv = self.kv.clone();
        let answered = self.answered.clone();
        Box::pin(async move {
            let caller = kv.callers.of(&req).await?;
            let out = answer(&kv, caller, req.into_inner(), true).await?;
            *answered.lock().unwrap_or_else(PoisonError::into_inner) = Some(out);
            Ok(Response::new(RangeResponse::default()))
        })
    }
}

/// A successful Range answer's body: its pieces, then the `grpc-status: 0` trailers.
/// It holds the answer's charge on the range budget until it is dropped.
struct RangeBody {
    data: VecDeque<Bytes>,
    trailers: Option<http::HeaderMap>,
    _charge: Option<Charge>,
}

impl RangeBody {
    fn new(frames: Frames) -> RangeBody {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
        RangeBody {
            data: frames
                .pieces
                .into_iter()
                .filter(|b| !b.is_empty())
                .collect(),
            trailers: Some(trailers),
            _charge: frames.charge,
        }
    }
}

impl Body for RangeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if let Some(data) = this.data.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_empty() && self.trailers.is_none()
    }
}
