//! Plain HTTP beside gRPC on the client port: `/health`, `/version` (etcd's JSON).

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
        .route("/version", get(version))
        .with_state(member)
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
