//! `GET /downgrade/enabled` on the peer port, as etcd 3.6 serves it
//! (`v3.6.14:server/etcdserver/api/etcdhttp/peer.go` `downgradeEnabledHandler`): after a
//! linearizable read, `true` or `false` (text/plain, no newline), with the cluster id in
//! `X-Etcd-Cluster-ID`. A member joining a running cluster asks it (see
//! [`crate::peer::remote`]): during a downgrade it may be one minor version above the
//! cluster's.
//!
//! The route holds the handles weakly: a peer server still draining connections after
//! the member stopped must not keep the backend open.

use std::sync::Weak;

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::cluster;
use super::handles::VersionHandles;

/// The route's path (etcd's `DowngradeEnabledPath`).
pub const PATH: &str = "/downgrade/enabled";

/// The route, answering from `handles` while the member runs.
pub fn routes(handles: Weak<VersionHandles>) -> axum::Router {
    axum::Router::new().route(
        PATH,
        axum::routing::any(move |method: Method| {
            let handles = handles.upgrade();
            async move { answer(method, handles.as_deref()).await }
        }),
    )
}

async fn answer(method: Method, handles: Option<&VersionHandles>) -> Response {
    if method != Method::GET {
        return crate::peer::etcd::method_not_allowed("GET");
    }
    let Some(handles) = handles else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let cluster_id = format!("{:x}", handles.reads.ids().cluster_id);
    let mut response = match enabled(handles).await {
        Ok(enabled) => (
            [(header::CONTENT_TYPE, "text/plain")],
            if enabled { "true" } else { "false" },
        )
            .into_response(),
        Err(e) => crate::peer::etcd::go_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("failed linearized read: {e}"),
        ),
    };
    if let Ok(v) = HeaderValue::from_str(&cluster_id) {
        response.headers_mut().insert("x-etcd-cluster-id", v);
    }
    response
}

/// Why the answer could not be read.
#[derive(Debug, thiserror::Error)]
enum ReadError {
    /// The linearizable read or the store failed.
    #[error(transparent)]
    Etcd(#[from] oxcd_api::errors::EtcdError),
    /// The read's task failed.
    #[error(transparent)]
    Task(#[from] crate::machine::reads::ReadFailed),
}

/// Whether a downgrade is enabled, read after everything committed has applied here.
async fn enabled(handles: &VersionHandles) -> Result<bool, ReadError> {
    handles.reads.barrier().await?;
    let recorded = handles.reads.blocking(cluster::read).await??;
    Ok(recorded.downgrade.enabled)
}
