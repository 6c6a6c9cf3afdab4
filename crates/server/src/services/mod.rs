//! The gRPC services: thin handlers that validate, call the member, and map errors.
//! Services whose features are not built yet (Auth) are registered with every method
//! answering gRPC `Unimplemented`, so clients get a clear answer instead of a 404.

pub mod auth;
pub mod caller;
pub mod cluster;
pub mod election;
pub mod kv;
pub mod kv_range;
pub mod learner_gate;
pub mod lease;
pub mod lock;
pub mod maintenance;
mod observe;
pub mod recipes;
pub mod watch;

use std::sync::Arc;

use oxcd_api::etcdserverpb::auth_server::AuthServer;
use oxcd_api::etcdserverpb::cluster_server::ClusterServer;
use oxcd_api::etcdserverpb::lease_server::LeaseServer;
use oxcd_api::etcdserverpb::maintenance_server::MaintenanceServer;
use oxcd_api::v3electionpb::election_server::ElectionServer;
use oxcd_api::v3lockpb::lock_server::LockServer;
use tonic::service::Routes;

use crate::lease::renewals::Renewals;
use crate::member::Member;

/// A service whose methods all answer Unimplemented (the generated defaults).
/// gRPC's own framing overhead allowed on top of `--max-request-bytes` (as etcd).
pub(crate) const GRPC_OVERHEAD_BYTES: usize = 512 * 1024;

/// Every etcd service, ready to serve.
pub fn routes(member: Arc<Member>, renewals: Arc<Renewals>) -> Routes {
    let max = member.limits.max_request_bytes + GRPC_OVERHEAD_BYTES;
    Routes::new(kv_range::KvRoutes::new(member.clone(), max))
        .add_service(MaintenanceServer::new(
            maintenance::MaintenanceService::new(member.clone()),
        ))
        .add_service(ClusterServer::new(cluster::ClusterService::new(
            member.clone(),
        )))
        .add_service(watch::WatchService::new(member.clone()))
        .add_service(LeaseServer::new(lease::LeaseService::new(
            member.clone(),
            renewals,
        )))
        .add_service(AuthServer::new(auth::AuthService::new(member.clone())))
        .add_service(LockServer::new(lock::LockService::new(member.clone())))
        .add_service(ElectionServer::new(election::ElectionService::new(member)))
}
