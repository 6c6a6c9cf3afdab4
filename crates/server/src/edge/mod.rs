//! The client edge: what a client's connection meets before the state machine.
//!
//! Each accepted connection is served by `oxcd_transport::serve` (HTTP/1 and HTTP/2,
//! gRPC and HTTP on one port, as etcd) through [`front`], which sends gRPC straight to
//! the services and the rest to the HTTP router, with [`grpc_compat`] smoothing what Go's gRPC
//! clients send; [`services`] routes every etcd gRPC service (the replicated domains'
//! services live with their domain); [`gateway`] is etcd's JSON gateway over the same
//! handlers; [`http`], [`health`] and [`metrics`] are the HTTP endpoints ([`go_http`]:
//! answers as Go's net/http writes them), [`pprof`] the CPU profiles of
//! `--enable-pprof`.
//!
//! Invariant: the edge changes no replicated state itself: writes are proposed through
//! the [`crate::machine::member::Member`] and answered once applied here.

pub mod front;
pub mod gateway;
pub mod go_http;
pub mod grpc_compat;
pub mod health;
pub mod http;
pub mod http_handles;
pub mod metrics;
pub mod pprof;
pub mod services;
