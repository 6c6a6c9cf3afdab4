//! oxcd-testkit: proves oxcd consistent under faults.
//!
//! Owns: [`cluster`] (real `oxcd` processes on loopback, each behind a partitioning
//! [`proxy`]), [`faults`] (a seeded schedule of kills, pauses and partitions),
//! [`workload`] (recorded concurrent clients, leases included; [`expiries`] places the
//! leases' expiries by what the watchers saw), [`watches`] (watchers beside the workload,
//! resuming after every break, checked against its history by [`checker::watch`]), [`leases`] (lease clients and a watcher,
//! checked for expiry, keepalive and watch guarantees), [`scenario`] (named runs), [`history`] (what a workload did: every operation with its invocation and
//! completion time and its result, indeterminate ones included), [`model`] (etcd's KV
//! semantics with revisions, as a step function with undo), [`checker`]
//! (linearizability of a history against the model, plus checks of serializable reads), and
//! [`pki`] (certificate authorities, certificates and CRLs for TLS tests), [`ports`]
//! (loopback ports for servers started elsewhere, clear of the ephemeral range)
//! and [`process`] (spawning them with a log file, signalling them; the workspace's built
//! binaries), [`small_disk`] (a tmpfs of a few MiB, for disk-full tests), and [`storm`]
//! (load beside a workload that members must shed: large ranges and new connections).
//!
//! Invariants: the checker never drops an operation: an indeterminate write may or may
//! not have taken effect and is checked both ways; a history is accepted only if one
//! order of its operations explains every response.

pub mod auth;
pub mod checker;
pub mod cluster;
pub mod dns;
pub mod expiries;
pub mod faults;
pub mod history;
pub mod leases;
pub mod model;
pub mod pki;
pub mod ports;
pub mod process;
pub mod proxy;
pub mod reference;
pub mod rng;
pub mod scenario;
pub mod small_disk;
pub mod storm;
pub mod watches;
pub mod workload;
