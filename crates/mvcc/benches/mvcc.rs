//! MVCC store and key index micro-benchmarks.
//!
//! Store (redb backend in a temporary directory, preloaded with 10,000 keys
//! `key/00000`..`key/09999` of 256-byte values):
//! - `mvcc_put/1_per_commit`: one put (overwriting an existing key) in its own
//!   `ApplyBatch`, committed without fsync, as the apply thread does for a lone entry.
//! - `mvcc_put/128_per_commit`: 128 puts, each its own write request (revision), in one
//!   batch and one non-durable commit, as the apply thread does for a burst.
//! - `mvcc_range/single_key`, `mvcc_range/prefix_100` (the keys `key/001..`),
//!   `mvcc_range/count_only_10k` (count of every key, no rows read): `Store::range` at
//!   the current revision, index lookup plus backend reads.
//!
//! - `mvcc_range_long/{key_order,shuffled}_{1,2}_threads`: `Store::range_encoded` of
//!   every key of a store holding 100,000 keys of 1 KiB (a 105 MB answer, more than
//!   the backend's 64 MiB cache), written in key order or in a shuffled order (rows
//!   then lie in the table in no order of their keys), read by one or two threads.
//!
//! Key index (in memory, no backend):
//! - `tree_index/{get_hit,get_miss,range_100,put}` on a `TreeIndex` of 10,000 keys.
//! - `key_history/{latest,oldest}`: `KeyIndex::get` on one key with 10,000 revisions,
//!   reading at the newest and at the oldest revision.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use oxcd_mvcc::index::TreeIndex;
use oxcd_mvcc::key_index::KeyIndex;
use oxcd_mvcc::{KeyRange, RangeOptions, Revision, Store};
use oxcd_storage::backend::Backend;

/// Keys in the preloaded store and index.
const KEYS: usize = 10_000;
/// Size of every value written.
const VALUE_SIZE: usize = 256;

fn key(i: usize) -> Vec<u8> {
    format!("key/{i:05}").into_bytes()
}

/// A store in a temporary directory holding `KEYS` keys; the directory must outlive it.
fn loaded_store() -> (tempfile::TempDir, Store, u64) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let backend = Backend::open(&dir.path().join("db")).expect("open the backend");
    let store = Store::open(Arc::new(backend)).expect("open the store");
    let value = vec![0x42u8; VALUE_SIZE];
    let mut index = 0u64;
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(1_000) {
        index += 1;
        store
            .write_batch(index, 1, false, |batch| {
                for &i in chunk {
                    let mut txn = batch.txn()?;
                    txn.put(&key(i), &value, 0)?;
                    txn.end();
                }
                Ok(())
            })
            .expect("commit");
    }
    (dir, store, index)
}

/// Keys in the store of the long ranges, and their values' size.
const LONG_KEYS: usize = 100_000;
const LONG_VALUE_SIZE: usize = 1024;

/// A store holding `LONG_KEYS` keys written in key order, or shuffled (the i-th write is
/// key i x 7919 mod `LONG_KEYS`, a permutation since 7919 is a prime not dividing it).
fn long_store(shuffled: bool) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let backend = Backend::open(&dir.path().join("db")).expect("open the backend");
    let store = Store::open(Arc::new(backend)).expect("open the store");
    let value = vec![0x42u8; LONG_VALUE_SIZE];
    let order: Vec<usize> = (0..LONG_KEYS)
        .map(|i| if shuffled { i * 7919 % LONG_KEYS } else { i })
        .collect();
    for (n, chunk) in order.chunks(1_000).enumerate() {
        store
            .write_batch(n as u64 + 1, 1, false, |batch| {
                for &i in chunk {
                    let mut txn = batch.txn()?;
                    txn.put(format!("long/{i:06}").as_bytes(), &value, 0)?;
                    txn.end();
                }
                Ok(())
            })
            .expect("commit");
    }
    (dir, store)
}

fn store_range_long(c: &mut Criterion) {
    let mut group = c.benchmark_group("mvcc_range_long");
    group.throughput(Throughput::Elements(LONG_KEYS as u64));
    for shuffled in [false, true] {
        let (_dir, store) = long_store(shuffled);
        for threads in [1, 2] {
            let name = if shuffled { "shuffled" } else { "key_order" };
            group.bench_function(format!("{name}_{threads}_threads"), |b| {
                b.iter(|| {
                    let (read, parts) = store
                        .range_encoded(
                            KeyRange::new(b"long/", b"long0"),
                            RangeOptions::default(),
                            usize::MAX,
                            threads,
                            || 0usize,
                            |bytes: &mut usize, row| {
                                *bytes += row.len();
                                true
                            },
                        )
                        .expect("range");
                    assert_eq!(read.found, LONG_KEYS);
                    black_box(parts)
                })
            });
        }
    }
    group.finish();
}

