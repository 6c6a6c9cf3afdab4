//! The gateway's streams: Watch and LeaseKeepAlive (requests read from the body as they
//! come, [`super::body`]), Snapshot and Observe (one request), each answer a line
//! `{"result":…}` as etcd's gateway writes it.
//!
//! Invariant: a stream that fails ends with one line `{"error":{…}}` (grpc-gateway's
//! stream error: the gRPC code, the HTTP code and status it maps to, the message) and
//! nothing after it.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::Request as HttpRequest;
use axum::response::Response;
use futures::{Stream, StreamExt};
use oxcd_api::etcdserverpb::maintenance_server::Maintenance;
use oxcd_api::etcdserverpb::{LeaseKeepAliveRequest, SnapshotRequest, WatchRequest, WatchResponse};
use oxcd_api::v3electionpb::LeaderRequest;
use oxcd_api::v3electionpb::election_server::Election;
use prost::Message;
use serde::Serialize;
use tokio::sync::OwnedSemaphorePermit;
use tonic::Status;

use super::{Gateway, body, grpc_request, json, reply};
use crate::domains::auth::caller::credentials;
use crate::domains::lease::service::LeaseService;
use crate::domains::watch::outbox::outbox;
use crate::domains::watch::stream::WatchStream;
use crate::edge::services::election::ElectionService;
use crate::edge::services::maintenance::MaintenanceService;

/// grpc-gateway's stream error.
#[derive(Serialize)]
struct StreamError<'a> {
    grpc_code: i32,
    http_code: u16,
    message: &'a str,
    http_status: &'a str,
}

/// The line ending a stream that failed with `status`.
fn error_line(status: &Status) -> Vec<u8> {
    let http = reply::http_status(status.code());
    let err = StreamError {
        grpc_code: status.code() as i32,
        http_code: http.as_u16(),
        message: status.message(),
        http_status: http.canonical_reason().unwrap_or(""),
    };
    json::stream_line("error", &err).unwrap_or_default()
}

/// A stream's answers as the lines of an HTTP body, ending after the first error; the
/// body holds the call's `slot` of the gateway's streams until it ends.
fn lines<S, T>(answers: S, slot: Option<OwnedSemaphorePermit>) -> Body
where
    S: Stream<Item = Result<T, Status>> + Send + 'static,
    T: Serialize,
{
    let lines = answers
        .scan(false, |failed, answer| {
            if *failed {
                return futures::future::ready(None);
            }
            let line = match answer {
                Ok(msg) => json::stream_result(&msg).unwrap_or_else(|e| {
                    *failed = true;
                    error_line(&Status::internal(e.to_string()))
                }),
                Err(status) => {
                    *failed = true;
                    error_line(&status)
                }
            };
            futures::future::ready(Some(Ok::<_, Infallible>(Bytes::from(line))))
        })
        .map(move |line| {
            let _held = &slot;
            line
        })
        .boxed();
    Body::from_stream(lines)
}

/// `/v3/watch`: a Watch stream whose requests are the body's values.
pub async fn watch(gw: Arc<Gateway>, req: HttpRequest) -> Response {
    if let Some(refused) = gw.refusal("/etcdserverpb.Watch/Watch", &req) {
        return refused;
    }
    let slot = gw.stream_slot().await;
    let (parts, body) = req.into_parts();
    let creds = credentials(&grpc_request(&parts.headers, ()));
    let (out, outgoing) = outbox();
    let stream = WatchStream::new(gw.watch.clone(), out, creds);
    let requests = body::requests::<WatchRequest>(body, gw.max_body);
    tokio::spawn(stream.run(requests));
    // Events may travel encoded once for many watchers: decoded back for the JSON.
    let answers = outgoing.map(|out| {
        out.and_then(|out| {
            WatchResponse::decode(out.encode_to_vec().as_slice())
                .map_err(|e| Status::internal(e.to_string()))
        })
    });
    reply::stream(lines(answers, slot))
}

/// `/v3/lease/keepalive`: a keepalive stream whose requests are the body's values.
pub async fn keep_alive(gw: Arc<Gateway>, lease: Arc<LeaseService>, req: HttpRequest) -> Response {
    if let Some(refused) = gw.refusal("/etcdserverpb.Lease/LeaseKeepAlive", &req) {
        return refused;
    }
    let slot = gw.stream_slot().await;
    let requests = body::requests::<LeaseKeepAliveRequest>(req.into_body(), gw.max_body);
    reply::stream(lines(lease.keep_alives(requests), slot))
}

/// A server-streaming call of the gRPC method at `grpc`: one request read from `req`'s
/// body, the answers `call` streams as lines.
async fn server_stream<Req, T, S, F, Fut>(
    gw: &Gateway,
    grpc: &str,
    req: HttpRequest,
    call: F,
) -> Response
where
    Req: serde::de::DeserializeOwned + Default + Message,
    T: Serialize,
    S: Stream<Item = Result<T, Status>> + Send + 'static,
    F: FnOnce(tonic::Request<Req>) -> Fut,
    Fut: std::future::Future<Output = Result<tonic::Response<S>, Status>>,
{
    let (message, headers) = match gw.read::<Req>(grpc, req).await {
        Ok(read) => read,
        Err(answer) => return answer,
    };
    let slot = gw.stream_slot().await;
    match call(grpc_request(&headers, message)).await {
        Ok(answers) => reply::stream(lines(answers.into_inner(), slot)),
        Err(status) => reply::status(&status),
    }
}

/// `/v3/maintenance/snapshot`: the snapshot's chunks.
pub async fn snapshot(
    gw: Arc<Gateway>,
    maintenance: Arc<MaintenanceService>,
    req: HttpRequest,
) -> Response {
    server_stream::<SnapshotRequest, _, _, _, _>(
        &gw,
        "/etcdserverpb.Maintenance/Snapshot",
        req,
        |r| maintenance.snapshot(r),
    )
    .await
}

/// `/v3/election/observe`: the election's leaders as they change.
pub async fn observe(
    gw: Arc<Gateway>,
    election: Arc<ElectionService>,
    req: HttpRequest,
) -> Response {
    server_stream::<LeaderRequest, _, _, _, _>(&gw, "/v3electionpb.Election/Observe", req, |r| {
        election.observe(r)
    })
    .await
}
