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

    /// `n` watchers begin catching up from the history: counted slow until each is
    /// marked done, or the returned guard is dropped (an error, or the stream's task
    /// cancelled mid-way).
    pub fn catching_up(&self, n: usize) -> CatchingUp<'_> {
        let left = n as i64;
        self.slow.fetch_add(left, Ordering::Relaxed);
        CatchingUp { counts: self, left }
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

/// Watchers counted slow while they catch up ([`WatchCounts::catching_up`]).
pub struct CatchingUp<'a> {
    counts: &'a WatchCounts,
    left: i64,
}

impl CatchingUp<'_> {
    /// One of them has caught up.
    pub fn done_one(&mut self) {
        if self.left > 0 {
            self.left -= 1;
            self.counts.slow.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for CatchingUp<'_> {
    fn drop(&mut self) {
        self.counts.slow.fetch_sub(self.left, Ordering::Relaxed);
    }
}
