//! The write handle: what a handler needs to change the replicated state. A typed
//! request ([`crate::machine::proposal`]) is proposed through raft, waited for until it
//! is applied here, and answered with its header completed; a request that stores
//! something new meets the space quota first ([`Writes::admit`]), which raises the
//! NOSPACE alarm when it refuses.
//!
//! Invariants:
//! - A proposal is answered only after it is applied here, or refused; its waiter is
//!   removed however the wait ends, the caller going away included.
//! - A put, a txn or a lease grant is proposed only with an [`Admitted`] token.

use std::sync::Arc;
use std::time::Duration;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::alarm_request::AlarmAction;
use oxcd_api::etcdserverpb::{AlarmRequest, AlarmType};
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_api::oxcdpb::{ConfChangeContext, InternalRequest, MemberInfo, MemberUpdate, RequestAuth};
use oxcd_config::quota::Quota;
use oxcd_raft::node::RaftHandle;
use oxcd_raft::{ConfChange, ConfChangeType, RaftError};
use prost::Message as _;
use tokio::sync::{Mutex, oneshot};

use crate::edge::metrics::Metrics;
use crate::machine::alarms;
use crate::machine::applied::{Applied, Outcome};
use crate::machine::etcd_entries;
use crate::machine::proposal::{Admitted, Free, Proposal};
use crate::machine::reads::{Reads, raft_err};
use crate::machine::vocabulary::Vocabulary;
use crate::machine::waiters::{Registration, Waiters};

/// How proposals are bounded.
#[derive(Debug, Clone)]
pub struct WriteLimits {
    /// `--max-request-bytes`: the largest proposal.
    pub max_request_bytes: usize,
    /// How long a proposal may wait for raft and the apply thread.
    pub request_timeout: Duration,
    /// The space quota (`--quota-backend-bytes`).
    pub quota: Quota,
    /// etcd 3.7's `PriorityRequest` gate: lease revocations are admitted further
    /// behind ([`admitted_behind`]).
    pub priority_requests: bool,
}

/// etcd's bound on committed entries not yet applied here: past it, new requests are
/// refused with "too many requests" (`maxGapBetweenApplyAndCommitIndex`).
pub const MAX_GAP: u64 = 5000;
/// How far behind a lease revocation is still admitted with `PriorityRequest` (etcd
/// 3.7's `maxPriorityGap`): revoking leases is what frees an overloaded member.
pub const MAX_PRIORITY_GAP: u64 = 2 * MAX_GAP;

/// Whether `op` may be proposed while `gap` committed entries wait to be applied here
/// (etcd 3.7's `exceedsRequestLimit`, inverted).
pub fn admitted_behind(gap: u64, op: &Op, priority_requests: bool) -> bool {
    if gap <= MAX_GAP {
        return true;
    }
    let revoke = matches!(op, Op::LeaseRevoke(_) | Op::LeaseExpire(_));
    priority_requests && revoke && gap <= MAX_PRIORITY_GAP
}

/// Proposes requests and waits for their answers. Cheap to clone (shared parts).
#[derive(Clone)]
pub struct Writes {
    reads: Reads,
    raft: RaftHandle,
    waiters: Arc<Waiters>,
    limits: WriteLimits,
    /// Held while this member raises its NOSPACE alarm: requests refused together
    /// propose it once.
    raising_nospace: Arc<Mutex<()>>,
    metrics: Arc<Metrics>,
    /// The vocabulary proposals are written in.
    vocabulary: Vocabulary,
}

impl Writes {
    /// Writes through `raft`, answered through `waiters` (completed by the apply
    /// thread) with headers from `reads`; failures counted in `metrics`.
    pub fn new(
        reads: Reads,
        raft: RaftHandle,
        waiters: Arc<Waiters>,
        limits: WriteLimits,
        metrics: Arc<Metrics>,
        vocabulary: Vocabulary,
    ) -> Writes {
        Writes {
            reads,
            raft,
            waiters,
            limits,
            raising_nospace: Arc::new(Mutex::new(())),
            metrics,
            vocabulary,
        }
    }

