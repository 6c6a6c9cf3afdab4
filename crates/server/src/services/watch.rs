//! The Watch service: each bidirectional stream is served by its own task
//! ([`crate::watch::stream`]); responses flow back through a bounded channel.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use oxcd_api::etcdserverpb::watch_server::Watch;
use oxcd_api::etcdserverpb::{WatchRequest, WatchResponse};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use crate::member::Member;
use crate::watch::stream::WatchStream;

/// Responses a stream may have queued for a client that reads slowly; beyond them the
/// stream waits, and the feed it stops reading is made up from the history later.
const QUEUED_RESPONSES: usize = 64;

/// What the generated service returns: a boxed stream of responses.
type Responses = Pin<Box<dyn Stream<Item = Result<WatchResponse, Status>> + Send + 'static>>;

/// The Watch service.
pub struct WatchService {
    member: Arc<Member>,
}

impl WatchService {
    /// A Watch service for `member`.
    pub fn new(member: Arc<Member>) -> WatchService {
        WatchService { member }
    }
}

#[tonic::async_trait]
impl Watch for WatchService {
    async fn watch(
        &self,
        req: Request<Streaming<WatchRequest>>,
    ) -> Result<Response<Responses>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(QUEUED_RESPONSES);
        let stream = WatchStream::new(self.member.clone(), self.member.watch_hub.clone(), tx);
        tokio::spawn(stream.run(req.into_inner()));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
