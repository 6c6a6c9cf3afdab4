//! What a watch stream ([`super::stream`]) is given: the hub, and the member's narrow
//! handles for its permission checks and headers.

use std::sync::Arc;

use super::WatchHub;
use crate::domains::auth::caller::Callers;
use crate::machine::reads::Reads;

/// What a watch stream works with.
pub struct WatchHandles {
    /// The live change feed and the history behind it.
    pub hub: Arc<WatchHub>,
    /// Who opened a stream, and the permission checks of each watch.
    pub callers: Callers,
    /// Response headers.
    pub reads: Reads,
    /// `--max-request-bytes`: the size of one catch-up chunk.
    pub max_request_bytes: usize,
    /// The largest message a client is sent: a fragmented watch's piece.
    pub max_grpc_message: usize,
}
