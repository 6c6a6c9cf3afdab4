//! The read-only endpoints of etcd's peer port (etcd 3.5.16
//! `server/etcdserver/api/etcdhttp/peer.go`, `github.com/xiang90/probing`):
//! - `GET /members`: the member list as this member knows it (not linearized), in
//!   etcd's JSON ([`super::members`]), with the cluster id in `X-Etcd-Cluster-ID`; a
//!   member joining an etcd cluster reads its cluster id and its own id from it;
//! - `/raft/probing`: `{"OK":true,"Now":"<RFC3339Nano>"}` and a newline, which etcd's
//!   prober asks every 4 s for its round-trip and clock-drift figures;
//! - `GET /members/hashkv` (etcd 3.5.16 `server/etcdserver/corrupt.go`
//!   `hashKVHandler`): the HashKV of the revision a JSON body names, which etcd's
//!   corruption checks ask every member for;
//! - `POST /members/promote/<id>`: a promotion a follower forwards to the leader
//!   ([`promote_on`] is the asking side).
//!
//! `/version` and `/downgrade/enabled` are served by the version domain.
//!
//! The routes hold the membership handles weakly: a peer server still draining
//! connections after the member stopped must not keep the backend open.

use std::sync::Weak;
use std::time::SystemTime;

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{go_error, headers, members, method_not_allowed};
use crate::domains::membership::MembershipHandles;

/// etcd's `peerMembersPath`.
pub const MEMBERS: &str = "/members";
/// etcd's `ProbingPrefix` (the probing library's handler).
pub const PROBING: &str = "/raft/probing";
/// etcd's `PeerHashKVPath`.
pub const HASH_KV: &str = "/members/hashkv";
/// etcd's `peerMemberPromotePrefix`, followed by the learner's decimal id.
pub const PROMOTE: &str = "/members/promote/";

/// The routes, answering from `membership` while the member runs.
pub fn routes(membership: Weak<MembershipHandles>) -> axum::Router {
    let for_hash = membership.clone();
    let for_promote = membership.clone();
    axum::Router::new()
        .route(
            "/members/promote/{id}",
            axum::routing::any(
                move |method: Method, axum::extract::Path(id): axum::extract::Path<String>| {
                    let membership = for_promote.upgrade();
                    async move { promote(method, &id, membership.as_deref()).await }
                },
            ),
        )
        .route(
            MEMBERS,
            axum::routing::any(move |method: Method| {
                let answer = member_list(method, membership.upgrade().as_deref());
                async move { answer }
            }),
        )
        .route(
            HASH_KV,
            axum::routing::any(
                move |method: Method, headers: HeaderMap, body: axum::body::Bytes| {
                    let membership = for_hash.upgrade();
                    async move { hash_kv(method, &headers, &body, membership.as_deref()).await }
                },
            ),
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

/// `POST /members/promote/<id>`: a follower forwards a promotion to the leader (which
/// forwards it again if it no longer leads); the members after it, or etcd's refusal.
async fn promote(method: Method, id: &str, membership: Option<&MembershipHandles>) -> Response {
    use oxcd_api::errors::EtcdError;
    if method != Method::POST {
        return method_not_allowed("POST");
    }
    let Some(m) = membership else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let Ok(id) = id.parse::<u64>() else {
        return go_error(
            StatusCode::NOT_FOUND,
            &format!("member {id} not found in cluster"),
        );
    };
    match crate::domains::membership::requests::promote(m, id).await {
        Ok(members) => {
            let listed = crate::domains::membership::service::listed(m, &members);
            (
                [(header::CONTENT_TYPE, "application/json")],
                members::list_json(&listed),
            )
                .into_response()
        }
        Err(EtcdError::MemberNotFound) => {
            go_error(StatusCode::NOT_FOUND, "membership: ID not found")
        }
        Err(EtcdError::MemberNotLearner) => go_error(
            StatusCode::PRECONDITION_FAILED,
            "membership: can only promote a learner member",
        ),
        Err(EtcdError::LearnerNotReady) => go_error(
            StatusCode::PRECONDITION_FAILED,
            "etcdserver: can only promote a learner member which is in sync with leader",
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "application/json")],
            "{\"message\":\"Internal Server Error\"}",
        )
            .into_response(),
    }
}

