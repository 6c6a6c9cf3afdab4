//! Keepalives between the members of an etcd cluster (etcd 3.5.16
//! `server/lease/leasehttp/http.go`; design §A.7): a follower forwards each keepalive it
//! receives to the leader's peer port, `POST /leases` with a protobuf
//! `LeaseKeepAliveRequest`, and the leader renews the lease from memory and answers a
//! `LeaseKeepAliveResponse` (404 `lease not found`; 400 with the reason otherwise, e.g.
//! `not a primary lessor` from a member that no longer leads). Neither side sends or
//! checks cluster or version headers.
//!
//! A follower's `LeaseTimeToLive` goes the same way, to `POST /leases/internal` with a
//! `leasepb.LeaseInternalRequest`, answered from the leader's lessor (its clocks are the
//! only ones keepalives renew).
//!
//! [`renew_at`] and [`time_to_live_at`] are the follower's side, [`routes`] the leader's.

use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::{
    LeaseKeepAliveRequest, LeaseKeepAliveResponse, LeaseTimeToLiveRequest, LeaseTimeToLiveResponse,
    ResponseHeader,
};
use oxcd_api::leasepb::{LeaseInternalRequest, LeaseInternalResponse};
use prost::Message as _;

use super::client::{self, PeerHttpError};
use super::go_error;
use crate::domains::lease::LeaseHandles;
use crate::domains::lease::renewals::Renewals;
use crate::peer::PeerDialer;

/// etcd's `LeasePrefix`.
pub const PATH: &str = "/leases";
/// How long a follower waits before asking the leader again (etcd: 50 ms).
const RETRY_EVERY: Duration = Duration::from_millis(50);
/// etcd's `LeaseInternalPrefix`.
pub const INTERNAL: &str = "/leases/internal";

/// Why a forwarded keepalive got no TTL.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The leader has no such lease.
    #[error("lease not found")]
    NotFound,
    /// The leader could not be asked, or refused (it may no longer lead).
    #[error(transparent)]
    Http(#[from] PeerHttpError),
    /// Its answer did not decode, or named another lease.
    #[error("unreadable keepalive answer")]
    Unreadable,
}

