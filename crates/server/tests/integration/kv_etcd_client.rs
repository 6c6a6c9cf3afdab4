//! Every KV feature, driven by the third-party `etcd-client` crate against a real member.

use crate::common;

use common::InProc;
use etcd_client::{
    Compare, CompareOp, DeleteOptions, Error, GetOptions, PutOptions, SortOrder, SortTarget, Txn,
    TxnOp, TxnOpResponse,
};

fn status_of(e: Error) -> tonic::Status {
    match e {
        Error::GRpcStatus(s) => s,
        other => panic!("expected a gRPC status, got {other:?}"),
    }
}

fn assert_status<T: std::fmt::Debug>(r: Result<T, Error>, code: tonic::Code, msg: &str) {
    let s = status_of(r.expect_err("expected an error"));
    assert_eq!((s.code(), s.message()), (code, msg));
}

async fn member() -> (tempfile::TempDir, InProc, etcd_client::Client) {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("data"), |_| {}).await;
    let c = m.client().await;
    (dir, m, c)
}

#[tokio::test]
async fn put_get_revisions_and_headers() {
    let (_d, m, mut c) = member().await;
    let r = c.get("nothing", None).await.expect("get");
    let h = r.header().expect("header");
    assert_eq!(h.revision(), 1, "a fresh store is at revision 1 as in etcd");
    assert_ne!(h.cluster_id(), 0);
    assert_ne!(h.member_id(), 0);
    assert!(h.raft_term() >= 1);

    let p = c.put("foo", "bar", None).await.expect("put");
    assert_eq!(p.header().expect("header").revision(), 2);
    let p = c
        .put("foo", "baz", Some(PutOptions::new().with_prev_key()))
        .await
        .expect("put");
    assert_eq!(p.prev_key().expect("prev").value(), b"bar");
    let r = c.get("foo", None).await.expect("get");
    let kv = &r.kvs()[0];
    assert_eq!(
        (
            kv.value(),
            kv.create_revision(),
            kv.mod_revision(),
            kv.version()
        ),
        (&b"baz"[..], 2, 3, 2)
    );
    // ignore_value keeps the value; on a missing key it fails.
    c.put("foo", "", Some(PutOptions::new().with_ignore_value()))
        .await
        .expect("ignore value");
    assert_eq!(
        c.get("foo", None).await.expect("get").kvs()[0].value(),
        b"baz"
    );
    assert_status(
        c.put("missing", "", Some(PutOptions::new().with_ignore_value()))
            .await,
        tonic::Code::InvalidArgument,
        "etcdserver: key not found",
    );
    assert_status(
        c.put("foo", "x", Some(PutOptions::new().with_ignore_value()))
            .await,
        tonic::Code::InvalidArgument,
        "etcdserver: value is provided",
    );
    c.put("foo", "q", Some(PutOptions::new().with_ignore_lease()))
        .await
        .expect("ignore lease");
    assert_status(
        c.put("foo", "x", Some(PutOptions::new().with_lease(7)))
            .await,
        tonic::Code::NotFound,
        "etcdserver: requested lease not found",
    );
    assert_status(
        c.put("", "x", None).await,
        tonic::Code::InvalidArgument,
        "etcdserver: key is not provided",
    );
    assert_status(
        c.get("", None).await,
        tonic::Code::InvalidArgument,
        "etcdserver: key is not provided",
    );
    // Historical read.
    let r = c
        .get("foo", Some(GetOptions::new().with_revision(2)))
        .await
        .expect("get at 2");
    assert_eq!(r.kvs()[0].value(), b"bar");
    // Version restarts after delete.
    c.delete("foo", None).await.expect("delete");
    c.put("foo", "again", None).await.expect("put");
    let kv = c.get("foo", None).await.expect("get").kvs()[0].clone();
    assert_eq!(kv.version(), 1);
    m.stop().await;
}

