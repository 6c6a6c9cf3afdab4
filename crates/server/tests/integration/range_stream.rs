//! KV.RangeStream (etcd 3.7) against the unary Range on the same member: the chunks'
//! key-values in order are Range's, the last chunk carries Range's header revision,
//! `more` and `count`; the refusals and the pinned revision are etcd's. Expectations
//! follow etcd v3.7.0 `tests/integration/v3_kv_test.go` (TestV3RangeStream*) and
//! `server/etcdserver/v3_server.go` `rangeStream`; no etcd 3.7 binary runs here.

use crate::common;

use common::InProc;
use oxcd_api::etcdserverpb::kv_client::KvClient;
use oxcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use oxcd_api::etcdserverpb::{CompactionRequest, PutRequest, RangeRequest, RangeResponse};
use tonic::transport::Channel;

/// Every chunk of a RangeStream of `r`, or the status it ended with (and the chunks
/// before it).
async fn stream(
    c: &mut KvClient<Channel>,
    r: RangeRequest,
) -> (Vec<RangeResponse>, Option<tonic::Status>) {
    let mut chunks = Vec::new();
    let mut s = match c.range_stream(r).await {
        Ok(s) => s.into_inner(),
        Err(e) => return (chunks, Some(e)),
    };
    loop {
        match s.message().await {
            Ok(Some(m)) => chunks.push(m.range_response.unwrap_or_default()),
            Ok(None) => return (chunks, None),
            Err(e) => return (chunks, Some(e)),
        }
    }
}

/// The chunks merged as clientv3's `GetStreamToGetResponse` does (proto.Merge).
fn merged(chunks: &[RangeResponse]) -> RangeResponse {
    let mut out = RangeResponse::default();
    for c in chunks {
        out.kvs.extend(c.kvs.iter().cloned());
        if c.header.is_some() {
            out.header = c.header;
        }
        out.more |= c.more;
        if c.count != 0 {
            out.count = c.count;
        }
    }
    out
}

