//! What the version loops, Status, `/version` and the Downgrade RPC are given.

use std::time::Duration;

use super::release::Release;
use crate::domains::membership::roster::Roster;
use crate::machine::reads::Reads;
use crate::machine::role::Role;
use crate::machine::writes::Writes;
use crate::peer::PeerDialer;

/// The version domain's handles.
#[derive(Clone)]
pub struct VersionHandles {
    /// The store the cluster and storage versions are read from.
    pub reads: Reads,
    /// Proposals of the cluster version and downgrades.
    pub writes: Writes,
    /// Who leads: only the leader decides.
    pub role: Role,
    /// The members asked for their versions.
    pub roster: Roster,
    /// The release this member acts as.
    pub release: Release,
    /// Dials peers to ask their versions.
    pub dialer: PeerDialer,
    /// How long each peer has to answer.
    pub request_timeout: Duration,
    /// The log's vocabulary, which the cluster version decides.
    pub vocabulary: crate::machine::vocabulary::LiveVocabulary,
    /// The streams etcd peers attached here (any: an etcd member is in the cluster).
    pub etcd_streams: std::sync::Arc<crate::peer::etcd::streams::EtcdStreams>,
}