#[tokio::test]
async fn ranges_sort_limit_filters() {
    let (_d, m, mut c) = member().await;
    for (k, v) in [("a/3", "x"), ("a/1", "z"), ("a/2", "y"), ("b", "w")] {
        c.put(k, v, None).await.expect("put");
    }
    c.put("a/1", "z2", None).await.expect("put");
    let keys = |r: &etcd_client::GetResponse| {
        r.kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.key()).to_string())
            .collect::<Vec<_>>()
    };
    let r = c
        .get("a/", Some(GetOptions::new().with_prefix()))
        .await
        .expect("prefix");
    assert_eq!(keys(&r), ["a/1", "a/2", "a/3"]);
    let r = c
        .get("a/", Some(GetOptions::new().with_prefix().with_limit(2)))
        .await
        .expect("limit");
    assert_eq!((keys(&r).len(), r.more(), r.count()), (2, true, 3));
    let r = c
        .get("a/2", Some(GetOptions::new().with_from_key()))
        .await
        .expect("from key");
    assert_eq!(keys(&r), ["a/2", "a/3", "b"]);
    let r = c
        .get("a/1", Some(GetOptions::new().with_range("a/3")))
        .await
        .expect("range");
    assert_eq!(keys(&r), ["a/1", "a/2"]);
    let r = c
        .get("", Some(GetOptions::new().with_all_keys()))
        .await
        .expect("all");
    assert_eq!(r.count(), 4);
    let r = c
        .get(
            "a/",
            Some(
                GetOptions::new()
                    .with_prefix()
                    .with_sort(SortTarget::Value, SortOrder::Descend),
            ),
        )
        .await
        .expect("sort by value");
    assert_eq!(keys(&r), ["a/1", "a/2", "a/3"]);
    let r = c
        .get(
            "a/",
            Some(
                GetOptions::new()
                    .with_prefix()
                    .with_sort(SortTarget::Create, SortOrder::Ascend)
                    .with_limit(1),
            ),
        )
        .await
        .expect("sort by create");
    assert_eq!((keys(&r), r.more()), (vec!["a/3".to_string()], true));
    let r = c
        .get(
            "a/",
            Some(
                GetOptions::new()
                    .with_prefix()
                    .with_sort(SortTarget::Key, SortOrder::Descend),
            ),
        )
        .await
        .expect("descend");
    assert_eq!(keys(&r), ["a/3", "a/2", "a/1"]);
    let r = c
        .get(
            "a/",
            Some(
                GetOptions::new()
                    .with_prefix()
                    .with_sort(SortTarget::Version, SortOrder::Descend),
            ),
        )
        .await
        .expect("version");
    assert_eq!(keys(&r)[0], "a/1");
    let r = c
        .get("a/", Some(GetOptions::new().with_prefix().with_keys_only()))
        .await
        .expect("keys only");
    assert!(r.kvs().iter().all(|kv| kv.value().is_empty()));
    let r = c
        .get(
            "a/",
            Some(GetOptions::new().with_prefix().with_count_only()),
        )
        .await
        .expect("count only");
    assert_eq!((r.kvs().len(), r.count()), (0, 3));
    let r = c
        .get(
            "a/",
            Some(GetOptions::new().with_prefix().with_serializable()),
        )
        .await
        .expect("serializable");
    assert_eq!(r.count(), 3);
    // Revisions: a/3=2, a/1=3, a/2=4, b=5, a/1 again=6.
    let filters = [
        (
            "min mod",
            GetOptions::new().with_min_mod_revision(4),
            ["a/1", "a/2"],
        ),
        (
            "max mod",
            GetOptions::new().with_max_mod_revision(4),
            ["a/2", "a/3"],
        ),
        (
            "min create",
            GetOptions::new().with_min_create_revision(3),
            ["a/1", "a/2"],
        ),
        (
            "max create",
            GetOptions::new().with_max_create_revision(3),
            ["a/1", "a/3"],
        ),
    ];
    for (what, opts, want) in filters {
        let r = c.get("a/", Some(opts.with_prefix())).await.expect(what);
        assert_eq!(keys(&r), want, "{what}");
    }
    m.stop().await;
}

#[tokio::test]
async fn delete_ranges_with_prev_kv() {
    let (_d, m, mut c) = member().await;
    for k in ["d/1", "d/2", "d/3", "e"] {
        c.put(k, "v", None).await.expect("put");
    }
    let r = c
        .delete(
            "d/",
            Some(DeleteOptions::new().with_prefix().with_prev_key()),
        )
        .await
        .expect("delete");
    assert_eq!((r.deleted(), r.prev_kvs().len()), (3, 3));
    assert_eq!(
        r.header().expect("header").revision(),
        6,
        "one revision for the whole delete"
    );
    let r = c.delete("zzz", None).await.expect("delete nothing");
    assert_eq!(
        (r.deleted(), r.header().expect("header").revision()),
        (0, 6)
    );
    let r = c
        .delete("a", Some(DeleteOptions::new().with_from_key()))
        .await
        .expect("from key");
    assert_eq!(r.deleted(), 1);
    m.stop().await;
}

