//! The receiving side of peer traffic: checks the cluster id, steps messages into raft.

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::peer_server::Peer;
use oxcd_api::oxcdpb::{PeerAck, RaftEnvelope};
use oxcd_raft::node::RaftHandle;
use oxcd_raft::persist::decode_message;
use tonic::{Request, Response, Status, Streaming};

use super::{CLUSTER_ID_KEY, FROM_KEY};

/// The Peer service of one member.
pub struct PeerService {
    raft: RaftHandle,
}

impl PeerService {
    /// A Peer service feeding `raft`.
    pub fn new(raft: RaftHandle) -> PeerService {
        PeerService { raft }
    }
}

fn hex_meta<T>(req: &Request<T>, key: &str) -> Option<u64> {
    req.metadata()
        .get(key)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| u64::from_str_radix(s, 16).ok())
}

#[tonic::async_trait]
impl Peer for PeerService {
    async fn raft(
        &self,
        req: Request<Streaming<RaftEnvelope>>,
    ) -> Result<Response<PeerAck>, Status> {
        let local = self.raft.cluster_id();
        let remote = hex_meta(&req, CLUSTER_ID_KEY);
        let from = hex_meta(&req, FROM_KEY).unwrap_or(0);
        if remote != Some(local) {
            tracing::error!(
                local_cluster_id = %format!("{local:x}"),
                remote_cluster_id = %remote.map(|r| format!("{r:x}")).unwrap_or_else(|| "none".into()),
                remote_member_id = %format!("{from:x}"),
                "rejected a peer stream: cluster ID mismatch"
            );
            return Err(EtcdError::ClusterIdMismatch.into());
        }
        let mut stream = req.into_inner();
        while let Some(env) = stream.message().await? {
            match decode_message(&env.message) {
                Ok(m) => {
                    if self.raft.step(m).is_err() {
                        return Err(EtcdError::Stopped.into());
                    }
                }
                Err(e) => {
                    tracing::warn!(from = %format!("{from:x}"), "dropping an undecodable raft message: {e}")
                }
            }
        }
        Ok(Response::new(PeerAck {}))
    }
}
