//! Serving a listener's connections with hyper directly, for the HTTP/2 settings
//! `axum::serve` does not expose: the client port's `--max-concurrent-streams` (hyper's
//! default is 200 streams per connection, etcd's is 2^32-1) and the peer port's flow
//! control windows.
//!
//! Shutdown is graceful as axum's: the listener closes, every connection gets a
//! GOAWAY and is awaited (the caller bounds that wait).

use std::pin::pin;
use std::task::{Context, Poll};

use std::convert::Infallible;

use axum::extract::ConnectInfo;
use axum::http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;
use tower_service::Service;

/// A service that hands each request its connection's address as axum's
/// [`ConnectInfo`] (when there is one to hand), as `into_make_service_with_connect_info`
/// does.
#[derive(Clone)]
struct WithConnectInfo<S, A> {
    inner: S,
    addr: Option<A>,
}

impl<S, A, B> Service<Request<B>> for WithConnectInfo<S, A>
where
    S: Service<Request<B>>,
    A: Clone + Send + Sync + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        if let Some(addr) = &self.addr {
            req.extensions_mut().insert(ConnectInfo(addr.clone()));
        }
        self.inner.call(req)
    }
}

/// Serves `service` (an axum router, or any service of the same shape) on `listener`'s
/// connections with `builder`'s settings until `stop` turns true, then shuts every
/// connection down gracefully and returns once they have all closed. With
/// `connect_info`, requests carry their connection's address.
pub async fn serve<L, S, B>(
    mut listener: L,
    builder: Builder<TokioExecutor>,
    service: S,
    connect_info: bool,
    mut stop: watch::Receiver<bool>,
) where
    L: axum::serve::Listener,
    L::Addr: Clone + Send + Sync + 'static,
    S: Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // Each connection holds a receiver: they are all gone once `closed` resolves.
    let (open_tx, open_rx) = watch::channel(());
    loop {
        let (conn, addr) = tokio::select! {
            c = listener.accept() => c,
            _ = stop.wait_for(|s| *s) => break,
        };
        let builder = builder.clone();
        let mut stop = stop.clone();
        let open = open_rx.clone();
        let service = TowerToHyperService::new(WithConnectInfo {
            inner: service.clone(),
            addr: connect_info.then_some(addr),
        });
        tokio::spawn(async move {
            // Serves one connection until it ends, shutting it down gracefully once
            // `stop` turns true.
            macro_rules! drive {
                ($connection:expr) => {{
                    let mut served = pin!($connection);
                    let mut asked_to_stop = false;
                    loop {
                        tokio::select! {
                            res = served.as_mut() => {
                                if let Err(e) = res {
                                    tracing::debug!("connection ended: {e}");
                                }
                                break;
                            }
                            _ = stop.wait_for(|s| *s), if !asked_to_stop => {
                                asked_to_stop = true;
                                served.as_mut().graceful_shutdown();
                            }
                        }
                    }
                }};
            }
            let io = TokioIo::new(conn);
            if builder.is_http1_available() {
                drive!(builder.serve_connection_with_upgrades(io, service));
            } else {
                // HTTP/2 only (a builder made `http2_only`): a connection that opens
                // with anything else is closed (upgrades would ignore the setting).
                drive!(builder.serve_connection(io, service));
            }
            drop(open);
        });
    }
    drop(listener);
    drop(open_rx);
    open_tx.closed().await;
}
