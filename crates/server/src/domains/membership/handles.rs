//! What the Cluster service, the auto-promotion ([`super::auto_promote`]) and promotions
//! forwarded by peers are given: the member's narrow handles and the reconfiguration
//! checks' parts.

use std::time::Duration;

use super::reconfig::Reconfig;
use super::roster::Roster;
use crate::domains::auth::caller::Callers;
use crate::machine::reads::Reads;
use crate::machine::role::Role;
use crate::machine::writes::Writes;

/// What the Cluster service, the auto-promotion and forwarded promotions work with.
pub struct MembershipHandles {
    /// Who makes a request (changes need root while auth is on).
    pub callers: Callers,
    /// Reads: headers, the published member attributes, this member's ids.
    pub reads: Reads,
    /// Proposals, membership changes among them.
    pub writes: Writes,
    /// Who leads (only the leader knows whether a learner caught up), the followers'
    /// progress.
    pub role: Role,
    /// The members.
    pub roster: Roster,
    /// The checks made before a change is proposed, and the dialer a promotion is
    /// forwarded to the leader with.
    pub reconfig: Reconfig,
    /// This member's advertised client URLs (listed before it has published them).
    pub client_urls: Vec<String>,
    /// How long a forwarded promotion is retried.
    pub request_timeout: Duration,
    /// The release this member acts as (3.6 checks the caller of MemberList).
    pub release: crate::domains::version::release::Release,
}
