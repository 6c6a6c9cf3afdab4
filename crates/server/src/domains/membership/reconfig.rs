//! `--strict-reconfig-check`: etcd's rules for refusing, before it is proposed, a
//! membership change that could cost the cluster its quorum. Pure functions of the
//! membership, of which members have started (published their attributes) and of how
//! long this member has been connected to each peer (etcd's `ActiveSince`); and
//! [`Reconfig`], the parts those checks and a forwarded promotion are given.
//!
//! - Adding a voter needs a quorum of the voters, counting the new one, started, and a
//!   connection to every voter for at least [`HEALTH_INTERVAL`] (the seed-004 accident:
//!   adding a member while another is down makes a cluster that cannot reach quorum).
//! - Removing a voter needs a quorum of the rest started and, unless the member removed
//!   is down, enough connected voters left to make quorum without it.
//! - Promoting a learner needs a quorum of the future voters started.
//! - Learners are added and removed without these checks: they never count in a quorum.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use oxcd_api::errors::EtcdError;

use super::MembershipState;
use crate::peer::PeerDialer;
use crate::peer::health::PeerHealth;

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

/// How long a peer must have been connected to count as healthy (etcd's).
pub const HEALTH_INTERVAL: Duration = Duration::from_secs(5);

/// What the checks know of the cluster's health, from this member's side.
pub struct Health<'a> {
    /// This member's id.
    pub me: u64,
    /// The members that have started (published their name and client URLs).
    pub started: &'a BTreeSet<u64>,
    /// Since when this member has been connected to a peer (None: not connected).
    pub connected_since: &'a dyn Fn(u64) -> Option<Instant>,
    /// The time now.
    pub now: Instant,
}

impl Health<'_> {
    fn connected_long_enough(&self, id: u64) -> bool {
        id == self.me
            || (self.connected_since)(id)
                .is_some_and(|t| self.now.saturating_duration_since(t) >= HEALTH_INTERVAL)
    }

    fn connected_voters(&self, state: &MembershipState) -> usize {
        state
            .voters()
            .into_iter()
            .filter(|id| self.connected_long_enough(*id))
            .count()
    }

    fn started_voters(&self, state: &MembershipState, except: Option<u64>) -> usize {
        state
            .voters()
            .into_iter()
            .filter(|id| Some(*id) != except && self.started.contains(id))
            .count()
    }
}

/// Whether a member (a learner when `learner`) may be added.
pub fn may_add(state: &MembershipState, learner: bool, h: &Health<'_>) -> Result<(), EtcdError> {
    if !learner {
        let members = state.voters().len() + 1;
        let started = h.started_voters(state, None);
        // One started member of two: etcd's way of growing a restored one-member
        // cluster.
        let restoring = started == 1 && members == 2;
        if !restoring && started < members / 2 + 1 {
            return Err(EtcdError::MemberNotEnoughStarted);
        }
    }
    if h.connected_voters(state) != state.voters().len() {
        return Err(EtcdError::Unhealthy);
    }
    Ok(())
}

/// Whether the member `id` may be removed.
pub fn may_remove(state: &MembershipState, id: u64, h: &Health<'_>) -> Result<(), EtcdError> {
    if state.members.get(&id).is_some_and(|m| m.is_learner) {
        return Ok(());
    }
    let members = state.voters().iter().filter(|v| **v != id).count();
    if h.started_voters(state, Some(id)) < members / 2 + 1 {
        return Err(EtcdError::MemberNotEnoughStarted);
    }
    // A member that is down is not part of the active quorum: removing it is safe.
    if id != h.me && (h.connected_since)(id).is_none() {
        return Ok(());
    }
    let voters = state.voters().len();
    let active = h.connected_voters(state);
    if active.saturating_sub(1) < 1 + voters.saturating_sub(1) / 2 {
        return Err(EtcdError::Unhealthy);
    }
    Ok(())
}

/// Whether the learner `id` may be promoted (that it has caught up is the leader's
/// check, [`learner_ready`]).
pub fn may_promote(state: &MembershipState, h: &Health<'_>) -> Result<(), EtcdError> {
    // The learner counts as a started voter of the future configuration.
    let members = state.voters().len() + 1;
    let started = h.started_voters(state, None) + 1;
    if started < members / 2 + 1 {
        return Err(EtcdError::MemberNotEnoughStarted);
    }
    Ok(())
}

