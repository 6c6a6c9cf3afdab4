//! oxcd-auth: authentication and authorization: users, roles and their permissions, whether auth is
//! on, and the auth revision (etcd's auth store).
//!
//! Replicated state is the backend's `auth`, `authUsers` and `authRoles` tables, written
//! by the apply path in the batch's transaction, so the auth state and the applied index
//! that produced it are committed together: a restarted member never applies a request
//! again under other permissions (the cause of etcd issue 11651). The tables are in the
//! table registry, so snapshots carry them and the state hash compares them. The
//! [`AuthStore`] mirrors them in memory for the checks, and reloads them at start and
//! after a snapshot.
//!
//! Invariants:
//! - Every change to users, roles or the enabled flag raises the revision by one, in the
//!   same transaction as the change; a request that changes nothing leaves it.
//! - The mirror changes only while a log entry is applied (or at a load), so members at
//!   the same applied index hold the same auth state.
//! - A user's roles and a role's permissions are kept sorted, as etcd keeps them.
//! - Each user's merged permissions are rebuilt whenever users or roles change (as
//!   etcd refreshes its range permission cache), so a check reads them under the same
//!   lock as the rest of the state.

pub mod changes;
pub mod jwt;
pub mod password;
pub mod password_cache;
pub mod perms;
pub mod provider;
pub mod table;
pub mod tokens;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{RwLock, RwLockReadGuard};
use std::time::Duration;

use oxcd_api::authpb::{Role, User};
use oxcd_api::errors::EtcdError;
use oxcd_api::oxcdpb::RequestAuth;
use oxcd_mvcc::MvccError;
use oxcd_storage::backend::Backend;
use oxcd_storage::batch::BatchTx;

use password_cache::PasswordCache;
use perms::UserPerms;
use provider::TokenProvider;
use tokens::SimpleTokens;

/// etcd's name of the all-powerful user and role.
pub const ROOT: &str = "root";

/// `--auth-token-ttl`'s default (seconds).
pub const DEFAULT_TOKEN_TTL: Duration = Duration::from_secs(300);
/// `--bcrypt-cost`'s default, etcd's.
pub const DEFAULT_BCRYPT_COST: u32 = 10;

/// The auth state of one member.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct AuthState {
    /// Whether requests are checked.
    pub enabled: bool,
    /// Raised by every change.
    pub revision: u64,
    /// Users by name.
    pub users: BTreeMap<String, User>,
    /// Roles by name.
    pub roles: BTreeMap<String, Role>,
    /// Each user's grants merged: derived from `users` and `roles` by
    /// [`AuthState::refresh_perms`].
    perms: HashMap<String, UserPerms>,
}

/// Whether `user` was added without a password (a certificate user): it cannot log in
/// with one.
pub fn no_password(user: &User) -> bool {
    user.options.as_ref().is_some_and(|o| o.no_password)
}

impl AuthState {
    /// Whether `user` holds the root role.
    pub fn is_root(&self, user: &str) -> bool {
        self.users
            .get(user)
            .is_some_and(|u| u.roles.iter().any(|r| r == ROOT))
    }

    /// etcd's admin check: passes while auth is off; else the caller must be a user
    /// holding the root role.
    pub fn check_admin(&self, caller: Option<&str>) -> Result<(), EtcdError> {
        if !self.enabled {
            return Ok(());
        }
        let name = caller
            .filter(|n| !n.is_empty())
            .ok_or(EtcdError::UserEmpty)?;
        if !self.users.contains_key(name) {
            return Err(EtcdError::UserNotFound);
        }
        if !self.is_root(name) {
            return Err(EtcdError::PermissionDenied);
        }
        Ok(())
    }

    /// What `user` may read and write (nothing for an unknown user).
    pub fn perms(&self, user: &str) -> &UserPerms {
        static NONE: UserPerms = UserPerms::NONE;
        self.perms.get(user).unwrap_or(&NONE)
    }

    /// Rebuilds every user's merged grants from `users` and `roles`.
    fn refresh_perms(&mut self) {
        let perms = self
            .users
            .iter()
            .map(|(name, u)| {
                let grants = u
                    .roles
                    .iter()
                    .filter_map(|r| self.roles.get(r))
                    .flat_map(|r| r.key_permission.iter());
                (name.clone(), UserPerms::new(grants))
            })
            .collect();
        self.perms = perms;
    }
}

/// What a request does to a range of keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reads it.
    Read,
    /// Writes it.
    Write,
}

/// What an apply function changed, for [`AuthStore::apply`] to write.
#[derive(Debug, Default)]
pub struct Changes {
    users: BTreeSet<String>,
    roles: BTreeSet<String>,
    enabled: bool,
    raise: bool,
}

impl Changes {
    /// User `name` was added, changed or removed (the revision rises).
    pub fn user(&mut self, name: &str) {
        self.users.insert(name.to_string());
        self.raise = true;
    }

    /// Role `name` was added, changed or removed (the revision rises).
    pub fn role(&mut self, name: &str) {
        self.roles.insert(name.to_string());
        self.raise = true;
    }

    /// The enabled flag changed; whether the revision rises is `raise` (etcd raises it
    /// when auth is disabled, not when it is enabled).
    pub fn enabled(&mut self, raise: bool) {
        self.enabled = true;
        self.raise |= raise;
    }

