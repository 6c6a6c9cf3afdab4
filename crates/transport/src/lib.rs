//! oxcd-transport: how oxcd's ports are opened and dialed, plain or over TLS — what
//! etcd keeps in `client/pkg/transport` and `tlsutil`.
//!
//! Owns:
//! - listen URLs (`http`, `https`, `unix`, `unixs`) and binding them with the system's
//!   largest accept backlog ([`listen`]);
//! - listeners whose TLS handshakes run off the accept loop, each connection with the
//!   certificate current at its handshake ([`listen::Listener`]);
//! - TLS settings as etcd names them ([`TlsInfo`], [`TlsOptions`]): certificates, keys,
//!   CAs and CRLs read from files and re-read when the files change ([`tls`]),
//!   client-certificate checks (CA, CRL, allowed CN and hostname), cipher suites by
//!   Go's names, protocol versions;
//! - auto-TLS: self-signed certificates generated under the data dir ([`selfcert`]);
//! - write coalescing for server connections with many streams ([`coalesce`]);
//! - a dialer for tonic channels: TCP or unix socket, plain or TLS, from a chosen local
//!   address ([`dial::Dialer`]);
//! - DNS SRV discovery of a cluster's members and endpoints ([`srv`]);
//! - serving a listener's connections over HTTP/1 and HTTP/2 with chosen HTTP/2 settings
//!   and a graceful stop ([`serve`]), and accepting the `:authority` Go's etcd clients
//!   send ([`go_authority`]).
//!
//! Invariants: a TLS setting that cannot be loaded is an error when it is first built
//! (at start), never a listener that refuses every handshake; after a file changes,
//! new connections use the new contents and open connections are left alone; a file
//! that changes into something unusable leaves the last good configuration in force
//! (with a warning). Nothing here knows of raft, storage or the etcd API.

pub mod coalesce;
pub mod dial;
pub mod go_authority;
pub mod listen;
pub mod selfcert;
pub mod serve;
pub mod srv;
pub mod tls;

pub use tls::{TlsError, TlsInfo, TlsOptions, TlsVersion, valid_for_host_of};