/// Asks the leader as etcd's followers do (`v3_server.go` `LeaseRenew`,
/// `LeaseTimeToLive`): `ask` each of its peer URLs (`leader_urls`, read again each
/// round: the leader may change) with the time left, again every 50 ms, until `timeout`.
/// Ok(None): the leader has no such lease.
pub async fn ask_leader<T, Fut>(
    leader_urls: impl Fn() -> Vec<String>,
    timeout: Duration,
    ask: impl Fn(String, Duration) -> Fut,
) -> Result<Option<T>, EtcdError>
where
    Fut: std::future::Future<Output = Result<T, ForwardError>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < deadline {
        for url in leader_urls() {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match ask(url.clone(), left).await {
                Ok(answer) => return Ok(Some(answer)),
                Err(ForwardError::NotFound) => return Ok(None),
                Err(e) => tracing::debug!(url, "not answered by the leader: {e}"),
            }
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
    Err(EtcdError::Timeout)
}

/// Asks the leader at peer URL `url` to renew lease `id`: its TTL.
pub async fn renew_at(
    dialer: &PeerDialer,
    url: &str,
    id: i64,
    timeout: Duration,
) -> Result<i64, ForwardError> {
    let body = LeaseKeepAliveRequest { id }.encode_to_vec();
    let answer = client::request(dialer, url, Method::POST, PATH, body.into(), timeout).await?;
    match answer.status {
        StatusCode::OK => {
            let r = LeaseKeepAliveResponse::decode(answer.body.as_ref())
                .map_err(|_| ForwardError::Unreadable)?;
            if r.id != id {
                return Err(ForwardError::Unreadable);
            }
            Ok(r.ttl)
        }
        StatusCode::NOT_FOUND => Err(ForwardError::NotFound),
        status => Err(ForwardError::Http(PeerHttpError::Refused {
            status,
            text: String::from_utf8_lossy(&answer.body).trim_end().to_string(),
            headers: answer.headers,
        })),
    }
}

/// Asks the leader at peer URL `url` for the TimeToLive of lease `id` (with its keys if
/// `keys`).
pub async fn time_to_live_at(
    dialer: &PeerDialer,
    url: &str,
    id: i64,
    keys: bool,
    timeout: Duration,
) -> Result<LeaseTimeToLiveResponse, ForwardError> {
    let body = LeaseInternalRequest {
        lease_time_to_live_request: Some(LeaseTimeToLiveRequest { id, keys }),
    }
    .encode_to_vec();
    let answer = client::request(dialer, url, Method::POST, INTERNAL, body.into(), timeout).await?;
    match answer.status {
        StatusCode::OK => LeaseInternalResponse::decode(answer.body.as_ref())
            .ok()
            .and_then(|r| r.lease_time_to_live_response)
            .filter(|r| r.id == id)
            .ok_or(ForwardError::Unreadable),
        StatusCode::NOT_FOUND => Err(ForwardError::NotFound),
        status => Err(ForwardError::Http(PeerHttpError::Refused {
            status,
            text: String::from_utf8_lossy(&answer.body).trim_end().to_string(),
            headers: answer.headers,
        })),
    }
}

/// The leader's side: `POST /leases`, renewed by `renewals` if this member leads, and
/// `POST /leases/internal`, answered from `lease`'s lessor if it leads.
pub fn routes(renewals: Arc<Renewals>, lease: Weak<LeaseHandles>) -> axum::Router {
    axum::Router::new()
        .route(
            PATH,
            axum::routing::any(move |method: Method, body: Bytes| {
                let renewals = renewals.clone();
                async move { keepalive(&renewals, method, &body) }
            }),
        )
        .route(
            INTERNAL,
            axum::routing::any(move |method: Method, body: Bytes| {
                let lease = lease.upgrade();
                async move { time_to_live(lease.as_deref(), method, &body) }
            }),
        )
}

fn time_to_live(lease: Option<&LeaseHandles>, method: Method, body: &[u8]) -> Response {
    if method != Method::POST {
        return go_error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    }
    let Some(lease) = lease else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let Some(req) = LeaseInternalRequest::decode(body)
        .ok()
        .and_then(|r| r.lease_time_to_live_request)
    else {
        return go_error(StatusCode::BAD_REQUEST, "error unmarshalling request");
    };
    if !lease.role.is_leader() {
        return go_error(StatusCode::INTERNAL_SERVER_ERROR, "not a primary lessor");
    }
    let Some(t) = lease.leases.time_to_live(req.id, req.keys) else {
        return go_error(StatusCode::NOT_FOUND, "lease not found");
    };
    let answer = LeaseInternalResponse {
        lease_time_to_live_response: Some(LeaseTimeToLiveResponse {
            header: Some(ResponseHeader::default()),
            id: req.id,
            ttl: t.remaining,
            granted_ttl: t.granted,
            keys: t.keys,
        }),
    };
    (
        [(header::CONTENT_TYPE, "application/protobuf")],
        answer.encode_to_vec(),
    )
        .into_response()
}

fn keepalive(renewals: &Renewals, method: Method, body: &[u8]) -> Response {
    if method != Method::POST {
        // etcd's lease handler answers 405 without an Allow header.
        return go_error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    }
    let Ok(req) = LeaseKeepAliveRequest::decode(body) else {
        return go_error(StatusCode::BAD_REQUEST, "error unmarshalling request");
    };
    match renewals
        .renew_as_leader(&[req.id])
        .and_then(|t| t.first().copied())
    {
        Some(0) => go_error(StatusCode::NOT_FOUND, "lease not found"),
        Some(ttl) => (
            [(header::CONTENT_TYPE, "application/protobuf")],
            LeaseKeepAliveResponse {
                header: Some(ResponseHeader::default()),
                id: req.id,
                ttl,
            }
            .encode_to_vec(),
        )
            .into_response(),
        None => go_error(StatusCode::BAD_REQUEST, "not a primary lessor"),
    }
}
