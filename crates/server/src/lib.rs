//! oxcd-server: one oxcd member.
//!
//! Owns: the apply path ([`apply`], [`apply_loop`]), request validation ([`validate`]),
//! leases ([`lease`]), the replicated membership ([`membership`]; changes are applied,
//! not yet proposed: issue 13), the proposal registry ([`waiters`]), the member handle
//! the services share ([`member`]), the space quota ([`quota`]), the gRPC services
//! ([`services`]), etcd's JSON gateway ([`gateway`]), HTTP endpoints ([`http`]): health
//! ([`health`]) and metrics ([`metrics`]),
//! configuration ([`flags`], [`settings`]), ids ([`ids`]), TLS ([`security`]), the
//! sockets ([`listeners`]), start-up ([`bootstrap`]), serving ([`serve`]) and
//! auto-compaction ([`compactor`]).
//!
//! Invariants:
//! - Every write goes through raft: propose, WAL fsync, commit, apply, then respond.
//!   There is no single-member shortcut.
//! - Apply is deterministic: the same log gives the same store on every member.
//! - A request is answered only after its effects are visible to reads here.

pub mod apply;
pub mod apply_loop;
pub mod auth;
pub mod authority;
pub mod backup;
pub mod bootstrap;
pub mod compactor;
pub mod conn_serve;
pub mod corrupt;
pub mod discovery;
pub mod flags;
pub mod gateway;
pub mod grpc_compat;
pub mod health;
pub mod http;
pub mod ids;
pub mod lease;
pub mod listeners;
pub mod logging;
pub mod member;
pub mod members;
pub mod membership;
pub mod metrics;
pub mod peer;
pub mod quota;
pub mod security;
pub mod serve;
pub mod services;
pub mod settings;
pub mod validate;
pub mod waiters;
pub mod watch;
