//! The Maintenance service: status, alarms, hashes, snapshots in etcd's format,
//! defragmentation (while the member keeps serving) and leader moves; the rest answers
//! Unimplemented.

use std::sync::Arc;

use oxcd_api::errors::EtcdError;

use oxcd_api::etcdserverpb::maintenance_server::Maintenance;
use oxcd_api::etcdserverpb::{
    AlarmRequest, AlarmResponse, DefragmentRequest, DefragmentResponse, HashKvRequest,
    HashKvResponse, HashRequest, HashResponse, SnapshotRequest, StatusRequest, StatusResponse,
};
use oxcd_api::etcdserverpb::{
    DowngradeRequest, DowngradeResponse, MoveLeaderRequest, MoveLeaderResponse,
};
use tonic::{Request, Response, Status};

use crate::backup::stream::{SnapshotStream, snapshot_stream};
use crate::domains::auth::caller::Callers;
use crate::domains::auth::caller::name;
use crate::domains::membership::roster::Roster;
use crate::domains::version::downgrade;
use crate::domains::version::release::Release;
use crate::domains::version::report::Report;
use crate::edge::metrics::Metrics;
use crate::machine::alarms;
use crate::machine::reads::Reads;
use crate::machine::role::Role;
use crate::machine::writes::Writes;
use oxcd_api::etcdserverpb::AlarmType;
use oxcd_api::etcdserverpb::alarm_request::AlarmAction;

/// How long a defragmentation waits for the last compaction's rows to be deleted.
const COMPACTION_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// The Maintenance service.
pub struct MaintenanceService {
    /// Who makes a request (hashes, snapshots and defragmentation need root).
    pub callers: Callers,
    /// The store, its hashes and the barrier.
    pub reads: Reads,
    /// Alarm changes.
    pub writes: Writes,
    /// Who leads, raft's indexes, leadership's hand-over.
    pub role: Role,
    /// The voters a leader may move to.
    pub roster: Roster,
    /// The defragmentation metrics.
    pub metrics: Arc<Metrics>,
    /// How long MoveLeader waits for the new leader.
    pub request_timeout: std::time::Duration,
    /// The space quota (Status's `dbSizeQuota`).
    pub quota: oxcd_config::quota::Quota,
    /// The release this member acts as (Status's version fields, the hash revision,
    /// the snapshot's version).
    pub release: Release,
    /// Tells gRPC's health service a defragmentation runs.
    pub defrag_notice: crate::edge::services::grpc_health::DefragNotice,
}

#[tonic::async_trait]
impl Maintenance for MaintenanceService {
    async fn status(
        &self,
        req: Request<StatusRequest>,
    ) -> Result<Response<StatusResponse>, Status> {
        let m = self;
        authenticated(&m.callers, m.release, &req).await?;
        let db_size = m.reads.store().backend().size() as i64;
        let versions = Report::read(m.reads.store(), m.release);
        Ok(Response::new(StatusResponse {
            header: Some(m.reads.header_now()),
            version: m.release.server_version().to_string(),
            storage_version: versions.storage_version(),
            db_size_quota: if m.release.has_3_6() {
                m.quota.gauge()
            } else {
                0
            },
            downgrade_info: versions.downgrade_info(),
            db_size,
            leader: m.role.leader(),
            raft_index: m.role.commit(),
            raft_term: m.role.term(),
            raft_applied_index: m.reads.applied_index(),
            errors: alarms::raised(m.reads.store())
                .unwrap_or_default()
                .iter()
                .map(alarms::describe)
                .collect(),
            db_size_in_use: db_size,
            is_learner: false,
        }))
    }

    async fn hash_kv(
        &self,
        req: Request<HashKvRequest>,
    ) -> Result<Response<HashKvResponse>, Status> {
        let m = self;
        admin(&m.callers, m.release, &req).await?;
        let rev = req.into_inner().revision;
        let (hash, compact_revision, hashed) = m
            .reads
            .blocking(move |store| store.hash_kv(rev))
            .await?
            .map_err(crate::machine::applier::mvcc_err)?;
        Ok(Response::new(HashKvResponse {
            header: Some(m.reads.header_now()),
            hash,
            compact_revision,
            hash_revision: if m.release.has_3_6() { hashed } else { 0 },
        }))
    }

    async fn hash(&self, req: Request<HashRequest>) -> Result<Response<HashResponse>, Status> {
        let m = self;
        admin(&m.callers, m.release, &req).await?;
        let hash = m
            .reads
            .blocking(|store| store.hash_all())
            .await?
            .map_err(crate::machine::applier::mvcc_err)?;
        Ok(Response::new(HashResponse {
            header: Some(m.reads.header_now()),
            hash,
        }))
    }

    async fn snapshot(
        &self,
        req: Request<SnapshotRequest>,
    ) -> Result<Response<SnapshotStream>, Status> {
        let m = self;
        admin(&m.callers, m.release, &req).await?;
        let version = Report::read(m.reads.store(), m.release).storage_version();
        Ok(Response::new(snapshot_stream(
            m.reads.store().backend().clone(),
            version,
        )))
    }

