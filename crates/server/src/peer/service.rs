//! The receiving side of peer traffic: checks the cluster id, steps messages into raft.
//! A snapshot is written to `member/snap/` and synced before raft hears of it, so that
//! raft never accepts a snapshot whose data could be lost. One is received at a time.

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::peer_server::Peer;
use std::path::PathBuf;

use std::sync::{Arc, Weak};

use oxcd_api::oxcdpb::{
    HashUnavailable, PeerAck, PeerHashKvRequest, PeerHashKvResponse, PeerMembersRequest,
    PeerMembersResponse, PeerPromoteRequest, PeerPromoteResponse, PeerRenewLeasesRequest,
    PeerRenewLeasesResponse, RaftEnvelope, SnapshotChunk,
};
use oxcd_mvcc::MvccError;
use oxcd_raft::node::RaftHandle;
use oxcd_raft::persist::decode_message;
use oxcd_storage::snapshot::SnapshotFile;
use tokio::sync::{Mutex, mpsc};
use tonic::{Request, Response, Status, Streaming};

use super::traffic::PeerCounts;
use super::{CLUSTER_ID_KEY, FROM_KEY, Refusal, compat};
use crate::domains::lease::renewals::Renewals;
use crate::domains::membership::MembershipHandles;
use crate::domains::version::release::Release;
use crate::machine::vocabulary::{LiveVocabulary, Vocabulary};
use crate::peer::traffic::PeerTraffic;

/// The Peer service of one member.
pub struct PeerService {
    raft: RaftHandle,
    snap_dir: PathBuf,
    receiving: Mutex<()>,
    /// Renews the keepalives followers forward, when this member leads.
    renewals: Arc<Renewals>,
    /// The member's store (corruption checks) and membership (removed ids, the member
    /// list, promotions). Weak: peers keep connections open past a member's shutdown,
    /// and the backend must close when the member stops.
    membership: Weak<MembershipHandles>,
    /// The traffic with each peer.
    traffic: Arc<PeerTraffic>,
    /// The release this member acts as, which senders' versions are checked against.
    release: Release,
    /// The vocabulary of the log, which a joining member must write too.
    vocabulary: LiveVocabulary,
}

impl PeerService {
    /// A Peer service feeding `raft`, receiving snapshots into `snap_dir`, answering
    /// from `membership` (the member list, its store's hashes, promotions), renewing
    /// forwarded keepalives with `renewals`, counting each peer's bytes in `traffic`,
    /// admitting senders whose versions are compatible with `release`.
    pub fn new(
        raft: RaftHandle,
        membership: &Arc<MembershipHandles>,
        snap_dir: PathBuf,
        renewals: Arc<Renewals>,
        traffic: Arc<PeerTraffic>,
        release: Release,
        vocabulary: LiveVocabulary,
    ) -> PeerService {
        PeerService {
            raft,
            snap_dir,
            receiving: Mutex::new(()),
            renewals,
            membership: Arc::downgrade(membership),
            traffic,
            release,
            vocabulary,
        }
    }

    fn member(&self) -> Result<Arc<MembershipHandles>, Status> {
        self.membership
            .upgrade()
            .ok_or_else(|| Status::from(EtcdError::Stopped))
    }

    /// Checks the sender's versions, then its cluster id (etcd's order); returns the
    /// sender's member id.
    fn admit<T>(&self, req: &Request<T>) -> Result<u64, Status> {
        self.admit_headers(&req.metadata().clone().into_headers())
            .map_err(Refusal::status)
    }

