//! The routers of the client port: gRPC (every etcd service behind the learner gate and
//! the gRPC counters), HTTP (`/health`, `/livez`, `/readyz`, `/metrics`, `/version`, the
//! JSON gateway), and what both share (CORS, the rewriting of gRPC errors for old
//! clients, the answer to a path nothing serves).
//!
//! With `--listen-client-http-urls`, as etcd 3.5 splits them (`embed/serve.go`:
//! `onlyGRPC`, `onlyHttp`), the client URLs serve gRPC only and the HTTP URLs HTTP only;
//! without it each client URL serves both.

use std::sync::Arc;

use axum::Router;

use crate::domains::membership::Membership;
use crate::edge::http_handles::HttpHandles;
use crate::edge::metrics::grpc::GrpcMetrics;
use crate::edge::services::Services;
use crate::edge::{gateway, http, services};

/// What the client listeners serve.
pub struct ClientRouters {
    /// What each `--listen-client-urls` URL serves: gRPC, and HTTP too unless split.
    pub client: Router,
    /// What each `--listen-client-http-urls` URL serves (None: none are given).
    pub http_only: Option<Router>,
}

/// What a client-port router is given.
pub struct RouterParts<'a> {
    /// The gRPC services.
    pub services: &'a Services,
    /// What the HTTP endpoints read.
    pub http: Arc<HttpHandles>,
    /// Whether this member is a learner (the gate in front of gRPC).
    pub membership: Arc<Membership>,
    /// The gRPC call counters.
    pub grpc_metrics: Arc<GrpcMetrics>,
    /// `--enable-grpc-gateway`.
    pub gateway: bool,
    /// `--max-concurrent-streams` (the gateway's calls in flight).
    pub max_streams: u32,
    /// Whether `--listen-client-http-urls` splits HTTP from gRPC.
    pub split: bool,
    /// `--enable-pprof`.
    pub pprof: bool,
}

/// The routers `parts` make.
pub fn build(parts: RouterParts<'_>) -> ClientRouters {
    let grpc = services::routes(parts.services)
        .into_axum_router()
        .layer(axum::middleware::from_fn_with_state(
            parts.membership,
            services::learner_gate::gate,
        ))
        .layer(axum::middleware::from_fn_with_state(
            parts.grpc_metrics,
            crate::edge::metrics::grpc::count,
        ));
    let mut plain = http::routes(parts.http);
    if parts.gateway {
        plain = plain.merge(gateway::routes(parts.services, parts.max_streams));
    }
    if parts.pprof {
        tracing::info!("pprof is enabled under /debug/pprof");
        plain = plain.merge(crate::edge::pprof::routes());
    }
    if parts.split {
        ClientRouters {
            client: finished(grpc),
            http_only: Some(finished(plain)),
        }
    } else {
        ClientRouters {
            client: finished(grpc.merge(plain)),
            http_only: None,
        }
    }
}

/// `router` with what every client-port router shares.
fn finished(router: Router) -> Router {
    router
        .fallback(http::not_found)
        .layer(axum::middleware::from_fn(gateway::cors))
        .layer(axum::middleware::map_response(
            crate::edge::grpc_compat::rewrite,
        ))
}
