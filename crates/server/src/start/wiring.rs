//! Which handles each part of a running member is given. Start-up holds the whole
//! [`Member`]; every service, job and driver gets only the handles it reads and proposes
//! through ([`crate::machine::reads::Reads`], [`crate::machine::writes::Writes`],
//! [`crate::machine::role::Role`], the domains' state), so what a part can touch is in
//! its constructor.

use std::sync::Arc;

use tokio::sync::watch;

use crate::domains::auth::service::AuthService;
use crate::domains::kv::KvHandles;
use crate::domains::kv::service::KvService;
use crate::domains::lease::LeaseHandles;
use crate::domains::lease::renewals::Renewals;
use crate::domains::lease::service::LeaseService;
use crate::domains::membership::MembershipHandles;
use crate::domains::membership::service::ClusterService;
use crate::domains::version::handles::VersionHandles;
use crate::domains::watch::WatchHandles;
use crate::edge::http_handles::HttpHandles;
use crate::edge::services::Services;
use crate::edge::services::election::ElectionService;
use crate::edge::services::grpc_health::HealthService;
use crate::edge::services::lock::LockService;
use crate::edge::services::maintenance::MaintenanceService;
use crate::edge::services::recipes::RecipeHandles;
use crate::jobs::JobHandles;
use crate::machine::member::Member;
use crate::peer::PeerDialer;

/// The lease service's and the leader's lease drivers' handles.
pub fn lease(m: &Member) -> LeaseHandles {
    LeaseHandles {
        leases: m.state.leases.clone(),
        callers: m.callers.clone(),
        reads: m.reads.clone(),
        writes: m.writes.clone(),
        role: m.role.clone(),
        roster: m.roster.clone(),
        election_timeout: m.limits.election_timeout,
        request_timeout: m.limits.request_timeout,
        vocabulary: m.id.vocabulary.clone(),
    }
}

/// The Cluster service's, the auto-promotion's and the peers' membership handles.
pub fn membership(m: &Member) -> MembershipHandles {
    MembershipHandles {
        callers: m.callers.clone(),
        reads: m.reads.clone(),
        writes: m.writes.clone(),
        role: m.role.clone(),
        roster: m.roster.clone(),
        reconfig: m.reconfig.clone(),
        client_urls: m.id.client_urls.clone(),
        request_timeout: m.limits.request_timeout,
        release: m.id.release,
    }
}

/// The background jobs' handles (compaction, corruption checks).
pub fn jobs(m: &Member) -> JobHandles {
    JobHandles {
        reads: m.reads.clone(),
        writes: m.writes.clone(),
        role: m.role.clone(),
        roster: m.roster.clone(),
    }
}

/// What `/metrics` and the health checks read.
pub fn http(m: &Member) -> HttpHandles {
    HttpHandles {
        reads: m.reads.clone(),
        writes: m.writes.clone(),
        role: m.role.clone(),
        membership: m.state.membership.clone(),
        leases: m.state.leases.clone(),
        quota: m.limits.quota,
        metrics: m.metrics.clone(),
        release: m.id.release,
        feature_gates: m.id.feature_gates.clone(),
        request_timeout: m.limits.request_timeout,
        watch_hub: m.state.watch_hub.clone(),
    }
}

/// The version loops' handles (they dial peers with `dialer`).
pub fn version(
    m: &Member,
    dialer: PeerDialer,
    etcd_streams: Arc<crate::peer::etcd::streams::EtcdStreams>,
) -> VersionHandles {
    VersionHandles {
        reads: m.reads.clone(),
        writes: m.writes.clone(),
        role: m.role.clone(),
        roster: m.roster.clone(),
        release: m.id.release,
        dialer,
        request_timeout: m.limits.request_timeout,
        vocabulary: m.id.vocabulary.clone(),
        etcd_streams,
    }
}

/// Every client-facing service of `m`, the lease and membership ones over the handles
/// given (shared with their drivers), keepalives renewed by `renewals`; the gRPC health
/// service reports SERVING until `stopped` turns true (and, with
/// `stop_grpc_on_defrag`, NOT_SERVING while a defragmentation runs).
pub fn services(
    m: &Member,
    lease: &Arc<LeaseHandles>,
    membership: &Arc<MembershipHandles>,
    renewals: Arc<Renewals>,
    stopped: watch::Receiver<bool>,
    stop_grpc_on_defrag: bool,
) -> Services {
    let kv = Arc::new(KvHandles {
        callers: m.callers.clone(),
        reads: m.reads.clone(),
        writes: m.writes.clone(),
        membership: m.state.membership.clone(),
        max_txn_ops: m.limits.max_txn_ops,
        max_request_bytes: m.limits.max_request_bytes,
        metrics: m.metrics.clone(),
    });
    let recipes = Arc::new(RecipeHandles {
        callers: m.callers.clone(),
        reads: m.reads.clone(),
        writes: m.writes.clone(),
        leases: m.state.leases.clone(),
        hub: m.state.watch_hub.clone(),
        max_txn_ops: m.limits.max_txn_ops,
    });
    let max_grpc_message = m.limits.max_grpc_message();
    let (health, defrag_notice) = HealthService::new(stopped, stop_grpc_on_defrag);
    Services {
        kv_service: Arc::new(KvService::new(kv.clone())),
        kv,
        watch: Arc::new(WatchHandles {
            hub: m.state.watch_hub.clone(),
            callers: m.callers.clone(),
            reads: m.reads.clone(),
            max_request_bytes: m.limits.max_request_bytes,
            max_grpc_message,
        }),
        lease: Arc::new(LeaseService::new(lease.clone(), renewals)),
        cluster: Arc::new(ClusterService::new(membership.clone())),
        maintenance: Arc::new(MaintenanceService {
            callers: m.callers.clone(),
            reads: m.reads.clone(),
            writes: m.writes.clone(),
            role: m.role.clone(),
            roster: m.roster.clone(),
            metrics: m.metrics.clone(),
            request_timeout: m.limits.request_timeout,
            quota: m.limits.quota,
            release: m.id.release,
            defrag_notice,
        }),
        auth: Arc::new(AuthService::new(
            m.callers.clone(),
            m.reads.clone(),
            m.writes.clone(),
        )),
        lock: Arc::new(LockService::new(recipes.clone())),
        election: Arc::new(ElectionService::new(recipes)),
        health: Arc::new(health),
        max_grpc_message,
    }
}
