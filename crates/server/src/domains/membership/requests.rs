//! Membership changes as clients ask for them (etcd's `AddMember`, `RemoveMember`,
//! `UpdateMember`, `PromoteMember`): the checks made before proposing — the caller's
//! permission is the service's, `--strict-reconfig-check` ([`super::reconfig`]) and a
//! learner's readiness here — then the proposal, answered once it is applied here with
//! the members after it. What depends on the membership itself (an id removed or
//! unknown, a peer URL taken, too many learners) is checked when the change is applied,
//! the same on every member.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::peer_client::PeerClient;
use oxcd_api::oxcdpb::{ConfChangeContext, MemberInfo, MemberUpdate, PeerPromoteRequest};
use oxcd_raft::ConfChangeType;

use super::reconfig::{self, Health};
use crate::domains::membership::MembershipHandles;
use crate::peer::Refusal;
use crate::peer::transport::Link;

/// The members that have started: published a name through raft.
pub fn started(m: &MembershipHandles) -> BTreeSet<u64> {
    super::published(m.reads.store())
        .into_values()
        .filter(|a| !a.name.is_empty())
        .map(|a| a.id)
        .collect()
}

/// Runs a strict reconfiguration check (nothing when `--strict-reconfig-check=false`).
fn strict(
    m: &MembershipHandles,
    check: impl FnOnce(&super::MembershipState, &Health<'_>) -> Result<(), EtcdError>,
) -> Result<(), EtcdError> {
    if !m.reconfig.strict {
        return Ok(());
    }
    let started = started(m);
    let health = m.reconfig.health.clone();
    let since = move |id: u64| health.active_since(id);
    let h = Health {
        me: m.role.me(),
        started: &started,
        connected_since: &since,
        now: Instant::now(),
    };
    let state = m.roster.membership().state().clone();
    check(&state, &h)
}

/// etcd's id for a member added now: from its peer URLs and the time, in seconds.
pub fn new_member_id(peer_urls: &[String]) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    crate::domains::membership::ids::member_id(peer_urls, &now.to_string())
}

/// Peer URLs checked and ordered as etcd's `types.NewURLs` does.
pub fn peer_urls(urls: &[String]) -> Result<Vec<String>, EtcdError> {
    if urls.is_empty() {
        return Err(EtcdError::MemberBadUrls);
    }
    let mut out = Vec::new();
    for u in urls {
        let url = oxcd_config::flags::value::parse_url(u).map_err(|_| EtcdError::MemberBadUrls)?;
        out.push(url.text());
    }
    out.sort();
    Ok(out)
}

/// Adds a member with `urls` (a learner when `learner`); returns it and the members.
pub async fn add(
    m: &MembershipHandles,
    urls: &[String],
    learner: bool,
) -> Result<(MemberInfo, Vec<MemberInfo>), EtcdError> {
    let urls = peer_urls(urls)?;
    strict(m, |state, h| reconfig::may_add(state, learner, h))?;
    let member = MemberInfo {
        id: new_member_id(&urls),
        name: String::new(),
        peer_urls: urls,
        client_urls: Vec::new(),
        is_learner: learner,
    };
    let change_type = if learner {
        ConfChangeType::AddLearnerNode
    } else {
        ConfChangeType::AddNode
    };
    let ctx = ConfChangeContext {
        member: Some(member.clone()),
        max_learners: m.reconfig.max_learners,
        ..Default::default()
    };
    let members = m
        .writes
        .propose_conf_change(change_type, member.id, ctx)
        .await?;
    Ok((member, members))
}

/// Removes the member `id`; returns the members left.
pub async fn remove(m: &MembershipHandles, id: u64) -> Result<Vec<MemberInfo>, EtcdError> {
    strict(m, |state, h| reconfig::may_remove(state, id, h))?;
    let ctx = ConfChangeContext::default();
    m.writes
        .propose_conf_change(ConfChangeType::RemoveNode, id, ctx)
        .await
}

/// Gives the member `id` new peer URLs; returns the members.
pub async fn update(
    m: &MembershipHandles,
    id: u64,
    urls: &[String],
) -> Result<Vec<MemberInfo>, EtcdError> {
    let urls = peer_urls(urls)?;
    let update = MemberUpdate {
        id,
        peer_urls: urls,
    };
    m.writes.propose_member_update(update).await
}

/// Promotes the learner `id`, here when this member leads (only the leader knows
/// whether the learner has caught up); Err(NotLeader) otherwise.
pub async fn promote_here(m: &MembershipHandles, id: u64) -> Result<Vec<MemberInfo>, EtcdError> {
    let progress = m.role.progress().await?;
    reconfig::learner_ready(&progress, m.role.me(), id)?;
    strict(m, reconfig::may_promote)?;
    let ctx = ConfChangeContext {
        member: Some(MemberInfo {
            id,
            ..Default::default()
        }),
        is_promote: true,
        ..Default::default()
    };
    m.writes
        .propose_conf_change(ConfChangeType::AddNode, id, ctx)
        .await
}

/// Promotes the learner `id`: here when this member leads, else on the leader, retried
/// (a leader that changes meanwhile) until the request timeout.
pub async fn promote(m: &MembershipHandles, id: u64) -> Result<Vec<MemberInfo>, EtcdError> {
    match promote_here(m, id).await {
        Err(EtcdError::NotLeader) => {}
        other => return other,
    }
    let deadline = tokio::time::Instant::now() + m.request_timeout;
    while tokio::time::Instant::now() < deadline {
        let leader = m.role.leader();
        if leader == m.role.me() {
            match promote_here(m, id).await {
                Err(EtcdError::NotLeader) => {}
                other => return other,
            }
        }
        for url in m.roster.peer_urls_of(leader) {
            match promote_on(m, &url, id).await {
                Ok(members) => return Ok(members),
                Err(Some(e)) => return Err(e),
                Err(None) => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(EtcdError::Timeout)
}

/// Asks the member at `url` to promote `id`: Err(Some) is its final answer, Err(None)
/// an answer worth retrying (it no longer leads, it could not be reached).
async fn promote_on(
    m: &MembershipHandles,
    url: &str,
    id: u64,
) -> Result<Vec<MemberInfo>, Option<EtcdError>> {
    let link = Link {
        me: m.reads.ids().member_id,
        cluster_id: m.reads.ids().cluster_id,
        url: url.to_string(),
        dialer: m.reconfig.dialer.clone(),
    };
    let call = async {
        let channel = link.connect().await.map_err(|_| None)?;
        let asked = PeerClient::new(channel)
            .promote_member(link.request(PeerPromoteRequest { id }))
            .await;
        if let Err(s) = &asked
            && s.code() == tonic::Code::Unimplemented
        {
            // An etcd member: asked as etcd's followers ask it.
            let dialer = &m.reconfig.dialer;
            return crate::peer::etcd::routes::promote_on(dialer, url, id, m.request_timeout).await;
        }
        asked.map(|r| r.into_inner().members).map_err(|s| {
            let final_answers = [
                EtcdError::LearnerNotReady,
                EtcdError::MemberNotFound,
                EtcdError::MemberNotLearner,
                EtcdError::MemberNotEnoughStarted,
                EtcdError::TooManyLearners,
            ];
            match Refusal::of(&s) {
                Some(Refusal::Etcd(e)) if final_answers.contains(&e) => Some(e),
                _ => None,
            }
        })
    };
    tokio::time::timeout(m.request_timeout, call)
        .await
        .map_err(|_| None)?
}
