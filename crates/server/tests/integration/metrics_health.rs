//! `/metrics`, `/health`, `/livez` and `/readyz` as etcd 3.5 serves them: after the same
//! workload, every family that etcd's Grafana dashboard and the kube-prometheus etcd
//! alerts read and oxcd exports has the same type, help and label names as a real etcd's
//! (`oxcd_testkit::reference`); the values move (calls counted by method and code, fsync
//! and commit histograms filled, a leader change counted); the health answers follow the
//! alarms, the leader and the query (`exclude`, `serializable`, `verbose`) as etcd's.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::InProc;
use crate::common::cluster::{leader_index, three};
use crate::common::etcd::start_etcd;

/// The families the etcd mixin's dashboard and alerts read, among those oxcd exports.
const USED: [&str; 18] = [
    "etcd_network_client_grpc_received_bytes_total",
    "etcd_network_client_grpc_sent_bytes_total",
    "etcd_server_has_leader",
    "etcd_server_leader_changes_seen_total",
    "etcd_server_proposals_applied_total",
    "etcd_server_proposals_committed_total",
    "etcd_server_proposals_failed_total",
    "etcd_server_proposals_pending",
    "etcd_server_quota_backend_bytes",
    "etcd_mvcc_db_total_size_in_bytes",
    "etcd_mvcc_db_total_size_in_use_in_bytes",
    "etcd_disk_wal_fsync_duration_seconds",
    "etcd_disk_backend_commit_duration_seconds",
    "grpc_server_started_total",
    "grpc_server_handled_total",
    "process_resident_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
];

/// GET `url` with curl: status code and body.
async fn get(url: &str) -> (String, String) {
    let out = tokio::process::Command::new("curl")
        .args(["-s", "-w", "\n%{http_code}", url])
        .output()
        .await
        .expect("curl (apt-get install -y curl)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or((&text, ""));
    (code.to_string(), body.to_string())
}

/// Each family of a scrape: its HELP and TYPE lines, and the label names of its samples.
fn families(text: &str) -> BTreeMap<String, (String, String, Vec<String>)> {
    let mut out: BTreeMap<String, (String, String, Vec<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.entry(name.into()).or_default().0 = help.into();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            out.entry(name.into()).or_default().1 = kind.into();
        } else if let Some((series, _)) = line.split_once(' ') {
            let (name, labels) = series.split_once('{').unwrap_or((series, ""));
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| out.contains_key(*f)))
                .unwrap_or(name);
            let names: Vec<String> = labels
                .trim_end_matches('}')
                .split(',')
                .filter_map(|kv| kv.split_once('=').map(|(k, _)| k.to_string()))
                .filter(|k| k != "le")
                .collect();
            if let Some(f) = out.get_mut(family)
                && f.2.is_empty()
            {
                f.2 = names;
            }
        }
    }
    out
}

/// The value of the sample `series` (name and labels, as written) in a scrape.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{series} in the scrape"))
}

