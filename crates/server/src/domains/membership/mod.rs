//! Who is in the cluster, as replicated state (etcd's RaftCluster): the members with
//! their peer and client URLs and whether each is a learner, and the ids removed from
//! the cluster, which may never come back. Changes arrive only as committed raft conf
//! changes, applied in log order by the apply thread, which validates each with etcd's
//! rules ([`MembershipState::validate`]) and writes the tables `members` and
//! `members_removed` in the batch's transaction, with the applied index
//! ([`table`]). The tables are in the table registry, so snapshots carry them and the
//! state hash compares them.
//!
//! Invariants:
//! - A removed id is never a member again, and a member's peer URLs are its own.
//! - The mirror changes only while a log entry is applied (or at a load), so members at
//!   the same applied index hold the same membership; every check reads the entry and
//!   the state, never this member's flags (a limit such as `--max-learners` travels in
//!   the entry).

pub mod apply;
pub mod auto_promote;
pub mod bootstrap;
pub mod etcd_conf_change;
pub mod etcd_json;
pub mod handles;
pub mod ids;
pub mod reconfig;
pub mod requests;
pub mod roster;
pub mod service;
pub mod table;

pub use handles::MembershipHandles;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard};

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::MemberInfo;

/// Why a membership change was refused when applied: etcd's membership errors (their
/// texts are etcd's, for logs; clients get the matching gRPC errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ChangeRefused {
    /// The id was removed before.
    #[error("membership: ID removed")]
    IdRemoved,
    /// The id is already a member.
    #[error("membership: ID exists")]
    IdExists,
    /// No member has this id.
    #[error("membership: ID not found")]
    IdNotFound,
    /// Another member has one of these peer URLs.
    #[error("membership: peerURL exists")]
    PeerUrlExists,
    /// Only a learner can be promoted.
    #[error("membership: can only promote a learner member")]
    NotLearner,
    /// One learner more than the limit.
    #[error("membership: too many learner members in cluster")]
    TooManyLearners,
}

impl From<ChangeRefused> for EtcdError {
    /// The gRPC error etcd answers for each (etcd's `toGRPCErrorMap`).
    fn from(r: ChangeRefused) -> EtcdError {
        match r {
            ChangeRefused::IdRemoved | ChangeRefused::IdNotFound => EtcdError::MemberNotFound,
            ChangeRefused::IdExists => EtcdError::MemberExist,
            ChangeRefused::PeerUrlExists => EtcdError::PeerUrlExist,
            ChangeRefused::NotLearner => EtcdError::MemberNotLearner,
            ChangeRefused::TooManyLearners => EtcdError::TooManyLearners,
        }
    }
}

/// A membership change, as a conf change entry and its context describe it.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A new member, a learner or a voter.
    Add {
        /// The member (`is_learner` set for a learner).
        member: MemberInfo,
        /// The most learners allowed, as the proposer's `--max-learners` said.
        max_learners: u32,
    },
    /// A learner becomes a voter.
    Promote {
        /// The learner.
        id: u64,
    },
    /// A member leaves, for good.
    Remove {
        /// The member.
        id: u64,
    },
    /// A member's peer URLs change.
    Update {
        /// The member.
        id: u64,
        /// Its new peer URLs.
        peer_urls: Vec<String>,
    },
}

impl Change {
    /// The member the change is about.
    pub fn id(&self) -> u64 {
        match self {
            Change::Add { member, .. } => member.id,
            Change::Promote { id } | Change::Remove { id } | Change::Update { id, .. } => *id,
        }
    }
}

/// The membership at one applied index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MembershipState {
    /// Members by id.
    pub members: BTreeMap<u64, MemberInfo>,
    /// Ids removed from the cluster.
    pub removed: BTreeSet<u64>,
}

