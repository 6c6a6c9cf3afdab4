//! The versions a member reports and the cluster version the members negotiate, as
//! etcd 3.6 does (no etcd 3.6 binary can be run here; each expectation names the etcd
//! file it follows):
//! - `/version` on the client and the peer port (etcd v3.6.14
//!   `server/etcdserver/api/etcdhttp/version.go`), Status's 3.6 fields
//!   (`api/v3rpc/maintenance.go` `Status`), HashKV's `hash_revision`
//!   (`storage/mvcc/kvstore.go` `hashByRev`), the snapshot's `version` on every message
//!   (`maintenance.go` `Snapshot`), `etcd_server_version` and `etcd_cluster_version`
//!   (`etcdserver/metrics.go`, `api/membership/metrics.go`);
//! - the cluster version: the lowest member release, decided by the leader and
//!   replicated (`etcdserver/version/monitor.go`), the storage version following it
//!   (`UpdateStorageVersionIfNeeded`), a backend from a newer release refused
//!   (`storage/schema/schema.go` `Validate`).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common;

use common::InProc;
use common::cluster::{cluster_of, configure};
use oxcd_api::etcdserverpb::downgrade_request::DowngradeAction;
use oxcd_api::etcdserverpb::maintenance_client::MaintenanceClient;
use oxcd_api::etcdserverpb::{
    DowngradeRequest, HashKvRequest, SnapshotRequest, StatusRequest, StatusResponse,
};

