//! Plain HTTP beside gRPC on the client port: `/health`, `/version` (etcd's JSON),
//! `/metrics` (Prometheus text, etcd's metric names), and the answer to any other path.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;

use crate::edge::go_http::go_text;
use crate::edge::http_handles::HttpHandles;

/// HTTP routes over `handles`.
pub fn routes(handles: Arc<HttpHandles>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(handles.clone())
        .merge(crate::domains::version::report::routes(
            Arc::downgrade(handles.reads.store()),
            handles.release,
        ))
        .merge(crate::edge::health::routes(handles))
}

/// The answer to a path nothing serves: gRPC's Unimplemented to a gRPC call, Go's
/// "404 page not found" to anything else (as etcd's HTTP mux).
pub async fn not_found(req: axum::extract::Request) -> axum::response::Response {
    if crate::edge::front::is_grpc(&req) {
        return tonic::Status::unimplemented("")
            .into_http::<axum::body::Body>()
            .into_response();
    }
    go_text(StatusCode::NOT_FOUND, "404 page not found")
}

/// Prometheus text exposition of etcd's metrics ([`crate::edge::metrics`]).
async fn metrics(State(handles): State<Arc<HttpHandles>>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8; escaping=underscores",
        )],
        crate::edge::metrics::render::render(&handles),
    )
}
