//! What a learner serves, as etcd: `Status` and serializable `Range` (the range service
//! refuses a linearizable one); every other RPC, streams included, is refused with
//! "etcdserver: rpc not supported for learner". A member that is not a learner pays one
//! atomic load per request.

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use oxcd_api::errors::EtcdError;

use crate::domains::membership::Membership;

/// The gRPC methods a learner serves.
const FOR_LEARNERS: [&str; 2] = ["/etcdserverpb.KV/Range", "/etcdserverpb.Maintenance/Status"];

/// Whether `path` names one of the gRPC services etcd serves (its interceptors refuse
/// every call a learner does not serve, gRPC's health checks included).
fn is_grpc(path: &str) -> bool {
    [
        "/etcdserverpb.",
        "/v3lockpb.",
        "/v3electionpb.",
        "/grpc.health.v1.",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}

/// Whether this member (its `membership`) refuses the gRPC method at `path`
/// (`/etcdserverpb.KV/Put`) because it is a learner; the gateway asks it of the method a
/// path stands for.
pub fn refuses(membership: &Membership, path: &str) -> bool {
    membership.is_learner() && is_grpc(path) && !FOR_LEARNERS.contains(&path)
}

/// The answer a learner gives an RPC it does not serve.
pub fn refusal() -> Response {
    let status: tonic::Status = EtcdError::LearnerNotSupported.into();
    status.into_http::<Body>().into_response()
}