fn prefix(p: &str) -> RangeRequest {
    let mut end = p.as_bytes().to_vec();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    RangeRequest {
        key: p.as_bytes().to_vec(),
        range_end: end,
        ..RangeRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_range_is_the_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |_| {}).await;
    // The unary answers are ~5 MB, over a client's default 4 MiB (the stream's chunks
    // are not).
    let mut c = KvClient::new(m.channel()).max_decoding_message_size(64 << 20);
    // 1000 keys, values of a few bytes to 10 KiB, some overwritten, one deleted after.
    for i in 0..1000u32 {
        let value = vec![b'v'; (i as usize * 37) % 10_240];
        c.put(PutRequest {
            key: format!("k/{i:04}").into_bytes(),
            value,
            ..PutRequest::default()
        })
        .await
        .expect("put");
    }
    let before_overwrites = c.range(prefix("k/")).await.expect("range").into_inner();
    let old_rev = before_overwrites
        .header
        .as_ref()
        .map(|h| h.revision)
        .unwrap_or_default();
    for i in (0..1000u32).step_by(7) {
        c.put(PutRequest {
            key: format!("k/{i:04}").into_bytes(),
            value: b"again".to_vec(),
            ..PutRequest::default()
        })
        .await
        .expect("overwrite");
    }
    let cases = [
        ("whole", prefix("k/")),
        (
            "limit",
            RangeRequest {
                limit: 250,
                ..prefix("k/")
            },
        ),
        (
            "limit past the end",
            RangeRequest {
                limit: 5000,
                ..prefix("k/")
            },
        ),
        (
            "serializable",
            RangeRequest {
                serializable: true,
                ..prefix("k/")
            },
        ),
        (
            "at an old revision",
            RangeRequest {
                revision: old_rev,
                ..prefix("k/")
            },
        ),
        (
            "count only",
            RangeRequest {
                count_only: true,
                ..prefix("k/")
            },
        ),
        (
            "one key",
            RangeRequest {
                key: b"k/0500".to_vec(),
                ..RangeRequest::default()
            },
        ),
        ("no key", prefix("none/")),
        (
            "key order ascending",
            RangeRequest {
                sort_order: SortOrder::Ascend as i32,
                ..prefix("k/")
            },
        ),
    ];
    for (what, r) in cases {
        let unary = c.range(r.clone()).await.expect("range").into_inner();
        let (chunks, err) = stream(&mut c, r.clone()).await;
        assert!(err.is_none(), "{what}: {err:?}");
        assert!(!chunks.is_empty(), "{what}: at least one message");
        let last = chunks.len() - 1;
        for (i, ch) in chunks.iter().enumerate() {
            assert_eq!(
                ch.header.is_some(),
                i == last,
                "{what}: only the last chunk has the header"
            );
            if i != last {
                assert!(
                    ch.count == 0 && !ch.more,
                    "{what}: a middle chunk carries kvs only"
                );
            }
        }
        if r.count_only {
            assert_eq!(chunks.len(), 1, "count_only is one message");
        }
        let all = merged(&chunks);
        assert_eq!(all.kvs, unary.kvs, "{what}: the key-values");
        assert_eq!(
            (all.more, all.count),
            (unary.more, unary.count),
            "{what}: more and count"
        );
        assert_eq!(
            all.header.map(|h| h.revision),
            unary.header.map(|h| h.revision),
            "{what}: the header's revision"
        );
    }
    // Chunks start at 10 keys and grow.
    let (chunks, _) = stream(&mut c, prefix("k/")).await;
    assert_eq!(chunks[0].kvs.len(), 10);
    assert!(
        chunks.len() > 2 && chunks.len() < 100,
        "{} chunks",
        chunks.len()
    );

    // Keys only: from the index, without values or leases (etcd 3.7's fast keys-only).
    let r = RangeRequest {
        keys_only: true,
        ..prefix("k/")
    };
    let unary = c.range(r.clone()).await.expect("range").into_inner();
    let (chunks, _) = stream(&mut c, r).await;
    let all = merged(&chunks);
    assert_eq!(all.kvs.len(), 1000);
    for (s, u) in all.kvs.iter().zip(&unary.kvs) {
        assert_eq!(
            (
                &s.key,
                s.create_revision,
                s.mod_revision,
                s.version,
                s.value.len()
            ),
            (&u.key, u.create_revision, u.mod_revision, u.version, 0)
        );
    }

    // sort_order NONE with another target: etcd sorts each chunk by it; oxcd too, and
    // no key is skipped or repeated.
    let r = RangeRequest {
        sort_target: SortTarget::Mod as i32,
        ..prefix("k/")
    };
    let (chunks, _) = stream(&mut c, r).await;
    let mut keys: Vec<Vec<u8>> = merged(&chunks).kvs.into_iter().map(|kv| kv.key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 1000, "every key once");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_and_the_pinned_revision_are_etcds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("m"), |_| {}).await;
    let mut c = KvClient::new(m.channel());
    for i in 0..200u32 {
        c.put(PutRequest {
            key: format!("p/{i:03}").into_bytes(),
            value: vec![b'x'; 100],
            ..PutRequest::default()
        })
        .await
        .expect("put");
    }
    let client = c.clone();
    let refused = |r: RangeRequest| {
        let mut c = client.clone();
        async move {
            let (chunks, err) = stream(&mut c, r).await;
            assert!(chunks.is_empty());
            err.map(|e| (e.code(), e.message().to_string()))
        }
    };
    assert_eq!(
        refused(RangeRequest {
            sort_order: SortOrder::Descend as i32,
            ..prefix("p/")
        })
        .await,
        Some((
            tonic::Code::Unimplemented,
            "RangeStream does not support custom sort orders".into()
        ))
    );
    assert_eq!(
        refused(RangeRequest {
            min_mod_revision: 3,
            ..prefix("p/")
        })
        .await,
        Some((
            tonic::Code::Unimplemented,
            "RangeStream does not support revision filters".into()
        ))
    );
    assert_eq!(
        refused(RangeRequest::default()).await,
        Some((
            tonic::Code::InvalidArgument,
            "etcdserver: key is not provided".into()
        ))
    );
    assert_eq!(
        refused(RangeRequest {
            revision: 10_000,
            ..prefix("p/")
        })
        .await,
        Some((
            tonic::Code::OutOfRange,
            "etcdserver: mvcc: required revision is a future revision".into()
        ))
    );
    c.compact(CompactionRequest {
        revision: 50,
        physical: true,
    })
    .await
    .expect("compact");
    assert_eq!(
        refused(RangeRequest {
            revision: 20,
            ..prefix("p/")
        })
        .await,
        Some((
            tonic::Code::OutOfRange,
            "etcdserver: mvcc: required revision has been compacted".into()
        ))
    );

    // Writes made while the stream runs are not in it (TestV3RangeStreamWriteBetweenChunks).
    let mut s = c
        .range_stream(prefix("p/"))
        .await
        .expect("stream")
        .into_inner();
    let first = s.message().await.expect("chunk").expect("a first chunk");
    let first = first.range_response.unwrap_or_default();
    assert_eq!(first.kvs.len(), 10);
    c.put(PutRequest {
        key: b"p/999".to_vec(),
        value: b"late".to_vec(),
        ..PutRequest::default()
    })
    .await
    .expect("put");
    c.put(PutRequest {
        key: b"p/150".to_vec(),
        value: b"changed".to_vec(),
        ..PutRequest::default()
    })
    .await
    .expect("put");
    let mut rest = vec![first];
    while let Some(m) = s.message().await.expect("chunk") {
        rest.push(m.range_response.unwrap_or_default());
    }
    let all = merged(&rest);
    assert_eq!(all.kvs.len(), 200, "the key put meanwhile is not seen");
    assert!(
        all.kvs.iter().all(|kv| kv.value.len() == 100),
        "nor the change"
    );
    assert_eq!(all.count, 200);
    m.stop().await;
}
