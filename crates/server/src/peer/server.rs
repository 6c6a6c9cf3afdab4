//! Serves the peer port: the Peer gRPC service over HTTP/2 with flow-control windows
//! sized for snapshots.
//!
//! hyper's server defaults (1 MiB per stream and per connection) let a sender push one
//! snapshot chunk and then wait for the receiver to hand back window, a round trip
//! between two busy processes every half MiB. Peers are few and trusted, so their
//! connections get windows of [`STREAM_WINDOW`] and [`CONNECTION_WINDOW`], and frames
//! of up to [`MAX_FRAME`]: a snapshot streams without waiting on window updates.
//!
//! Shutdown is graceful as axum's: the listener closes, every connection gets a
//! GOAWAY and is awaited (the caller bounds that wait).

use std::pin::pin;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use oxcd_transport::listen::Listener;
use tokio::sync::watch;

/// Receive window of each peer stream.
pub const STREAM_WINDOW: u32 = 16 << 20;
/// Receive window of each peer connection, over all its streams.
pub const CONNECTION_WINDOW: u32 = 32 << 20;
/// Largest HTTP/2 frame a peer may send.
pub const MAX_FRAME: u32 = 1 << 20;

/// Serves `router` on `listener` until `stop` turns true, then shuts every connection
/// down gracefully and returns once they have all closed.
pub async fn serve(mut listener: Listener, router: axum::Router, mut stop: watch::Receiver<bool>) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http2()
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME);
    // Each connection holds a receiver: they are all gone once `closed` resolves.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let (conn, _addr) = tokio::select! {
            c = listener.accept() => c,
            _ = stop.wait_for(|s| *s) => break,
        };
        let service = TowerToHyperService::new(router.clone());
        let builder = builder.clone();
        let mut stop = stop.clone();
        let open = open_rx.clone();
        tokio::spawn(async move {
            let mut served = pin!(builder.serve_connection(TokioIo::new(conn), service));
            let mut asked_to_stop = false;
            loop {
                tokio::select! {
                    res = served.as_mut() => {
                        if let Err(e) = res {
                            tracing::debug!("peer connection ended: {e}");
                        }
                        break;
                    }
                    _ = stop.wait_for(|s| *s), if !asked_to_stop => {
                        asked_to_stop = true;
                        served.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(open);
        });
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
}