    /// [`Self::admit`] on a request's headers (a gRPC stream's metadata, or the
    /// upgrade request of a [`crate::peer::direct`] link).
    pub(crate) fn admit_headers(&self, headers: &http::HeaderMap) -> Result<u64, Refusal> {
        let local = self.raft.cluster_id();
        let remote = hex_header(headers, CLUSTER_ID_KEY);
        let from = hex_header(headers, FROM_KEY).unwrap_or(0);
        let text = |key| headers.get(key).and_then(|v| v.to_str().ok());
        if let Err(e) = compat::check(
            from,
            text(compat::SERVER_VERSION_KEY),
            text(compat::MIN_CLUSTER_VERSION_KEY),
            self.release,
        ) {
            tracing::warn!(
                remote_member_id = %format!("{from:x}"),
                error = %e,
                "failed version compatibility check"
            );
            return Err(Refusal::IncompatibleVersion);
        }
        if remote != Some(local) {
            tracing::error!(
                local_cluster_id = %format!("{local:x}"),
                remote_cluster_id = %remote.map(|r| format!("{r:x}")).unwrap_or_else(|| "none".into()),
                remote_member_id = %format!("{from:x}"),
                "rejected a peer stream: cluster ID mismatch"
            );
            return Err(Refusal::Etcd(EtcdError::ClusterIdMismatch));
        }
        if let Some(m) = self.membership.upgrade()
            && m.roster.membership().state().removed.contains(&from)
        {
            tracing::warn!(
                remote_member_id = %format!("{from:x}"),
                "rejected a peer stream: the member was removed from the cluster"
            );
            return Err(Refusal::MemberRemoved);
        }
        Ok(from)
    }

    /// The traffic counts of peer `from`, which a stream looks up once.
    pub(crate) fn counts_of(&self, from: u64) -> std::sync::Arc<PeerCounts> {
        self.traffic.of(from)
    }

    /// Takes one raft message from a peer into raft (a gRPC stream's or a direct
    /// link's); an error means raft has stopped.
    pub(crate) fn take_message(&self, m: oxcd_raft::Message) -> Result<(), oxcd_raft::RaftError> {
        self.heard_from(m.from);
        self.raft.step(m)
    }

    /// A message from `from` arrived (its leases' forwarded keepalives count it alive).
    pub(crate) fn heard_from(&self, from: u64) {
        self.renewals.heard_from(from);
    }

    /// Hands a peer link to the raft thread, which reads it and steps its messages.
    pub(crate) fn add_inlet(
        &self,
        inlet: Box<dyn oxcd_raft::node::Inlet>,
    ) -> Result<(), oxcd_raft::RaftError> {
        self.raft.add_inlet(inlet)
    }
}

/// Writes chunks to a snapshot file on a blocking thread; returns the finished path.
async fn receive_into(
    dir: PathBuf,
    index: u64,
    first: bytes::Bytes,
    stream: &mut Streaming<SnapshotChunk>,
) -> Result<(PathBuf, u64), Status> {
    let (tx, mut rx) = mpsc::channel::<bytes::Bytes>(4);
    let writer = tokio::task::spawn_blocking(
        move || -> Result<(PathBuf, u64), oxcd_storage::StorageError> {
            let mut file = SnapshotFile::create(&dir, index)?;
            let mut bytes = 0u64;
            while let Some(chunk) = rx.blocking_recv() {
                bytes += chunk.len() as u64;
                file.write(&chunk)?;
            }
            Ok((file.finish()?, bytes))
        },
    );
    let mut res = Ok(());
    if !first.is_empty() && tx.send(first).await.is_err() {
        res = Err(Status::internal("snapshot writer stopped"));
    }
    while res.is_ok() {
        match stream.message().await {
            Ok(Some(c)) => {
                if tx.send(c.data).await.is_err() {
                    res = Err(Status::internal("snapshot writer stopped"));
                }
            }
            Ok(None) => break,
            Err(e) => res = Err(e),
        }
    }
    drop(tx);
    let written = writer
        .await
        .map_err(|e| Status::internal(e.to_string()))?
        .map_err(|e| Status::internal(e.to_string()));
    // A broken stream leaves no file behind (SnapshotFile removes an unfinished one).
    res?;
    written
}

