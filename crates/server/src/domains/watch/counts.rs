//! What etcd's watchable store counts (`v3.5.16:server/mvcc/metrics.go`,
//! `watchable_store.go`): the watch streams and watchers open now, the watchers being
//! caught up from the history (etcd's unsynced, "slow" watchers) and the events sent.
//!
//! etcd's `etcd_debugging_mvcc_pending_events_total` counts events buffered for a
//! watcher whose channel was full; oxcd never buffers them (a watcher that falls behind
//! reads from the history instead), so it stays 0.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The member's watch counts.
#[derive(Debug, Default)]
pub struct WatchCounts {
    streams: AtomicI64,
    watchers: AtomicI64,
    slow: AtomicI64,
    events: AtomicU64,
}

impl WatchCounts {
    /// A stream opened (`+1`) or closed (`-1`).
    pub fn streams_add(&self, n: i64) {
        self.streams.fetch_add(n, Ordering::Relaxed);
    }

    /// Watchers created (`> 0`) or gone (`< 0`).
    pub fn watchers_add(&self, n: i64) {
        self.watchers.fetch_add(n, Ordering::Relaxed);
    }

    /// Watchers that started (`> 0`) or finished (`< 0`) catching up from the history.
    pub fn slow_add(&self, n: i64) {
        self.slow.fetch_add(n, Ordering::Relaxed);
    }

    /// Events sent to a watcher.
    pub fn sent(&self, events: usize) {
        self.events.fetch_add(events as u64, Ordering::Relaxed);
    }

    /// Watch streams open (`etcd_debugging_mvcc_watch_stream_total`).
    pub fn streams(&self) -> i64 {
        self.streams.load(Ordering::Relaxed)
    }

    /// Watchers open (`etcd_debugging_mvcc_watcher_total`).
    pub fn watchers(&self) -> i64 {
        self.watchers.load(Ordering::Relaxed)
    }

    /// Watchers catching up (`etcd_debugging_mvcc_slow_watcher_total`).
    pub fn slow(&self) -> i64 {
        self.slow.load(Ordering::Relaxed)
    }

    /// Events sent (`etcd_debugging_mvcc_events_total`).
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }
}
