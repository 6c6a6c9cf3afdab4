//! The gateway's paths, as etcd's protos declare them (`google.api.http` options,
//! additional bindings included), each to the gRPC method it stands for.

use std::sync::Arc;

use axum::Router;
use axum::extract::Request as HttpRequest;
use axum::routing::{MethodRouter, post};
use oxcd_api::etcdserverpb::auth_server::Auth;
use oxcd_api::etcdserverpb::cluster_server::Cluster;
use oxcd_api::etcdserverpb::kv_server::Kv;
use oxcd_api::etcdserverpb::lease_server::Lease;
use oxcd_api::etcdserverpb::maintenance_server::Maintenance;
use oxcd_api::v3electionpb::election_server::Election;
use oxcd_api::v3lockpb::lock_server::Lock;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tonic::Request;

use super::{Answer, Gateway, reply, streams};
use crate::edge::services::Services;

/// A POST route of a unary method: `call` of `service`, as gRPC's `grpc` method.
fn unary<S, Req, Resp, F>(
    gw: &Arc<Gateway>,
    service: &Arc<S>,
    grpc: &'static str,
    call: F,
) -> MethodRouter
where
    S: Send + Sync + 'static,
    Req: DeserializeOwned + Default + prost::Message + Send + 'static,
    Resp: Serialize + Send + 'static,
    F: for<'a> Fn(&'a S, Request<Req>) -> Answer<'a, Resp> + Clone + Send + Sync + 'static,
{
    let (gw, service) = (gw.clone(), service.clone());
    post(move |req: HttpRequest| {
        let (gw, service, call) = (gw.clone(), service.clone(), call.clone());
        async move { gw.unary(grpc, req, &*service, call).await }
    })
    .fallback(|| async { reply::method_not_allowed() })
}

/// A POST route served by `handler`.
fn stream<H, T>(handler: H) -> MethodRouter
where
    H: axum::handler::Handler<T, ()>,
    T: 'static,
{
    post(handler).fallback(|| async { reply::method_not_allowed() })
}

