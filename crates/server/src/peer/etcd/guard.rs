//! An oxcd cluster whose log is written in oxcd's vocabulary (it began as an oxcd
//! cluster; [`crate::machine::vocabulary`]) takes no etcd member: its log holds oxcd's
//! extensions, which an etcd member cannot apply, so an etcd peer is neither sent this
//! member's raft traffic ([`refuse_link`]) nor heard on the raft paths of etcd's peer
//! protocol ([`refusing`]). The etcd member stays a learner that never catches up, and
//! both sides say why; nothing of either log reaches the other, so nothing diverges.
//!
//! The read-only endpoints (`/members`, `/raft/probing`, `/members/hashkv`, `/version`)
//! stay open: they change nothing.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::Response;

use super::go_error;

/// Why an etcd member cannot join, naming the extensions in the log.
pub const REFUSAL: &str = "an etcd member cannot join this cluster: its log is written in \
oxcd's vocabulary (oxcd's entry format, with replicated lease keepalives and expiries), \
which etcd cannot apply; etcd members join only clusters that began as etcd clusters \
(docs/etcd-peer-design.md)";

/// How often the refusal is logged again while etcd keeps asking.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// When the refusal was last logged.
static LOGGED: Mutex<Option<Instant>> = Mutex::new(None);

/// Logs [`REFUSAL`] about `whom`, at most once every [`LOG_EVERY`].
fn log_refusal(whom: &str) {
    let mut last = LOGGED.lock().unwrap_or_else(|p| p.into_inner());
    if last.is_some_and(|t| t.elapsed() < LOG_EVERY) {
        return;
    }
    *last = Some(Instant::now());
    tracing::error!("{whom}: {REFUSAL}");
}

/// `router` (raft paths of etcd's peer protocol) answering every request it would serve
/// with 503 and [`REFUSAL`].
pub fn refusing(router: axum::Router) -> axum::Router {
    router.route_layer(axum::middleware::from_fn(
        |req: axum::extract::Request, _next: axum::middleware::Next| async move {
            log_refusal(&format!("refused {} from an etcd member", req.uri().path()));
            refusal()
        },
    ))
}

/// The answer to an etcd member's raft traffic.
fn refusal() -> Response {
    go_error(StatusCode::SERVICE_UNAVAILABLE, REFUSAL)
}

/// Logs that the etcd peer `peer` gets no link.
pub fn refuse_link(peer: u64) {
    log_refusal(&format!("peer {peer:x} speaks etcd's protocol"));
}
