//! The read-only endpoints of etcd's peer port (etcd 3.5.16
//! `server/etcdserver/api/etcdhttp/peer.go`, `github.com/xiang90/probing`):
//! - `GET /members`: the member list as this member knows it (not linearized), in
//!   etcd's JSON ([`super::members`]), with the cluster id in `X-Etcd-Cluster-ID`; a
//!   member joining an etcd cluster reads its cluster id and its own id from it;
//! - `/raft/probing`: `{"OK":true,"Now":"<RFC3339Nano>"}` and a newline, which etcd's
//!   prober asks every 4 s for its round-trip and clock-drift figures.
//!
//! `/version` and `/downgrade/enabled` are served by the version domain.
//!
//! The routes hold the membership handles weakly: a peer server still draining
//! connections after the member stopped must not keep the backend open.

use std::sync::Weak;
use std::time::SystemTime;

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{headers, members, method_not_allowed};
use crate::domains::membership::MembershipHandles;

/// etcd's `peerMembersPath`.
pub const MEMBERS: &str = "/members";
/// etcd's `ProbingPrefix` (the probing library's handler).
pub const PROBING: &str = "/raft/probing";

/// The routes, answering from `membership` while the member runs.
pub fn routes(membership: Weak<MembershipHandles>) -> axum::Router {
    axum::Router::new()
        .route(
            MEMBERS,
            axum::routing::any(move |method: Method| {
                let answer = member_list(method, membership.upgrade().as_deref());
                async move { answer }
            }),
        )
        .route(PROBING, axum::routing::any(|| async { probing() }))
}

/// `GET /members`.
fn member_list(method: Method, membership: Option<&MembershipHandles>) -> Response {
    if method != Method::GET {
        return method_not_allowed("GET");
    }
    let Some(m) = membership else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let listed = crate::domains::membership::service::listed(m, &m.roster.members());
    let mut response = (
        [(header::CONTENT_TYPE, "application/json")],
        members::list_json(&listed),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&headers::id(m.reads.ids().cluster_id)) {
        response.headers_mut().insert(headers::CLUSTER_ID, v);
    }
    response
}

/// `/raft/probing`: healthy, and the time here.
fn probing() -> Response {
    format!(
        "{{\"OK\":true,\"Now\":\"{}\"}}\n",
        oxcd_go::time::rfc3339_nano(SystemTime::now())
    )
    .into_response()
}
