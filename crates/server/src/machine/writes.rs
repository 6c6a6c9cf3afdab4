//! The write handle: what a handler needs to change the replicated state. A typed
//! request ([`crate::machine::proposal`]) is proposed through raft, waited for until it
//! is applied here, and answered with its header completed; a request that stores
//! something new meets the space quota first ([`Writes::admit`]), which raises the
//! NOSPACE alarm when it refuses.
//!
//! A request's caller sleeps once: raft taking its proposal into the log wakes no one
//! (the caller reads raft's answer after the apply path completed its waiter); only a
//! refusal completes the waiter early.
//!
//! Invariants:
//! - A proposal is answered only after it is applied here, or refused; its waiter is
//!   removed however the wait ends, the caller going away included.
//! - A put, a txn or a lease grant is proposed only with an [`Admitted`] token.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
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
use crate::machine::vocabulary::{LiveVocabulary, LogVocabulary, Vocabulary};
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
    /// The vocabulary proposals are written in (the log's as applied here; raft drops
    /// one that lands after a switch).
    vocabulary: LiveVocabulary,
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
        vocabulary: LiveVocabulary,
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
        let log = self.vocabulary.log();
        let vocabulary = log.vocabulary;
        let data = self.write_request(vocabulary, waiter.id(), op, auth)?;
        let mut taken = self.propose_quietly(vocabulary, data, waiter.id());
        let outcome = self.settle_written(waiter, done, log).await;
        let data = match taken.try_recv() {
            Ok(Err(RaftError::FormatSwitched { data })) => data,
            Ok(Err(e)) => {
                self.metrics.proposal_failed();
                return Err(raft_err(e));
            }
            // Taken into the log (or raft has not answered yet and the wait ended).
            Ok(Ok(())) | Err(_) => return outcome,
        };
        // The leader's log switched vocabulary first: the same request again, in the new
        // one, once the switch applied here.
        let now = self.switched_from(vocabulary).await?;
        let (_, op, auth) = read_request(vocabulary, &data)?;
        let (waiter, done) = self.waiters.register();
        let data = self.write_request(now.vocabulary, waiter.id(), op, auth)?;
        if self
            .propose_once(now.vocabulary, Written::Request(data))
            .await?
            .is_err()
        {
            self.metrics.proposal_failed();
            return Err(EtcdError::LeaderChanged);
        }
        self.settle_written(waiter, done, now).await
    }

    /// Proposes the request `data` (written in `vocabulary`) for the waiter `id`
    /// without waking its caller when raft takes it: the caller waits only for the
    /// outcome the apply path gives. A refusal completes the waiter at once, with a
    /// stand-in outcome; the receiver returned holds raft's answer, the refusal's reason
    /// with it (filled before the waiter is completed, and never polled before, so
    /// raft's "taken" wakes no one).
    fn propose_quietly(
        &self,
        vocabulary: Vocabulary,
        data: Vec<u8>,
        id: u64,
    ) -> oneshot::Receiver<Result<(), RaftError>> {
        let (tx, taken) = oneshot::channel();
        let mut answer = RaftAnswer {
            waiters: self.waiters.clone(),
            id,
            tx: Some(tx),
        };
        self.raft
            .propose(data, Some(vocabulary.format()), move |r| answer.tell(r));
        taken
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
        let log = self.vocabulary.log();
        let vocabulary = log.vocabulary;
        let written = match vocabulary {
            // etcd's type numbers and JSON context, which raft-rs never decodes.
            Vocabulary::Etcd => {
                Written::EtcdConfChange(crate::domains::membership::etcd_conf_change::write(
                    waiter.id(),
                    change_type,
                    id,
                    &ctx,
                ))
            }
            Vocabulary::Oxcd => {
                ctx.request_id = waiter.id();
                let mut cc = ConfChange::default();
                cc.set_change_type(change_type);
                cc.node_id = id;
                cc.context = ctx.encode_to_vec().into();
                Written::ConfChange(cc)
            }
        };
        self.propose_or_retry_later(vocabulary, written).await?;
        members_of(self.settle_written(waiter, done, log).await?)
    }

    /// Proposes new peer URLs for a member and waits until applied here: in oxcd's
    /// vocabulary a normal entry, in etcd's etcd's UpdateNode conf change (raft's
    /// configuration is untouched either way).
    pub async fn propose_member_update(
        &self,
        update: MemberUpdate,
    ) -> Result<Vec<MemberInfo>, EtcdError> {
        if self.vocabulary.get() == Vocabulary::Oxcd {
            return self.propose(update, None).await;
        }
        let (waiter, done) = self.waiters.register();
        let log = self.vocabulary.log();
        let written = Written::EtcdConfChange(
            crate::domains::membership::etcd_conf_change::write_update(waiter.id(), &update),
        );
        self.propose_or_retry_later(Vocabulary::Etcd, written)
            .await?;
        members_of(self.settle_written(waiter, done, log).await?)
    }

    /// The log's vocabulary as applied here, which proposals are written in.
    pub fn vocabulary(&self) -> Vocabulary {
        self.vocabulary.get()
    }

    /// On the leader: appends a switch of the log's vocabulary to `to`
    /// ([`crate::machine::vocabulary`]); returns once raft took it into the log.
    pub async fn switch_vocabulary(&self, to: Vocabulary) -> Result<(), EtcdError> {
        let (tx, accepted) = oneshot::channel();
        self.raft.switch_format(to.format(), move |r| {
            let _ = tx.send(r);
        });
        match accepted.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(raft_err(e)),
            Err(_) => Err(EtcdError::Stopped),
        }
    }

    /// Request `id`'s `op` for `auth`, written in `vocabulary`.
    fn write_request(
        &self,
        vocabulary: Vocabulary,
        id: u64,
        op: Op,
        auth: Option<RequestAuth>,
    ) -> Result<Vec<u8>, EtcdError> {
        let data = match vocabulary {
            Vocabulary::Oxcd => InternalRequest {
                id,
                op: Some(op),
                auth,
            }
            .encode_to_vec(),
            Vocabulary::Etcd => etcd_entries::write(id, op, auth).map_err(|e| {
                tracing::warn!("{e}");
                EtcdError::NotCapable
            })?,
        };
        if data.len() > self.limits.max_request_bytes {
            return Err(EtcdError::RequestTooLarge);
        }
        Ok(data)
    }

    /// Proposes `written` (written in `vocabulary`) and waits until raft took it into
    /// its log; `Err(data)` inside when the leader's log switched vocabulary first (the
    /// entry would be read in the other one), with the entry's data given back.
    async fn propose_once(
        &self,
        vocabulary: Vocabulary,
        written: Written,
    ) -> Result<Result<(), Vec<u8>>, EtcdError> {
        let (tx, accepted) = oneshot::channel();
        let done = move |r| {
            let _ = tx.send(r);
        };
        let format = Some(vocabulary.format());
        match written {
            Written::Request(data) => self.raft.propose(data, format, done),
            Written::ConfChange(cc) => self.raft.propose_conf_change(cc, format, done),
            Written::EtcdConfChange(data) => {
                self.raft.propose_conf_change_bytes(data, format, done)
            }
        }
        match accepted.await {
            Ok(Ok(())) => Ok(Ok(())),
            Ok(Err(RaftError::FormatSwitched { data })) => Ok(Err(data)),
            Ok(Err(e)) => {
                self.metrics.proposal_failed();
                Err(raft_err(e))
            }
            Err(_) => {
                self.metrics.proposal_failed();
                Err(EtcdError::Stopped)
            }
        }
    }

    /// [`Writes::propose_once`] for a membership change, which is not written again
    /// after a switch: the caller is told to retry (a conf change and a switch at once
    /// are rare).
    async fn propose_or_retry_later(
        &self,
        vocabulary: Vocabulary,
        written: Written,
    ) -> Result<(), EtcdError> {
        self.propose_once(vocabulary, written).await?.map_err(|_| {
            self.metrics.proposal_failed();
            EtcdError::LeaderChanged
        })
    }

    /// The vocabulary after the switch away from `old` has applied here.
    async fn switched_from(&self, old: Vocabulary) -> Result<LogVocabulary, EtcdError> {
        let mut live = self.vocabulary.subscribe();
        let switched = live.wait_for(|v| v.vocabulary != old);
        match tokio::time::timeout(self.limits.request_timeout, switched).await {
            Ok(Ok(now)) => Ok(*now),
            Ok(Err(_)) => Err(EtcdError::Stopped),
            Err(_) => {
                self.metrics.proposal_failed();
                Err(EtcdError::Timeout)
            }
        }
    }

    /// [`Writes::settle`] for an entry written in the vocabulary of `written`. Once a
    /// switch away from it has applied here, an entry not applied yet never will be: the
    /// leader drops a proposal forwarded to it in the old vocabulary, and this member
    /// applies in order and completes an entry's waiter before it publishes a switch
    /// after it. The request ends then with "leader changed", which clients retry,
    /// instead of at its timeout.
    async fn settle_written(
        &self,
        waiter: Registration<'_>,
        done: oneshot::Receiver<Outcome>,
        written: LogVocabulary,
    ) -> Result<Applied, EtcdError> {
        let mut live = self.vocabulary.subscribe();
        let settled = self.settle(waiter, done);
        tokio::pin!(settled);
        tokio::select! {
            biased;
            outcome = &mut settled => outcome,
            true = async { live.wait_for(|v| v.since != written.since).await.is_ok() } => {
                // Completed in the batch that published the switch: its answer is there.
                match (&mut settled).now_or_never() {
                    Some(outcome) => outcome,
                    None => {
                        self.metrics.proposal_failed();
                        Err(EtcdError::LeaderChanged)
                    }
                }
            }
        }
    }

    /// Waits for the outcome of a proposal raft took into its log. The waiter is
    /// removed however this ends, the caller going away included (the registration's
    /// drop).
    async fn settle(
        &self,
        waiter: Registration<'_>,
        done: oneshot::Receiver<Outcome>,
    ) -> Result<Applied, EtcdError> {
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

/// Raft's answer to a proposal made by [`Writes::propose_quietly`]: kept for the
/// caller, and a refusal (or raft going away without answering) completes the waiter.
struct RaftAnswer {
    waiters: Arc<Waiters>,
    id: u64,
    tx: Option<oneshot::Sender<Result<(), RaftError>>>,
}

impl RaftAnswer {
    /// Keeps raft's answer `r` for the caller (the first answer only); a refusal also
    /// completes the waiter.
    fn tell(&mut self, r: Result<(), RaftError>) {
        let Some(tx) = self.tx.take() else {
            return;
        };
        let refused = r.is_err();
        let _ = tx.send(r);
        if refused {
            self.waiters.complete(self.id, Err(EtcdError::Stopped));
        }
    }
}

impl Drop for RaftAnswer {
    fn drop(&mut self) {
        self.tell(Err(RaftError::Stopped));
    }
}

/// An entry written for raft in one vocabulary.
enum Written {
    /// A request: a normal entry.
    Request(Vec<u8>),
    /// A membership change in oxcd's vocabulary.
    ConfChange(ConfChange),
    /// A membership change in etcd's (its type numbers, which raft-rs cannot decode).
    EtcdConfChange(Vec<u8>),
}

/// The request `data` holds, written in `vocabulary`: its id, op and caller.
fn read_request(
    vocabulary: Vocabulary,
    data: &[u8],
) -> Result<(u64, Op, Option<RequestAuth>), EtcdError> {
    let read = match vocabulary {
        Vocabulary::Oxcd => InternalRequest::decode(data)
            .ok()
            .and_then(|r| Some((r.id, r.op?, r.auth))),
        Vocabulary::Etcd => match etcd_entries::read(data) {
            Ok(etcd_entries::EtcdEntry::Request { id, op, caller }) => Some((id, op, caller)),
            _ => None,
        },
    };
    read.ok_or_else(|| {
        tracing::error!("a proposal given back by raft does not read as what was written");
        EtcdError::Corrupt
    })
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
