//! oxcd-bench: etcd `benchmark`-style workloads against any etcd v3 endpoints
//! ([`workloads`], driven by [`driver`], summarised by [`stats`]) and the side-by-side
//! comparison of oxcd with etcd ([`compare`]), and a learner's catch-up on each
//! ([`learner`]).
//!
//! Arrows: cli → workloads → driver/stats; compare → workloads; learner → compare's
//! cluster. Nothing here depends on the server crates: the tool speaks only the etcd
//! wire protocol.

pub mod cli;
pub mod compare;
pub mod conns;
pub mod driver;
pub mod keys;
pub mod learner;
pub mod stats;
pub mod workloads;
