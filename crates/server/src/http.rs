//! Plain HTTP beside gRPC on the client port: `/health`, `/version` (etcd's JSON),
//! `/metrics` (Prometheus text, etcd's metric names), and the answer to any other path.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::member::Member;

/// HTTP routes for `member`.
pub fn routes(member: Arc<Member>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/version", get(version))
        .with_state(member)
}

/// The answer to a path nothing serves: gRPC's Unimplemented to a gRPC call, Go's
/// "404 page not found" to anything else (as etcd's HTTP mux).
pub async fn not_found(req: axum::extract::Request) -> axum::response::Response {
    let grpc = req
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if grpc {
        return tonic::Status::unimplemented("")
            .into_http::<axum::body::Body>()
            .into_response();
    }
    (
        StatusCode::NOT_FOUND,
        [
            (
                axum::http::header::CONTENT_TYPE,
                "text/plain; charset=utf-8",
            ),
            (axum::http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        "404 page not found\n",
    )
        .into_response()
}

/// Prometheus text exposition of the figures that exist so far, under etcd's names.
async fn metrics(State(member): State<Arc<Member>>) -> impl IntoResponse {
    let st = member.raft.status();
    let leader = st.leader();
    let lines = [
        "# HELP etcd_server_version Which version is running. 1 for 'server_version' label with current version.".to_string(),
        "# TYPE etcd_server_version gauge".to_string(),
        format!("etcd_server_version{{server_version=\"{}\"}} 1", oxcd_api::ETCD_API_VERSION),
        "# HELP etcd_cluster_version Which version is running. 1 for 'cluster_version' label with current cluster version".to_string(),
        "# TYPE etcd_cluster_version gauge".to_string(),
        format!("etcd_cluster_version{{cluster_version=\"{}\"}} 1", cluster_minor()),
        "# TYPE etcd_server_has_leader gauge".to_string(),
        format!("etcd_server_has_leader {}", u8::from(leader != 0)),
        "# TYPE etcd_server_is_leader gauge".to_string(),
        format!("etcd_server_is_leader {}", u8::from(leader == member.id.member_id)),
        "# TYPE etcd_server_proposals_committed_total gauge".to_string(),
        format!("etcd_server_proposals_committed_total {}", st.commit()),
        "# TYPE etcd_server_proposals_applied_total gauge".to_string(),
        format!("etcd_server_proposals_applied_total {}", member.applied_index()),
        "# TYPE etcd_mvcc_db_total_size_in_bytes gauge".to_string(),
        format!("etcd_mvcc_db_total_size_in_bytes {}", member.store.backend().size()),
        "# TYPE etcd_debugging_mvcc_current_revision gauge".to_string(),
        format!("etcd_debugging_mvcc_current_revision {}", member.store.current_rev()),
        "# TYPE etcd_server_quota_backend_bytes gauge".to_string(),
        format!("etcd_server_quota_backend_bytes {}", member.limits.quota.gauge()),
    ];
    let mut body = lines.join("\n");
    body.push('\n');
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        body,
    )
}

/// The cluster version as etcd labels it: major.minor.
fn cluster_minor() -> &'static str {
    let v = oxcd_api::ETCD_CLUSTER_VERSION;
    match v.rfind('.') {
        Some(i) => &v[..i],
        None => v,
    }
}

async fn version() -> impl IntoResponse {
    let body = serde_json::json!({
        "etcdserver": oxcd_api::ETCD_API_VERSION,
        "etcdcluster": oxcd_api::ETCD_CLUSTER_VERSION,
    });
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
}

/// Healthy when a leader is known and a linearizable read barrier completes.
async fn health(State(member): State<Arc<Member>>) -> impl IntoResponse {
    let (ok, reason) = if member.raft.status().leader() == 0 {
        (false, "RAFT NO LEADER".to_string())
    } else {
        match member.read_barrier().await {
            Ok(()) => (true, String::new()),
            Err(e) => (false, format!("QGET ERROR:{e}")),
        }
    };
    let body = serde_json::json!({ "health": ok.to_string(), "reason": reason });
    let code = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        code,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
}
