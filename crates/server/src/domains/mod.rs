//! The replicated domains, one shape each: a domain's folder holds its state and its
//! backend tables (or uses the crate that keeps them: oxcd-mvcc for kv, oxcd-auth for
//! auth), `apply.rs` (what a committed entry does to it, called by
//! [`crate::machine::apply`]) and `service.rs` (the gRPC service that reads it and
//! proposes its requests); drivers that act only on the leader (lease expiry, learner
//! promotion) sit beside them.
//!
//! - [`kv`]: keys and revisions (state: [`oxcd_mvcc::Store`]);
//! - [`lease`]: leases and their keys;
//! - [`auth`]: users, roles, permissions and tokens;
//! - [`membership`]: the members, learners and removed ids, and the bootstrap list;
//! - [`version`]: the release this member acts as, the cluster version and the
//!   downgrade;
//! - [`watch`]: the change feed from the apply thread to every watcher (no apply of its own).

pub mod auth;
pub mod kv;
pub mod lease;
pub mod membership;
pub mod version;
pub mod watch;