fn store_put(c: &mut Criterion) {
    let (_dir, store, mut index) = loaded_store();
    let value = vec![0x17u8; VALUE_SIZE];
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let mut next = 0usize;
    let mut group = c.benchmark_group("mvcc_put");
    for per_commit in [1usize, 128] {
        group.throughput(Throughput::Elements(per_commit as u64));
        group.bench_function(format!("{per_commit}_per_commit"), |b| {
            b.iter(|| {
                index += 1;
                store
                    .write_batch(index, 1, false, |batch| {
                        for _ in 0..per_commit {
                            let mut txn = batch.txn()?;
                            txn.put(&keys[next % KEYS], black_box(&value), 0)?;
                            txn.end();
                            next += 1;
                        }
                        Ok(())
                    })
                    .expect("commit")
            });
        });
    }
    group.finish();
}

fn store_range(c: &mut Criterion) {
    let (_dir, store, _) = loaded_store();
    let mut group = c.benchmark_group("mvcc_range");

    let single = key(4_321);
    group.throughput(Throughput::Elements(1));
    group.bench_function("single_key", |b| {
        b.iter(|| {
            let res = store
                .range(
                    KeyRange::new(black_box(&single), b""),
                    RangeOptions::default(),
                )
                .expect("range");
            assert_eq!(res.kvs.len(), 1);
            res
        });
    });

    // key/00100 ..= key/00199
    group.throughput(Throughput::Elements(100));
    group.bench_function("prefix_100", |b| {
        b.iter(|| {
            let res = store
                .range(
                    KeyRange::new(black_box(b"key/001"), b"key/002"),
                    RangeOptions::default(),
                )
                .expect("range");
            assert_eq!(res.kvs.len(), 100);
            res
        });
    });

    group.throughput(Throughput::Elements(KEYS as u64));
    group.bench_function("count_only_10k", |b| {
        let opts = RangeOptions {
            count_only: true,
            ..Default::default()
        };
        b.iter(|| {
            let res = store
                .range(KeyRange::new(black_box(b"key/"), b"key0"), opts)
                .expect("range");
            assert_eq!(res.count, KEYS);
            res
        });
    });
    group.finish();
}

fn tree_index(c: &mut Criterion) {
    let mut tree = TreeIndex::default();
    for i in 0..KEYS {
        tree.put(&key(i), Revision::new(2 + i as i64, 0));
    }
    let at = 1 + KEYS as i64;
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let mut group = c.benchmark_group("tree_index");
    group.throughput(Throughput::Elements(1));

    let mut next = 0usize;
    group.bench_function("get_hit", |b| {
        b.iter(|| {
            next = (next + 7_919) % KEYS;
            tree.get(black_box(&keys[next]), at).expect("key is live")
        });
    });
    group.bench_function("get_miss", |b| {
        b.iter(|| tree.get(black_box(b"key/99999x"), at));
    });

    group.throughput(Throughput::Elements(100));
    group.bench_function("range_100", |b| {
        b.iter(|| {
            let (found, count) =
                tree.range(KeyRange::new(black_box(b"key/001"), b"key/002"), at, 0);
            assert_eq!(count, 100);
            found
        });
    });

    group.throughput(Throughput::Elements(1));
    let mut rev = at;
    group.bench_function("put", |b| {
        b.iter(|| {
            next = (next + 7_919) % KEYS;
            rev += 1;
            tree.put(black_box(&keys[next]), Revision::new(rev, 0));
        });
    });
    group.finish();
}

fn key_history(c: &mut Criterion) {
    let mut ki = KeyIndex::default();
    let revisions = 10_000i64;
    for r in 2..2 + revisions {
        ki.put(Revision::new(r, 0));
    }
    let mut group = c.benchmark_group("key_history");
    group.throughput(Throughput::Elements(1));
    group.bench_function("latest", |b| {
        b.iter(|| ki.get(black_box(1 + revisions)).expect("live"));
    });
    group.bench_function("oldest", |b| {
        b.iter(|| ki.get(black_box(2)).expect("live"));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = store_put, store_range, store_range_long, tree_index, key_history
}
criterion_main!(benches);