#[tokio::test]
async fn txn_compares_branches_and_nesting() {
    let (_d, m, mut c) = member().await;
    c.put("k", "v1", None).await.expect("put"); // rev 2
    c.put("k2", "x", None).await.expect("put"); // rev 3
    let t = Txn::new()
        .when([
            Compare::value("k", CompareOp::Equal, "v1"),
            Compare::version("k", CompareOp::Equal, 1),
            Compare::create_revision("k", CompareOp::Less, 3),
            Compare::mod_revision("k2", CompareOp::Greater, 2),
            Compare::lease("k", CompareOp::Equal, 0),
            Compare::value("k", CompareOp::NotEqual, "zz"),
        ])
        .and_then([
            TxnOp::put("k", "v2", None),
            TxnOp::put("k3", "y", None),
            TxnOp::get("k", None),
            TxnOp::txn(
                Txn::new()
                    .when([Compare::value("k", CompareOp::Equal, "v2")])
                    .and_then([TxnOp::delete("k2", None)]),
            ),
        ])
        .or_else([TxnOp::put("failed", "1", None)]);
    let r = c.txn(t).await.expect("txn");
    assert!(r.succeeded());
    assert_eq!(
        r.header().expect("header").revision(),
        4,
        "the whole txn is one revision"
    );
    match &r.op_responses()[2] {
        TxnOpResponse::Get(g) => {
            assert_eq!(g.kvs()[0].value(), b"v2", "reads see the txn's own writes")
        }
        other => panic!("unexpected {other:?}"),
    }
    // As in etcd, nested compares are evaluated against the state before the txn ran.
    match &r.op_responses()[3] {
        TxnOpResponse::Txn(t) => assert!(!t.succeeded()),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(c.get("k2", None).await.expect("get").count(), 1);
    // Failing compare on a missing key's value: the else branch runs.
    let r = c
        .txn(
            Txn::new()
                .when([Compare::value("nope", CompareOp::Equal, "")])
                .or_else([TxnOp::put("f", "1", None)]),
        )
        .await
        .expect("txn");
    assert!(!r.succeeded());
    // A range compare over a prefix: every key must match.
    let r = c
        .txn(Txn::new().when([Compare::version("k", CompareOp::Greater, 0).with_prefix()]))
        .await
        .expect("range compare");
    assert!(r.succeeded());
    // Read-only txn consumes no revision.
    let before = c
        .get("k", None)
        .await
        .expect("get")
        .header()
        .expect("h")
        .revision();
    let r = c
        .txn(Txn::new().and_then([TxnOp::get("k", None)]))
        .await
        .expect("ro txn");
    assert_eq!(r.header().expect("header").revision(), before);
    // Errors.
    let dup = Txn::new().and_then([TxnOp::put("a", "1", None), TxnOp::put("a", "2", None)]);
    assert_status(
        c.txn(dup).await,
        tonic::Code::InvalidArgument,
        "etcdserver: duplicate key given in txn request",
    );
    let many = Txn::new().and_then(
        (0..129)
            .map(|i| TxnOp::put(format!("m{i}"), "v", None))
            .collect::<Vec<_>>(),
    );
    assert_status(
        c.txn(many).await,
        tonic::Code::InvalidArgument,
        "etcdserver: too many operations in txn request",
    );
    let leased = Txn::new().and_then([TxnOp::put("a", "1", Some(PutOptions::new().with_lease(5)))]);
    assert_status(
        c.txn(leased).await,
        tonic::Code::NotFound,
        "etcdserver: requested lease not found",
    );
    let future =
        Txn::new().and_then([TxnOp::get("a", Some(GetOptions::new().with_revision(1000)))]);
    assert_status(
        c.txn(future).await,
        tonic::Code::OutOfRange,
        "etcdserver: mvcc: required revision is a future revision",
    );
    m.stop().await;
}

#[tokio::test]
async fn compaction_and_revision_errors() {
    let (_d, m, mut c) = member().await;
    for i in 0..5 {
        c.put("c", format!("v{i}"), None).await.expect("put"); // revs 2..=6
    }
    c.compact(4, None).await.expect("compact");
    assert_status(
        c.get("c", Some(GetOptions::new().with_revision(3))).await,
        tonic::Code::OutOfRange,
        "etcdserver: mvcc: required revision has been compacted",
    );
    assert_eq!(
        c.get("c", Some(GetOptions::new().with_revision(4)))
            .await
            .expect("at 4")
            .kvs()[0]
            .value(),
        b"v2"
    );
    assert_status(
        c.compact(4, None).await,
        tonic::Code::OutOfRange,
        "etcdserver: mvcc: required revision has been compacted",
    );
    assert_status(
        c.compact(100, None).await,
        tonic::Code::OutOfRange,
        "etcdserver: mvcc: required revision is a future revision",
    );
    assert_status(
        c.get("c", Some(GetOptions::new().with_revision(100))).await,
        tonic::Code::OutOfRange,
        "etcdserver: mvcc: required revision is a future revision",
    );
    m.stop().await;
}

#[tokio::test]
async fn oversized_requests_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("data"), |s| s.max_request_bytes = 64 * 1024).await;
    let mut c = m.client().await;
    let big = vec![b'x'; 100 * 1024];
    assert_status(
        c.put("big", big, None).await,
        tonic::Code::InvalidArgument,
        "etcdserver: request is too large",
    );
    // Beyond the gRPC limit (max + 512 KiB) the transport refuses it.
    let huge = vec![b'x'; 700 * 1024];
    let s = status_of(
        c.put("huge", huge, None)
            .await
            .expect_err("too large for grpc"),
    );
    assert_eq!(s.code(), tonic::Code::ResourceExhausted, "{s:?}");
    c.put("small", "ok", None)
        .await
        .expect("small put still works");
    m.stop().await;
}

