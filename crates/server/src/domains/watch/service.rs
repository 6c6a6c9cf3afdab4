//! The Watch service: each bidirectional stream is served by its own task
//! ([`crate::domains::watch::stream`]); responses flow back in batches through a bounded channel
//! ([`crate::domains::watch::outbox`]).

use std::convert::Infallible;
use std::future::{Ready, ready};
use std::sync::Arc;

use oxcd_api::etcdserverpb::WatchRequest;
use tonic::codegen::{Body, BoxFuture, Context, Poll, Service, StdError, http};
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::{Request, Response, Status, Streaming};
use tonic_prost::ProstCodec;

use crate::domains::watch::WatchHandles;
use crate::domains::watch::outbox::{Outgoing, outbox};
use crate::domains::watch::stream::WatchStream;
use crate::domains::watch::wire::WatchOut;

/// etcd's Watch service and method path.
const SERVICE: &str = "etcdserverpb.Watch";
const METHOD_PATH: &str = "/etcdserverpb.Watch/Watch";

/// The Watch service, served here rather than by the generated `WatchServer` so that its
/// responses can carry events encoded once per batch ([`WatchOut`]); it answers what the
/// generated server would (the same path, codec and Unimplemented for other methods).
#[derive(Clone)]
pub struct WatchService {
    watch: Arc<WatchHandles>,
}

impl WatchService {
    /// A Watch service over `watch`.
    pub fn new(watch: Arc<WatchHandles>) -> WatchService {
        WatchService { watch }
    }
}

impl NamedService for WatchService {
    const NAME: &'static str = SERVICE;
}

impl<B> Service<http::Request<B>> for WatchService
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
        if req.uri().path() != METHOD_PATH {
            return Box::pin(async { Ok(Status::unimplemented("").into_http()) });
        }
        let streams = Streams(self.watch.clone());
        Box::pin(async move {
            let codec = ProstCodec::<WatchOut, WatchRequest>::default();
            Ok(Grpc::new(codec).streaming(streams, req).await)
        })
    }
}

/// Opens one stream task per call.
struct Streams(Arc<WatchHandles>);

impl StreamingService<WatchRequest> for Streams {
    type Response = WatchOut;
    type ResponseStream = Outgoing;
    type Future = Ready<Result<Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, req: Request<Streaming<WatchRequest>>) -> Self::Future {
        let (out, outgoing) = outbox();
        let creds = crate::domains::auth::caller::credentials(&req);
        let stream = WatchStream::new(self.0.clone(), out, creds);
        tokio::spawn(stream.run(req.into_inner()));
        ready(Ok(Response::new(outgoing)))
    }
}
