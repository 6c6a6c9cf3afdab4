//! `--max-concurrent-streams` as etcd honours it: on gRPC, a client connection may have
//! that many streams open (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS; a call past it
//! waits for one to end); on the gateway, which etcd serves over one gRPC connection to
//! itself, that many calls may be in flight: etcd's e2e test (`v3_curl_maxstream_test`)
//! opens N-1 watches with curl and a range still answers; with N open, the range waits
//! until curl gives up.

use std::process::Stdio;
use std::time::Duration;

use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::watch_client::WatchClient;
use oxcd_api::etcdserverpb::watch_request::RequestUnion;
use oxcd_api::etcdserverpb::{RangeRequest, WatchCreateRequest, WatchRequest};

use crate::common::InProc;

const LIMIT: u32 = 3;

/// A gateway watch of `foo` held open by curl (killed when dropped).
fn curl_watch(endpoint: &str) -> tokio::process::Child {
    tokio::process::Command::new("curl")
        .args(["-s", "-N", "-X", "POST", "--max-time", "30"])
        .arg(format!("{endpoint}/v3/watch"))
        .args(["-d", r#"{"create_request":{"key":"Zm9v"}}"#])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("curl (apt-get install -y curl)")
}

/// A gateway range of `foo` with curl giving up after 5 s, as etcd's test: curl's exit
/// code and what it printed.
async fn curl_range(endpoint: &str) -> (i32, String) {
    let out = tokio::process::Command::new("curl")
        .args(["-s", "-X", "POST", "--max-time", "5"])
        .arg(format!("{endpoint}/v3/kv/range"))
        .args(["-d", r#"{"key":"Zm9v"}"#])
        .output()
        .await
        .expect("curl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_calls_past_the_limit_wait_as_etcds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| {
        s.max_concurrent_streams = LIMIT
    })
    .await;
    let endpoint = oxcd.endpoint();
    let mut watches: Vec<_> = (0..LIMIT - 1).map(|_| curl_watch(&endpoint)).collect();
    // As etcd's test: give the watches time to be created.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (code, out) = curl_range(&endpoint).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(r#""revision":""#), "{out}");
    watches.push(curl_watch(&endpoint));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (code, out) = curl_range(&endpoint).await;
    // curl's "Operation timed out".
    assert_eq!(code, 28, "the range waits past the limit: {out}");
    // A watch ending frees its slot.
    watches.pop();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (code, out) = curl_range(&endpoint).await;
    assert_eq!(code, 0, "{out}");
    drop(watches);
    oxcd.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_streams_past_the_limit_wait_on_one_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let oxcd = InProc::start(dir.path().join("oxcd"), |s| {
        s.max_concurrent_streams = LIMIT
    })
    .await;
    let channel = oxcd.channel();
    let mut open = Vec::new();
    for _ in 0..LIMIT {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        tx.send(WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(WatchCreateRequest {
                key: b"foo".to_vec(),
                ..Default::default()
            })),
        })
        .await
        .expect("queue the create");
        let mut stream = WatchClient::new(channel.clone())
            .watch(tokio_stream::wrappers::ReceiverStream::new(rx))
            .await
            .expect("watch")
            .into_inner();
        let created = stream.message().await.expect("created").expect("an answer");
        assert!(created.created);
        open.push((tx, stream));
    }
    let mut kv = KvClient::new(channel.clone());
    let range = RangeRequest {
        key: b"foo".to_vec(),
        ..Default::default()
    };
    let waited = tokio::time::timeout(Duration::from_secs(2), kv.range(range.clone())).await;
    assert!(waited.is_err(), "a call past the limit waits");
    // Closing one stream lets the next call through.
    drop(open.pop());
    let answered = tokio::time::timeout(Duration::from_secs(5), kv.range(range)).await;
    assert!(matches!(answered, Ok(Ok(_))), "{answered:?}");
    drop(open);
    oxcd.stop().await;
}
