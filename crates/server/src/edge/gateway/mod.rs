//! etcd's JSON gateway on the client port: every RPC of KV, Lease, Cluster, Maintenance,
//! Auth, Lock and Election at etcd's paths under `/v3/` (and `/v3beta/`, which etcd
//! 3.4's clients still use), with the JSON etcd 3.5's gateway speaks.
//!
//! etcd's gateway is a gRPC client of its own server over a loopback connection; this
//! one calls the same service handlers the gRPC server calls, in process, with the
//! request metadata a gRPC call would carry (the `Authorization` header as the token,
//! `Grpc-Metadata-*` headers as metadata). So the gateway answers exactly what gRPC
//! answers, errors included, without a second trip through HTTP/2.
//!
//! - [`json`]: the JSON layout and the reading of bodies; [`reply`]: answers and errors;
//!   [`body`]: a stream's requests read from its body; [`streams`]: Watch,
//!   LeaseKeepAlive, Snapshot and Observe as lines of `{"result": …}`.
//!
//! Invariants: a request is checked as gRPC checks it (learner gate, the request size
//! bound) before a handler runs; a body is never read past its bound.

pub mod body;
pub mod json;
pub mod reply;
mod routes;
pub mod streams;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request as HttpRequest;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use oxcd_api::errors::EtcdError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::metadata::{MetadataKey, MetadataValue};
use tonic::{Code, Request, Status};

use crate::domains::membership::Membership;
use crate::domains::watch::WatchHandles;
use crate::edge::services::Services;
use crate::edge::services::learner_gate;
use crate::start::listeners::ClientAddr;

pub use routes::routes;

/// An answer of a service handler, as its gRPC trait returns it.
pub type Answer<'a, T> =
    Pin<Box<dyn Future<Output = Result<tonic::Response<T>, Status>> + Send + 'a>>;

/// The header whose value etcd's gateway passes as the auth token.
const AUTHORIZATION: &str = "authorization";
/// The prefix of headers etcd's gateway passes on as gRPC metadata.
const METADATA_PREFIX: &str = "grpc-metadata-";
/// The metadata etcd's gateway adds to each call (from the `Accept` header), by which a
/// call is known to come through a gateway.
const GATEWAY_MARK: &str = "grpcgateway-accept";
/// etcd's answer to a gateway request over a connection whose certificate names a user
/// while auth is on (the certificate's CN is not taken as the caller here).
const CN_IGNORED: &str = "CommonName of client sending a request against gateway will be ignored and not used as expected";

/// What every gateway route shares.
pub struct Gateway {
    /// Watch streams (and the auth store: a certificate's CN is refused while on).
    watch: Arc<WatchHandles>,
    /// Whether this member is a learner.
    membership: Arc<Membership>,
    /// The largest request message gRPC accepts (`--max-request-bytes` and gRPC's slack).
    max_message: usize,
    /// The largest body read: a message's JSON is at most 4/3 of it (base64) and some.
    max_body: usize,
    /// Calls in flight, at most `--max-concurrent-streams` (etcd's gateway makes its
    /// calls over one gRPC connection to its server, which allows that many streams):
    /// a call past the limit waits for one to end.
    streams: Arc<Semaphore>,
}

impl Gateway {
    /// The gateway in front of `services`, with at most `max_streams` calls in flight.
    pub fn new(services: &Services, max_streams: u32) -> Gateway {
        let max_message = services.max_grpc_message;
        let permits = usize::try_from(max_streams)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        Gateway {
            watch: services.watch.clone(),
            membership: services.kv.membership.clone(),
            max_message,
            max_body: 2 * max_message + (1 << 20),
            streams: Arc::new(Semaphore::new(permits)),
        }
    }

