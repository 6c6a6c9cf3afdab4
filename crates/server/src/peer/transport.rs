//! The sending side of peer traffic: one task per peer owns a gRPC stream to it and
//! forwards raft messages in order. The raft loop never waits on the network: it hands
//! messages over with `try_send`; when a peer's queue is full or the peer is down, the
//! message is dropped and raft is told the peer is unreachable (raft resends what
//! matters). While a peer is down, queued messages are discarded rather than delivered
//! stale later.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use oxcd_api::oxcdpb::RaftEnvelope;
use oxcd_api::oxcdpb::peer_client::PeerClient;
use oxcd_raft::Message;
use oxcd_raft::node::{RaftHandle, Transport};
use oxcd_raft::persist::encode_message;
use tokio::sync::mpsc;
use tonic::transport::Endpoint;

use super::{CLUSTER_ID_KEY, FROM_KEY};

/// Messages queued per peer before new ones are dropped.
const QUEUE: usize = 4096;

/// Links to cut, for partition tests: messages from `from` to `to` are dropped as a
/// network partition would drop them. The server binary never sets one.
#[derive(Debug, Clone, Default)]
pub struct PeerFaults {
    blocked: Arc<std::sync::RwLock<std::collections::HashSet<(u64, u64)>>>,
}

impl PeerFaults {
    /// Cuts both directions between `a` and `b`.
    pub fn cut(&self, a: u64, b: u64) {
        let mut set = self.blocked.write().unwrap_or_else(|p| p.into_inner());
        set.insert((a, b));
        set.insert((b, a));
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.blocked
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    fn is_cut(&self, from: u64, to: u64) -> bool {
        self.blocked
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&(from, to))
    }
}

/// Sends raft messages to peers.
pub struct PeerTransport {
    me: u64,
    queues: HashMap<u64, mpsc::Sender<Message>>,
    raft: Arc<OnceLock<RaftHandle>>,
    faults: Option<PeerFaults>,
}

impl PeerTransport {
    /// Starts one sending task per peer (`id -> peer URL`) on the current runtime. The
    /// raft handle, for unreachable reports, is set once raft has started.
    pub fn start(
        me: u64,
        cluster_id: u64,
        peers: &HashMap<u64, String>,
        raft: Arc<OnceLock<RaftHandle>>,
        faults: Option<PeerFaults>,
    ) -> PeerTransport {
        let mut queues = HashMap::new();
        for (&id, url) in peers {
            let (tx, rx) = mpsc::channel(QUEUE);
            queues.insert(id, tx);
            tokio::spawn(peer_loop(me, cluster_id, id, url.clone(), rx, raft.clone()));
        }
        PeerTransport {
            me,
            queues,
            raft,
            faults,
        }
    }

    fn unreachable(&self, id: u64) {
        if let Some(r) = self.raft.get() {
            r.report_unreachable(id);
        }
    }
}

impl Transport for PeerTransport {
    fn send(&mut self, msgs: Vec<Message>) {
        for m in msgs {
            let to = m.to;
            if self.faults.as_ref().is_some_and(|f| f.is_cut(self.me, to)) {
                continue;
            }
            match self.queues.get(&to) {
                Some(q) => {
                    if q.try_send(m).is_err() {
                        self.unreachable(to);
                    }
                }
                None => {
                    tracing::warn!(to = %format!("{to:x}"), "raft message to an unknown member dropped")
                }
            }
        }
    }
}

/// Keeps a stream open to one peer and forwards its queue into it.
async fn peer_loop(
    me: u64,
    cluster_id: u64,
    id: u64,
    url: String,
    mut queue: mpsc::Receiver<Message>,
    raft: Arc<OnceLock<RaftHandle>>,
) {
    let report = |raft: &Arc<OnceLock<RaftHandle>>| {
        if let Some(r) = raft.get() {
            r.report_unreachable(id);
        }
    };
    let mut logged_down = false;
    loop {
        let Ok(endpoint) = Endpoint::from_shared(url.clone()) else {
            tracing::error!(peer = %format!("{id:x}"), url, "invalid peer URL; not sending to it");
            return;
        };
        let endpoint = endpoint
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true);
        let channel = match endpoint.connect().await {
            Ok(c) => c,
            Err(e) => {
                if !logged_down {
                    tracing::warn!(peer = %format!("{id:x}"), url, "peer unreachable: {e}");
                    logged_down = true;
                }
                // Drop what queued up meanwhile: it would be stale when delivered.
                let mut dropped = false;
                while queue.try_recv().is_ok() {
                    dropped = true;
                }
                if dropped {
                    report(&raft);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if logged_down {
            tracing::info!(peer = %format!("{id:x}"), url, "peer reachable again");
            logged_down = false;
        }
        let (tx, rx) = mpsc::channel::<RaftEnvelope>(QUEUE);
        let mut req = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
        if let (Ok(c), Ok(f)) = (format!("{cluster_id:x}").parse(), format!("{me:x}").parse()) {
            req.metadata_mut().insert(CLUSTER_ID_KEY, c);
            req.metadata_mut().insert(FROM_KEY, f);
        }
        let mut client = PeerClient::new(channel);
        let mut call = tokio::spawn(async move { client.raft(req).await });
        loop {
            tokio::select! {
                m = queue.recv() => {
                    let Some(m) = m else { return };
                    if tx.send(RaftEnvelope { message: encode_message(&m) }).await.is_err() {
                        report(&raft);
                        break;
                    }
                }
                res = &mut call => {
                    match res {
                        Ok(Err(status)) if status.message() == oxcd_api::errors::EtcdError::ClusterIdMismatch.message() => {
                            tracing::error!(peer = %format!("{id:x}"), url, "peer refused us: {}", status.message());
                        }
                        Ok(Err(status)) => tracing::debug!(peer = %format!("{id:x}"), "peer stream ended: {status}"),
                        _ => {}
                    }
                    report(&raft);
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