    /// etcd's space check before a request that stores something new is proposed, the
    /// one check such a request meets: one costing `cost` (see [`crate::machine::quota`])
    /// must leave this member's backend below the quota, its size counted as etcd would
    /// count the same data (`Backend::quota_size`). When it would not, this member's
    /// NOSPACE alarm is raised through raft (unless already raised here) before the
    /// refusal is returned, so that whoever saw the refusal finds the alarm listed; the
    /// alarm then refuses such requests on every member until an operator disarms it.
    pub async fn admit(&self, cost: u64) -> Result<Admitted, EtcdError> {
        let store = self.reads.store();
        if self
            .limits
            .quota
            .admits(cost, || store.backend().quota_size())
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
        let me = self.reads.ids().member_id;
        let raised = alarms::raised(self.reads.store()).is_ok_and(|all| {
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

    /// As [`Writes::propose`], for a request that stores something new, which the space
    /// quota admitted ([`Writes::admit`]).
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
        P::answer(applied, &self.reads.headers()).map_err(|other| {
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
        let gap = self
            .raft
            .status()
            .commit()
            .saturating_sub(self.reads.applied_index());
        if !admitted_behind(gap, &op, self.limits.priority_requests) {
            return Err(EtcdError::TooManyRequests);
        }
        let (waiter, done) = self.waiters.register();
        let data = match self.vocabulary {
            Vocabulary::Oxcd => InternalRequest {
                id: waiter.id(),
                op: Some(op),
                auth,
            }
            .encode_to_vec(),
            Vocabulary::Etcd => etcd_entries::write(waiter.id(), op, auth).map_err(|e| {
                tracing::warn!("{e}");
                EtcdError::NotCapable
            })?,
        };
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
        let (tx, accepted) = oneshot::channel();
        let accept = move |r| {
            let _ = tx.send(r);
        };
        match self.vocabulary {
            // etcd's type numbers and JSON context, which raft-rs never decodes.
            Vocabulary::Etcd => self.raft.propose_conf_change_bytes(
                crate::domains::membership::etcd_conf_change::write(
                    waiter.id(),
                    change_type,
                    id,
                    &ctx,
                ),
                accept,
            ),
            Vocabulary::Oxcd => {
                ctx.request_id = waiter.id();
                let mut cc = ConfChange::default();
                cc.set_change_type(change_type);
                cc.node_id = id;
                cc.context = ctx.encode_to_vec().into();
                self.raft.propose_conf_change(cc, accept);
            }
        }
        members_of(self.settle(waiter, accepted, done).await?)
    }

    /// Proposes new peer URLs for a member and waits until applied here: in oxcd's
    /// vocabulary a normal entry, in etcd's etcd's UpdateNode conf change (raft's
    /// configuration is untouched either way).
    pub async fn propose_member_update(
        &self,
        update: MemberUpdate,
    ) -> Result<Vec<MemberInfo>, EtcdError> {
        if self.vocabulary == Vocabulary::Oxcd {
            return self.propose(update, None).await;
        }
        let (waiter, done) = self.waiters.register();
        let (tx, accepted) = oneshot::channel();
        self.raft.propose_conf_change_bytes(
            crate::domains::membership::etcd_conf_change::write_update(waiter.id(), &update),
            move |r| {
                let _ = tx.send(r);
            },
        );
        members_of(self.settle(waiter, accepted, done).await?)
    }

    /// Waits for raft to take the proposal into its log, then for its outcome. The
    /// waiter is removed however this ends, the caller going away included (the
    /// registration's drop).
    async fn settle(
        &self,
        waiter: Registration<'_>,
        accepted: oneshot::Receiver<Result<(), RaftError>>,
        done: oneshot::Receiver<Outcome>,
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
    pub fn pending(&self) -> usize {
        self.waiters.len()
    }
}

/// The members a membership change was answered with.
fn members_of(applied: Applied) -> Result<Vec<MemberInfo>, EtcdError> {
    match applied {
        Applied::Membership(members) => Ok(members),
        other => {
            tracing::error!(applied = ?other, "a conf change was answered with another kind's result");
            Err(EtcdError::Corrupt)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::etcdserverpb::{LeaseRevokeRequest, PutRequest};

    // etcd v3.7.0 server/etcdserver/util.go exceedsRequestLimit.
    #[test]
    fn revocations_pass_further_behind_only_with_priority_requests() {
        let put = Op::Put(PutRequest::default());
        let revoke = Op::LeaseRevoke(LeaseRevokeRequest::default());
        assert!(admitted_behind(5000, &put, false));
        assert!(!admitted_behind(5001, &put, true));
        assert!(!admitted_behind(5001, &revoke, false));
        assert!(admitted_behind(10_000, &revoke, true));
        assert!(!admitted_behind(10_001, &revoke, true));
    }
}
