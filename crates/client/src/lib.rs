//! oxcd-client: an async client for etcd v3 servers (oxcd or etcd).
//!
//! Owns: endpoint handling (etcdctl's forms: `host:port`, `http(s)://host:port`,
//! `unix(s)://path`), TLS as etcdctl sets it up, the
//! connection (the first endpoint, in order, that answers within the dial timeout),
//! authentication (a token from `Auth.Authenticate`, sent as `token` metadata on every
//! call), the generated service stubs, convenience calls for the common requests,
//! resumable watches ([`Watch`]), locks, elections and a background lease keeper
//! ([`LeaseKeeper`]), and errors that print as etcd's Go client prints them.
//!
//! Invariants: no retry hides a server error, so a request returns either the server's
//! answer or an [`Error`] that says what failed; every call made through the convenience
//! methods is bounded by [`ConnectOptions::request_timeout`].

mod auth_ops;
mod client;
mod coordination;
mod endpoint;
mod error;
mod ops;
mod password;
mod peer_urls;
mod watch;

pub use auth_ops::PermissionType;
pub use client::{Client, ConnectOptions, Credentials, Service, TlsConfig, TokenInterceptor};
pub use coordination::LeaseKeeper;
pub use endpoint::{Target, endpoint_uri, parse_endpoint};
pub use error::Error;
pub use ops::prefix_end;
pub use password::{ask_password, ask_secret};
pub use peer_urls::check_peer_urls;
pub use watch::{Watch, watch_prefix, watch_request};
