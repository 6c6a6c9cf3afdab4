//! While the log is in oxcd's vocabulary ([`crate::machine::vocabulary`]: the cluster
//! version is 3.6 and every member is oxcd) the cluster takes no etcd member: its log
//! holds oxcd's extensions, which an etcd member cannot apply, so an etcd peer is
//! neither sent this member's raft traffic ([`refuse_link`]) nor heard on the raft paths
//! of etcd's peer protocol ([`refusing_unless_etcd`]). The etcd member stays a learner
//! that never catches up, and both sides say why; nothing of either log reaches the
//! other, so nothing diverges. Once the cluster version is 3.5 the leader switches the
//! log to etcd's vocabulary and both open.
//!
//! The read-only endpoints (`/members`, `/raft/probing`, `/members/hashkv`, `/version`)
//! stay open: they change nothing.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use axum::response::Response;

use super::go_error;
use crate::machine::vocabulary::{LiveVocabulary, Vocabulary};

/// Why an etcd member cannot join, naming the extensions in the log.
pub const REFUSAL: &str = "an etcd member cannot join this cluster now: its log is in \
oxcd's vocabulary (oxcd's entry format, with replicated lease keepalives and conditional \
lease expiries in use), which etcd cannot apply; the log switches to etcd's vocabulary \
when the cluster version is 3.5: run `etcdctl downgrade enable 3.5` first \
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
/// with 503 and [`REFUSAL`] while the log is in oxcd's vocabulary.
pub fn refusing_unless_etcd(router: axum::Router, vocabulary: LiveVocabulary) -> axum::Router {
    router.route_layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let vocabulary = vocabulary.clone();
            async move {
                if vocabulary.get() == Vocabulary::Etcd {
                    return next.run(req).await;
                }
                log_refusal(&format!("refused {} from an etcd member", req.uri().path()));
                refusal()
            }
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