/// A body fetched with curl (`GET url`).
async fn get(url: &str) -> String {
    let out = tokio::process::Command::new("curl")
        .args(["-s", url])
        .output()
        .await
        .expect("curl (apt-get install -y curl)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits until `url`'s `/version` body is `want`; the last body seen otherwise.
async fn version_becomes(url: &str, want: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let body = get(&format!("{url}/version")).await;
        if body == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn status(m: &InProc) -> StatusResponse {
    MaintenanceClient::new(m.channel())
        .status(StatusRequest {})
        .await
        .expect("status")
        .into_inner()
}

const V36: &str = r#"{"etcdserver":"3.6.14","etcdcluster":"3.6.0","storage":"3.6.0"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_reports_itself_as_etcd_3_6_everywhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    let peer = format!("http://127.0.0.1:{}", common::free_port());
    let peer_url = peer.clone();
    let m = InProc::start(dir.path().join("m"), move |s| {
        s.listen_peer_urls = vec![peer_url.clone()];
        s.peer_urls = vec![peer_url];
    })
    .await;
    version_becomes(&m.endpoint(), V36)
        .await
        .expect("the cluster and storage versions decided");
    assert_eq!(
        get(&format!("{peer}/version")).await,
        V36,
        "the peer port's /version"
    );

    let st = status(&m).await;
    assert_eq!(st.version, "3.6.14");
    assert_eq!(st.storage_version, "3.6.0");
    assert_eq!(st.db_size_quota, 2 << 30, "0 is etcd's 2 GiB (3.6.6+)");
    let d = st.downgrade_info.expect("downgradeInfo is always set");
    assert!(!d.enabled && d.target_version.is_empty());

    let mut c = m.client().await;
    for i in 0..5 {
        c.put(format!("k{i}"), "v", None).await.expect("put");
    }
    let mut mc = MaintenanceClient::new(m.channel());
    let now = mc
        .hash_kv(HashKvRequest { revision: 0 })
        .await
        .expect("hashkv")
        .into_inner();
    let current = now.header.as_ref().map(|h| h.revision).unwrap_or_default();
    assert_eq!(now.hash_revision, current, "0 hashes the current revision");
    let at3 = mc
        .hash_kv(HashKvRequest { revision: 3 })
        .await
        .expect("hashkv at 3")
        .into_inner();
    assert_eq!(at3.hash_revision, 3);

    let mut snap = mc
        .snapshot(SnapshotRequest {})
        .await
        .expect("snapshot")
        .into_inner();
    let mut messages = 0;
    while let Some(msg) = snap.message().await.expect("snapshot message") {
        assert_eq!(msg.version, "3.6.0", "every message, the checksum's too");
        messages += 1;
    }
    assert!(messages >= 2, "data and checksum");

    let metrics = common::scrape(&m.endpoint()).await;
    assert!(
        metrics.contains("etcd_server_version{server_version=\"3.6.14\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("etcd_cluster_version{cluster_version=\"3.6\"} 1"),
        "{metrics}"
    );

    // etcd v3.6.14 server/etcdserver/metrics.go: every gate, labelled with its stage;
    // 3.5's debugging copy of the range count is gone.
    for sample in [
        "etcd_server_feature_enabled{name=\"StopGRPCServiceOnDefrag\",stage=\"ALPHA\"} 0",
        "etcd_server_feature_enabled{name=\"TxnModeWriteWithSharedBuffer\",stage=\"BETA\"} 1",
        "etcd_server_feature_enabled{name=\"AllAlpha\",stage=\"ALPHA\"} 0",
    ] {
        assert!(metrics.contains(sample), "{sample} in {metrics}");
    }
    assert!(!metrics.contains("etcd_debugging_mvcc_range_total"));
    // etcd v3.6.14 api/membership/cluster.go buildMembershipMetric, apply/apply.go Alarm.
    let me = format!(
        "{:x}",
        st.header.as_ref().map(|h| h.member_id).unwrap_or_default()
    );
    let known = format!("etcd_network_known_peers{{Local=\"{me}\",Remote=\"{me}\"}} 1");
    assert!(metrics.contains(&known), "{known} in {metrics}");
    mc.alarm(oxcd_api::etcdserverpb::AlarmRequest {
        action: oxcd_api::etcdserverpb::alarm_request::AlarmAction::Activate as i32,
        member_id: st.header.as_ref().map(|h| h.member_id).unwrap_or_default(),
        alarm: oxcd_api::etcdserverpb::AlarmType::Nospace as i32,
    })
    .await
    .expect("raise an alarm");
    let metrics = common::scrape(&m.endpoint()).await;
    let alarm =
        format!("etcd_debugging_server_alarms{{alarm_type=\"NOSPACE\",server_id=\"{me}\"}} 1");
    assert!(metrics.contains(&alarm), "{alarm} in {metrics}");
    mc.alarm(oxcd_api::etcdserverpb::AlarmRequest {
        action: oxcd_api::etcdserverpb::alarm_request::AlarmAction::Deactivate as i32,
        member_id: st.header.as_ref().map(|h| h.member_id).unwrap_or_default(),
        alarm: oxcd_api::etcdserverpb::AlarmType::Nospace as i32,
    })
    .await
    .expect("clear the alarm");
    // A cleared alarm's sample stays, at 0 (v3.6.14 server/etcdserver/apply/apply.go
    // Alarm: the gauge is decremented); 3.6's Range timing and the apply timings.
    let mut c = m.client().await;
    c.get("k", None).await.expect("get");
    let metrics = common::scrape(&m.endpoint()).await;
    let cleared =
        format!("etcd_debugging_server_alarms{{alarm_type=\"NOSPACE\",server_id=\"{me}\"}} 0");
    for want in [
        cleared.as_str(),
        "etcd_server_range_duration_seconds_count{success=\"true\"} ",
        "etcd_server_apply_duration_seconds_count{op=\"Alarm\",success=\"true\",version=\"v3\"} 2",
        "etcd_server_slow_apply_total ",
    ] {
        assert!(metrics.contains(want), "{want} in {metrics}");
    }

    // The gateway's JSON (grpc-gateway leaves zero fields out; a set message stays).
    let out = tokio::process::Command::new("curl")
        .args([
            "-s",
            "-X",
            "POST",
            "-d",
            "{}",
            &format!("{}/v3/maintenance/status", m.endpoint()),
        ])
        .output()
        .await
        .expect("curl");
    let body = String::from_utf8_lossy(&out.stdout);
    for field in [
        r#""version":"3.6.14""#,
        r#""storageVersion":"3.6.0""#,
        r#""dbSizeQuota":"2147483648""#,
        r#""downgradeInfo":{}"#,
    ] {
        assert!(body.contains(field), "{field} in {body}");
    }
    m.stop().await;
}

/// Three members, `m{emulated}` acting as etcd 3.5.
async fn three_with_a_3_5(dir: &Path, emulated: usize) -> (Vec<InProc>, Vec<u16>) {
    let peers: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let cluster = cluster_of(&peers);
    let start = |i: usize| {
        let cluster = cluster.clone();
        InProc::start(dir.join(format!("m{i}")), move |s| {
            configure(s, i, &cluster);
            if i == emulated {
                s.emulated_version = oxcd_go::semver::Version::new(3, 5, 0);
            }
        })
    };
    let (a, b, c) = tokio::join!(start(0), start(1), start(2));
    (vec![a, b, c], peers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cluster_version_is_the_lowest_release_and_rises_when_it_goes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, peers) = three_with_a_3_5(dir.path(), 2).await;
    // The 3.6 members: cluster 3.5, their storage brought down to 3.5 (no key: 3.5 is
    // detected from the applied term).
    let v35_on_36 = r#"{"etcdserver":"3.6.14","etcdcluster":"3.5.0","storage":"3.5.0"}"#;
    for m in &members[..2] {
        version_becomes(&m.endpoint(), v35_on_36)
            .await
            .expect("cluster version 3.5 on a 3.6 member");
    }
    // The 3.5 member prints 3.5's /version, and 3.5's Status.
    let v35 = r#"{"etcdserver":"3.5.17","etcdcluster":"3.5.0"}"#;
    version_becomes(&members[2].endpoint(), v35)
        .await
        .expect("3.5's /version on the 3.5 member");
    let st = status(&members[2]).await;
    assert_eq!(st.version, "3.5.17");
    assert!(st.storage_version.is_empty() && st.db_size_quota == 0);
    assert!(st.downgrade_info.is_none());
    let metrics = common::scrape(&members[2].endpoint()).await;
    assert!(
        metrics.contains("etcd_debugging_mvcc_range_total")
            && !metrics.contains("etcd_server_feature_enabled")
            && !metrics.contains("etcd_server_range_duration_seconds"),
        "3.5's families on the 3.5 member"
    );

    let metrics = common::scrape(&members[0].endpoint()).await;
    assert!(
        metrics.contains("etcd_cluster_version{cluster_version=\"3.5\"} 1"),
        "{metrics}"
    );

    // The 3.5 member comes back as 3.6: the cluster goes to 3.6 on every member, and
    // the old version's metric sample stays at 0.
    let m2 = members.pop().expect("m2");
    let data = m2.data_dir.clone();
    m2.stop().await;
    let cluster = cluster_of(&peers);
    members.push(InProc::start(data, move |s| configure(s, 2, &cluster)).await);
    for m in &members {
        version_becomes(&m.endpoint(), V36)
            .await
            .expect("cluster version 3.6 once every member runs 3.6");
    }
    let metrics = common::scrape(&members[0].endpoint()).await;
    assert!(
        metrics.contains("etcd_cluster_version{cluster_version=\"3.5\"} 0")
            && metrics.contains("etcd_cluster_version{cluster_version=\"3.6\"} 1"),
        "{metrics}"
    );
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_refuses_a_data_dir_of_a_newer_release() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("m");
    let m = InProc::start(data.clone(), |_| {}).await;
    version_becomes(&m.endpoint(), V36)
        .await
        .expect("3.6 storage");
    m.stop().await;
    // etcd v3.6.14 storage/schema/schema.go Validate → newPlan: a storage version the
    // binary does not know stops it.
    let e = InProc::try_start(data, |s| {
        s.emulated_version = oxcd_go::semver::Version::new(3, 5, 0)
    })
    .await
    .err()
    .expect("a 3.5 member must refuse 3.6 storage");
    assert!(e.contains(r#"version "3.6" is not supported"#), "{e}");
}

async fn downgrade(
    m: &InProc,
    action: DowngradeAction,
    version: &str,
) -> Result<String, (tonic::Code, String)> {
    MaintenanceClient::new(m.channel())
        .downgrade(DowngradeRequest {
            action: action as i32,
            version: version.to_string(),
        })
        .await
        .map(|r| r.into_inner().version)
        .map_err(|s| (s.code(), s.message().to_string()))
}

/// Stops member `i` of `members` (on `peers`) and starts it again from its data dir,
/// acting as `release` (`X.Y.0`).
async fn restart_as(
    members: &mut Vec<InProc>,
    peers: &[u16],
    i: usize,
    release: oxcd_go::semver::Version,
) {
    let cluster = cluster_of(peers);
    let old = members.remove(i);
    let data = old.data_dir.clone();
    old.stop().await;
    let fresh = InProc::start(data, move |s| {
        configure(s, i, &cluster);
        s.emulated_version = release;
    })
    .await;
    members.insert(i, fresh);
}

/// Puts keys one after another until `stop`, through any member that answers: the keys
/// acknowledged.
async fn writer(endpoints: Vec<String>, stop: Arc<AtomicBool>) -> Vec<String> {
    let mut acked = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let key = format!("load/{n:06}");
        n += 1;
        let put = async {
            let mut c = etcd_client::Client::connect(endpoints.clone(), None).await?;
            c.put(key.clone(), "v", None).await
        };
        match tokio::time::timeout(Duration::from_secs(3), put).await {
            Ok(Ok(_)) => acked.push(key),
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    acked
}

// etcd's downgrade guide (website content/en/docs/v3.6/downgrades/downgrade_3_6.md):
// enable, wait for the cluster version to fall, replace members one at a time (the
// leader last), the leader cancels the finished downgrade; then upgrade the same way.
// Rules and errors: v3.6.14 server/etcdserver/version/version.go, v3_server.go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_downgrade_to_3_5_and_back_under_load_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, peers) = common::cluster::three(dir.path()).await;
    for m in &members {
        version_becomes(&m.endpoint(), V36)
            .await
            .expect("3.6 everywhere");
    }
    let m0 = &members[0];
    assert_eq!(
        downgrade(m0, DowngradeAction::Validate, "3.5").await,
        Ok("3.6".into())
    );
    assert_eq!(
        downgrade(m0, DowngradeAction::Validate, "3.4").await,
        Err((
            tonic::Code::InvalidArgument,
            "etcdserver: invalid downgrade target version".into()
        ))
    );
    assert_eq!(
        downgrade(m0, DowngradeAction::Validate, "x").await,
        Err((
            tonic::Code::InvalidArgument,
            "etcdserver: wrong downgrade target version format".into()
        ))
    );
    // etcd 3.6: a cancel with nothing to cancel is only logged.
    assert_eq!(
        downgrade(m0, DowngradeAction::Cancel, "").await,
        Ok("3.6".into())
    );

    let stop = Arc::new(AtomicBool::new(false));
    let endpoints: Vec<String> = members.iter().map(InProc::endpoint).collect();
    let load = tokio::spawn(writer(endpoints, stop.clone()));

    assert_eq!(
        downgrade(m0, DowngradeAction::Enable, "3.5").await,
        Ok("3.6".into())
    );
    let lowered = r#"{"etcdserver":"3.6.14","etcdcluster":"3.5.0","storage":"3.5.0"}"#;
    for m in &members {
        version_becomes(&m.endpoint(), lowered)
            .await
            .expect("the leader lowers the cluster version, every member its storage");
        let d = status(m)
            .await
            .downgrade_info
            .expect("3.6 reports the downgrade");
        assert!(d.enabled && d.target_version == "3.5.0", "{d:?}");
    }
    assert_eq!(
        downgrade(&members[0], DowngradeAction::Validate, "3.5").await,
        Err((
            tonic::Code::InvalidArgument,
            "etcdserver: invalid downgrade target version".into()
        )),
        "the target is checked before the downgrade in progress"
    );

    // Followers first, the leader last.
    let leader = common::cluster::leader_index(&members).await;
    let order: Vec<usize> = (0..3).filter(|i| *i != leader).chain([leader]).collect();
    for &i in &order {
        restart_as(
            &mut members,
            &peers,
            i,
            oxcd_go::semver::Version::new(3, 5, 0),
        )
        .await;
        version_becomes(
            &members[i].endpoint(),
            r#"{"etcdserver":"3.5.17","etcdcluster":"3.5.0"}"#,
        )
        .await
        .expect("the member is back as 3.5");
    }
    // Once every member runs 3.5, the leader cancels the downgrade: 3.4 is then a valid
    // next target, and none is in progress.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match downgrade(&members[0], DowngradeAction::Validate, "3.4").await {
            Ok(v) if v == "3.5" => break,
            other => assert!(
                Instant::now() < deadline,
                "downgrade never cancelled: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // And back up, one member at a time.
    for i in 0..3 {
        restart_as(
            &mut members,
            &peers,
            i,
            oxcd_go::semver::Version::new(3, 6, 0),
        )
        .await;
    }
    for m in &members {
        version_becomes(&m.endpoint(), V36)
            .await
            .expect("3.6 again everywhere");
    }
    stop.store(true, Ordering::Relaxed);
    let acked = load.await.expect("writer");
    assert!(acked.len() > 20, "the load ran: {} writes", acked.len());
    for m in &members {
        let mut c = m.client().await;
        let got = c
            .get(
                "load/",
                Some(
                    etcd_client::GetOptions::new()
                        .with_prefix()
                        .with_keys_only(),
                ),
            )
            .await
            .expect("linearizable get");
        let keys: std::collections::HashSet<String> = got
            .kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
            .collect();
        let lost: Vec<&String> = acked.iter().filter(|k| !keys.contains(*k)).collect();
        assert!(
            lost.is_empty(),
            "acknowledged writes lost on {}: {lost:?}",
            m.endpoint()
        );
    }
    let hashes = common::cluster::state_hashes(&members, None).await;
    assert!(
        hashes.windows(2).all(|w| w[0] == w[1]),
        "members differ: {hashes:?}"
    );
    for m in members {
        m.stop().await;
    }
}

/// `curl -s -X method url`: the status line's code and the body.
async fn request(method: &str, url: &str) -> (String, String) {
    let out = tokio::process::Command::new("curl")
        .args(["-s", "-X", method, "-w", "\n%{http_code}", url])
        .output()
        .await
        .expect("curl (apt-get install -y curl)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
    (code.to_string(), body.to_string())
}

// A member joining a running cluster with no data checks the cluster's version, as
// etcd v3.6.14 server/etcdserver/cluster_util.go isCompatibleWithCluster does (and
// bootstrap.go bootstrapExistingClusterNoWAL's error); `/downgrade/enabled` on the peer
// port as etcdhttp/peer.go downgradeEnabledHandler serves it; the leader cancels a
// finished downgrade every `--downgrade-check-time` (server.go monitorDowngrade).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joins_only_a_cluster_whose_version_it_can_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let peers: Vec<u16> = (0..3).map(|_| common::free_port()).collect();
    let cluster = cluster_of(&peers);
    let first = cluster[..1].to_vec();
    let mut members = vec![
        InProc::start(dir.path().join("m0"), move |s| {
            configure(s, 0, &first);
            s.downgrade_check_time = Duration::from_millis(500);
        })
        .await,
    ];
    version_becomes(&members[0].endpoint(), V36)
        .await
        .expect("cluster 3.6");
    let enabled_url = format!("http://127.0.0.1:{}/downgrade/enabled", peers[0]);
    assert_eq!(
        request("GET", &enabled_url).await,
        ("200".to_string(), "false".to_string())
    );
    assert_eq!(
        request("POST", &enabled_url).await,
        ("405".to_string(), "Method Not Allowed\n".to_string())
    );

    // A learner, so that the one member keeps its quorum while the new one is away.
    let learner = || Some(etcd_client::MemberAddOptions::new().with_is_learner());
    let join = |i: usize, release: (i64, i64)| {
        let cluster = cluster[..=i].to_vec();
        let data = dir.path().join(format!("m{i}"));
        InProc::try_start(data, move |s| {
            configure(s, i, &cluster);
            s.initial_cluster_existing = true;
            s.emulated_version = oxcd_go::semver::Version::new(release.0, release.1, 0);
        })
    };
    let mut c = members[0].client().await;
    let added = c
        .member_add(cluster[1].1.clone(), learner())
        .await
        .expect("member add");
    let e = join(1, (3, 5))
        .await
        .err()
        .expect("a 3.5 member must not join a 3.6 cluster");
    assert!(
        e.contains("incompatible with current running cluster"),
        "{e}"
    );
    c.member_remove(added.member().expect("added").id())
        .await
        .expect("remove the learner that never came");

    // A downgrade to 3.5, enabled: the member says so, the cluster version falls.
    downgrade(&members[0], DowngradeAction::Enable, "3.5")
        .await
        .expect("enable");
    assert_eq!(
        request("GET", &enabled_url).await,
        ("200".to_string(), "true".to_string())
    );
    let v35_on_36 = r#"{"etcdserver":"3.6.14","etcdcluster":"3.5.0","storage":"3.5.0"}"#;
    version_becomes(&members[0].endpoint(), v35_on_36)
        .await
        .expect("cluster version 3.5");
    // The member comes back as 3.5: the downgrade is done and the leader cancels it.
    restart_as(
        &mut members,
        &peers[..1],
        0,
        oxcd_go::semver::Version::new(3, 5, 0),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while request("GET", &enabled_url).await.1 != "false" {
        assert!(
            Instant::now() < deadline,
            "the finished downgrade is never cancelled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // At cluster version 3.5, a 3.6 member and a 3.5 member join.
    let mut c = members[0].client().await;
    let added = c
        .member_add(cluster[1].1.clone(), learner())
        .await
        .expect("member add");
    members.push(
        join(1, (3, 6))
            .await
            .expect("a 3.6 member joins a 3.5 cluster"),
    );
    let id = added.member().expect("added").id();
    let deadline = Instant::now() + Duration::from_secs(20);
    while let Err(e) = c.member_promote(id).await {
        assert!(Instant::now() < deadline, "promote: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let url = cluster[2].1.clone();
    common::cluster::healthy_retry(|| {
        let (mut c, url) = (c.clone(), url.clone());
        async move { c.member_add(url, learner()).await }
    })
    .await
    .expect("member add");
    members.push(
        join(2, (3, 5))
            .await
            .expect("a 3.5 member joins a 3.5 cluster"),
    );
    assert_eq!(status(&members[1]).await.version, "3.6.14");
    assert_eq!(status(&members[2]).await.version, "3.5.17");
    for m in members {
        m.stop().await;
    }
}

// etcd v3.6.14 server/etcdserver/server.go MemberList: with auth on, the caller must be
// an authenticated user (requireAuthInfo, since 3.6.10; any user, root or not); etcd
// 3.5 checks nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_list_needs_a_user_under_auth_as_in_3_6() {
    use etcd_client::ConnectOptions;
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, _) = three_with_a_3_5(dir.path(), 2).await;
    let mut admin = members[0].client().await;
    admin.user_add("root", "rootpw", None).await.expect("root");
    admin.user_grant_role("root", "root").await.expect("grant");
    admin
        .user_add("alice", "secret", None)
        .await
        .expect("alice");
    admin.auth_enable().await.expect("enable");
    for m in &members[..2] {
        let mut anonymous = m.client().await;
        let e = anonymous
            .member_list()
            .await
            .expect_err("no user under auth");
        assert!(
            e.to_string().contains("etcdserver: user name is empty"),
            "{e}"
        );
        let opts = ConnectOptions::new().with_user("alice", "secret");
        let mut alice = etcd_client::Client::connect([m.endpoint()], Some(opts))
            .await
            .expect("alice");
        assert_eq!(alice.member_list().await.expect("list").members().len(), 3);
    }
    // The 3.5 member lists for anyone.
    let mut anonymous = members[2].client().await;
    anonymous
        .member_list()
        .await
        .expect("3.5 lists without a user");
    for m in members {
        m.stop().await;
    }
}

/// Puts through `endpoint`, one after another, until stopped: (acknowledged, the
/// errors' texts). Each put may take up to 20 s, longer than the server's request
/// timeout, so that a put the server lets time out is seen as such.
async fn put_and_record(
    endpoint: String,
    writer: usize,
    stop: Arc<AtomicBool>,
) -> (u64, Vec<String>) {
    let mut c = etcd_client::Client::connect([endpoint], None)
        .await
        .expect("connect");
    let (mut acked, mut errors) = (0, Vec::new());
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let put = c.put(format!("switch/{writer}/{n:06}"), "v", None);
        match tokio::time::timeout(Duration::from_secs(20), put).await {
            Ok(Ok(_)) => acked += 1,
            Ok(Err(e)) => errors.push(e.to_string()),
            Err(_) => errors.push("no answer within 20 s".into()),
        }
    }
    (acked, errors)
}

// A switch of the log's vocabulary (here to etcd's, by `downgrade enable 3.5`: v3.6.14
// server/etcdserver/version/version.go) while followers forward puts: the leader drops a
// proposal forwarded in the old vocabulary, and the follower ends it with "leader
// changed" once it has applied the switch, never with a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn puts_forwarded_across_a_vocabulary_switch_end_without_a_timeout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, _) = common::cluster::three(dir.path()).await;
    for m in &members {
        version_becomes(&m.endpoint(), V36)
            .await
            .expect("3.6 everywhere");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    for m in &members {
        while crate::etcd_peer::vocabulary_of(m).await != "oxcd" {
            assert!(Instant::now() < deadline, "oxcd's vocabulary at 3.6");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let leader = common::cluster::leader_index(&members).await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for (i, m) in members.iter().enumerate().filter(|(i, _)| *i != leader) {
        for w in 0..4 {
            writers.push(tokio::spawn(put_and_record(
                m.endpoint(),
                i * 10 + w,
                stop.clone(),
            )));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        downgrade(&members[leader], DowngradeAction::Enable, "3.5").await,
        Ok("3.6".into())
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    for m in &members {
        while crate::etcd_peer::vocabulary_of(m).await != "etcd" {
            assert!(
                Instant::now() < deadline,
                "the log switched to etcd's vocabulary"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut acked, mut errors) = (0, Vec::new());
    for w in writers {
        let (a, e) = w.await.expect("writer");
        acked += a;
        errors.extend(e);
    }
    let leader_changed = errors
        .iter()
        .filter(|e| e.contains("leader changed"))
        .count();
    eprintln!(
        "{acked} puts acknowledged through followers across the switch; {} errors, {leader_changed} of them 'leader changed': {:?}",
        errors.len(),
        errors.iter().take(5).collect::<Vec<_>>()
    );
    assert!(acked > 0, "the followers took puts");
    assert!(
        errors.iter().all(|e| e.contains("leader changed")),
        "a put across the switch ended otherwise than with 'leader changed': {errors:?}"
    );
    for m in members {
        m.stop().await;
    }
}