    /// Member-local, as etcd's: rewrites this member's backend file compactly. Unlike
    /// etcd's, reads and writes go on while it runs; writers wait only for the last
    /// catch-up (see `oxcd_storage::defrag`). etcd 3.5 leaves the header unset.
    async fn defragment(
        &self,
        req: Request<DefragmentRequest>,
    ) -> Result<Response<DefragmentResponse>, Status> {
        let m = self;
        admin(&m.callers, m.release, &req).await?;
        let store = m.reads.store().clone();
        tracing::info!(path = %store.backend().path().display(), "starting defragment");
        let timed = m.metrics.defrag_started();
        let notified = m.defrag_notice.started();
        let report = tokio::task::spawn_blocking(move || {
            // The rows of the last compaction go first, so that the copy is of the live
            // data (etcd's defragmentation copies whatever its compaction left so far).
            let compacted = store.compact_rev();
            if compacted > 0 && !store.wait_compacted(compacted, COMPACTION_WAIT) {
                tracing::warn!(
                    compact_revision = compacted,
                    "defragmenting while the last compaction's rows are still being deleted"
                );
            }
            store.backend().defragment()
        })
        .await
        .map_err(|e| Status::internal(e.to_string()));
        drop(timed);
        drop(notified);
        match report? {
            Ok(r) => {
                tracing::info!(
                    size_before = r.size_before,
                    size_after = r.size_after,
                    rounds = r.rounds,
                    paused = ?r.paused,
                    took = ?r.took,
                    "finished defragment"
                );
                Ok(Response::new(DefragmentResponse { header: None }))
            }
            Err(e) => {
                tracing::warn!(error = %e, "failed to defragment");
                Err(Status::unknown(e.to_string()))
            }
        }
    }

    async fn move_leader(
        &self,
        req: Request<MoveLeaderRequest>,
    ) -> Result<Response<MoveLeaderResponse>, Status> {
        let m = self;
        if m.release.has_3_6() {
            admin(&m.callers, m.release, &req).await?;
        }
        let target = req.into_inner().target_id;
        if !m.role.is_leader() {
            return Err(EtcdError::NotLeader.into());
        }
        if !m.roster.voters().contains(&target) {
            return Err(EtcdError::BadLeaderTransferee.into());
        }
        if target != m.role.me() {
            m.role.transfer_leader(target)?;
            if !m
                .role
                .wait_for_leader(m.request_timeout, |leader| leader == target)
                .await
            {
                return Err(EtcdError::Timeout.into());
            }
        }
        Ok(Response::new(MoveLeaderResponse {
            header: Some(m.reads.header_now()),
        }))
    }

    /// etcd 3.6's downgrade ([`crate::domains::version::downgrade`]); root only.
    async fn downgrade(
        &self,
        req: Request<DowngradeRequest>,
    ) -> Result<Response<DowngradeResponse>, Status> {
        let m = self;
        admin(&m.callers, m.release, &req).await?;
        let req = req.into_inner();
        let handles = downgrade::Handles {
            reads: &m.reads,
            writes: &m.writes,
        };
        let version = downgrade::downgrade(&handles, req.action, &req.version).await?;
        Ok(Response::new(DowngradeResponse {
            header: Some(m.reads.header_now()),
            version,
        }))
    }

    async fn alarm(&self, req: Request<AlarmRequest>) -> Result<Response<AlarmResponse>, Status> {
        let m = self;
        if req.get_ref().action() == AlarmAction::Get {
            authenticated(&m.callers, m.release, &req).await?;
        } else if m.release.has_3_6() {
            admin(&m.callers, m.release, &req).await?;
        }
        let req = req.into_inner();
        let alarms = if req.action() == AlarmAction::Get {
            m.reads.barrier().await?;
            // As etcd: every alarm, or those of the type asked for.
            let mut raised = alarms::raised(m.reads.store())?;
            if req.alarm() != AlarmType::None {
                raised.retain(|a| a.alarm == req.alarm);
            }
            raised
        } else {
            m.writes.propose(req, None).await?
        };
        Ok(Response::new(AlarmResponse {
            header: Some(m.reads.header_now()),
            alarms,
        }))
    }
}

/// etcd's rule for Hash, HashKV, Snapshot, Defragment (and, from 3.6, MoveLeader,
/// Downgrade and the Alarm changes): a user with the root role while auth is on.
/// etcd 3.5 answers these refusals with its auth store's own errors, unconverted; etcd
/// 3.6 converts them (`togRPCError`).
async fn admin<T>(callers: &Callers, release: Release, req: &Request<T>) -> Result<(), Status> {
    let convert = |e: EtcdError| {
        if release.has_3_6() {
            e
        } else {
            e.unconverted()
        }
    };
    let caller = callers.of(req).await.map_err(convert)?;
    callers
        .auth()
        .state()
        .check_admin(name(&caller))
        .map_err(convert)?;
    Ok(())
}

/// etcd 3.6.12+'s rule for Status and Alarm GET (`requireAuthInfo`): with auth on, any
/// authenticated user; etcd 3.5 checks nothing.
async fn authenticated<T>(
    callers: &Callers,
    release: Release,
    req: &Request<T>,
) -> Result<(), Status> {
    if release.has_3_6() {
        callers.require_user(req).await?;
    }
    Ok(())
}
