//! Serves the peer port: the Peer gRPC service over HTTP/2 with flow-control windows
//! sized for snapshots.
//!
//! hyper's server defaults (1 MiB per stream and per connection) let a sender push one
//! snapshot chunk and then wait for the receiver to hand back window, a round trip
//! between two busy processes every half MiB. Peers are few and trusted, so their
//! connections get windows of [`STREAM_WINDOW`] and [`CONNECTION_WINDOW`], and frames
//! of up to [`MAX_FRAME`]: a snapshot streams without waiting on window updates.
//!
//! Connections are served by `oxcd_transport::serve`.

use hyper_util::rt::TokioExecutor;
use hyper_util::server::conn::auto::Builder;
use oxcd_transport::listen::Listener;
use tokio::sync::watch;

use crate::start::listeners::PlainListener;

/// Receive window of each peer stream.
pub const STREAM_WINDOW: u32 = 16 << 20;
/// Receive window of each peer connection, over all its streams.
pub const CONNECTION_WINDOW: u32 = 32 << 20;
/// Largest HTTP/2 frame a peer may send.
pub const MAX_FRAME: u32 = 1 << 20;

/// Serves `router` on `listener` until `stop` turns true, then shuts every connection
/// down gracefully and returns once they have all closed.
pub async fn serve(listener: Listener, router: axum::Router, stop: watch::Receiver<bool>) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http2()
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME);
    oxcd_transport::serve::serve(PlainListener(listener), builder, router, false, stop).await;
}
