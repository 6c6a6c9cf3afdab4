//! gRPC's health checking service (`grpc.health.v1.Health`) on the client port, compared
//! with etcd 3.5.16's (etcd's `server/etcdserver/api/v3rpc/grpc.go` registers grpc-go's
//! health server; `health.go` marks the server as a whole SERVING): the same answers to
//! Check and Watch, for the whole server ("") and for a service nobody registered.

use crate::common;

use common::InProc;
use common::etcd::on_etcd_then_oxcd;
use oxcd_api::grpc_health_v1::health_check_response::ServingStatus;
use oxcd_api::grpc_health_v1::health_client::HealthClient;
use oxcd_api::grpc_health_v1::{HealthCheckRequest, HealthCheckResponse};

/// What one server answers.
#[derive(Debug, PartialEq)]
struct Answers {
    /// Check of "": its status.
    check_whole: Result<ServingStatus, (tonic::Code, String)>,
    /// Check of a service nobody registered.
    check_unknown: Result<ServingStatus, (tonic::Code, String)>,
    /// The first answer of a Watch of "".
    watch_whole: ServingStatus,
    /// The first answer of a Watch of a service nobody registered.
    watch_unknown: ServingStatus,
}

async fn check(
    c: &mut HealthClient<tonic::transport::Channel>,
    service: &str,
) -> Result<ServingStatus, (tonic::Code, String)> {
    c.check(HealthCheckRequest {
        service: service.to_string(),
    })
    .await
    .map(|r| r.into_inner().status())
    .map_err(|s| (s.code(), s.message().to_string()))
}

async fn first_watched(
    c: &mut HealthClient<tonic::transport::Channel>,
    service: &str,
) -> ServingStatus {
    let mut stream = c
        .watch(HealthCheckRequest {
            service: service.to_string(),
        })
        .await
        .expect("watch")
        .into_inner();
    stream
        .message()
        .await
        .expect("watch answer")
        .expect("a first answer")
        .status()
}

async fn answers(url: &str) -> Answers {
    let mut c = HealthClient::connect(url.to_string())
        .await
        .expect("connect");
    Answers {
        check_whole: check(&mut c, "").await,
        check_unknown: check(&mut c, "etcdserverpb.KV").await,
        watch_whole: first_watched(&mut c, "").await,
        watch_unknown: first_watched(&mut c, "etcdserverpb.KV").await,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_answer_as_etcds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (theirs, ours) =
        on_etcd_then_oxcd(dir.path(), |url| async move { answers(&url).await }).await;
    assert_eq!(
        ours,
        Answers {
            check_whole: Ok(ServingStatus::Serving),
            check_unknown: Err((tonic::Code::NotFound, "unknown service".to_string())),
            watch_whole: ServingStatus::Serving,
            watch_unknown: ServingStatus::ServiceUnknown,
        }
    );
    assert_eq!(ours, theirs, "oxcd's answers differ from etcd's");
}

/// A Watch of the whole server ("") at `url`.
async fn watch_whole_server(url: &str) -> tonic::Streaming<HealthCheckResponse> {
    let mut c = HealthClient::connect(url.to_string())
        .await
        .expect("connect");
    c.watch(HealthCheckRequest {
        service: String::new(),
    })
    .await
    .expect("watch")
    .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_hears_not_serving_when_the_member_stops() {
    // Not etcd's: etcd 3.5 and 3.6 only end the stream when they stop (they mark the
    // server NOT_SERVING only during a defragmentation, behind 3.6's
    // StopGRPCServiceOnDefrag gate). A load balancer watching oxcd hears the stop first.
    let dir = tempfile::tempdir().expect("tempdir");
    let oxcd = InProc::start(dir.path().join("oxcd"), |_| {}).await;
    let mut stream = watch_whole_server(&oxcd.endpoint()).await;
    let first = stream.message().await.expect("answer").expect("first");
    assert_eq!(first.status(), ServingStatus::Serving);
    oxcd.stop().await;
    let next = stream.message().await.expect("answer").expect("second");
    assert_eq!(next.status(), ServingStatus::NotServing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_stop_on_defrag_a_defragmenting_member_is_not_serving() {
    // etcd 3.5's --experimental-stop-grpc-service-on-defrag (server/etcdserver/api/v3rpc/
    // health.go: defragStarted marks "" NOT_SERVING, defragFinished SERVING again).
    let dir = tempfile::tempdir().expect("tempdir");
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| {
        s.stop_grpc_service_on_defrag = true
    })
    .await;
    // Enough data that the copy takes a while.
    let mut kv = etcd_client::Client::connect([oxcd.endpoint()], None)
        .await
        .expect("connect");
    let value = vec![b'v'; 4096];
    for i in 0..3000 {
        kv.put(format!("k{i:05}"), value.clone(), None)
            .await
            .expect("put");
    }
    let mut stream = watch_whole_server(&oxcd.endpoint()).await;
    let mut seen = vec![
        stream
            .message()
            .await
            .expect("answer")
            .expect("first")
            .status(),
    ];
    let mut maintenance = kv.maintenance_client();
    let defrag = tokio::spawn(async move { maintenance.defragment().await.map(drop) });
    while seen.last() != Some(&ServingStatus::Serving) || seen.len() < 3 {
        let next = stream.message().await.expect("answer").expect("next");
        seen.push(next.status());
    }
    defrag.await.expect("task").expect("defragment");
    assert_eq!(
        seen,
        [
            ServingStatus::Serving,
            ServingStatus::NotServing,
            ServingStatus::Serving
        ]
    );
    oxcd.stop().await;
}