/// The gateway's routes under `/v3/` and `/v3beta/`, with at most `max_streams` calls
/// in flight.
pub fn routes(services: &Services, max_streams: u32) -> Router {
    let gw = Arc::new(Gateway::new(services, max_streams));
    let kv = services.kv_service.clone();
    let lease = services.lease.clone();
    let cluster = services.cluster.clone();
    let mt = services.maintenance.clone();
    let auth = services.auth.clone();
    let lock = services.lock.clone();
    let election = services.election.clone();

    let revoke = unary(&gw, &lease, "/etcdserverpb.Lease/LeaseRevoke", |s, r| {
        s.lease_revoke(r)
    });
    let time_to_live = unary(
        &gw,
        &lease,
        "/etcdserverpb.Lease/LeaseTimeToLive",
        |s, r| s.lease_time_to_live(r),
    );
    let leases = unary(&gw, &lease, "/etcdserverpb.Lease/LeaseLeases", |s, r| {
        s.lease_leases(r)
    });
    let v3 = Router::new()
        .route(
            "/kv/range",
            unary(&gw, &kv, "/etcdserverpb.KV/Range", |s, r| s.range(r)),
        )
        .route(
            "/kv/put",
            unary(&gw, &kv, "/etcdserverpb.KV/Put", |s, r| s.put(r)),
        )
        .route(
            "/kv/deleterange",
            unary(&gw, &kv, "/etcdserverpb.KV/DeleteRange", |s, r| {
                s.delete_range(r)
            }),
        )
        .route(
            "/kv/txn",
            unary(&gw, &kv, "/etcdserverpb.KV/Txn", |s, r| s.txn(r)),
        )
        .route(
            "/kv/compaction",
            unary(&gw, &kv, "/etcdserverpb.KV/Compact", |s, r| s.compact(r)),
        )
        .route(
            "/watch",
            stream({
                let gw = gw.clone();
                move |req: HttpRequest| streams::watch(gw.clone(), req)
            }),
        )
        .route(
            "/lease/grant",
            unary(&gw, &lease, "/etcdserverpb.Lease/LeaseGrant", |s, r| {
                s.lease_grant(r)
            }),
        )
        .route("/lease/revoke", revoke.clone())
        .route("/kv/lease/revoke", revoke)
        .route(
            "/lease/keepalive",
            stream({
                let (gw, lease) = (gw.clone(), lease.clone());
                move |req: HttpRequest| streams::keep_alive(gw.clone(), lease.clone(), req)
            }),
        )
        .route("/lease/timetolive", time_to_live.clone())
        .route("/kv/lease/timetolive", time_to_live)
        .route("/lease/leases", leases.clone())
        .route("/kv/lease/leases", leases)
        .route(
            "/cluster/member/add",
            unary(&gw, &cluster, "/etcdserverpb.Cluster/MemberAdd", |s, r| {
                s.member_add(r)
            }),
        )
        .route(
            "/cluster/member/remove",
            unary(
                &gw,
                &cluster,
                "/etcdserverpb.Cluster/MemberRemove",
                |s, r| s.member_remove(r),
            ),
        )
        .route(
            "/cluster/member/update",
            unary(
                &gw,
                &cluster,
                "/etcdserverpb.Cluster/MemberUpdate",
                |s, r| s.member_update(r),
            ),
        )
        .route(
            "/cluster/member/list",
            unary(&gw, &cluster, "/etcdserverpb.Cluster/MemberList", |s, r| {
                s.member_list(r)
            }),
        )
        .route(
            "/cluster/member/promote",
            unary(
                &gw,
                &cluster,
                "/etcdserverpb.Cluster/MemberPromote",
                |s, r| s.member_promote(r),
            ),
        )
        .route(
            "/maintenance/alarm",
            unary(&gw, &mt, "/etcdserverpb.Maintenance/Alarm", |s, r| {
                s.alarm(r)
            }),
        )
        .route(
            "/maintenance/status",
            unary(&gw, &mt, "/etcdserverpb.Maintenance/Status", |s, r| {
                s.status(r)
            }),
        )
        .route(
            "/maintenance/defragment",
            unary(&gw, &mt, "/etcdserverpb.Maintenance/Defragment", |s, r| {
                s.defragment(r)
            }),
        )
        .route(
            "/maintenance/hash",
            unary(&gw, &mt, "/etcdserverpb.Maintenance/Hash", |s, r| s.hash(r)),
        )
        .route(
            "/maintenance/hashkv",
            unary(&gw, &mt, "/etcdserverpb.Maintenance/HashKV", |s, r| {
                s.hash_kv(r)
            }),
        )
        .route(
            "/maintenance/snapshot",
            stream({
                let (gw, mt) = (gw.clone(), mt.clone());
                move |req: HttpRequest| streams::snapshot(gw.clone(), mt.clone(), req)
            }),
        )
        .route(
            "/maintenance/transfer-leadership",
            unary(&gw, &mt, "/etcdserverpb.Maintenance/MoveLeader", |s, r| {
                s.move_leader(r)
            }),
        )
        .route(
            "/maintenance/downgrade",
            unary(&gw, &mt, "/etcdserverpb.Maintenance/Downgrade", |s, r| {
                s.downgrade(r)
            }),
        )
        .route(
            "/auth/enable",
            unary(&gw, &auth, "/etcdserverpb.Auth/AuthEnable", |s, r| {
                s.auth_enable(r)
            }),
        )
        .route(
            "/auth/disable",
            unary(&gw, &auth, "/etcdserverpb.Auth/AuthDisable", |s, r| {
                s.auth_disable(r)
            }),
        )
        .route(
            "/auth/status",
            unary(&gw, &auth, "/etcdserverpb.Auth/AuthStatus", |s, r| {
                s.auth_status(r)
            }),
        )
        .route(
            "/auth/authenticate",
            unary(&gw, &auth, "/etcdserverpb.Auth/Authenticate", |s, r| {
                s.authenticate(r)
            }),
        )
        .route(
            "/auth/user/add",
            unary(&gw, &auth, "/etcdserverpb.Auth/UserAdd", |s, r| {
                s.user_add(r)
            }),
        )
        .route(
            "/auth/user/get",
            unary(&gw, &auth, "/etcdserverpb.Auth/UserGet", |s, r| {
                s.user_get(r)
            }),
        )
        .route(
            "/auth/user/list",
            unary(&gw, &auth, "/etcdserverpb.Auth/UserList", |s, r| {
                s.user_list(r)
            }),
        )
        .route(
            "/auth/user/delete",
            unary(&gw, &auth, "/etcdserverpb.Auth/UserDelete", |s, r| {
                s.user_delete(r)
            }),
        )
        .route(
            "/auth/user/changepw",
            unary(
                &gw,
                &auth,
                "/etcdserverpb.Auth/UserChangePassword",
                |s, r| s.user_change_password(r),
            ),
        )
        .route(
            "/auth/user/grant",
            unary(&gw, &auth, "/etcdserverpb.Auth/UserGrantRole", |s, r| {
                s.user_grant_role(r)
            }),
        )
        .route(
            "/auth/user/revoke",
            unary(&gw, &auth, "/etcdserverpb.Auth/UserRevokeRole", |s, r| {
                s.user_revoke_role(r)
            }),
        )
        .route(
            "/auth/role/add",
            unary(&gw, &auth, "/etcdserverpb.Auth/RoleAdd", |s, r| {
                s.role_add(r)
            }),
        )
        .route(
            "/auth/role/get",
            unary(&gw, &auth, "/etcdserverpb.Auth/RoleGet", |s, r| {
                s.role_get(r)
            }),
        )
        .route(
            "/auth/role/list",
            unary(&gw, &auth, "/etcdserverpb.Auth/RoleList", |s, r| {
                s.role_list(r)
            }),
        )
        .route(
            "/auth/role/delete",
            unary(&gw, &auth, "/etcdserverpb.Auth/RoleDelete", |s, r| {
                s.role_delete(r)
            }),
        )
        .route(
            "/auth/role/grant",
            unary(
                &gw,
                &auth,
                "/etcdserverpb.Auth/RoleGrantPermission",
                |s, r| s.role_grant_permission(r),
            ),
        )
        .route(
            "/auth/role/revoke",
            unary(
                &gw,
                &auth,
                "/etcdserverpb.Auth/RoleRevokePermission",
                |s, r| s.role_revoke_permission(r),
            ),
        )
        .route(
            "/lock/lock",
            unary(&gw, &lock, "/v3lockpb.Lock/Lock", |s, r| s.lock(r)),
        )
        .route(
            "/lock/unlock",
            unary(&gw, &lock, "/v3lockpb.Lock/Unlock", |s, r| s.unlock(r)),
        )
        .route(
            "/election/campaign",
            unary(&gw, &election, "/v3electionpb.Election/Campaign", |s, r| {
                s.campaign(r)
            }),
        )
        .route(
            "/election/proclaim",
            unary(&gw, &election, "/v3electionpb.Election/Proclaim", |s, r| {
                s.proclaim(r)
            }),
        )
        .route(
            "/election/leader",
            unary(&gw, &election, "/v3electionpb.Election/Leader", |s, r| {
                s.leader(r)
            }),
        )
        .route(
            "/election/observe",
            stream({
                let (gw, election) = (gw.clone(), election.clone());
                move |req: HttpRequest| streams::observe(gw.clone(), election.clone(), req)
            }),
        )
        .route(
            "/election/resign",
            unary(&gw, &election, "/v3electionpb.Election/Resign", |s, r| {
                s.resign(r)
            }),
        )
        .fallback(|| async { reply::not_found() });
    Router::new().nest("/v3", v3.clone()).nest("/v3beta", v3)
}
