//! etcd's MVCC operation counts (`etcd_mvcc_range_total`, `_put_total`,
//! `_delete_total`, `_txn_total`), and the applies timed by operation
//! (`etcd_server_apply_duration_seconds`), and etcd's debugging MVCC figures (live keys,
//! bytes put, watch streams, watchers, events sent, rows compacted), after the same
//! workload on etcd 3.5.16 and on oxcd:
//! the same increases (etcd 3.6 dropped 3.5's `etcd_debugging_mvcc_range_total`, which
//! oxcd exports only as 3.5: `versions.rs`). etcd counts each Range, Put
//! and DeleteRange its transactions make (compares and reads of previous values
//! included) and each transaction of more than one (`server/mvcc/metrics_txn.go`); a
//! Txn that writes is two of its transactions (`server/etcdserver/apply.go`, `Txn`).

use std::collections::BTreeMap;

use etcd_client::{
    Client, CompactionOptions, Compare, CompareOp, DeleteOptions, GetOptions, PutOptions, Txn,
    TxnOp, WatchOptions,
};

use crate::common::etcd::on_etcd_then_oxcd;
use crate::common::scrape;

const FAMILIES: [&str; 4] = [
    "etcd_mvcc_range_total",
    "etcd_mvcc_put_total",
    "etcd_mvcc_delete_total",
    "etcd_mvcc_txn_total",
];

/// The applies `etcd_server_apply_duration_seconds` counts by operation (v3.5.16
/// server/etcdserver/apply.go `Apply`; v3.6.14 txn/metrics.go), as samples named in
/// the scrape (none before the first). Txn is left out: etcd answers a read-only txn
/// with a linearizable read, oxcd applies it through the log, and so counts it.
const APPLIES: [&str; 4] = [
    "etcd_server_apply_duration_seconds_count{op=\"Put\",success=\"true\",version=\"v3\"}",
    "etcd_server_apply_duration_seconds_count{op=\"DeleteRange\",success=\"true\",version=\"v3\"}",
    "etcd_server_apply_duration_seconds_count{op=\"LeaseGrant\",success=\"true\",version=\"v3\"}",
    "etcd_server_apply_duration_seconds_count{op=\"LeaseRevoke\",success=\"true\",version=\"v3\"}",
];

/// etcd's debugging MVCC figures that a workload moves (v3.5.16 server/mvcc/metrics.go):
/// live keys, bytes put, watch streams, watchers and events sent, rows compacted.
const DEBUGGING: [&str; 6] = [
    "etcd_debugging_mvcc_keys_total",
    "etcd_debugging_mvcc_total_put_size_in_bytes",
    "etcd_debugging_mvcc_watch_stream_total",
    "etcd_debugging_mvcc_watcher_total",
    "etcd_debugging_mvcc_events_total",
    "etcd_debugging_mvcc_db_compaction_keys_total",
];

/// The families' values in the scrape of `base` (`http://host:port`).
async fn counts(base: &str) -> BTreeMap<&'static str, f64> {
    let text = scrape(base).await;
    let value = |f: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(f)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
    };
    let mut out: BTreeMap<&'static str, f64> = FAMILIES
        .iter()
        .chain(&DEBUGGING)
        .map(|f| {
            let v = value(f).unwrap_or_else(|| panic!("no {f} in the scrape of {base}"));
            (*f, v)
        })
        .collect();
    for a in APPLIES {
        out.insert(a, value(a).unwrap_or(0.0));
    }
    out
}

/// A workload of every kind of operation etcd counts; the counts' increases.
async fn increases(base: &str) -> BTreeMap<&'static str, f64> {
    let mut c = Client::connect([base], None).await.expect("connect");
    let before = counts(base).await;
    let mut events = c
        .watch("k", Some(WatchOptions::new().with_prefix()))
        .await
        .expect("watch");
    for i in 0..5 {
        c.put(format!("k{i}"), "v", None).await.expect("put");
    }
    c.put("k0", "w", Some(PutOptions::new().with_prev_key()))
        .await
        .expect("put prev_kv");
    c.put("k1", "", Some(PutOptions::new().with_ignore_value()))
        .await
        .expect("put ignore_value");
    c.get("k0", None).await.expect("get");
    c.get("k", Some(GetOptions::new().with_prefix()))
        .await
        .expect("get prefix");
    c.get("k2", Some(GetOptions::new().with_serializable()))
        .await
        .expect("serializable get");
    c.delete("k3", None).await.expect("delete");
    c.delete("k4", Some(DeleteOptions::new().with_prev_key()))
        .await
        .expect("delete prev_kv");
    // A txn that only reads: its compare and its gets in one of etcd's transactions.
    c.txn(
        Txn::new()
            .when([Compare::version("k0", CompareOp::Greater, 0)])
            .and_then([TxnOp::get("k0", None), TxnOp::get("k1", None)]),
    )
    .await
    .expect("read txn");
    // A txn that writes: compares apart from its operations.
    c.txn(
        Txn::new()
            .when([
                Compare::version("k0", CompareOp::Greater, 0),
                Compare::value("k1", CompareOp::Equal, "v"),
            ])
            .and_then([
                TxnOp::put("t1", "v", None),
                TxnOp::delete("k2", None),
                TxnOp::get("t1", None),
            ]),
    )
    .await
    .expect("write txn");
    // The first compare fails: the second is not evaluated.
    c.txn(
        Txn::new()
            .when([
                Compare::version("nope", CompareOp::Greater, 0),
                Compare::version("k0", CompareOp::Greater, 0),
            ])
            .or_else([TxnOp::put(
                "t2",
                "v",
                Some(PutOptions::new().with_prev_key()),
            )]),
    )
    .await
    .expect("failed compare txn");
    // A nested txn.
    c.txn(
        Txn::new().and_then([TxnOp::txn(
            Txn::new()
                .when([Compare::version("t1", CompareOp::Greater, 0)])
                .and_then([TxnOp::put("t3", "v", None)]),
        )]),
    )
    .await
    .expect("nested txn");
    // A lease's keys deleted with it.
    let lease = c.lease_grant(60, None).await.expect("grant").id();
    for k in ["l1", "l2"] {
        c.put(k, "v", Some(PutOptions::new().with_lease(lease)))
            .await
            .expect("put with lease");
    }
    c.lease_revoke(lease).await.expect("revoke");
    // Every event of the workload has reached the watcher before the scrape.
    let last = c
        .put("k9", "last", None)
        .await
        .expect("put")
        .header()
        .expect("h")
        .revision();
    loop {
        let resp = events.message().await.expect("watch").expect("watch open");
        if resp
            .events()
            .iter()
            .any(|e| e.kv().is_some_and(|kv| kv.mod_revision() == last))
        {
            break;
        }
    }
    // A physical compaction: its rows are gone when it answers.
    c.compact(last - 3, Some(CompactionOptions::new().with_physical()))
        .await
        .expect("compact");
    let after = counts(base).await;
    FAMILIES
        .iter()
        .chain(&APPLIES)
        .chain(&DEBUGGING)
        .map(|f| (*f, after[f] - before[f]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operation_counts_grow_as_etcds_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (theirs, ours) =
        on_etcd_then_oxcd(dir.path(), |url| async move { increases(&url).await }).await;
    eprintln!("etcd: {theirs:?}\noxcd: {ours:?}");
    assert_eq!(ours, theirs);
}
