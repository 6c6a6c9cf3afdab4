//! The auth tables' rows, in etcd's encodings: `auth` holds `authEnabled` (one byte) and
//! `authRevision` (u64 big-endian); `authUsers` and `authRoles` hold `authpb.User` and
//! `authpb.Role` by name.

use std::collections::BTreeSet;

use oxcd_api::authpb::{Role, User};
use oxcd_mvcc::MvccError;
use oxcd_storage::backend::{Backend, redb};
use oxcd_storage::batch::BatchTx;
use oxcd_storage::schema;
use prost::Message;

use super::{AuthState, Changes};

/// The revision of a store that was never changed (etcd starts at 1 too).
const FIRST_REVISION: u64 = 1;

fn corrupt(what: &str, e: impl std::fmt::Display) -> MvccError {
    MvccError::Corrupt(Default::default(), format!("{what}: {e}"))
}

fn name(key: &[u8]) -> Result<String, MvccError> {
    String::from_utf8(key.to_vec()).map_err(|e| corrupt("auth name", e))
}

/// The auth state `backend` holds.
pub(crate) fn load(backend: &Backend) -> Result<AuthState, MvccError> {
    let mut state = AuthState {
        revision: FIRST_REVISION,
        ..AuthState::default()
    };
    for (k, v) in backend.rows(schema::AUTH)? {
        if k == schema::AUTH_ENABLED {
            state.enabled = v.first() == Some(&1);
        } else if k == schema::AUTH_REVISION {
            let bytes: [u8; 8] = v
                .as_slice()
                .try_into()
                .map_err(|_| corrupt("auth revision", format!("{} bytes", v.len())))?;
            state.revision = u64::from_be_bytes(bytes);
        }
    }
    for (k, v) in backend.rows(schema::AUTH_USERS)? {
        let user = User::decode(v.as_slice()).map_err(|e| corrupt("auth user", e))?;
        state.users.insert(name(&k)?, user);
    }
    for (k, v) in backend.rows(schema::AUTH_ROLES)? {
        let role = Role::decode(v.as_slice()).map_err(|e| corrupt("auth role", e))?;
        state.roles.insert(name(&k)?, role);
    }
    Ok(state)
}

/// Writes the rows `changes` names (a name no longer in `state` is deleted) and the
/// revision.
pub(crate) fn write(
    tx: &BatchTx<'_>,
    state: &AuthState,
    changes: &Changes,
) -> Result<(), MvccError> {
    let err = |e| MvccError::Storage(tx.backend().err(e));
    {
        let mut auth = tx.open(schema::AUTH)?;
        auth.insert(
            schema::AUTH_REVISION,
            state.revision.to_be_bytes().as_slice(),
        )
        .map_err(err)?;
        if changes.enabled {
            auth.insert(schema::AUTH_ENABLED, [u8::from(state.enabled)].as_slice())
                .map_err(err)?;
        }
    }
    write_rows(tx, schema::AUTH_USERS, &changes.users, |n| {
        state.users.get(n)
    })?;
    write_rows(tx, schema::AUTH_ROLES, &changes.roles, |n| {
        state.roles.get(n)
    })?;
    Ok(())
}

/// Writes the row of each of `names` in the table `def`: the record `now` gives, or no
/// row once it gives none (deleted).
fn write_rows<'a, M: Message + 'a>(
    tx: &BatchTx<'_>,
    def: redb::TableDefinition<'static, &'static [u8], &'static [u8]>,
    names: &BTreeSet<String>,
    now: impl Fn(&str) -> Option<&'a M>,
) -> Result<(), MvccError> {
    let mut table = tx.open(def)?;
    for n in names {
        match now(n) {
            Some(record) => table.insert(n.as_bytes(), record.encode_to_vec().as_slice()),
            None => table.remove(n.as_bytes()).map(|_| None),
        }
        .map_err(|e| MvccError::Storage(tx.backend().err(e)))?;
    }
    Ok(())
}