/// Asks the etcd member at peer URL `url` to promote learner `id` (etcd's
/// `promoteMemberHTTP`): the members after it; Err(Some) is its final answer, Err(None)
/// one worth asking again (unreachable, or not leading any more).
pub async fn promote_on(
    dialer: &crate::peer::PeerDialer,
    url: &str,
    id: u64,
    timeout: std::time::Duration,
) -> Result<Vec<oxcd_api::oxcdpb::MemberInfo>, Option<oxcd_api::errors::EtcdError>> {
    use oxcd_api::errors::EtcdError;
    let answer = super::client::post_empty(dialer, url, &format!("{PROMOTE}{id}"), timeout)
        .await
        .map_err(|_| None)?;
    let text = String::from_utf8_lossy(&answer.body);
    match answer.status {
        StatusCode::OK => members::parse_list(&answer.body)
            .map(|list| {
                list.into_iter()
                    .map(members::EtcdMember::into_info)
                    .collect()
            })
            .map_err(|_| None),
        StatusCode::NOT_FOUND => Err(Some(EtcdError::MemberNotFound)),
        StatusCode::PRECONDITION_FAILED if text.contains("in sync with leader") => {
            Err(Some(EtcdError::LearnerNotReady))
        }
        StatusCode::PRECONDITION_FAILED if text.contains("can only promote a learner member") => {
            Err(Some(EtcdError::MemberNotLearner))
        }
        _ => Err(None),
    }
}

/// The body of a `/members/hashkv` request.
#[derive(serde::Deserialize)]
struct HashKvRequest {
    #[serde(default)]
    revision: i64,
}

/// `GET /members/hashkv`.
async fn hash_kv(
    method: Method,
    request_headers: &HeaderMap,
    body: &[u8],
    membership: Option<&MembershipHandles>,
) -> Response {
    if method != Method::GET {
        return method_not_allowed("GET");
    }
    let Some(m) = membership else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let cluster = headers::id(m.reads.ids().cluster_id);
    if let Some(theirs) = request_headers.get(headers::CLUSTER_ID)
        && !theirs.is_empty()
        && theirs.as_bytes() != cluster.as_bytes()
    {
        return go_error(StatusCode::PRECONDITION_FAILED, "cluster ID mismatch");
    }
    let Ok(req) = serde_json::from_slice::<HashKvRequest>(body) else {
        return go_error(StatusCode::BAD_REQUEST, "error unmarshalling request");
    };
    let store = m.reads.store().clone();
    let rev = req.revision;
    let hashed = crate::machine::reads::read_blocking(store, move |store| {
        (store.hash_kv(rev), store.current_rev())
    })
    .await;
    let (hashed, current) = match hashed {
        Ok(h) => h,
        Err(e) => return go_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
    };
    let (hash, compact_revision, _) = match hashed {
        Ok(h) => h,
        Err(e) => return go_error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    // Go's encoding of HashKVResponse: zero fields left out.
    let mut json = String::from("{\"header\":{");
    if current != 0 {
        json.push_str(&format!("\"revision\":{current}"));
    }
    json.push('}');
    if hash != 0 {
        json.push_str(&format!(",\"hash\":{hash}"));
    }
    if compact_revision != 0 {
        json.push_str(&format!(",\"compact_revision\":{compact_revision}"));
    }
    json.push('}');
    let mut response = ([(header::CONTENT_TYPE, "application/json")], json).into_response();
    if let Ok(v) = HeaderValue::from_str(&cluster) {
        response.headers_mut().insert(headers::CLUSTER_ID, v);
    }
    response
}

/// The header every answer of oxcd's peer port carries beside etcd's: a member that
/// could not reach a TLS peer's gRPC tells an oxcd peer from an etcd one by its
/// `/raft/probing` answer (`peer/transport.rs`), and an asker of `/version` knows an
/// error status came from oxcd, not from etcd's gRPC server refusing plain HTTP/2
/// (`peer/versions.rs`). etcd reads only the bodies.
pub const OXCD_PEER_HEADER: &str = "x-oxcd-peer";

/// Marks an answer of this member's peer port as oxcd's ([`OXCD_PEER_HEADER`]).
pub async fn mark_oxcd(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(OXCD_PEER_HEADER, HeaderValue::from_static("1"));
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
