//! The gRPC routes: every etcd service on one router. The replicated domains' services
//! live with their domain ([`crate::domains`]); here are the services that are not one
//! domain's ([`maintenance`], and the [`lock`] and [`election`] recipes over KV, with
//! `observe` and [`recipes`]), gRPC's health protocol ([`grpc_health`]) and the learner
//! gate in front of them all.

pub mod election;
pub mod grpc_health;
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
use oxcd_api::grpc_health_v1::health_server::HealthServer;
use oxcd_api::v3electionpb::election_server::ElectionServer;
use oxcd_api::v3lockpb::lock_server::LockServer;
use tonic::service::Routes;

use crate::domains::auth::service::AuthService;
use crate::domains::kv::KvHandles;
use crate::domains::kv::routes::KvRoutes;
use crate::domains::kv::service::KvService;
use crate::domains::lease::service::LeaseService;
use crate::domains::membership::service::ClusterService;
use crate::domains::watch::WatchHandles;
use crate::domains::watch::service::WatchService;

/// Every client-facing service, each over the handles it needs (start-up builds them
/// from the member); gRPC and the JSON gateway serve the same ones.
pub struct Services {
    /// KV: served by hand for Range, by [`KvService`] for the rest.
    pub kv: Arc<KvHandles>,
    /// KV's writes and compaction.
    pub kv_service: Arc<KvService>,
    /// Watch streams.
    pub watch: Arc<WatchHandles>,
    /// Leases.
    pub lease: Arc<LeaseService>,
    /// Membership.
    pub cluster: Arc<ClusterService>,
    /// Maintenance.
    pub maintenance: Arc<maintenance::MaintenanceService>,
    /// Users, roles, tokens.
    pub auth: Arc<AuthService>,
    /// Lock.
    pub lock: Arc<lock::LockService>,
    /// Election.
    pub election: Arc<election::ElectionService>,
    /// gRPC's health checking protocol.
    pub health: Arc<grpc_health::HealthService>,
    /// The largest gRPC message a client may send or be sent.
    pub max_grpc_message: usize,
}

/// Every etcd service, ready to serve.
pub fn routes(services: &Services) -> Routes {
    let max = services.max_grpc_message;
    Routes::new(KvRoutes::new(
        services.kv.clone(),
        services.kv_service.clone(),
        max,
    ))
    .add_service(MaintenanceServer::from_arc(services.maintenance.clone()))
    .add_service(ClusterServer::from_arc(services.cluster.clone()))
    .add_service(WatchService::new(services.watch.clone()))
    .add_service(LeaseServer::from_arc(services.lease.clone()))
    .add_service(AuthServer::from_arc(services.auth.clone()))
    .add_service(LockServer::from_arc(services.lock.clone()))
    .add_service(ElectionServer::from_arc(services.election.clone()))
    .add_service(HealthServer::from_arc(services.health.clone()))
}
