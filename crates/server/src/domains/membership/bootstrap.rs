//! Who is in the cluster: the member list a cluster was bootstrapped with, this member's
//! id, and the cluster id. A new member derives it from `--initial-cluster` (ids as etcd
//! derives them); a restarted member reads what its WAL recorded and ignores the
//! `--initial-*` flags, as etcd does, so it rejoins as itself.

use std::collections::HashMap;

use oxcd_api::oxcdpb::{MemberInfo, MemberList};
use prost::Message as _;

use crate::domains::membership::ids;
use oxcd_config::settings::Settings;

/// Why the cluster a member starts with could not be known.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    /// `--name` is not in `--initial-cluster` (etcd's text).
    #[error("couldn't find local name {0:?} in the initial cluster configuration")]
    NameNotInInitialCluster(String),
    /// The member list the WAL recorded does not decode.
    #[error("the WAL's member list does not decode: {0}")]
    RecordedListUndecodable(prost::DecodeError),
}

/// The cluster as this member knows it at start: the bootstrap list (from the flags,
/// the WAL, or the cluster it joins). The replicated membership takes over once applied.
#[derive(Debug, Clone)]
pub struct InitialCluster {
    /// This member's id.
    pub me: u64,
    /// The cluster id.
    pub cluster_id: u64,
    /// Every member, this one included.
    pub members: Vec<MemberInfo>,
    /// The running cluster it joins is an etcd cluster (its members answered in etcd's
    /// peer protocol): the log is in etcd's vocabulary.
    pub joins_etcd: bool,
}

impl InitialCluster {
    /// The cluster `--initial-cluster` describes, for a member starting with no data.
    pub fn bootstrap(s: &Settings) -> Result<InitialCluster, BootstrapError> {
        let mut members = Vec::new();
        for (name, urls) in &s.initial_cluster {
            let id = ids::member_id(urls, &s.initial_cluster_token);
            let client_urls = if *name == s.name {
                s.advertise_client_urls.clone()
            } else {
                Vec::new()
            };
            members.push(MemberInfo {
                id,
                name: name.clone(),
                peer_urls: urls.clone(),
                client_urls,
                is_learner: false,
            });
        }
        let me = members
            .iter()
            .find(|m| m.name == s.name)
            .map(|m| m.id)
            .ok_or_else(|| BootstrapError::NameNotInInitialCluster(s.name.clone()))?;
        let ids: Vec<u64> = members.iter().map(|m| m.id).collect();
        Ok(InitialCluster {
            me,
            cluster_id: ids::cluster_id(&ids),
            members,
            joins_etcd: false,
        })
    }

    /// The cluster recorded in a member's WAL.
    pub fn recorded(
        me: u64,
        cluster_id: u64,
        encoded: &[u8],
    ) -> Result<InitialCluster, BootstrapError> {
        let list = MemberList::decode(encoded).map_err(BootstrapError::RecordedListUndecodable)?;
        Ok(InitialCluster {
            me,
            cluster_id,
            members: list.members,
            joins_etcd: false,
        })
    }

    /// The member list as recorded in the WAL.
    pub fn encode(&self) -> Vec<u8> {
        MemberList {
            members: self.members.clone(),
        }
        .encode_to_vec()
    }

    /// Every member's id.
    pub fn ids(&self) -> Vec<u64> {
        self.members.iter().map(|m| m.id).collect()
    }

    /// The other members' first peer URL, by id.
    pub fn peers(&self) -> HashMap<u64, String> {
        self.members
            .iter()
            .filter(|m| m.id != self.me)
            .filter_map(|m| m.peer_urls.first().map(|u| (m.id, u.clone())))
            .collect()
    }
}
