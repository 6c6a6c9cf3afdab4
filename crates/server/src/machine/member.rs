//! A running member as the services see it: propose-and-wait for writes, the ReadIndex
//! barrier for linearizable reads, response headers, identity, the watch feed, the
//! admission of multi-key range reads to the blocking pool, the space quota's check
//! before proposing (which raises the NOSPACE alarm).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::alarm_request::AlarmAction;
use oxcd_api::etcdserverpb::{AlarmRequest, AlarmType, ResponseHeader};
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_api::oxcdpb::{ConfChangeContext, MemberInfo};
use oxcd_api::oxcdpb::{InternalRequest, RequestAuth};
use oxcd_mvcc::Store;
use oxcd_raft::node::{Leadership, RaftHandle};
use oxcd_raft::{ConfChange, ConfChangeType, RaftError};
use prost::Message as _;
use tokio::sync::{Mutex, Semaphore, oneshot, watch};

use crate::domains::lease::Lessor;
use crate::domains::membership::Membership;
use crate::domains::watch::WatchHub;
use crate::edge::metrics::Metrics;
use crate::machine::alarms;
use crate::machine::applied::Applied;
use crate::machine::proposal::{Admitted, Free, Headers, Proposal};
use crate::machine::waiters::{Registration, Waiters};
use crate::peer::PeerDialer;
use crate::peer::health::PeerHealth;
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
}

/// How membership changes are checked before they are proposed, and what the checks
/// and a forwarded promotion need.
#[derive(Clone)]
pub struct Reconfig {
    /// `--strict-reconfig-check`.
    pub strict: bool,
    /// `--max-learners`.
    pub max_learners: u32,
    /// Which peers are connected, and since when.
    pub health: Arc<PeerHealth>,
    /// Dials peers (a promotion is forwarded to the leader).
    pub dialer: PeerDialer,
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

/// The member handle shared by all services.
pub struct Member {
    /// Identity.
    pub id: Identity,
    /// Limits.
    pub limits: Limits,
    /// The MVCC store.
    pub store: Arc<Store>,
    /// Every lease and its keys.
    pub leases: Arc<Lessor>,
    /// Users, roles and the auth revision.
    pub auth: Arc<AuthStore>,
    /// The members and the ids removed, as applied here.
    pub membership: Arc<Membership>,
    /// The raft loop.
    pub raft: RaftHandle,
    /// The live change feed watchers read.
    pub watch_hub: Arc<WatchHub>,
    /// Membership change checks.
    pub reconfig: Reconfig,
    /// Multi-key ranges read at once on the blocking pool: bounds the threads and the
    /// answers being built together.
    pub range_reads: Semaphore,
    /// Held while this member raises its NOSPACE alarm: requests refused together
    /// propose it once.
    raising_nospace: Mutex<()>,
    /// What `/metrics` counts that no other part keeps.
    pub metrics: Metrics,
    waiters: Arc<Waiters>,
    applied: watch::Receiver<u64>,
}

/// A read on the blocking pool ended without an answer (its task panicked or was
/// cancelled at shutdown).
#[derive(Debug, thiserror::Error)]
#[error("oxcd: backend read failed: {0}")]
pub struct ReadFailed(#[from] tokio::task::JoinError);

impl From<ReadFailed> for tonic::Status {
    fn from(e: ReadFailed) -> tonic::Status {
        tonic::Status::internal(e.to_string())
    }
}

/// Runs `read` against `store` on the blocking pool (see [`Member::read_blocking`]).
pub async fn read_blocking<T, F>(store: Arc<Store>, read: F) -> Result<T, ReadFailed>
where
    F: FnOnce(&Store) -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(tokio::task::spawn_blocking(move || read(&store)).await?)
}

fn raft_err(e: RaftError) -> EtcdError {
    match e {
        RaftError::ProposalDropped => EtcdError::NoLeader,
        RaftError::LeaderChanged => EtcdError::LeaderChanged,
        _ => EtcdError::Stopped,
    }
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
        let applied = state.store.applied_index();
        Member {
            id,
            limits,
            store: state.store,
            leases: state.leases,
            auth: state.auth,
            membership: state.membership,
            raft,
            watch_hub: state.watch_hub,
            reconfig,
            range_reads: Semaphore::new(cores().max(2)),
            raising_nospace: Mutex::new(()),
            metrics,
            waiters,
            applied,
        }
    }

    /// Runs `read` against the store on the blocking pool: scans that can cover the whole
    /// keyspace (hashes, ranges of keys) must not hold an async worker while they run.
    pub async fn read_blocking<T, F>(&self, read: F) -> Result<T, ReadFailed>
    where
        F: FnOnce(&Store) -> T + Send + 'static,
        T: Send + 'static,
    {
        read_blocking(self.store.clone(), read).await
    }

