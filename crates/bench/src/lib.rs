//! oxcd-bench: etcd `benchmark`-style workloads against any etcd v3 endpoints
//! ([`workloads`], driven by [`driver`], summarised by [`stats`]) and the side-by-side
//! comparison of oxcd with etcd ([`compare`]), a learner's catch-up on each
//! ([`learner`]), and their snapshot, restore and defragmentation ([`backup`]).
//!
//! Arrows: cli → workloads → driver/stats; compare → workloads; learner and backup →
//! compare's cluster, [`load`] (fill and background writers) and [`versus`] (rounds of
//! both systems, their report). Nothing here depends on the server crates: the tool
//! speaks only the etcd wire protocol.

pub mod backup;
pub mod cli;
pub mod compare;
pub mod conns;
pub mod driver;
pub mod gateway;
pub mod keys;
pub mod learner;
pub mod load;
pub mod stats;
pub mod versus;
pub mod workloads;
