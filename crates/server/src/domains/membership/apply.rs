//! Applying a committed conf change entry, on the apply thread: the change is read from
//! the entry (the raft `ConfChange` and its `oxcdpb.ConfChangeContext`), checked against
//! the membership, handed to raft, and written with the configuration raft gives into
//! the batch's transaction. A refused change changes nothing, on every member alike, and
//! its proposer gets etcd's error.

use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::{ConfChangeContext, MemberInfo, MemberUpdate};
use oxcd_raft::node::RaftHandle;
use oxcd_raft::persist;
use oxcd_raft::{ConfChange, ConfChangeType, Entry};
use oxcd_storage::batch::BatchTx;
use oxcd_storage::schema::META_CONF_STATE;
use prost::Message as _;

use super::{Change, Membership, table};
use crate::machine::apply::{Applied, ApplyError};
use crate::machine::waiters::Outcome;

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

/// Applies the conf change entry `e`: the proposer's request id (0: none) and its
/// outcome. An error is fatal (the entry cannot be read, raft is gone, the backend
/// failed): the member stops rather than skip it.
pub fn apply_conf_change(
    membership: &Membership,
    raft: &RaftHandle,
    tx: &BatchTx<'_>,
    e: &Entry,
) -> Result<(u64, Outcome), String> {
    let cc = persist::decode_conf_change(&e.data)
        .map_err(|err| format!("conf change at index {}: {err}", e.index))?;
    let ctx = ConfChangeContext::decode(cc.context.as_ref())
        .map_err(|err| format!("conf change context at index {}: {err}", e.index))?;
    let change = change_of(&cc, &ctx);
    if let Err(refused) = membership.state().validate(&change) {
        tracing::warn!(
            index = e.index,
            ?change,
            "membership change refused: {refused}"
        );
        return Ok((ctx.request_id, Err(refused.into())));
    }
    let conf = match raft.apply_conf_change(e.index, cc) {
        Ok(conf) => conf,
        Err(oxcd_raft::RaftError::Raft(err)) => {
            // raft-rs refuses what would leave no voter: the same on every member.
            tracing::warn!(
                index = e.index,
                ?change,
                "raft refused a membership change: {err}"
            );
            return Ok((ctx.request_id, Err(EtcdError::MemberNotEnoughStarted)));
        }
        Err(err) => return Err(format!("conf change at index {}: {err}", e.index)),
    };
    membership
        .apply(&change)
        .map_err(|refused| format!("conf change at index {}: {refused}", e.index))?;
    let state = membership.state();
    table::write(tx, &state, &change).map_err(|err| err.to_string())?;
    tx.put_meta(META_CONF_STATE, &persist::encode_conf_state(&conf))
        .map_err(|err| err.to_string())?;
    tracing::info!(index = e.index, ?change, voters = ?conf.voters, learners = ?conf.learners, "membership changed");
    if let Change::Remove { id } = change
        && id == raft.id()
    {
        tracing::warn!("{}", crate::peer::MEMBER_REMOVED);
        membership.stop_as_removed();
    }
    let members = state.members.values().cloned().collect();
    Ok((ctx.request_id, Ok(Applied::Membership(members))))
}

/// Applies a change of peer URLs (a normal entry: raft's configuration is untouched).
/// A refused change changes nothing; its proposer gets etcd's error.
pub fn apply_update(
    membership: &Membership,
    tx: &BatchTx<'_>,
    u: &MemberUpdate,
) -> Result<Applied, ApplyError> {
    let change = Change::Update {
        id: u.id,
        peer_urls: u.peer_urls.clone(),
    };
    membership
        .apply(&change)
        .map_err(|refused| ApplyError::Request(refused.into()))?;
    let state = membership.state();
    table::write(tx, &state, &change)?;
    tracing::info!(?change, "membership changed");
    Ok(Applied::Membership(
        state.members.values().cloned().collect(),
    ))
}