    /// What fills in response headers now: this member's ids, term and revision.
    pub fn headers(&self) -> Headers {
        Headers {
            cluster_id: self.id.cluster_id,
            member_id: self.id.member_id,
            raft_term: self.raft.status().term(),
            current_rev: self.store.current_rev(),
        }
    }

    /// A response header at `revision`.
    pub fn header(&self, revision: i64) -> ResponseHeader {
        self.headers().at(revision)
    }

    /// Whether this member leads now.
    pub fn is_leader(&self) -> bool {
        self.raft.status().leader() == self.id.member_id
    }

    /// Who leads, in which term: a watch raft sends to whenever either changes.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.raft.leadership()
    }

    /// Waits, at most `within`, until the leader (0: none) is one `wanted` accepts;
    /// whether it is. Follows raft's leadership watch: no polling.
    pub async fn wait_for_leader(
        &self,
        within: Duration,
        mut wanted: impl FnMut(u64) -> bool,
    ) -> bool {
        let mut leadership = self.leadership();
        tokio::time::timeout(within, leadership.wait_for(|l| wanted(l.leader)))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// The election timeout, for the lessor's grace period on becoming leader.
    pub fn election_timeout(&self) -> Duration {
        self.limits.election_timeout
    }

    /// etcd's space check before a request that stores something new is proposed, the
    /// one check such a request meets: one costing `cost` (see [`crate::machine::quota`])
    /// must leave this member's backend below the quota. When it would not, this member's
    /// NOSPACE alarm is raised through raft (unless already raised here) before the
    /// refusal is returned, so that whoever saw the refusal finds the alarm listed; the
    /// alarm then refuses such requests on every member until an operator disarms it.
    pub async fn admit(&self, cost: u64) -> Result<Admitted, EtcdError> {
        if self
            .limits
            .quota
            .admits(cost, || self.store.backend().size())
        {
            return Ok(Admitted(()));
        }
        self.raise_nospace().await;
        Err(EtcdError::NoSpace)
    }

    /// Proposes this member's NOSPACE alarm and waits for it, unless this member has
    /// applied it already. Refused requests racing each other wait for the one proposal
    /// in flight instead of each sending one (etcd sends one per refused request). A
    /// failure is only logged: the request is refused either way, and the next refusal
    /// tries again.
    async fn raise_nospace(&self) {
        let Ok(_raising) = self.raising_nospace.try_lock() else {
            // Another refusal is raising it: wait for that attempt's end.
            let _ = self.raising_nospace.lock().await;
            return;
        };
        let me = self.id.member_id;
        let raised = alarms::raised(&self.store).is_ok_and(|all| {
            all.iter()
                .any(|a| a.member_id == me && a.alarm() == AlarmType::Nospace)
        });
        if raised {
            return;
        }
        let alarm = AlarmRequest {
            action: AlarmAction::Activate as i32,
            member_id: me,
            alarm: AlarmType::Nospace as i32,
        };
        if let Err(e) = self.submit(alarm.into_op(), None).await {
            tracing::warn!(error = %e, "failed to raise the NOSPACE alarm");
        }
    }

    /// Proposes `request` for the user `caller` names (checked when it is applied; None:
    /// no user, or auth is off), waits until it is applied here and gives its answer.
    pub async fn propose<P: Free>(
        &self,
        request: P,
        caller: Option<RequestAuth>,
    ) -> Result<P::Answer, EtcdError> {
        let applied = self.submit(request.into_op(), caller).await?;
        self.answer::<P>(applied)
    }

    /// As [`Member::propose`], for a request that stores something new, which the space
    /// quota admitted ([`Member::admit`]).
    pub async fn propose_admitted<P: Proposal>(
        &self,
        request: P,
        caller: Option<RequestAuth>,
        _admitted: Admitted,
    ) -> Result<P::Answer, EtcdError> {
        let applied = self.submit(request.into_op(), caller).await?;
        self.answer::<P>(applied)
    }

    /// `P`'s answer in what applying it gave.
    fn answer<P: Proposal>(&self, applied: Applied) -> Result<P::Answer, EtcdError> {
        P::answer(applied, &self.headers()).map_err(|other| {
            // The one dispatch answers each kind with its own variant: this member's
            // apply path disagrees with its proposer.
            tracing::error!(
                proposal = std::any::type_name::<P>(),
                applied = ?other,
                "a proposal was answered with another kind's result"
            );
            EtcdError::Corrupt
        })
    }

    /// Proposes `op` and waits until it is applied here.
    async fn submit(&self, op: Op, auth: Option<RequestAuth>) -> Result<Applied, EtcdError> {
        let (waiter, done) = self.waiters.register();
        let data = InternalRequest {
            id: waiter.id(),
            op: Some(op),
            auth,
        }
        .encode_to_vec();
        if data.len() > self.limits.max_request_bytes {
            return Err(EtcdError::RequestTooLarge);
        }
        let (tx, accepted) = oneshot::channel();
        self.raft.propose(data, move |r| {
            let _ = tx.send(r);
        });
        self.settle(waiter, accepted, done).await
    }

    /// Proposes a membership change of `change_type` for member `id`, its context
    /// `ctx` completed with the waiter, and waits until it is applied here.
    pub async fn propose_conf_change(
        &self,
        change_type: ConfChangeType,
        id: u64,
        mut ctx: ConfChangeContext,
    ) -> Result<Vec<MemberInfo>, EtcdError> {
        let (waiter, done) = self.waiters.register();
        ctx.request_id = waiter.id();
        let mut cc = ConfChange::default();
        cc.set_change_type(change_type);
        cc.node_id = id;
        cc.context = ctx.encode_to_vec().into();
        let (tx, accepted) = oneshot::channel();
        self.raft.propose_conf_change(cc, move |r| {
            let _ = tx.send(r);
        });
        match self.settle(waiter, accepted, done).await? {
            Applied::Membership(members) => Ok(members),
            other => {
                tracing::error!(applied = ?other, "a conf change was answered with another kind's result");
                Err(EtcdError::Corrupt)
            }
        }
    }

    /// Waits for raft to take the proposal into its log, then for its outcome. The
    /// waiter is removed however this ends, the caller going away included (the
    /// registration's drop).
    async fn settle(
        &self,
        waiter: Registration<'_>,
        accepted: oneshot::Receiver<Result<(), RaftError>>,
        done: oneshot::Receiver<crate::machine::applied::Outcome>,
    ) -> Result<Applied, EtcdError> {
        match accepted.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                self.metrics.proposal_failed();
                return Err(raft_err(e));
            }
            Err(_) => {
                self.metrics.proposal_failed();
                return Err(EtcdError::Stopped);
            }
        }
        match tokio::time::timeout(self.limits.request_timeout, done).await {
            Ok(Ok(outcome)) => {
                waiter.settled();
                outcome
            }
            Ok(Err(_)) => {
                self.metrics.proposal_failed();
                Err(EtcdError::Stopped)
            }
            Err(_) => {
                self.metrics.proposal_failed();
                Err(EtcdError::Timeout)
            }
        }
    }

    /// Proposals waiting to be applied.
    pub fn pending_proposals(&self) -> usize {
        self.waiters.len()
    }

    /// Waits until this member has applied everything committed when it was called, as
    /// confirmed by the leader (ReadIndex): a read after this is linearizable.
    pub async fn read_barrier(&self) -> Result<(), EtcdError> {
        let (tx, rx) = oneshot::channel();
        self.raft.read_index(move |r| {
            let _ = tx.send(r);
        });
        let index = match tokio::time::timeout(self.limits.request_timeout, rx).await {
            Ok(Ok(Ok(index))) => index,
            Ok(Ok(Err(e))) => return Err(raft_err(e)),
            Ok(Err(_)) => return Err(EtcdError::Stopped),
            Err(_) => return Err(EtcdError::Timeout),
        };
        self.wait_applied(index).await
    }

    /// Waits until this member has applied the entry at `index`.
    pub async fn wait_applied(&self, index: u64) -> Result<(), EtcdError> {
        let mut applied = self.applied.clone();
        match tokio::time::timeout(
            self.limits.request_timeout,
            applied.wait_for(|a| *a >= index),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(EtcdError::Stopped),
            Err(_) => Err(EtcdError::TimeoutWaitAppliedIndex),
        }
    }

    /// The applied index.
    pub fn applied_index(&self) -> u64 {
        *self.applied.borrow()
    }

    /// Each member's match index when this member leads: Err(NotLeader) when it does
    /// not (only the leader tracks the others' logs).
    pub async fn progress(&self) -> Result<std::collections::BTreeMap<u64, u64>, EtcdError> {
        let (tx, rx) = oneshot::channel();
        self.raft.progress(move |r| {
            let _ = tx.send(r);
        });
        rx.await
            .map_err(|_| EtcdError::Stopped)?
            .map_err(|_| EtcdError::Stopped)?
            .ok_or(EtcdError::NotLeader)
    }

    /// The members, as the replicated membership holds them here (a backend from
    /// before it: the bootstrap list), by id.
    pub fn members(&self) -> Vec<MemberInfo> {
        let state = self.membership.state();
        if state.members.is_empty() {
            let mut members = self.id.members.clone();
            members.sort_by_key(|m| m.id);
            members
        } else {
            state.members.values().cloned().collect()
        }
    }

    /// The voting members' ids (read by the leader on every keepalive: no member
    /// record is copied).
    pub fn voters(&self) -> Vec<u64> {
        let state = self.membership.state();
        if state.members.is_empty() {
            let mut ids: Vec<u64> = self
                .id
                .members
                .iter()
                .filter(|m| !m.is_learner)
                .map(|m| m.id)
                .collect();
            ids.sort_unstable();
            ids
        } else {
            state.voters()
        }
    }
}

/// The machine's cores (1 when unknown), read once: how many multi-key ranges are read at
/// once, and how many threads read one long answer's rows.
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
