//! oxcd-bench: etcd `benchmark`-style workloads against any etcd v3 endpoints
//! ([`workloads`], driven by [`driver`] over [`conns`], summarised by [`stats`]) and the
//! side-by-side comparison of oxcd with etcd ([`compare`]), a learner's catch-up on each
//! ([`learner`]), their snapshot, restore and defragmentation ([`backup`]), their JSON
//! gateway ([`gateway`]), a large range read at once ([`big_range`]) and a storm of them
//! against a leader ([`overload`]).
//!
//! Arrows (no circles): [`cli`] (the subcommands and their dispatch) → everything else;
//! every subcommand's module owns its flags. learner, backup, gateway, big_range,
//! overload and scale →
//! [`cluster`]
//! (the launcher of either system), [`load`] (fill and background writers; not gateway)
//! and [`versus`] (the `Bench` trait each implements, its one runner, the rounds of both
//! systems, the report's tables); compare → workloads, cluster and versus (its rounds
//! and ratios); workloads → driver, [`keys`], stats. Nothing here depends on the server
//! crates: the tool speaks only the etcd wire protocol.

pub mod backup;
pub mod big_range;
pub mod cli;
pub mod cluster;
pub mod compare;
pub mod conns;
pub mod driver;
pub mod floor;
pub mod gateway;
pub mod keys;
pub mod learner;
pub mod load;
pub mod overload;
pub mod scale;
pub mod stats;
pub mod versus;
pub mod workloads;
