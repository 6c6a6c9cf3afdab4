//! The membership tables' rows: `members` holds each member's `oxcdpb.MemberInfo` by
//! its id (u64 big-endian), `members_removed` each removed id with an empty value.

use oxcd_api::oxcdpb::MemberInfo;
use oxcd_mvcc::MvccError;
use oxcd_storage::backend::Backend;
use oxcd_storage::batch::BatchTx;
use oxcd_storage::schema;
use prost::Message;

use super::{Change, MembershipState};

fn corrupt(what: &str, e: impl std::fmt::Display) -> MvccError {
    MvccError::Corrupt(Default::default(), format!("{what}: {e}"))
}

/// The member id a `members` or `members_removed` key holds.
pub(crate) fn id_of(key: &[u8]) -> Result<u64, MvccError> {
    let bytes: [u8; 8] = key
        .try_into()
        .map_err(|_| corrupt("member id", format!("{} bytes", key.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

/// The membership `backend` holds.
pub fn load(backend: &Backend) -> Result<MembershipState, MvccError> {
    let mut state = MembershipState::default();
    for (k, v) in backend.rows(schema::MEMBERS)? {
        let member = MemberInfo::decode(v.as_slice()).map_err(|e| corrupt("member", e))?;
        let id = id_of(&k)?;
        if member.id != id {
            return Err(corrupt(
                "member",
                format!("row {id:x} holds member {:x}", member.id),
            ));
        }
        state.members.insert(id, member);
    }
    for (k, _) in backend.rows(schema::MEMBERS_REMOVED)? {
        state.removed.insert(id_of(&k)?);
    }
    Ok(state)
}

/// Writes the rows `change` touched, as `state` holds them after it.
pub fn write(tx: &BatchTx<'_>, state: &MembershipState, change: &Change) -> Result<(), MvccError> {
    let err = |e| MvccError::Storage(tx.backend().err(e));
    let id = change.id();
    let key = id.to_be_bytes();
    match state.members.get(&id) {
        Some(m) => put_member(tx, m)?,
        None => {
            tx.open(schema::MEMBERS)?
                .remove(key.as_slice())
                .map_err(err)?;
        }
    }
    if state.removed.contains(&id) {
        tx.open(schema::MEMBERS_REMOVED)?
            .insert(key.as_slice(), [].as_slice())
            .map_err(err)?;
    }
    Ok(())
}

/// Writes `member`'s row as it now is.
pub fn put_member(tx: &BatchTx<'_>, member: &MemberInfo) -> Result<(), MvccError> {
    tx.open(schema::MEMBERS)?
        .insert(
            member.id.to_be_bytes().as_slice(),
            member.encode_to_vec().as_slice(),
        )
        .map_err(|e| MvccError::Storage(tx.backend().err(e)))?;
    Ok(())
}

/// Replaces every membership row of `backend` with `state`'s, and every published
/// attributes row with `attributes` (a snapshot's membership).
pub fn replace(
    backend: &Backend,
    state: &MembershipState,
    attributes: &[oxcd_api::oxcdpb::MemberAttributes],
) -> Result<(), MvccError> {
    use oxcd_storage::backend::redb::ReadableTable;
    let err = |e: oxcd_storage::backend::redb::Error| MvccError::Storage(backend.err(e));
    let tx = backend.begin_write()?;
    {
        let mut meta = tx.open_table(schema::META).map_err(|e| err(e.into()))?;
        let prefix = schema::META_MEMBER_ATTRIBUTES_PREFIX;
        let stale: Vec<String> = meta
            .range(prefix..)
            .map_err(|e| err(e.into()))?
            .map_while(|row| {
                let key = row.ok()?.0.value().to_string();
                key.starts_with(prefix).then_some(key)
            })
            .collect();
        for key in stale {
            meta.remove(key.as_str()).map_err(|e| err(e.into()))?;
        }
        for a in attributes {
            let key = format!("{prefix}{:016x}", a.id);
            meta.insert(key.as_str(), a.encode_to_vec().as_slice())
                .map_err(|e| err(e.into()))?;
        }
        for table in [schema::MEMBERS, schema::MEMBERS_REMOVED] {
            tx.delete_table(table).map_err(|e| err(e.into()))?;
        }
        let mut members = tx.open_table(schema::MEMBERS).map_err(|e| err(e.into()))?;
        for (id, m) in &state.members {
            members
                .insert(id.to_be_bytes().as_slice(), m.encode_to_vec().as_slice())
                .map_err(|e| err(e.into()))?;
        }
        let mut removed = tx
            .open_table(schema::MEMBERS_REMOVED)
            .map_err(|e| err(e.into()))?;
        for id in &state.removed {
            removed
                .insert(id.to_be_bytes().as_slice(), [].as_slice())
                .map_err(|e| err(e.into()))?;
        }
    }
    backend.commit(tx, true)?;
    Ok(())
}