impl MembershipState {
    /// Records a member's published name and client URLs in its row, as etcd's
    /// `UpdateAttributes` does; returns the member, or None if it is not one.
    pub fn set_attributes(
        &mut self,
        a: &oxcd_api::oxcdpb::MemberAttributes,
    ) -> Option<&MemberInfo> {
        let m = self.members.get_mut(&a.id)?;
        m.name = a.name.clone();
        m.client_urls = a.client_urls.clone();
        Some(m)
    }

    /// Whether `change` may apply, by etcd's rules (`ValidateConfigurationChange`).
    pub fn validate(&self, change: &Change) -> Result<(), ChangeRefused> {
        let id = change.id();
        if self.removed.contains(&id) {
            return Err(ChangeRefused::IdRemoved);
        }
        match change {
            Change::Add {
                member,
                max_learners,
            } => {
                if self.members.contains_key(&id) {
                    return Err(ChangeRefused::IdExists);
                }
                if self.peer_url_taken(&member.peer_urls, None) {
                    return Err(ChangeRefused::PeerUrlExists);
                }
                if member.is_learner && self.learners() + 1 > *max_learners as usize {
                    return Err(ChangeRefused::TooManyLearners);
                }
            }
            Change::Promote { .. } => match self.members.get(&id) {
                None => return Err(ChangeRefused::IdNotFound),
                Some(m) if !m.is_learner => return Err(ChangeRefused::NotLearner),
                Some(_) => {}
            },
            Change::Remove { .. } => {
                if !self.members.contains_key(&id) {
                    return Err(ChangeRefused::IdNotFound);
                }
            }
            Change::Update { peer_urls, .. } => {
                if !self.members.contains_key(&id) {
                    return Err(ChangeRefused::IdNotFound);
                }
                if self.peer_url_taken(peer_urls, Some(id)) {
                    return Err(ChangeRefused::PeerUrlExists);
                }
            }
        }
        Ok(())
    }

    /// Applies a change [`MembershipState::validate`] accepted.
    pub fn apply(&mut self, change: &Change) {
        match change {
            Change::Add { member, .. } => {
                self.members.insert(member.id, member.clone());
            }
            Change::Promote { id } => {
                if let Some(m) = self.members.get_mut(id) {
                    m.is_learner = false;
                }
            }
            Change::Remove { id } => {
                self.members.remove(id);
                self.removed.insert(*id);
            }
            Change::Update { id, peer_urls } => {
                if let Some(m) = self.members.get_mut(id) {
                    m.peer_urls = peer_urls.clone();
                }
            }
        }
    }

    /// Every member's peer URLs, by id.
    pub fn peer_urls(&self) -> PeerUrls {
        self.members
            .iter()
            .map(|(id, m)| (*id, m.peer_urls.clone()))
            .collect()
    }

    /// How many members are learners.
    pub fn learners(&self) -> usize {
        self.members.values().filter(|m| m.is_learner).count()
    }

    /// The voting members' ids.
    pub fn voters(&self) -> Vec<u64> {
        self.members
            .values()
            .filter(|m| !m.is_learner)
            .map(|m| m.id)
            .collect()
    }

    fn peer_url_taken(&self, urls: &[String], except: Option<u64>) -> bool {
        self.members
            .values()
            .filter(|m| Some(m.id) != except)
            .flat_map(|m| &m.peer_urls)
            .any(|u| urls.contains(u))
    }
}

/// The members' peer URLs by id.
pub type PeerUrls = BTreeMap<u64, Vec<String>>;

/// The membership mirror: what the tables hold, for the checks and the member list; its
/// peer URLs are published for the peer transport.
#[derive(Debug)]
pub struct Membership {
    state: RwLock<MembershipState>,
    peers: tokio::sync::watch::Sender<PeerUrls>,
    removed_self: tokio::sync::watch::Sender<bool>,
    /// This member's id (0: not known: tools, tests).
    me: AtomicU64,
    /// Whether this member is a learner, kept with every change (read per request).
    learner: AtomicBool,
}

impl Default for Membership {
    fn default() -> Membership {
        Membership::new(MembershipState::default())
    }
}

