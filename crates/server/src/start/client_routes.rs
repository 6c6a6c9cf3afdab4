//! What the client port serves, as a [`Front`] per listener: gRPC (every etcd service,
//! the learner gate and the gRPC counters in the front itself) and HTTP (`/health`,
//! `/livez`, `/readyz`, `/metrics`, `/version`, the JSON gateway, CORS, the answer to a
//! path nothing serves).
//!
//! With `--listen-client-http-urls`, as etcd 3.5 splits them (`embed/serve.go`:
//! `onlyGRPC`, `onlyHttp`), the client URLs serve gRPC only and the HTTP URLs HTTP only;
//! without it each client URL serves both.

use std::sync::Arc;

use axum::Router;

use crate::domains::membership::Membership;
use crate::edge::front::{Front, GrpcSide};
use crate::edge::http_handles::HttpHandles;
use crate::edge::metrics::grpc::GrpcMetrics;
use crate::edge::services::Services;
use crate::edge::{gateway, http, services};

/// What the client listeners serve.
pub struct ClientRouters {
    /// What each `--listen-client-urls` URL serves: gRPC, and HTTP too unless split.
    pub client: Front,
    /// What each `--listen-client-http-urls` URL serves (None: none are given).
    pub http_only: Option<Front>,
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
    let grpc = GrpcSide {
        routes: services::routes(parts.services).into_axum_router(),
        membership: parts.membership,
        metrics: parts.grpc_metrics,
    };
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
            client: Front::new(Some(grpc), finished(Router::new())),
            http_only: Some(Front::new(None, finished(plain))),
        }
    } else {
        ClientRouters {
            client: Front::new(Some(grpc), finished(plain)),
            http_only: None,
        }
    }
}

/// The HTTP side of a client listener: `router`, the answer to a path nothing serves
/// (gRPC's Unimplemented to a gRPC request an HTTP-only listener gets), CORS.
fn finished(router: Router) -> Router {
    router
        .fallback(http::not_found)
        .layer(axum::middleware::from_fn(gateway::cors))
}