    /// A stream of the gateway's connection, waited for while `--max-concurrent-streams`
    /// are in flight.
    pub(crate) async fn stream_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.streams.clone().acquire_owned().await.ok()
    }

    /// Serves a unary call of the gRPC method at `grpc` (`/etcdserverpb.KV/Put`): reads
    /// the request from `req`'s body and answers what `call` of `service` answers.
    pub async fn unary<S, Req, Resp, F>(
        &self,
        grpc: &str,
        req: HttpRequest,
        service: &S,
        call: F,
    ) -> Response
    where
        Req: DeserializeOwned + Default + prost::Message,
        Resp: Serialize,
        F: for<'a> Fn(&'a S, Request<Req>) -> Answer<'a, Resp>,
    {
        let (message, headers) = match self.read::<Req>(grpc, req).await {
            Ok(read) => read,
            Err(answer) => return answer,
        };
        let _slot = self.stream_slot().await;
        match call(service, grpc_request(&headers, message)).await {
            Ok(resp) => reply::message(resp.get_ref()),
            Err(status) => reply::status(&status),
        }
    }

    /// The request message in `req`'s body and its headers, or the answer refusing it.
    pub(crate) async fn read<Req>(
        &self,
        grpc: &str,
        req: HttpRequest,
    ) -> Result<(Req, HeaderMap), Response>
    where
        Req: DeserializeOwned + Default + prost::Message,
    {
        if let Some(refusal) = self.refusal(grpc, &req) {
            return Err(refusal);
        }
        let (parts, body) = req.into_parts();
        let bytes = match axum::body::to_bytes(body, self.max_body).await {
            Ok(b) => b,
            Err(_) => {
                let size = parts
                    .headers
                    .get(header::CONTENT_LENGTH)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<usize>().ok())
                    .unwrap_or(self.max_body + 1);
                return Err(self.too_large(size));
            }
        };
        let message: Req = match json::request(&bytes) {
            Ok(m) => m,
            Err(e) => return Err(reply::error(Code::InvalidArgument, &e.0)),
        };
        let size = message.encoded_len();
        if size > self.max_message {
            return Err(self.too_large(size));
        }
        Ok((message, parts.headers))
    }

    /// The answer refusing what etcd refuses before any handler runs: a method a learner
    /// does not serve, a certificate's CN while auth is on.
    pub(crate) fn refusal(&self, grpc: &str, req: &HttpRequest) -> Option<Response> {
        if learner_gate::refuses(&self.membership, grpc) {
            return Some(reply::status(&EtcdError::LearnerNotSupported.into()));
        }
        let common_name = req
            .extensions()
            .get::<axum::extract::ConnectInfo<ClientAddr>>()
            .and_then(|c| c.0.common_name.as_ref());
        if common_name.is_some() && self.watch.callers.auth().enabled() {
            return Some(crate::edge::go_http::go_text(
                StatusCode::BAD_REQUEST,
                CN_IGNORED,
            ));
        }
        None
    }

    /// gRPC's answer to a message over the size bound.
    fn too_large(&self, size: usize) -> Response {
        reply::error(
            Code::ResourceExhausted,
            &format!(
                "grpc: received message larger than max ({size} vs. {})",
                self.max_message
            ),
        )
    }
}

/// A gRPC request carrying `message` and the metadata etcd's gateway makes of `headers`.
pub fn grpc_request<T>(headers: &HeaderMap, message: T) -> Request<T> {
    let mut req = Request::new(message);
    let md = req.metadata_mut();
    md.insert(GATEWAY_MARK, MetadataValue::from_static("*/*"));
    for (name, value) in headers {
        let name = name.as_str();
        let key = if name == AUTHORIZATION {
            AUTHORIZATION
        } else if let Some(rest) = name.strip_prefix(METADATA_PREFIX) {
            rest
        } else {
            continue;
        };
        let (Ok(key), Ok(value)) = (
            MetadataKey::from_bytes(key.as_bytes()),
            MetadataValue::try_from(value.as_bytes()),
        ) else {
            continue;
        };
        md.append(key, value);
    }
    req
}

/// etcd's CORS headers on every HTTP answer of the client port, and its answer to
/// `OPTIONS` (an empty 200); gRPC calls pass untouched.
pub async fn cors(req: HttpRequest, next: Next) -> Response {
    if crate::edge::front::is_grpc(&req) {
        return next.run(req).await;
    }
    let mut resp = if req.method() == Method::OPTIONS {
        Response::new(Body::empty())
    } else {
        next.run(req).await
    };
    let headers = resp.headers_mut();
    headers.insert(
        "access-control-allow-headers",
        HeaderValue::from_static("accept, content-type, authorization"),
    );
    headers.insert(
        "access-control-allow-methods",
        HeaderValue::from_static("POST, GET, OPTIONS, PUT, DELETE"),
    );
    headers.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_become_the_metadata_etcds_gateway_sends() {
        let mut headers = HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("tok.1"));
        headers.insert("grpc-metadata-hasleader", HeaderValue::from_static("true"));
        headers.insert("user-agent", HeaderValue::from_static("curl"));
        let req = grpc_request(&headers, ());
        let md = req.metadata();
        assert_eq!(
            md.get("authorization").map(|v| v.as_bytes()),
            Some(&b"tok.1"[..])
        );
        assert_eq!(
            md.get("hasleader").map(|v| v.as_bytes()),
            Some(&b"true"[..])
        );
        assert!(md.get("user-agent").is_none());
        assert!(md.get(GATEWAY_MARK).is_some());
    }
}
