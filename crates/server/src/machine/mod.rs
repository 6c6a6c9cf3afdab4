//! The replicated state machine: how a request is proposed, and how a committed entry
//! is applied.
//!
//! The [`member::Member`] start-up assembles gives out narrow handles: [`reads`] (the
//! store, the ReadIndex barrier, headers, the [`range_budget`] that bounds range answers'
//! memory), [`writes`] and [`role`] (who leads).
//! Proposing: the [`writes::Writes`] handle takes a typed request ([`proposal`]: what
//! it travels as and what it answers), admitted by the space [`quota`] when it stores
//! something new, registers a waiter ([`waiters`]) and hands the bytes to raft. Applying: the
//! [`applying`] state takes committed entries from raft, runs each through [`apply`] (the
//! one dispatch, into each domain's apply function, and [`alarms`]) in one backend
//! transaction per batch, publishes the batch to readers and watchers, then completes
//! the waiters with what each entry produced; the [`apply_lane`] decides which thread
//! does it for each batch (raft's own for a small plain one when nothing is queued,
//! else the [`apply_thread`]). A log written in etcd's vocabulary (a
//! member inside an etcd cluster, as [`vocabulary`] records) is read through
//! [`etcd_entries`].
//!
//! Invariants:
//! - Every write goes through raft: propose, WAL fsync, commit, apply, then respond.
//! - Apply is deterministic: the same log gives the same store on every member.
//! - A request is answered only after its effects are visible to reads here.

pub mod alarms;
pub mod applied;
pub mod applier;
pub mod apply;
pub mod apply_lane;
pub mod apply_thread;
pub mod applying;
pub mod etcd_entries;
pub mod fatal;
pub mod member;
pub mod proposal;
pub mod quota;
pub mod range_budget;
pub mod reads;
pub mod role;
pub mod vocabulary;
pub mod waiters;
pub mod writes;
