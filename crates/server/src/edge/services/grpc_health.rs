//! gRPC's health checking service (`grpc.health.v1.Health`) on the client port, as etcd
//! serves it (`server/etcdserver/api/v3rpc/grpc.go` registers grpc-go's health server,
//! and `health.go` marks the server as a whole, service "", SERVING once it serves):
//! `Check` answers the status of a registered service and NotFound ("unknown service")
//! for any other; `Watch` sends the status now (SERVICE_UNKNOWN for an unknown service),
//! then each change, until the caller goes away.
//!
//! Registered: "" only, as etcd. It is SERVING while the member serves clients (this
//! service exists only then), NOT_SERVING while a defragmentation runs if
//! `--experimental-stop-grpc-service-on-defrag` asks (etcd 3.5's `healthNotifier`, so a
//! health-checking balancer sends clients elsewhere meanwhile), and NOT_SERVING once
//! the member stops, so watchers hear of the stop before their stream ends (etcd just
//! ends the stream).

use std::pin::Pin;

use futures::Stream;
use oxcd_api::grpc_health_v1::health_check_response::ServingStatus;
use oxcd_api::grpc_health_v1::health_server::Health;
use oxcd_api::grpc_health_v1::{HealthCheckRequest, HealthCheckResponse};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

/// The one service registered: the server as a whole.
const WHOLE_SERVER: &str = "";

/// A Watch stream's answers.
pub type HealthUpdates =
    Pin<Box<dyn Stream<Item = Result<HealthCheckResponse, Status>> + Send + 'static>>;

/// The Health service.
pub struct HealthService {
    stopped: watch::Receiver<bool>,
    defragmenting: watch::Receiver<bool>,
}

/// Tells the health service that a defragmentation runs, when
/// `--experimental-stop-grpc-service-on-defrag` is on. Cheap to clone.
#[derive(Clone)]
pub struct DefragNotice {
    active: Option<std::sync::Arc<watch::Sender<bool>>>,
}

/// While held, the server is NOT_SERVING (if the notice is on).
pub struct Defragmenting(Option<std::sync::Arc<watch::Sender<bool>>>);

impl Drop for Defragmenting {
    fn drop(&mut self) {
        if let Some(active) = &self.0 {
            tracing::info!(
                service = WHOLE_SERVER,
                status = "SERVING",
                "grpc service status changed"
            );
            active.send_replace(false);
        }
    }
}

impl DefragNotice {
    /// A defragmentation about to run: NOT_SERVING until the guard is dropped, when
    /// the notice is on.
    pub fn started(&self) -> Defragmenting {
        if let Some(active) = &self.active {
            tracing::warn!(
                service = WHOLE_SERVER,
                status = "NOT_SERVING",
                reason = "defrag is active",
                "grpc service status changed"
            );
            active.send_replace(true);
        }
        Defragmenting(self.active.clone())
    }
}

impl HealthService {
    /// The service reporting the whole server as SERVING until `stopped` turns true,
    /// and its notice of defragmentations (which change nothing unless
    /// `stop_on_defrag`).
    pub fn new(
        stopped: watch::Receiver<bool>,
        stop_on_defrag: bool,
    ) -> (HealthService, DefragNotice) {
        let (active, defragmenting) = watch::channel(false);
        let notice = DefragNotice {
            active: stop_on_defrag.then(|| std::sync::Arc::new(active)),
        };
        (
            HealthService {
                stopped,
                defragmenting,
            },
            notice,
        )
    }

    /// The whole server's status now.
    fn status(stopped: bool, defragmenting: bool) -> ServingStatus {
        if stopped || defragmenting {
            ServingStatus::NotServing
        } else {
            ServingStatus::Serving
        }
    }
}

fn answer(status: ServingStatus) -> HealthCheckResponse {
    HealthCheckResponse {
        status: status as i32,
    }
}

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(
        &self,
        req: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        if req.get_ref().service != WHOLE_SERVER {
            // grpc-go's text.
            return Err(Status::not_found("unknown service"));
        }
        let now = Self::status(*self.stopped.borrow(), *self.defragmenting.borrow());
        Ok(Response::new(answer(now)))
    }

    async fn watch(
        &self,
        req: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthUpdates>, Status> {
        if req.get_ref().service != WHOLE_SERVER {
            // grpc-go: the unknown status once; the stream stays open (a service
            // registered later would be sent), here until the caller goes away.
            let once = futures::stream::once(async { Ok(answer(ServingStatus::ServiceUnknown)) });
            let pending = futures::stream::pending();
            return Ok(Response::new(Box::pin(futures::StreamExt::chain(
                once, pending,
            ))));
        }
        let mut stopped = self.stopped.clone();
        let mut defragmenting = self.defragmenting.clone();
        let updates = async_stream_of(move |tx| async move {
            let mut last = None;
            // Closed when no defragmentation can be noticed (the flag is off).
            let mut defrag_open = true;
            loop {
                let now = Self::status(
                    *stopped.borrow_and_update(),
                    *defragmenting.borrow_and_update(),
                );
                if last != Some(now) {
                    if tx.send(Ok(answer(now))).await.is_err() {
                        return;
                    }
                    last = Some(now);
                }
                tokio::select! {
                    c = stopped.changed() => if c.is_err() { return },
                    c = defragmenting.changed(), if defrag_open => defrag_open = c.is_ok(),
                }
            }
        });
        Ok(Response::new(updates))
    }
}

/// A stream fed by `feed` through a small channel: it ends when `feed` returns or the
/// caller stops reading.
fn async_stream_of<F, Fut>(feed: F) -> HealthUpdates
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<HealthCheckResponse, Status>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(feed(tx));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}