#[tokio::test]
async fn data_survives_restart_and_status_answers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let m = InProc::start(data.clone(), |_| {}).await;
    let mut c = m.client().await;
    for i in 0..50 {
        c.put(format!("r{i:02}"), format!("{i}"), None)
            .await
            .expect("put");
    }
    let st = c.status().await.expect("status");
    assert_eq!(st.version(), "3.6.14");
    assert_ne!(st.leader(), 0);
    assert!(st.raft_index() > 50 && st.db_size() > 0);
    m.stop().await;
    let m = InProc::start(data, |_| {}).await;
    let mut c = m.client().await;
    let r = c
        .get("r", Some(GetOptions::new().with_prefix()))
        .await
        .expect("get");
    assert_eq!(r.count(), 50);
    assert_eq!(r.header().expect("h").revision(), 51);
    m.stop().await;
}

#[tokio::test]
async fn quota_refuses_writes_but_not_deletes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let m = InProc::start(dir.path().join("data"), |s| s.quota_backend_bytes = 1).await;
    let mut c = m.client().await;
    assert_status(
        c.put("k", "v", None).await,
        tonic::Code::ResourceExhausted,
        "etcdserver: mvcc: database space exceeded",
    );
    c.delete("k", None).await.expect("deletes still pass");
    m.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_health_version_metrics() {
    let (_d, m, _c) = member().await;
    let get = |path: &str| {
        let mut s = std::net::TcpStream::connect(m.addr).expect("connect");
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        std::io::Write::write_all(&mut s, req.as_bytes()).expect("send");
        let mut out = String::new();
        std::io::Read::read_to_string(&mut s, &mut out).expect("read");
        out
    };
    let h = tokio::task::block_in_place(|| get("/health"));
    assert!(
        h.starts_with("HTTP/1.1 200") && h.contains(r#"{"health":"true","reason":""}"#),
        "{h}"
    );
    let v = tokio::task::block_in_place(|| get("/version"));
    assert!(
        v.contains(&format!(r#""etcdserver":"{}""#, "3.6.14")),
        "{v}"
    );
    let metrics = tokio::task::block_in_place(|| get("/metrics"));
    assert!(metrics.contains("etcd_server_has_leader 1"), "{metrics}");
    assert!(metrics.contains(&format!(
        "etcd_server_version{{server_version=\"{}\"}} 1",
        "3.6.14"
    )));
    m.stop().await;
}
