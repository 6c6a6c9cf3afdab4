//! What the lease service and the leader's lease drivers ([`super::expiry`],
//! [`super::renewals`]) are given: the lessor and the member's narrow handles.

use std::sync::Arc;
use std::time::Duration;

use super::Lessor;
use crate::domains::auth::caller::Callers;
use crate::domains::membership::roster::Roster;
use crate::machine::reads::Reads;
use crate::machine::role::Role;
use crate::machine::writes::Writes;

/// What the lease service and the leader's lease drivers work with.
pub struct LeaseHandles {
    /// Every lease and its keys.
    pub leases: Arc<Lessor>,
    /// Who makes a request, and the permission checks.
    pub callers: Callers,
    /// Reads: the barrier, headers, this member's ids.
    pub reads: Reads,
    /// Proposals.
    pub writes: Writes,
    /// Who leads (only the leader renews from memory and revokes).
    pub role: Role,
    /// The voters (a leader renews from memory only while a quorum is heard) and the
    /// leader's peer URL (followers forward keepalives to it).
    pub roster: Roster,
    /// `--election-timeout`: a new leader's grace period for every lease.
    pub election_timeout: Duration,
    /// How long a keepalive forwarded to an etcd leader is retried.
    pub request_timeout: Duration,
    /// The log's vocabulary: in etcd's, keepalives are never replicated and expiry is a
    /// plain revocation, as etcd 3.5 does them.
    pub vocabulary: crate::machine::vocabulary::LiveVocabulary,
}
