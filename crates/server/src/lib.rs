//! oxcd-server: one oxcd member.
//!
//! The map (a request enters at the edge, is proposed through the machine, and is
//! applied by the machine to the domains):
//!
//! | area | what it holds |
//! |---|---|
//! | [`start`] | start-up and serving: `serve`, bootstrap, discovery, sockets, TLS, logs (flags and settings: `oxcd_config`) |
//! | [`edge`] | the client edge: gRPC routes, the JSON gateway, health, metrics (on `oxcd_transport::serve`) |
//! | [`machine`] | the state machine: the `Member` and the handles it gives out (reads, writes, role), typed proposals, waiters, quota; the apply thread and its dispatch |
//! | [`domains`] | the replicated domains, one shape each: kv, lease, auth, membership, watch |
//! | [`peer`] | member-to-member traffic: raft messages, snapshots, peer HTTP |
//! | [`jobs`] | background jobs: auto-compaction, corruption checks |
//! | [`backup`] | etcd-format backups: the bbolt file `Snapshot` streams |
//!
//! The rule for a domain: `domains/<domain>/` holds its state and tables (or uses the
//! crate that keeps them: kv's `oxcd_mvcc`, auth's `oxcd_auth`), `apply.rs` (what a
//! committed entry does to it) and `service.rs` (the gRPC side); the machine's one
//! dispatch ([`machine::apply`]) calls each domain's apply.
//!
//! The rule for a handler: it is given handles (reads, writes, role, roster, callers and
//! its domain's state; built in [`start::wiring`]), never the whole member.
//!
//! Invariants:
//! - Every write goes through raft: propose, WAL fsync, commit, apply, then respond.
//!   There is no single-member shortcut.
//! - Apply is deterministic: the same log gives the same store on every member.
//! - A request is answered only after its effects are visible to reads here.

pub mod backup;
pub mod domains;
pub mod edge;
pub mod jobs;
pub mod machine;
pub mod peer;
pub mod start;