impl Membership {
    /// A membership holding `state`.
    pub fn new(state: MembershipState) -> Membership {
        let peers = tokio::sync::watch::Sender::new(state.peer_urls());
        Membership {
            state: RwLock::new(state),
            peers,
            removed_self: tokio::sync::watch::Sender::new(false),
            me: AtomicU64::new(0),
            learner: AtomicBool::new(false),
        }
    }

    /// The membership of member `me`, holding `state`.
    pub fn of_member(me: u64, state: MembershipState) -> Membership {
        let m = Membership::new(state);
        m.me.store(me, Ordering::Release);
        m.publish(&m.state());
        m
    }

    /// Whether this member is a learner (etcd then serves only what learners may).
    pub fn is_learner(&self) -> bool {
        self.learner.load(Ordering::Acquire)
    }

    /// This member was removed from the cluster (it applied its removal, or a peer
    /// refused it as removed): it must stop.
    pub fn stop_as_removed(&self) {
        self.removed_self.send_replace(true);
    }

    /// Becomes true when this member learns it was removed.
    pub fn removed_self(&self) -> tokio::sync::watch::Receiver<bool> {
        self.removed_self.subscribe()
    }

    /// The members' peer URLs, updated as changes apply.
    pub fn peer_urls(&self) -> tokio::sync::watch::Receiver<PeerUrls> {
        self.peers.subscribe()
    }

    fn publish(&self, state: &MembershipState) {
        self.peers.send_replace(state.peer_urls());
        let me = self.me.load(Ordering::Acquire);
        let learner = state.members.get(&me).is_some_and(|m| m.is_learner);
        self.learner.store(learner, Ordering::Release);
    }

    /// The current membership, for reading.
    pub fn state(&self) -> RwLockReadGuard<'_, MembershipState> {
        // Changes are validated before anything changes: a poisoned lock holds
        // consistent data.
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the mirror (a load, a snapshot installed).
    pub fn replace(&self, state: MembershipState) {
        self.publish(&state);
        *self.state.write().unwrap_or_else(|p| p.into_inner()) = state;
    }

    /// Takes a member's published name and client URLs into its row, as etcd's
    /// `UpdateAttributes` does (a removed or unknown member is left alone); the member as
    /// it now is, for the caller to write.
    pub fn set_attributes(&self, a: &oxcd_api::oxcdpb::MemberAttributes) -> Option<MemberInfo> {
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        state.set_attributes(a).cloned()
    }

    /// Validates `change` and applies it to the mirror; the caller writes the rows.
    pub fn apply(&self, change: &Change) -> Result<(), ChangeRefused> {
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        state.validate(change)?;
        state.apply(change);
        self.publish(&state);
        Ok(())
    }
}

#[cfg(test)]
mod tests;

/// The attributes (name, client URLs) members have published through raft, by id.
pub fn published(
    store: &oxcd_mvcc::Store,
) -> std::collections::HashMap<u64, oxcd_api::oxcdpb::MemberAttributes> {
    let prefix = oxcd_storage::schema::META_MEMBER_ATTRIBUTES_PREFIX;
    let rows = store.read_meta_prefix(prefix).unwrap_or_else(|e| {
        tracing::warn!("cannot read member attributes: {e}");
        Vec::new()
    });
    attributes_by_id(&rows)
}

/// The member attributes among meta `rows` (`member_attributes/<id>` keys), by id.
pub fn attributes_by_id(
    rows: &[(String, Vec<u8>)],
) -> std::collections::HashMap<u64, oxcd_api::oxcdpb::MemberAttributes> {
    use prost::Message as _;
    let prefix = oxcd_storage::schema::META_MEMBER_ATTRIBUTES_PREFIX;
    rows.iter()
        .filter(|(k, _)| k.starts_with(prefix))
        .filter_map(|(_, v)| oxcd_api::oxcdpb::MemberAttributes::decode(v.as_slice()).ok())
        .map(|a| (a.id, a))
        .collect()
}
