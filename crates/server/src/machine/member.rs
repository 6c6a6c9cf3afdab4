//! A running member as start-up assembles it: its identity and limits, its replicated
//! state, and the narrow handles the services, jobs and peers are given instead of the
//! member itself. [`Reads`] answers from the state (the ReadIndex barrier, headers, the
//! blocking pool), [`Writes`] proposes typed requests and waits for them (the space quota
//! first), [`Role`] says who leads, [`Roster`] lists the members, [`Callers`] tells who
//! makes a request. Only start-up (`crate::start`) holds the whole [`Member`].

use std::sync::Arc;
use std::time::Duration;

use oxcd_mvcc::Store;
use oxcd_raft::node::RaftHandle;

use crate::domains::auth::caller::Callers;
use crate::domains::lease::Lessor;
use crate::domains::membership::Membership;
use crate::domains::membership::reconfig::Reconfig;
use crate::domains::membership::roster::Roster;
use crate::domains::watch::WatchHub;
use crate::edge::metrics::Metrics;
use crate::machine::range_budget::RangeBudget;
use crate::machine::reads::{Ids, Reads};
use crate::machine::role::Role;
use crate::machine::waiters::Waiters;
use crate::machine::writes::{WriteLimits, Writes};
use oxcd_auth::AuthStore;
use oxcd_config::quota::Quota;

/// gRPC's own framing overhead allowed on top of `--max-request-bytes` (as etcd).
pub const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

/// Request limits and timeouts.
#[derive(Debug, Clone)]
pub struct Limits {
    /// `--max-txn-ops`.
    pub max_txn_ops: usize,
    /// `--max-request-bytes`.
    pub max_request_bytes: usize,
    /// How long a request may wait for raft (etcd: 5 s + 2 election timeouts).
    pub request_timeout: Duration,
    /// The space quota (`--quota-backend-bytes`).
    pub quota: Quota,
    /// `--election-timeout`.
    pub election_timeout: Duration,
    /// The `PriorityRequest` feature gate (etcd 3.7).
    pub priority_requests: bool,
    /// The bound on Range answers in flight (`--max-inflight-range-bytes`, resolved).
    pub max_inflight_range_bytes: usize,
}

/// Who this member is, for headers and member lists.
#[derive(Debug, Clone)]
pub struct Identity {
    /// `--name`.
    pub name: String,
    /// Member id.
    pub member_id: u64,
    /// Cluster id.
    pub cluster_id: u64,
    /// Advertised peer URLs.
    pub peer_urls: Vec<String>,
    /// Advertised client URLs.
    pub client_urls: Vec<String>,
    /// Every member of the cluster (this one included).
    pub members: Vec<oxcd_api::oxcdpb::MemberInfo>,
    /// The etcd release it acts as.
    pub release: crate::domains::version::release::Release,
    /// The feature gates it runs with.
    pub feature_gates: oxcd_config::features::FeatureGates,
    /// The vocabulary of its raft log.
    pub vocabulary: crate::machine::vocabulary::LiveVocabulary,
}

impl Limits {
    /// The largest gRPC message a client may send or be sent: `--max-request-bytes`
    /// and gRPC's framing overhead.
    pub fn max_grpc_message(&self) -> usize {
        self.max_request_bytes + GRPC_OVERHEAD_BYTES
    }
}

/// The replicated state a member holds: what the apply thread changes and the services
/// read. Cheap to clone (shared parts).
#[derive(Clone)]
pub struct Replicated {
    /// The MVCC store, which publishes the applied index.
    pub store: Arc<Store>,
    /// Every lease and its keys.
    pub leases: Arc<Lessor>,
    /// Users, roles and the auth revision.
    pub auth: Arc<AuthStore>,
    /// The members and the ids removed, as applied here.
    pub membership: Arc<Membership>,
    /// The live change feed watchers read.
    pub watch_hub: Arc<WatchHub>,
}

/// A running member: what start-up holds, and the handles it gives out.
pub struct Member {
    /// Identity.
    pub id: Identity,
    /// Limits.
    pub limits: Limits,
    /// The replicated state.
    pub state: Replicated,
    /// Reads of the state.
    pub reads: Reads,
    /// Proposals.
    pub writes: Writes,
    /// Who leads.
    pub role: Role,
    /// The member list.
    pub roster: Roster,
    /// Who makes a request.
    pub callers: Callers,
    /// The raft loop (start-up stops it and hands leadership over; the peer service
    /// steps messages into it).
    pub raft: RaftHandle,
    /// Membership change checks.
    pub reconfig: Reconfig,
    /// What `/metrics` counts that no other part keeps.
    pub metrics: Arc<Metrics>,
}

impl Member {
    /// A member over its replicated state and its raft loop; `waiters` are completed by
    /// the apply thread.
    pub fn new(
        id: Identity,
        limits: Limits,
        state: Replicated,
        raft: RaftHandle,
        waiters: Arc<Waiters>,
        reconfig: Reconfig,
        metrics: Metrics,
    ) -> Member {
        let metrics = Arc::new(metrics);
        let ids = Ids {
            cluster_id: id.cluster_id,
            member_id: id.member_id,
        };
        let reads = Reads::new(
            ids,
            state.store.clone(),
            raft.clone(),
            limits.request_timeout,
            RangeBudget::new(limits.max_inflight_range_bytes),
        );
        let writes = Writes::new(
            reads.clone(),
            raft.clone(),
            waiters,
            WriteLimits {
                max_request_bytes: limits.max_request_bytes,
                request_timeout: limits.request_timeout,
                quota: limits.quota,
                priority_requests: limits.priority_requests,
            },
            metrics.clone(),
            id.vocabulary.clone(),
        );
        Member {
            role: Role::new(id.member_id, raft.clone()),
            roster: Roster::new(state.membership.clone(), id.members.clone()),
            callers: Callers::new(state.auth.clone(), reads.clone()),
            id,
            limits,
            state,
            reads,
            writes,
            raft,
            reconfig,
            metrics,
        }
    }
}
