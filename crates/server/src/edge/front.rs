//! The client port's front door: one service per listener that sends a gRPC request
//! (content type `application/grpc...`) straight to the gRPC services, counted
//! ([`crate::edge::metrics::grpc`]), refused at once by a learner that does not serve its
//! method ([`crate::edge::services::learner_gate`]), its size errors worded as grpc-go's
//! ([`crate::edge::grpc_compat`]); and everything else to the HTTP router (health,
//! metrics, version, the JSON gateway, CORS, 404).
//!
//! It replaces a stack of axum middlewares around the gRPC routes: each of them boxed
//! the request's future and cloned the service behind it on every call; here a gRPC call
//! costs one branch, one counter and one future of a known type.
//!
//! Invariant: a gRPC request gets the same answer as through the middlewares (the
//! learner refusal first, then the service; an unknown method is Unimplemented).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{Request, Response, header};
use axum::routing::future::RouteFuture;
use hyper::body::Incoming;
use tonic::codegen::Service;

use crate::domains::membership::Membership;
use crate::edge::grpc_compat;
use crate::edge::metrics::grpc::{Call, GrpcMetrics};
use crate::edge::services::learner_gate;

/// The gRPC side of a front door.
#[derive(Clone)]
pub struct GrpcSide {
    /// Every etcd gRPC service (tonic's routes as the axum router they are).
    pub routes: axum::Router,
    /// Whether this member is a learner.
    pub membership: Arc<Membership>,
    /// The call counters.
    pub metrics: Arc<GrpcMetrics>,
}

/// What one client listener serves: gRPC (unless it serves HTTP only) and HTTP.
#[derive(Clone)]
pub struct Front {
    grpc: Option<GrpcSide>,
    http: axum::Router,
}

impl Front {
    /// A front door sending gRPC to `grpc` (None: an HTTP-only listener, where gRPC
    /// meets the HTTP router's 404) and the rest to `http`.
    pub fn new(grpc: Option<GrpcSide>, http: axum::Router) -> Front {
        Front { grpc, http }
    }
}

/// Whether `req` is a gRPC call (its content type `application/grpc...`), for every
/// part of the client port that answers gRPC and HTTP apart.
pub fn is_grpc<B>(req: &Request<B>) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

impl Service<Request<Incoming>> for Front {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = FrontFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> FrontFuture {
        let Some(grpc) = self.grpc.as_mut().filter(|_| is_grpc(&req)) else {
            return FrontFuture::Http(self.http.call(req));
        };
        let path = req.uri().path();
        if learner_gate::refuses(&grpc.membership, path) {
            return FrontFuture::Answered(Some(learner_gate::refusal()));
        }
        let call = grpc.metrics.start(path);
        FrontFuture::Grpc {
            answer: grpc.routes.call(req),
            call,
        }
    }
}

/// The answer of a [`Front`].
pub enum FrontFuture {
    /// Answered without a service (a learner's refusal).
    Answered(Option<Response<Body>>),
    /// A gRPC call in progress, counted by `call` when it has one.
    Grpc {
        answer: RouteFuture<Infallible>,
        call: Option<Call>,
    },
    /// An HTTP request in progress.
    Http(RouteFuture<Infallible>),
}

impl Future for FrontFuture {
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Every variant is Unpin (the inner futures are boxed by tonic and axum).
        match self.get_mut() {
            FrontFuture::Answered(resp) => match resp.take() {
                Some(r) => Poll::Ready(Ok(r)),
                None => Poll::Pending,
            },
            FrontFuture::Http(f) => Pin::new(f).poll(cx),
            FrontFuture::Grpc { answer, call } => {
                let mut resp = match Pin::new(answer).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Ok(resp)) => resp,
                    Poll::Ready(Err(never)) => match never {},
                };
                grpc_compat::rewrite_headers(resp.headers_mut());
                Poll::Ready(Ok(match call.take() {
                    Some(call) => call.answered(resp),
                    None => resp,
                }))
            }
        }
    }
}