/// The leader's check that `id` has caught up (etcd: its match index is at least 90%
/// of the leader's): `progress` is each member's match index, `leader` the leader.
pub fn learner_ready(
    progress: &std::collections::BTreeMap<u64, u64>,
    leader: u64,
    id: u64,
) -> Result<(), EtcdError> {
    let Some(&learner) = progress.get(&id) else {
        return Err(EtcdError::MemberNotFound);
    };
    let lead = progress.get(&leader).copied().unwrap_or(0);
    if (learner as f64) < (lead as f64) * 0.9 {
        return Err(EtcdError::LearnerNotReady);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::oxcdpb::MemberInfo;
    use std::collections::BTreeMap;

    fn state(voters: &[u64], learners: &[u64]) -> MembershipState {
        let mut s = MembershipState::default();
        for (&id, learner) in voters
            .iter()
            .map(|v| (v, false))
            .chain(learners.iter().map(|l| (l, true)))
        {
            s.members.insert(
                id,
                MemberInfo {
                    id,
                    is_learner: learner,
                    ..Default::default()
                },
            );
        }
        s
    }

    fn check<T>(
        started: &[u64],
        connected: &[u64],
        f: impl FnOnce(&Health<'_>) -> Result<T, EtcdError>,
    ) -> Result<T, EtcdError> {
        let now = Instant::now();
        let long_ago = now.checked_sub(Duration::from_secs(60)).unwrap_or(now);
        let started: BTreeSet<u64> = started.iter().copied().collect();
        let connected: Vec<u64> = connected.to_vec();
        let since = move |id: u64| connected.contains(&id).then_some(long_ago);
        f(&Health {
            me: 1,
            started: &started,
            connected_since: &since,
            now,
        })
    }

    #[test]
    fn adding_a_voter_while_a_member_is_down_is_refused() {
        let s = state(&[1, 2, 3], &[]);
        assert_eq!(
            check(&[1, 2, 3], &[2, 3], |h| may_add(&s, false, h)),
            Ok(())
        );
        // Seed 004: member 3 is down.
        assert_eq!(
            check(&[1, 2, 3], &[2], |h| may_add(&s, false, h)),
            Err(EtcdError::Unhealthy)
        );
        // Two of four would be started: not a quorum.
        assert_eq!(
            check(&[1, 2], &[2, 3], |h| may_add(&s, false, h)),
            Err(EtcdError::MemberNotEnoughStarted)
        );
        // A learner never counts in a quorum, but the links must still be up.
        assert_eq!(check(&[1, 2], &[2, 3], |h| may_add(&s, true, h)), Ok(()));
        assert_eq!(
            check(&[1, 2, 3], &[2], |h| may_add(&s, true, h)),
            Err(EtcdError::Unhealthy)
        );
    }

    #[test]
    fn a_one_member_cluster_can_grow() {
        let s = state(&[1], &[]);
        assert_eq!(check(&[1], &[], |h| may_add(&s, false, h)), Ok(()));
        // Its second member added but not started yet: a third waits for it.
        let s = state(&[1, 2], &[]);
        assert_eq!(
            check(&[1], &[], |h| may_add(&s, false, h)),
            Err(EtcdError::MemberNotEnoughStarted)
        );
    }

    #[test]
    fn removing_keeps_a_quorum_of_started_and_connected_voters() {
        let s = state(&[1, 2, 3], &[4]);
        assert_eq!(check(&[1, 2, 3], &[2, 3], |h| may_remove(&s, 3, h)), Ok(()));
        // A member that is down may go.
        assert_eq!(check(&[1, 2, 3], &[2], |h| may_remove(&s, 3, h)), Ok(()));
        // Removing a live member while another is down would leave one of two.
        assert_eq!(
            check(&[1, 2, 3], &[3], |h| may_remove(&s, 3, h)),
            Err(EtcdError::Unhealthy)
        );
        // The rest must have a started quorum.
        assert_eq!(
            check(&[1], &[2, 3], |h| may_remove(&s, 3, h)),
            Err(EtcdError::MemberNotEnoughStarted)
        );
        // Learners go freely.
        assert_eq!(check(&[1], &[], |h| may_remove(&s, 4, h)), Ok(()));
    }

    #[test]
    fn promotion_needs_a_started_quorum_and_a_learner_caught_up() {
        let s = state(&[1, 2, 3], &[4]);
        assert_eq!(check(&[1, 2], &[], |h| may_promote(&s, h)), Ok(()));
        assert_eq!(
            check(&[1], &[], |h| may_promote(&s, h)),
            Err(EtcdError::MemberNotEnoughStarted)
        );
        let progress: BTreeMap<u64, u64> = [(1, 1000), (2, 1000), (4, 899)].into();
        assert_eq!(
            learner_ready(&progress, 1, 4),
            Err(EtcdError::LearnerNotReady)
        );
        let progress: BTreeMap<u64, u64> = [(1, 1000), (4, 900)].into();
        assert_eq!(learner_ready(&progress, 1, 4), Ok(()));
        assert_eq!(
            learner_ready(&progress, 1, 9),
            Err(EtcdError::MemberNotFound)
        );
    }
}