/// The same calls against either system: puts, ranges, one refused range.
async fn workload(endpoint: &str) {
    let mut c = etcd_client::Client::connect([endpoint], None)
        .await
        .expect("connect");
    for i in 0..20 {
        c.put(format!("k{i}"), "v", None).await.expect("put");
    }
    for _ in 0..5 {
        c.get("k1", None).await.expect("get");
    }
    let refused = c.get("", None).await;
    assert!(refused.is_err(), "an empty key is refused");
    c.defragment().await.expect("defragment");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_has_etcds_families_and_its_values_move() {
    let dir = tempfile::tempdir().expect("tempdir");
    let etcd = start_etcd(&dir.path().join("etcd"));
    workload(&format!("http://{}", etcd.endpoint)).await;
    let (_, theirs) = get(&format!("http://{}/metrics", etcd.endpoint)).await;
    drop(etcd);
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| s.metrics_extensive = true).await;
    workload(&oxcd.endpoint()).await;
    let (code, ours) = get(&format!("{}/metrics", oxcd.endpoint())).await;
    assert_eq!(code, "200");
    let (theirs_f, ours_f) = (families(&theirs), families(&ours));
    let mut compared = 0;
    for (name, ours) in &ours_f {
        if let Some(t) = theirs_f.get(name) {
            assert_eq!(t, ours, "{name}: etcd's {t:?}, oxcd's {ours:?}");
            compared += 1;
        }
    }
    for name in USED {
        assert!(ours_f.contains_key(name), "{name} exported");
    }
    eprintln!(
        "{compared} families compared with etcd's ({} exported by etcd, {} by oxcd)",
        theirs_f.len(),
        ours_f.len()
    );
    let put = r#"grpc_method="Put",grpc_service="etcdserverpb.KV",grpc_type="unary""#;
    assert_eq!(
        value(&ours, &format!("grpc_server_started_total{{{put}}}")),
        20.0
    );
    assert_eq!(
        value(
            &ours,
            &format!(r#"grpc_server_handled_total{{grpc_code="OK",{put}}}"#)
        ),
        20.0
    );
    let range = r#"grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary""#;
    assert_eq!(
        value(
            &ours,
            &format!(r#"grpc_server_handled_total{{grpc_code="InvalidArgument",{range}}}"#)
        ),
        1.0
    );
    assert_eq!(
        value(
            &ours,
            &format!(r#"grpc_server_handling_seconds_count{{{put}}}"#)
        ),
        20.0,
        "--metrics extensive keeps handling times"
    );
    assert!(value(&ours, "etcd_disk_wal_fsync_duration_seconds_count") >= 20.0);
    assert!(value(&ours, "etcd_disk_backend_commit_duration_seconds_count") >= 1.0);
    assert!(value(&ours, "etcd_debugging_mvcc_current_revision") >= 21.0);
    assert_eq!(
        value(&ours, "etcd_disk_backend_defrag_duration_seconds_count"),
        1.0
    );
    assert_eq!(value(&ours, "etcd_disk_defrag_inflight"), 0.0);
    assert_eq!(value(&ours, "etcd_server_has_leader"), 1.0);
    assert_eq!(value(&ours, "etcd_server_leader_changes_seen_total"), 1.0);
    oxcd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_change_is_counted_and_no_leader_is_unhealthy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, _) = three(dir.path()).await;
    let old = leader_index(&members).await;
    let leader = members.remove(old);
    leader.stop().await;
    // A new leader among the two left: each saw one change more than at start.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, text) = get(&format!("{}/metrics", members[0].endpoint())).await;
        if value(&text, "etcd_server_has_leader") == 1.0
            && value(&text, "etcd_server_leader_changes_seen_total") >= 2.0
        {
            break;
        }
        assert!(Instant::now() < deadline, "no new leader counted: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, body) = get(&format!("{}/health", members[0].endpoint())).await;
    assert_eq!(
        (code.as_str(), body.as_str()),
        ("200", r#"{"health":"true","reason":""}"#)
    );
    // Peer traffic: bytes both ways, round trips measured.
    let (_, text) = get(&format!("{}/metrics", members[0].endpoint())).await;
    let f = families(&text);
    for (name, label) in [
        ("etcd_network_peer_sent_bytes_total", "To"),
        ("etcd_network_peer_received_bytes_total", "From"),
        ("etcd_network_peer_round_trip_time_seconds", "To"),
    ] {
        let fam = f.get(name).unwrap_or_else(|| panic!("{name} in {text}"));
        assert_eq!(fam.2, vec![label.to_string()], "{name}");
    }
    let probed = text
        .lines()
        .filter(|l| l.starts_with("etcd_network_peer_round_trip_time_seconds_count{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>();
    assert!(probed >= 1.0, "round trips measured: {text}");
    // One member left alone has no leader once its election timeout passes.
    let other = members.remove(1);
    other.stop().await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        // On the way there a read may fail first ("RANGE ERROR:etcdserver: leader
        // changed"), as etcd's would.
        let (code, body) = get(&format!("{}/health", members[0].endpoint())).await;
        let no_leader = "{\"health\":\"false\",\"reason\":\"RAFT NO LEADER\"}\n";
        if code == "503" && body == no_leader {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not yet without a leader: {code} {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Votes it asks of the two stopped peers cannot be sent.
    loop {
        let (_, text) = get(&format!("{}/metrics", members[0].endpoint())).await;
        if let Some(failures) = families(&text).get("etcd_network_peer_sent_failures_total") {
            assert_eq!(failures.2, vec!["To".to_string()]);
            break;
        }
        assert!(Instant::now() < deadline, "no send failure counted: {text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (code, body) = get(&format!(
        "{}/health?serializable=true",
        members[0].endpoint()
    ))
    .await;
    assert_eq!(
        (code.as_str(), body.as_str()),
        ("200", r#"{"health":"true","reason":""}"#)
    );
    let (code, body) = get(&format!("{}/livez", members[0].endpoint())).await;
    assert_eq!((code.as_str(), body.as_str()), ("200", "ok\n"));
    let (code, body) = get(&format!("{}/readyz", members[0].endpoint())).await;
    assert_eq!(code, "503");
    assert!(
        body.starts_with(
            "[+]data_corruption ok\n[+]serializable_read ok\n[-]linearizable_read failed: "
        ),
        "{body}"
    );
    let (code, body) = get(&format!(
        "{}/readyz?exclude=linearizable_read&verbose",
        members[0].endpoint()
    ))
    .await;
    assert_eq!(
        (code.as_str(), body.as_str()),
        (
            "200",
            "[+]data_corruption ok\n[+]serializable_read ok\nok\n"
        )
    );
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_makes_health_false_unless_excluded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let oxcd = InProc::start(dir.path().join("oxcd"), |_| {}).await;
    let base = oxcd.endpoint();
    let mut c = oxcd.client().await;
    let me = c
        .status()
        .await
        .expect("status")
        .header()
        .map(|h| h.member_id())
        .unwrap_or(0);
    let mut raise = etcd_client::AlarmOptions::new();
    raise.with_member(me);
    c.alarm(
        etcd_client::AlarmAction::Activate,
        etcd_client::AlarmType::Nospace,
        Some(raise),
    )
    .await
    .expect("raise NOSPACE");
    let (code, body) = get(&format!("{base}/health")).await;
    assert_eq!(
        (code.as_str(), body.as_str()),
        (
            "503",
            "{\"health\":\"false\",\"reason\":\"ALARM NOSPACE\"}\n"
        )
    );
    let (code, _) = get(&format!("{base}/health?exclude=NOSPACE")).await;
    assert_eq!(code, "200");
    let (code, body) = get(&format!("{base}/readyz/data_corruption?verbose")).await;
    assert_eq!(
        (code.as_str(), body.as_str()),
        ("200", "[+]data_corruption ok\nok\n")
    );
    let (code, body) = get(&format!("{base}/livez/nothing")).await;
    assert_eq!(
        (code.as_str(), body.as_str()),
        ("404", "404 page not found\n")
    );
    let (_, text) = get(&format!("{base}/metrics")).await;
    assert_eq!(value(&text, "etcd_server_health_failures"), 1.0);
    assert_eq!(value(&text, "etcd_server_health_success"), 1.0);
    assert_eq!(
        value(
            &text,
            r#"etcd_server_healthchecks_total{name="data_corruption",status="success",type="readyz"}"#
        ),
        1.0
    );
    oxcd.stop().await;
}
