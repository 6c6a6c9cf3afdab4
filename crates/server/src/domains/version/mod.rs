//! Versions, as etcd 3.6 negotiates them:
//! - [`release`]: the etcd release this member acts as (3.6 by default, 3.5 with
//!   `--emulated-version=3.5`) and what it reports of itself;
//! - [`cluster`]: the cluster version and the downgrade as replicated state (the
//!   `cluster_version_set` and `downgrade_info_set` entries, their apply, their reads);
//! - [`decide`]: the leader's choice of the cluster version from the members' releases;
//! - [`downgrade`]: the Downgrade RPC's checks and proposals;
//! - [`storage`]: the storage version each member brings to the cluster version;
//! - [`report`]: `/version` and Status's version fields;
//! - [`enabled`]: `/downgrade/enabled` on the peer port, which joining members ask;
//! - [`join`]: the check a member joining a running cluster runs on its version;
//! - [`monitor`]: the loops: the leader asks every member its version and proposes the
//!   choice; every member migrates its storage version;
//! - [`vocabulary`]: the log's vocabulary the cluster version asks for (etcd's at 3.5).
//!
//! Invariants: the cluster version only rises to the lowest release among the members
//! (all known), or falls one minor at a time to an enabled downgrade's target; a member
//! whose release is below the cluster version stops rather than serve (etcd's
//! `MustDetectDowngrade`).

pub mod cluster;
pub mod decide;
pub mod downgrade;
pub mod enabled;
pub mod handles;
pub mod join;
pub mod monitor;
pub mod release;
pub mod report;
pub mod storage;
pub mod vocabulary;
