//! The member list as requests read it: the replicated membership as applied here, or,
//! while it is empty (a backend from before the membership tables), the bootstrap list.

use std::sync::Arc;

use oxcd_api::oxcdpb::MemberInfo;

use super::Membership;

/// Lists the members. Cheap to clone.
#[derive(Clone)]
pub struct Roster {
    membership: Arc<Membership>,
    bootstrap: Arc<[MemberInfo]>,
}

impl Roster {
    /// The members `membership` holds, or `bootstrap` while it holds none.
    pub fn new(membership: Arc<Membership>, bootstrap: Vec<MemberInfo>) -> Roster {
        let mut bootstrap = bootstrap;
        bootstrap.sort_by_key(|m| m.id);
        Roster {
            membership,
            bootstrap: bootstrap.into(),
        }
    }

    /// The replicated membership.
    pub fn membership(&self) -> &Arc<Membership> {
        &self.membership
    }

    /// The members, by id.
    pub fn members(&self) -> Vec<MemberInfo> {
        let state = self.membership.state();
        if state.members.is_empty() {
            self.bootstrap.to_vec()
        } else {
            state.members.values().cloned().collect()
        }
    }

    /// The peer URLs of member `id` (none for an unknown member, or id 0: no leader).
    pub fn peer_urls_of(&self, id: u64) -> Vec<String> {
        if id == 0 {
            return Vec::new();
        }
        self.members()
            .into_iter()
            .find(|m| m.id == id)
            .map(|m| m.peer_urls)
            .unwrap_or_default()
    }

    /// The voting members' ids (read by the leader on every keepalive: no member
    /// record is copied).
    pub fn voters(&self) -> Vec<u64> {
        let state = self.membership.state();
        if state.members.is_empty() {
            self.bootstrap
                .iter()
                .filter(|m| !m.is_learner)
                .map(|m| m.id)
                .collect()
        } else {
            state.voters()
        }
    }
}
