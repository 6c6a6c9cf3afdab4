//! Watch: the live change feed and the per-stream watchers fed from it.
//!
//! Owns: the [`WatchHub`] (the apply thread publishes every committed batch's events to
//! it, after the commit), the [`watcher::Watcher`]s of one gRPC stream and the task that
//! serves them ([`stream`]).
//!
//! Invariants:
//! - A revision's events are published once, in revision order, after the store made the
//!   revision visible to readers. A batch applied while no stream was open (events are
//!   then not recorded) and a leader snapshot that replaces the state publish a gap
//!   instead: watchers read the skipped revisions from the backend's history.
//! - Every watcher gets each event at or after its start revision exactly once, in
//!   revision order, all events of a revision in one response (unless fragmented).
//! - The hub keeps a bounded ring of batches shared by every stream; a stream that falls
//!   behind it (a slow or stalled client) loses its place in the ring and catches up from
//!   the backend's history in bounded chunks, so a slow watcher never blocks the apply
//!   thread or other watchers, and the memory it holds is bounded.

pub mod stream;
pub mod watcher;

use std::sync::Arc;
use std::time::Duration;

use oxcd_api::mvccpb::Event;
use oxcd_mvcc::Store;
use tokio::sync::broadcast;

/// How many published batches the ring keeps for streams that are behind.
const FEED_CAPACITY: usize = 4096;

/// One published batch.
#[derive(Debug)]
pub struct Feed {
    /// The store's revision after the batch.
    pub rev: i64,
    /// The batch's events in revision order; `None` for a gap (a snapshot from the
    /// leader replaced the state): read the revisions up to `rev` from the history.
    pub events: Option<Vec<Event>>,
}

/// The live change feed of one member.
pub struct WatchHub {
    store: Arc<Store>,
    feed: broadcast::Sender<Arc<Feed>>,
    closed: tokio::sync::watch::Sender<bool>,
    /// `--experimental-watch-progress-notify-interval`.
    pub progress_interval: Duration,
}

impl WatchHub {
    /// A hub over `store`.
    pub fn new(store: Arc<Store>, progress_interval: Duration) -> WatchHub {
        let (feed, _) = broadcast::channel(FEED_CAPACITY);
        WatchHub {
            store,
            feed,
            closed: tokio::sync::watch::Sender::new(false),
            progress_interval,
        }
    }

    /// The store watched.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Publishes a committed batch whose revision readers can already see.
    pub fn publish(&self, rev: i64, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        // No receiver (no watch stream open) is not an error.
        let _ = self.feed.send(Arc::new(Feed {
            rev,
            events: Some(events),
        }));
    }

    /// Whether any watch stream is open (only then are events worth recording).
    pub fn has_streams(&self) -> bool {
        self.feed.receiver_count() > 0
    }

    /// Publishes that the state jumped to `rev` without events (a snapshot was installed).
    pub fn publish_gap(&self, rev: i64) {
        let _ = self.feed.send(Arc::new(Feed { rev, events: None }));
    }

    /// Ends every watch stream (the member is stopping): clients see etcd's "server
    /// stopped" and reconnect elsewhere.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    /// Becomes true when the member stops.
    pub fn closed(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// A new place in the feed, and the revision from which it is complete: every
    /// revision above the returned one will be received.
    pub fn subscribe(&self) -> (broadcast::Receiver<Arc<Feed>>, i64) {
        let rx = self.feed.subscribe();
        // Read after subscribing: a revision published to readers after this read is
        // sent to the feed after it, so it reaches `rx`.
        (rx, self.store.current_rev())
    }
}
