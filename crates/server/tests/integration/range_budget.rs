//! `--max-inflight-range-bytes`: the bytes of Range answers being read or sent at once
//! are bounded; a range that would pass the bound beside another is refused with etcd's
//! "etcdserver: too many requests" (ResourceExhausted, etcd's code for it:
//! `server/etcdserver/api/v3rpc/rpctypes/error.go` at v3.6.14), while small puts,
//! single-key gets and small ranges go on, and the bound frees once the slow answer's
//! connection is gone. etcd has no such bound: a burst of large ranges builds every
//! answer whole at once (etcd issues 12342, 16598).

use std::time::{Duration, Instant};

use oxcd_api::etcdserverpb::{RangeRequest, RangeResponse};
use tonic::codegen::http::uri::PathAndQuery;
use tonic_prost::ProstCodec;

use crate::common::InProc;
use crate::common::etcd::ETCDCTL;

/// 40 values of 100 KiB: a 4 MiB answer for the prefix.
const BIG_KEYS: usize = 40;
const BIG_VALUE: usize = 100 << 10;

fn big_range() -> RangeRequest {
    RangeRequest {
        key: b"big/".to_vec(),
        range_end: b"big0".to_vec(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_beside_a_slow_large_answer_is_refused_and_everything_small_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |s| {
        s.max_inflight_range_bytes = 1 << 20;
    })
    .await;
    let mut c = m.client().await;
    let value = vec![b'v'; BIG_VALUE];
    for i in 0..BIG_KEYS {
        c.put(format!("big/{i:02}"), value.clone(), None)
            .await
            .expect("put");
    }
    for i in 0..3 {
        c.put(format!("small/{i}"), "s", None).await.expect("put");
    }
    // Alone, a range larger than the bound is served.
    let all = c
        .get("big/", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .expect("a large range alone is served");
    assert_eq!(all.kvs().len(), BIG_KEYS);

    // A client that asks for the prefix and reads nothing: 64 KiB windows, and the
    // answer's body is never polled, so the server holds the rest of it.
    let slow = m.small_window_channel().await;
    let mut grpc = tonic::client::Grpc::new(slow.clone());
    grpc.ready().await.expect("ready");
    let stalled = grpc
        .server_streaming(
            tonic::Request::new(big_range()),
            PathAndQuery::from_static("/etcdserverpb.KV/Range"),
            ProstCodec::<RangeRequest, RangeResponse>::default(),
        )
        .await
        .expect("the stalled range's headers");

    // Beside it, the same range is refused with etcd's error, through the etcd-client
    // crate and through etcdctl 3.4.
    let refused = c
        .get("big/", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .expect_err("refused beside the stalled answer");
    match refused {
        etcd_client::Error::GRpcStatus(s) => {
            assert_eq!(s.code(), tonic::Code::ResourceExhausted, "{s:?}");
            assert_eq!(s.message(), "etcdserver: too many requests");
        }
        other => panic!("not a gRPC status: {other:?}"),
    }
    let out = std::process::Command::new(ETCDCTL)
        .args([
            format!("--endpoints={}", m.endpoint()),
            "get".into(),
            "big/".into(),
            "--prefix".into(),
        ])
        .env("ETCDCTL_API", "3")
        .output()
        .expect("run etcdctl 3.4 (apt-get install -y etcd-client)");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Error: etcdserver: too many requests"),
        "{stderr}"
    );

    // Small work goes on: puts, a single large key, a small range.
    c.put("small/3", "s", None).await.expect("a put beside it");
    let one = c.get("big/00", None).await.expect("a single key beside it");
    assert_eq!(one.kvs()[0].value().len(), BIG_VALUE);
    let small = c
        .get("small/", Some(etcd_client::GetOptions::new().with_prefix()))
        .await
        .expect("a small range beside it");
    assert_eq!(small.kvs().len(), 4);

    // The slow client goes away: its answer's share is released and the range is served
    // again (the server learns of the reset when it next writes to the connection).
    drop(stalled);
    drop(grpc);
    drop(slow);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match c
            .get("big/", Some(etcd_client::GetOptions::new().with_prefix()))
            .await
        {
            Ok(r) => {
                assert_eq!(r.kvs().len(), BIG_KEYS);
                break;
            }
            Err(e) => {
                assert!(Instant::now() < deadline, "still refused: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    m.stop().await;
}
