//! What etcd measures of its compactions (`v3.5.16:server/mvcc/kvstore_compaction.go`,
//! `metrics.go`): the pause of the index compaction, each batch of row deletions, the
//! whole compaction, the rows deleted, and when the last one ended. Histograms keep
//! seconds; `/metrics` writes them in milliseconds, as etcd's families are.
//!
//! Invariant: recording is atomic additions only (the apply thread times the index
//! compaction, the row deleter the rest).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use oxcd_storage::timing::{Histogram, HistogramSnapshot};

/// The compaction figures of one store.
#[derive(Debug)]
pub struct CompactionStats {
    index_pause: Histogram,
    db_pause: Histogram,
    total: Histogram,
    rows: AtomicU64,
    last: AtomicI64,
}

impl Default for CompactionStats {
    fn default() -> CompactionStats {
        // etcd's buckets in milliseconds: 0.5 doubling 14 times, 1 doubling 13, 100
        // doubling 14.
        CompactionStats {
            index_pause: Histogram::exponential(0.0005, 2.0, 14),
            db_pause: Histogram::exponential(0.001, 2.0, 13),
            total: Histogram::exponential(0.1, 2.0, 14),
            rows: AtomicU64::new(0),
            last: AtomicI64::new(0),
        }
    }
}

impl CompactionStats {
    /// The index compaction (under the index lock) took `d`.
    pub fn index_paused(&self, d: Duration) {
        self.index_pause.observe(d);
    }

    /// One transaction of row deletions took `d` and deleted `rows`.
    pub fn db_paused(&self, d: Duration, rows: u64) {
        self.db_pause.observe(d);
        self.rows.fetch_add(rows, Ordering::Relaxed);
    }

    /// A compaction ended, `d` after its rows began to be deleted.
    pub fn finished(&self, d: Duration) {
        self.total.observe(d);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |t| t.as_secs() as i64);
        self.last.store(now, Ordering::Relaxed);
    }

    /// `etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds` (seconds).
    pub fn index_pause(&self) -> HistogramSnapshot {
        self.index_pause.snapshot()
    }

    /// `etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds` (seconds).
    pub fn db_pause(&self) -> HistogramSnapshot {
        self.db_pause.snapshot()
    }

    /// `etcd_debugging_mvcc_db_compaction_total_duration_milliseconds` (seconds).
    pub fn total(&self) -> HistogramSnapshot {
        self.total.snapshot()
    }

    /// `etcd_debugging_mvcc_db_compaction_keys_total`: rows deleted.
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    /// `etcd_debugging_mvcc_db_compaction_last`: unix seconds of the last end (0: none
    /// since start).
    pub fn last(&self) -> i64 {
        self.last.load(Ordering::Relaxed)
    }
}