fn hex_header(headers: &http::HeaderMap, key: &str) -> Option<u64> {
    headers
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
        let from = self.admit(&req)?;
        let counts = self.counts_of(from);
        let mut stream = req.into_inner();
        while let Some(env) = stream.message().await? {
            PeerCounts::add(&counts.received_bytes, env.message.len() as u64);
            match decode_message(&env.message) {
                Ok(m) => {
                    if self.take_message(m).is_err() {
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

    async fn snapshot(
        &self,
        req: Request<Streaming<SnapshotChunk>>,
    ) -> Result<Response<PeerAck>, Status> {
        let from = self.admit(&req)?;
        let Ok(_one) = self.receiving.try_lock() else {
            return Err(Status::unavailable("a snapshot is already being received"));
        };
        let mut stream = req.into_inner();
        let first = stream
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("empty snapshot stream"))?;
        let msg = decode_message(&first.message)
            .map_err(|e| Status::invalid_argument(format!("bad snapshot message: {e}")))?;
        let index = msg.get_snapshot().get_metadata().index;
        let started = std::time::Instant::now();
        let (path, bytes) =
            receive_into(self.snap_dir.clone(), index, first.data, &mut stream).await?;
        tracing::info!(
            from = %format!("{from:x}"),
            index,
            bytes,
            took_ms = started.elapsed().as_millis() as u64,
            file = %path.display(),
            "received a snapshot"
        );
        self.raft
            .step(msg)
            .map_err(|_| Status::from(EtcdError::Stopped))?;
        Ok(Response::new(PeerAck {}))
    }

    async fn hash_kv(
        &self,
        req: Request<PeerHashKvRequest>,
    ) -> Result<Response<PeerHashKvResponse>, Status> {
        self.admit(&req)?;
        let store = self.member()?.reads.store().clone();
        let revision = store.current_rev();
        let rev = req.into_inner().revision;
        // Whole-keyspace scans: on the blocking pool, not an async worker.
        let (kv, state) = crate::machine::reads::read_blocking(store, move |store| {
            (store.hash_kv(rev), store.backend().state_hash_at_index())
        })
        .await?;
        // Behind or compacted at the revision asked: said by code, not as an error text.
        let ((hash, compact_revision, hash_revision), unavailable) = match kv {
            Ok(hashed) => (hashed, HashUnavailable::HashAvailable),
            Err(MvccError::FutureRev) => ((0, 0, 0), HashUnavailable::HashFutureRevision),
            Err(MvccError::Compacted) => ((0, 0, 0), HashUnavailable::HashCompacted),
            Err(e) => return Err(crate::machine::applier::mvcc_err(e).into()),
        };
        let state = state.map_err(|e| crate::machine::applier::mvcc_err(e.into()))?;
        // Index 0 (never an applied one): not comparable now (see
        // `Backend::state_hash_at_index`).
        let (state_hash, state_index, table_hashes) =
            state.map_or((0, 0, Vec::new()), |s| (s.hash, s.index, s.tables));
        Ok(Response::new(PeerHashKvResponse {
            member_id: self.raft.id(),
            revision,
            compact_revision,
            hash,
            hash_revision,
            state_hash,
            state_index,
            unavailable: unavailable as i32,
            table_hashes,
        }))
    }

    async fn renew_leases(
        &self,
        req: Request<PeerRenewLeasesRequest>,
    ) -> Result<Response<PeerRenewLeasesResponse>, Status> {
        self.admit(&req)?;
        match self.renewals.renew_as_leader(&req.get_ref().ids) {
            Some(ttls) => Ok(Response::new(PeerRenewLeasesResponse { ttls })),
            None => Err(Status::failed_precondition("not the leader")),
        }
    }

    async fn members(
        &self,
        _req: Request<PeerMembersRequest>,
    ) -> Result<Response<PeerMembersResponse>, Status> {
        let m = self.member()?;
        let published = crate::domains::membership::published(m.reads.store())
            .into_keys()
            .collect();
        Ok(Response::new(PeerMembersResponse {
            cluster_id: self.raft.cluster_id(),
            members: m.roster.members(),
            published,
            etcd_vocabulary: self.vocabulary.get() == Vocabulary::Etcd,
        }))
    }

    async fn promote_member(
        &self,
        req: Request<PeerPromoteRequest>,
    ) -> Result<Response<PeerPromoteResponse>, Status> {
        self.admit(&req)?;
        let m = self.member()?;
        let members = crate::domains::membership::requests::promote_here(&m, req.get_ref().id)
            .await
            .map_err(|e| Refusal::Etcd(e).status())?;
        Ok(Response::new(PeerPromoteResponse { members }))
    }
}
