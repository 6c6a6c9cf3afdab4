//! Every backend table and meta key, in one place. [`crate::tables::TABLES`] lists the
//! tables for the code that handles all of them alike (snapshots, hashes).
//!
//! - [`KEY`]: the MVCC key space. Key: a revision (see `oxcd-mvcc`), value: an encoded
//!   `mvccpb.KeyValue`. Rows are immutable once written; compaction deletes old ones.
//! - [`LEASE`]: leases granted and not yet revoked or expired.
//! - [`AUTH`], [`AUTH_USERS`], [`AUTH_ROLES`]: the auth store, as etcd's buckets of the
//!   same names: whether auth is on and its revision; users; roles.
//! - [`MEMBERS`], [`MEMBERS_REMOVED`]: the cluster's members and the ids removed from it,
//!   as etcd's buckets of the same names (issue 13).
//! - [`META`]: small named values, listed below as constants.

use redb::TableDefinition;

/// Name of [`KEY`].
pub const KEY_NAME: &str = "key";
/// Name of [`META`].
pub const META_NAME: &str = "meta";
/// MVCC rows: revision bytes -> encoded `mvccpb.KeyValue`.
pub const KEY: TableDefinition<&[u8], &[u8]> = TableDefinition::new(KEY_NAME);
/// Name of [`LEASE`].
pub const LEASE_NAME: &str = "lease";
/// Leases: lease id (i64 big-endian) -> encoded `oxcdpb.LeaseRecord` (etcd's
/// `leasepb.Lease` encoding). Which keys a lease holds is not stored here: it is the
/// `lease` field of each key's current row.
pub const LEASE: TableDefinition<&[u8], &[u8]> = TableDefinition::new(LEASE_NAME);
/// Named metadata values.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new(META_NAME);
/// Name of [`AUTH`].
pub const AUTH_NAME: &str = "auth";
/// The auth store's state, as etcd's `auth` bucket: [`AUTH_ENABLED`] -> one byte (1: on),
/// [`AUTH_REVISION`] -> u64 big-endian.
pub const AUTH: TableDefinition<&[u8], &[u8]> = TableDefinition::new(AUTH_NAME);
/// Whether auth is enabled (a row of [`AUTH`]).
pub const AUTH_ENABLED: &[u8] = b"authEnabled";
/// The auth store's revision, raised by every change to users, roles or the enabled
/// flag (a row of [`AUTH`]).
pub const AUTH_REVISION: &[u8] = b"authRevision";
/// Name of [`AUTH_USERS`].
pub const AUTH_USERS_NAME: &str = "authUsers";
/// Users: name -> encoded `authpb.User` (bcrypt hash, roles sorted).
pub const AUTH_USERS: TableDefinition<&[u8], &[u8]> = TableDefinition::new(AUTH_USERS_NAME);
/// Name of [`AUTH_ROLES`].
pub const AUTH_ROLES_NAME: &str = "authRoles";
/// Roles: name -> encoded `authpb.Role` (permissions sorted by key).
pub const AUTH_ROLES: TableDefinition<&[u8], &[u8]> = TableDefinition::new(AUTH_ROLES_NAME);

/// Name of [`MEMBERS`].
pub const MEMBERS_NAME: &str = "members";
/// Members: member id (u64 big-endian) -> encoded `oxcdpb.MemberInfo` (learner flag
/// included).
pub const MEMBERS: TableDefinition<&[u8], &[u8]> = TableDefinition::new(MEMBERS_NAME);
/// Name of [`MEMBERS_REMOVED`].
pub const MEMBERS_REMOVED_NAME: &str = "members_removed";
/// Ids removed from the cluster, never to be used again: member id (u64 big-endian) ->
/// empty.
pub const MEMBERS_REMOVED: TableDefinition<&[u8], &[u8]> =
    TableDefinition::new(MEMBERS_REMOVED_NAME);

/// Raft index of the last entry applied (u64 LE), written with the data it produced.
pub const META_CONSISTENT_INDEX: &str = "consistent_index";
/// Raft term of that entry (u64 LE).
pub const META_CONSISTENT_TERM: &str = "consistent_term";
/// Revision of the last finished compaction (revision bytes).
pub const META_FINISHED_COMPACT: &str = "finishedCompactRev";
/// Revision of the last scheduled compaction (revision bytes).
pub const META_SCHEDULED_COMPACT: &str = "scheduledCompactRev";
/// Prefix of the published attributes of each member: `member_attributes/<id hex>` ->
/// encoded `oxcdpb.MemberAttributes`.
pub const META_MEMBER_ATTRIBUTES_PREFIX: &str = "member_attributes/";
/// Prefix of raised alarms: `alarm/<member id, 16 hex digits>/<etcdserverpb.AlarmType
/// number>` -> empty. Replicated, so every member refuses the same requests.
pub const META_ALARM_PREFIX: &str = "alarm/";
/// The cluster version the members agreed on, `X.Y.0` (replicated; etcd keeps it in its
/// `cluster` bucket under the same key).
pub const META_CLUSTER_VERSION: &str = "clusterVersion";
/// The cluster's downgrade, as etcd's JSON `{"target-version":"3.5.0","enabled":true}`
/// (replicated; etcd's `cluster` bucket, key `downgrade`).
pub const META_DOWNGRADE: &str = "downgrade";
/// The version of this member's data (`X.Y.0`), set by the member itself once the
/// cluster version allows it (etcd's `meta` bucket, key `storageVersion`). Not
/// replicated: members set it at different times.
pub const META_STORAGE_VERSION: &str = "storageVersion";
/// Raft conf state of the applied log (encoded by oxcd-raft).
pub const META_CONF_STATE: &str = "conf_state";

/// Meta keys that differ between members holding the same data, left out of state
/// hashes: where in the raft log the state is, and the storage version each member
/// sets on its own.
pub const RAFT_POSITION_KEYS: &[&str] = &[
    META_CONSISTENT_INDEX,
    META_CONSISTENT_TERM,
    META_CONF_STATE,
    META_STORAGE_VERSION,
];
/// The vocabulary of the raft log this member applies: absent for oxcd's own, `etcd`
/// for etcd's (a member inside an etcd cluster). Set by the member when it joins;
/// snapshots carry it.
pub const META_LOG_VOCABULARY: &str = "oxcd_log_vocabulary";
