//! WAL write-path micro-benchmarks.
//!
//! - `wal_append_sync/{1,16,128}`: buffer N log entries of 256 bytes with
//!   `Wal::append_entry`, then make them durable with one `Wal::sync` (one `write` and
//!   one `fdatasync`), as the raft loop does for one Ready. Throughput is in entries, so
//!   the per-entry cost of the fsync shows how well batching amortises it.
//! - `wal_record_encode/256`: framing and CRC-32C of one 256-byte entry record into a
//!   buffer (no I/O), the CPU part of an append.
//!
//! The WAL lives in a temporary directory on the same file system as `$TMPDIR` (the
//! default temporary directory), so the fsync cost is that device's.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use oxcd_storage::wal::record::{self, RecordKind};
use oxcd_storage::wal::{DEFAULT_SEGMENT_SIZE, Wal};

/// Size of one benchmarked log entry, roughly a small put with its raft framing.
const ENTRY_SIZE: usize = 256;

fn append_sync(c: &mut Criterion) {
    let mut group = c.benchmark_group("wal_append_sync");
    let entry = vec![0xa5u8; ENTRY_SIZE];
    for batch in [1u64, 16, 128] {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let mut wal = Wal::create(
            &dir.path().join("wal"),
            b"bench member",
            DEFAULT_SEGMENT_SIZE,
        )
        .expect("create the WAL");
        let mut index = 0u64;
        group.throughput(Throughput::Elements(batch));
        group.bench_with_input(BenchmarkId::from_parameter(batch), &batch, |b, &batch| {
            b.iter(|| {
                for _ in 0..batch {
                    index += 1;
                    wal.append_entry(index, black_box(&entry));
                }
                wal.sync().expect("sync the WAL");
            });
        });
    }
    group.finish();
}

fn record_encode(c: &mut Criterion) {
    let mut group = c.benchmark_group("wal_record_encode");
    let payload = vec![0x5au8; ENTRY_SIZE + 8];
    let mut out = Vec::with_capacity(2 * payload.len());
    group.throughput(Throughput::Bytes(payload.len() as u64));
    group.bench_function(BenchmarkId::from_parameter(ENTRY_SIZE), |b| {
        let mut crc = 0u32;
        b.iter(|| {
            out.clear();
            crc = record::encode(&mut out, crc, RecordKind::Entry, black_box(&payload));
            black_box(&out);
        });
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = append_sync, record_encode
}
criterion_main!(benches);