    pub(crate) fn any(&self) -> bool {
        self.enabled || self.raise
    }
}

/// The auth store: the replicated state's mirror and this member's tokens.
#[derive(Debug)]
pub struct AuthStore {
    state: RwLock<AuthState>,
    /// `state.enabled`, readable without the lock: every request asks it.
    on: AtomicBool,
    /// This member's tokens (`--auth-token`); simple ones are recorded when
    /// Authenticate entries are applied.
    pub tokens: TokenProvider,
    /// `--bcrypt-cost`: the cost new passwords are hashed at.
    pub bcrypt_cost: u32,
    /// Passwords this member checked good lately (`--auth-password-cache-ttl`).
    pub passwords: PasswordCache,
}

impl Default for AuthStore {
    fn default() -> AuthStore {
        AuthStore::new(DEFAULT_TOKEN_TTL, DEFAULT_BCRYPT_COST)
    }
}

impl AuthStore {
    /// An empty store whose simple tokens live `token_ttl` after their last use and
    /// whose new passwords are hashed at `bcrypt_cost`.
    pub fn new(token_ttl: Duration, bcrypt_cost: u32) -> AuthStore {
        AuthStore::with_tokens(
            TokenProvider::Simple(SimpleTokens::new(token_ttl)),
            bcrypt_cost,
        )
    }

    /// An empty store with `tokens`, whose new passwords are hashed at `bcrypt_cost`.
    pub fn with_tokens(tokens: TokenProvider, bcrypt_cost: u32) -> AuthStore {
        AuthStore {
            state: RwLock::default(),
            on: AtomicBool::new(false),
            tokens,
            bcrypt_cost,
            passwords: PasswordCache::default(),
        }
    }

    /// The store with good passwords remembered for `ttl` (zero: never).
    pub fn with_password_cache(mut self, ttl: Duration) -> AuthStore {
        self.passwords = PasswordCache::new(ttl);
        self
    }

    /// The store as `backend` holds it, with `tokens`.
    pub fn load(
        backend: &Backend,
        tokens: TokenProvider,
        bcrypt_cost: u32,
    ) -> Result<AuthStore, MvccError> {
        let store = AuthStore::with_tokens(tokens, bcrypt_cost);
        store.reload(backend)?;
        Ok(store)
    }

    /// Replaces the mirror with what `backend` holds (after a snapshot was installed).
    pub fn reload(&self, backend: &Backend) -> Result<(), MvccError> {
        let mut loaded = table::load(backend)?;
        loaded.refresh_perms();
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        *state = loaded;
        self.on.store(state.enabled, Ordering::Release);
        Ok(())
    }

    /// The current state, for reading.
    pub fn state(&self) -> RwLockReadGuard<'_, AuthState> {
        // A panic while holding the lock leaves consistent data: changes are validated
        // before anything is changed.
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether auth is enabled.
    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// The current revision.
    pub fn revision(&self) -> u64 {
        self.state().revision
    }

    /// etcd's permission check of one range (`end` empty: the key alone) for `caller`:
    /// passes while auth is off; else the caller must be a user known at the current
    /// revision ("revision of auth store is old" if the store changed since its
    /// permission was read), with the root role or a grant covering the whole range.
    pub fn check(
        &self,
        caller: Option<&RequestAuth>,
        key: &[u8],
        end: &[u8],
        access: Access,
    ) -> Result<(), EtcdError> {
        if !self.enabled() {
            return Ok(());
        }
        let state = self.state();
        if !state.enabled {
            return Ok(());
        }
        let c = caller
            .filter(|c| c.revision != 0)
            .ok_or(EtcdError::UserEmpty)?;
        if c.revision < state.revision {
            return Err(EtcdError::AuthOldRevision);
        }
        if !state.users.contains_key(&c.username) {
            return Err(EtcdError::PermissionDenied);
        }
        if state.is_root(&c.username) {
            return Ok(());
        }
        let perms = state.perms(&c.username);
        let granted = match access {
            Access::Read => perms.may_read(key, end),
            Access::Write => perms.may_write(key, end),
        };
        if granted {
            Ok(())
        } else {
            Err(EtcdError::PermissionDenied)
        }
    }

    /// Applies one change: `change` checks the request against the state and changes
    /// it, naming what it changed (a refusal must change nothing); then the revision is
    /// raised if anything changed and the changed rows are written to `tx`.
    pub fn apply<R>(
        &self,
        tx: &BatchTx<'_>,
        change: impl FnOnce(&mut AuthState, &mut Changes) -> Result<R, EtcdError>,
    ) -> Result<Result<R, EtcdError>, MvccError> {
        let mut state = self.state.write().unwrap_or_else(|p| p.into_inner());
        let mut changes = Changes::default();
        let out = match change(&mut state, &mut changes) {
            Ok(out) => out,
            Err(e) => return Ok(Err(e)),
        };
        self.on.store(state.enabled, Ordering::Release);
        if changes.raise {
            state.revision += 1;
        }
        if changes.any() {
            state.refresh_perms();
            table::write(tx, &state, &changes)?;
        }
        Ok(Ok(out))
    }
}

#[cfg(test)]
mod tests;
