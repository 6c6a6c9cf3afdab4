//! Applying a committed conf change entry, on the apply thread: the change is read from
//! the entry (the raft `ConfChange` and its `oxcdpb.ConfChangeContext`, or etcd's
//! ([`super::etcd_conf_change`]) in a log of etcd's vocabulary), checked against
//! the membership, handed to raft, and written with the configuration raft gives into
//! the batch's transaction. A refused change changes nothing, on every member alike, and
//! its proposer gets etcd's error.

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::{ConfChangeContext, MemberAttributes, MemberInfo, MemberUpdate};
use oxcd_raft::persist;
use oxcd_raft::{ConfChange, ConfChangeType, Entry};
use oxcd_storage::schema::{META_CONF_STATE, META_MEMBER_ATTRIBUTES_PREFIX};
use prost::Message as _;

use super::{Change, table};
use crate::machine::applied::{Applied, Outcome};
use crate::machine::applier::{Applier, ApplyError};
use crate::machine::fatal::Fatal;
use crate::machine::vocabulary::Vocabulary;

/// The change a conf change entry describes. (raft-rs has no UpdateNode: a change of
/// peer URLs leaves raft's configuration alone and travels as a normal entry.)
pub fn change_of(cc: &ConfChange, ctx: &ConfChangeContext) -> Change {
    let id = cc.node_id;
    let member = |is_learner: bool| MemberInfo {
        id,
        is_learner,
        ..ctx.member.clone().unwrap_or_default()
    };
    match cc.get_change_type() {
        ConfChangeType::AddNode if ctx.is_promote => Change::Promote { id },
        ConfChangeType::AddNode => Change::Add {
            member: member(false),
            max_learners: ctx.max_learners,
        },
        ConfChangeType::AddLearnerNode => Change::Add {
            member: member(true),
            max_learners: ctx.max_learners,
        },
        ConfChangeType::RemoveNode => Change::Remove { id },
    }
}

/// Reads the conf change entry `e` in oxcd's vocabulary: the proposer's request id, the
/// change, and what raft takes.
fn read_oxcd(e: &Entry) -> Result<(u64, Change, Option<ConfChange>), Fatal> {
    let index = e.index;
    let cc = persist::decode_conf_change(&e.data).map_err(|err| Fatal::ConfChangeUndecodable {
        index,
        what: "the conf change",
        reason: err.to_string(),
    })?;
    let cctx = ConfChangeContext::decode(cc.context.as_ref()).map_err(|err| {
        Fatal::ConfChangeUndecodable {
            index,
            what: "its context",
            reason: err.to_string(),
        }
    })?;
    Ok((cctx.request_id, change_of(&cc, &cctx), Some(cc)))
}

/// Reads the conf change entry `e` in etcd's vocabulary (etcd panics where this fails).
fn read_etcd(e: &Entry) -> Result<(u64, Change, Option<ConfChange>), Fatal> {
    let read =
        super::etcd_conf_change::read(&e.data).map_err(|err| Fatal::ConfChangeUndecodable {
            index: e.index,
            what: "etcd's conf change",
            reason: err.to_string(),
        })?;
    Ok((read.request_id, read.change, read.raft))
}

/// Applies the conf change entry `e`, read in the log's `vocabulary`: the proposer's
/// request id (0: none) and its outcome. A refused change changes nothing, on every
/// member alike. An error is fatal (the entry cannot be read, raft is gone, the backend
/// failed): the member stops rather than skip it. Raft takes the change on its own
/// thread: this waits for it.
pub fn apply_conf_change(
    ctx: &mut Applier<'_>,
    e: &Entry,
    vocabulary: Vocabulary,
) -> Result<(u64, Outcome), Fatal> {
    let index = e.index;
    let (request_id, change, cc) = match vocabulary {
        Vocabulary::Oxcd => read_oxcd(e)?,
        Vocabulary::Etcd => read_etcd(e)?,
    };
    let membership = ctx.membership;
    if let Err(refused) = membership.state().validate(&change) {
        tracing::warn!(index, ?change, "membership change refused: {refused}");
        return Ok((request_id, Err(refused.into())));
    }
    // An update of peer URLs (etcd's UpdateNode) leaves raft's configuration alone.
    let conf = match cc.map(|cc| ctx.raft.apply_conf_change(index, cc)) {
        None => None,
        Some(Ok(conf)) => Some(conf),
        Some(Err(oxcd_raft::RaftError::Raft(err))) => {
            // raft-rs refuses what would leave no voter: the same on every member.
            tracing::warn!(index, ?change, "raft refused a membership change: {err}");
            return Ok((request_id, Err(EtcdError::MemberNotEnoughStarted)));
        }
        Some(Err(source)) => return Err(Fatal::ConfChangeRaft { index, source }),
    };
    membership
        .apply(&change)
        .map_err(|source| Fatal::ConfChangeRefused { index, source })?;
    let state = membership.state();
    table::write(ctx.tx, &state, &change)?;
    if let Some(conf) = conf {
        ctx.tx
            .put_meta(META_CONF_STATE, &persist::encode_conf_state(&conf))?;
        tracing::info!(index, ?change, voters = ?conf.voters, learners = ?conf.learners, "membership changed");
    } else {
        tracing::info!(index, ?change, "membership changed");
    }
    if let Change::Remove { id } = change
        && id == ctx.raft.member_id()
    {
        tracing::warn!("{}", crate::peer::MEMBER_REMOVED);
        membership.stop_as_removed();
    }
    let members = state.members.values().cloned().collect();
    Ok((request_id, Ok(Applied::Membership(members))))
}

/// Applies a change of peer URLs (a normal entry: raft's configuration is untouched).
/// A refused change changes nothing; its proposer gets etcd's error.
pub fn apply_update(ctx: &mut Applier<'_>, u: &MemberUpdate) -> Result<Applied, ApplyError> {
    let change = Change::Update {
        id: u.id,
        peer_urls: u.peer_urls.clone(),
    };
    ctx.membership
        .apply(&change)
        .map_err(|refused| ApplyError::Request(refused.into()))?;
    let state = ctx.membership.state();
    table::write(ctx.tx, &state, &change)?;
    tracing::info!(?change, "membership changed");
    Ok(Applied::Membership(
        state.members.values().cloned().collect(),
    ))
}

/// Records a member's published name and client URLs (etcd's member attributes).
pub fn apply_attributes(
    ctx: &mut Applier<'_>,
    a: &MemberAttributes,
) -> Result<Applied, ApplyError> {
    let key = format!("{META_MEMBER_ATTRIBUTES_PREFIX}{:016x}", a.id);
    ctx.tx.put_meta(&key, &a.encode_to_vec())?;
    // The member's row carries them too, as etcd's `members` bucket does: a member that
    // imported an etcd backend (a swap, an etcd leader's snapshot) holds the rows etcd
    // wrote, and one that applied the same entries must hold the same rows.
    if let Some(member) = ctx.membership.set_attributes(a) {
        table::put_member(ctx.tx, &member)?;
    }
    Ok(Applied::MemberAttributes)
}
