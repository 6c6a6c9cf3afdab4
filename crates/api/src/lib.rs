//! oxcd-api: the etcd v3 wire protocol as generated Rust types, and etcd's error strings.
//!
//! Owns: the generated prost messages and tonic client/server stubs for `etcdserverpb`,
//! `mvccpb`, `authpb`, `v3lockpb`, `v3electionpb`, `membershippb`, `leasepb` (with etcd's raft log
//! entries: `InternalRaftRequest` and the v2 `Request`) and gRPC's `grpc.health.v1` (package,
//! message and field numbers identical to etcd's, so etcd clients interoperate), oxcd's
//! internal log-entry message (`oxcdpb`), [`errors::EtcdError`] and the table of etcd's
//! client-visible errors. With the `json` feature, etcd's messages also implement serde's
//! traits with the JSON mapping etcd's gRPC gateway speaks (see `build.rs`).
//!
//! Invariant: no logic lives here beyond conversions; every other crate speaks these
//! types.

#![allow(clippy::all, clippy::unwrap_used)]

pub mod errors;

/// Key-value and event messages (`mvccpb`).
pub mod mvccpb {
    tonic::include_proto!("mvccpb");
    #[cfg(feature = "json")]
    include!(concat!(env!("OUT_DIR"), "/mvccpb.serde.rs"));
}

/// Users, roles and permissions (`authpb`).
pub mod authpb {
    tonic::include_proto!("authpb");
    #[cfg(feature = "json")]
    include!(concat!(env!("OUT_DIR"), "/authpb.serde.rs"));
}

/// The etcd v3 services and their messages (`etcdserverpb`).
pub mod etcdserverpb {
    tonic::include_proto!("etcdserverpb");
    #[cfg(feature = "json")]
    include!(concat!(env!("OUT_DIR"), "/etcdserverpb.serde.rs"));
}

/// The distributed lock service (`v3lockpb`).
pub mod v3lockpb {
    tonic::include_proto!("v3lockpb");
    #[cfg(feature = "json")]
    include!(concat!(env!("OUT_DIR"), "/v3lockpb.serde.rs"));
}

/// The leader election service (`v3electionpb`).
pub mod v3electionpb {
    tonic::include_proto!("v3electionpb");
    #[cfg(feature = "json")]
    include!(concat!(env!("OUT_DIR"), "/v3electionpb.serde.rs"));
}

/// gRPC's health checking protocol (`grpc.health.v1`), served as etcd serves it.
pub mod grpc_health_v1 {
    tonic::include_proto!("grpc.health.v1");
}

/// etcd's membership requests in its raft log (`membershippb`).
pub mod membershippb {
    tonic::include_proto!("membershippb");
    #[cfg(feature = "json")]
    include!(concat!(env!("OUT_DIR"), "/membershippb.serde.rs"));
}

/// etcd's lease messages between members (`leasepb`).
pub mod leasepb {
    tonic::include_proto!("leasepb");
}

/// oxcd's internal, replicated log entries (`oxcdpb`).
pub mod oxcdpb {
    tonic::include_proto!("oxcdpb");
}
