//! Start-up and serving: from a process's flags to a running member and back down.
//!
//! [`serve`] is the entry point: it reads the [`oxcd_config::Settings`], opens the data
//! dir and the WAL ([`bootstrap`], with [`discovery`] for a member that learns its
//! cluster from DNS SRV records or an existing cluster), binds the sockets
//! ([`listeners`], with [`security`]'s TLS), starts the raft, apply and background
//! threads, serves until asked to stop or until a thread fails, then hands leadership
//! over and stops them in order. [`wiring`] gives each service, job and driver its
//! handles, [`client_routes`] puts the services on the client port's routers, and
//! [`logging`] sets up etcd-style logs.

pub mod bootstrap;
pub mod client_routes;
pub mod discovery;
pub mod listeners;
pub mod logging;
pub mod security;
pub mod serve;
pub mod wiring;
