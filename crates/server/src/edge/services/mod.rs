//! The gRPC routes: every etcd service on one router. The replicated domains' services
//! live with their domain ([`crate::domains`]); here are the services that are not one
//! domain's ([`maintenance`], and the [`lock`] and [`election`] recipes over KV, with
//! `observe` and [`recipes`]) and the learner gate in front of them all.

pub mod election;
pub mod learner_gate;
pub mod lock;
pub mod maintenance;
mod observe;
pub mod recipes;

use std::sync::Arc;

use oxcd_api::etcdserverpb::auth_server::AuthServer;
use oxcd_api::etcdserverpb::cluster_server::ClusterServer;
use oxcd_api::etcdserverpb::lease_server::LeaseServer;
use oxcd_api::etcdserverpb::maintenance_server::MaintenanceServer;
use oxcd_api::v3electionpb::election_server::ElectionServer;
use oxcd_api::v3lockpb::lock_server::LockServer;
use tonic::service::Routes;

use crate::domains::auth::service::AuthService;
use crate::domains::kv::routes::KvRoutes;
use crate::domains::lease::renewals::Renewals;
use crate::domains::lease::service::LeaseService;
use crate::domains::membership::service::ClusterService;
use crate::domains::watch::service::WatchService;
use crate::machine::member::Member;

/// Every etcd service, ready to serve.
pub fn routes(member: Arc<Member>, renewals: Arc<Renewals>) -> Routes {
    let max = member.limits.max_grpc_message();
    Routes::new(KvRoutes::new(member.clone(), max))
        .add_service(MaintenanceServer::new(
            maintenance::MaintenanceService::new(member.clone()),
        ))
        .add_service(ClusterServer::new(ClusterService::new(member.clone())))
        .add_service(WatchService::new(member.clone()))
        .add_service(LeaseServer::new(LeaseService::new(
            member.clone(),
            renewals,
        )))
        .add_service(AuthServer::new(AuthService::new(member.clone())))
        .add_service(LockServer::new(lock::LockService::new(member.clone())))
        .add_service(ElectionServer::new(election::ElectionService::new(member)))
}
