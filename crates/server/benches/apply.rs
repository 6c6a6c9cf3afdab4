//! Apply-path micro-benchmarks: committed log entries into the MVCC store.
//!
//! The apply thread's own batching loop (`ApplyLoop::apply_entries`) is private and needs
//! a raft loop and waiters, so this measures what it does per batch through the public
//! entry point: each committed entry through `apply::apply_entry` (decode, alarm check,
//! validation, MVCC writes, response) into one batch, then the batch's commit with its
//! raft index and term. Only waiter completion is left out; no entry is a conf change.
//!
//! The store is a redb backend in a temporary directory preloaded with 10,000 keys
//! (`key/00000`..`key/09999`, 256-byte values); every entry overwrites one of them.
//! - `apply_put/{1,16,128}`: N put entries per batch, non-durable commit (the usual case).
//! - `apply_put_durable/128`: the same with an fsynced commit (every 100 ms, or before a
//!   log compaction).
//! - `apply_txn/16`: N txn entries (compare the key's version > 0, then put it) per batch.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use oxcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use oxcd_api::etcdserverpb::request_op::Request;
use oxcd_api::etcdserverpb::{Compare, PutRequest, RequestOp, TxnRequest};
use oxcd_api::oxcdpb::InternalRequest;
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_mvcc::Store;
use oxcd_raft::{ConfChange, ConfState, Entry, RaftError};
use oxcd_server::machine::applier::{Applier, RaftConf};
use oxcd_server::machine::apply;
use oxcd_storage::backend::Backend;
use prost::Message;

/// Keys in the preloaded store.
const KEYS: usize = 10_000;
/// Size of every value written.
const VALUE_SIZE: usize = 256;

fn key(i: usize) -> Vec<u8> {
    format!("key/{i:05}").into_bytes()
}

fn put_op(i: usize) -> Op {
    Op::Put(PutRequest {
        key: key(i % KEYS),
        value: vec![0x42u8; VALUE_SIZE],
        ..Default::default()
    })
}

fn txn_op(i: usize) -> Op {
    let k = key(i % KEYS);
    Op::Txn(TxnRequest {
        compare: vec![Compare {
            result: CompareResult::Greater as i32,
            target: CompareTarget::Version as i32,
            key: k.clone(),
            target_union: Some(TargetUnion::Version(0)),
            ..Default::default()
        }],
        success: vec![RequestOp {
            request: Some(Request::RequestPut(PutRequest {
                key: k,
                value: vec![0x43u8; VALUE_SIZE],
                ..Default::default()
            })),
        }],
        failure: Vec::new(),
    })
}

/// Log entry payloads as the raft loop hands them over: encoded `InternalRequest`s.
fn entries(n: usize, make: fn(usize) -> Op) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            InternalRequest {
                id: i as u64 + 1,
                op: Some(make(i)),
                auth: None,
            }
            .encode_to_vec()
        })
        .collect()
}

/// The benchmark applies no conf change: raft's side of one is refused.
struct NoConfChanges;

impl RaftConf for NoConfChanges {
    fn apply_conf_change(&self, _index: u64, _cc: ConfChange) -> Result<ConfState, RaftError> {
        Err(RaftError::Stopped)
    }
    fn member_id(&self) -> u64 {
        1
    }
}

/// What the apply thread does with one batch of committed entries (minus the waiters).
fn apply_batch(store: &Store, batch_entries: &[Vec<u8>], index: &mut u64, durable: bool) {
    let tx = store.backend().begin_batch().expect("begin a batch");
    let leases = oxcd_server::domains::lease::Lessor::empty(2);
    let auth = oxcd_auth::AuthStore::default();
    let membership = oxcd_server::domains::membership::Membership::default();
    let timing = oxcd_server::edge::metrics::timing::ApplyTiming::default();
    let mut ctx = Applier::new(
        store,
        &leases,
        &auth,
        &membership,
        &NoConfChanges,
        &tx,
        false,
    );
    for data in batch_entries {
        *index += 1;
        let entry = Entry {
            index: *index,
            term: 1,
            data: data.clone().into(),
            ..Default::default()
        };
        ctx.index = *index;
        let applied =
            apply::apply_entry(&mut ctx, &entry, &timing, Default::default()).expect("apply");
        black_box(applied);
    }
    let written = ctx.finish();
    tx.commit(*index, 1, durable).expect("commit the batch");
    store.publish(&written, *index);
}

/// A store in a temporary directory holding `KEYS` keys; the directory must outlive it.
fn loaded_store() -> (tempfile::TempDir, Store, u64) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let backend = Backend::open(&dir.path().join("db")).expect("open the backend");
    let store = Store::open(Arc::new(backend)).expect("open the store");
    let mut index = 0u64;
    for chunk in entries(KEYS, put_op).chunks(1_000) {
        apply_batch(&store, chunk, &mut index, false);
    }
    (dir, store, index)
}

fn bench_entries(
    c: &mut Criterion,
    group_name: &str,
    make: fn(usize) -> Op,
    sizes: &[usize],
    durable: bool,
) {
    let (_dir, store, mut index) = loaded_store();
    // Enough distinct entries that consecutive batches touch different keys.
    let all = entries(KEYS, make);
    let mut group = c.benchmark_group(group_name);
    for &n in sizes {
        let mut start = 0usize;
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter(|| {
                if start + n > all.len() {
                    start = 0;
                }
                apply_batch(&store, &all[start..start + n], &mut index, durable);
                start += n;
            });
        });
    }
    group.finish();
}

fn apply_put(c: &mut Criterion) {
    bench_entries(c, "apply_put", put_op, &[1, 16, 128], false);
}

fn apply_put_durable(c: &mut Criterion) {
    bench_entries(c, "apply_put_durable", put_op, &[128], true);
}

fn apply_txn(c: &mut Criterion) {
    bench_entries(c, "apply_txn", txn_op, &[16], false);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = apply_put, apply_put_durable, apply_txn
}
criterion_main!(benches);
