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
//! - A batch goes only to the subscriptions (streams, lock and election waits) with an
//!   interest in one of its keys ([`routes`]), through each one's bounded queue of shared
//!   batches; a gap goes to all. A subscription whose queue is full (a slow or stalled
//!   client) is marked lagged instead and catches up from the backend's history in
//!   bounded chunks, so a slow watcher never blocks the apply thread or other watchers,
//!   and the memory it holds is bounded.
//! - A batch is routed under the routes' read lock and `published` moves to its revision
//!   before that lock is released: a subscription that registers an interest (write
//!   lock) and then reads the store's current revision gets every later batch on it.

pub mod counts;
pub mod handles;
pub mod outbox;
pub mod routes;
pub mod service;
pub mod stream;
pub mod watcher;
pub mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use oxcd_api::mvccpb::Event;
use oxcd_mvcc::Store;
use tokio::sync::mpsc;

use routes::{Routes, SubId};

pub use handles::WatchHandles;

/// How many batches a subscription's queue holds before it is marked lagged.
const QUEUE_CAPACITY: usize = 1024;
/// At most this many queued batches are taken together into one response per watcher.
const MERGE_BATCHES: usize = 256;
/// ... and batches whose keys and values add up to at most this many bytes.
const MERGE_BYTES: usize = 1 << 20;

/// One published batch.
#[derive(Debug)]
pub struct Feed {
    /// The store's revision after the batch.
    pub rev: i64,
    /// The batch's events in revision order; `None` for a gap (a snapshot from the
    /// leader replaced the state): read the revisions up to `rev` from the history.
    pub events: Option<Vec<Event>>,
    /// The events' keys and values in bytes.
    pub bytes: usize,
    /// The events encoded once for every stream that sends them as they are.
    pub encoded: wire::EncodedEvents,
}

/// Where a subscription's batches go.
struct Mailbox {
    tx: mpsc::Sender<Arc<Feed>>,
    lagged: Arc<AtomicBool>,
}

impl Mailbox {
    fn deliver(&self, feed: &Arc<Feed>) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(feed.clone()) {
            self.lagged.store(true, Ordering::Release);
        }
    }
}

#[derive(Default)]
struct Subscribers {
    routes: Routes,
    mailboxes: HashMap<SubId, Mailbox>,
}

/// The live change feed of one member.
pub struct WatchHub {
    store: Arc<Store>,
    subscribers: RwLock<Subscribers>,
    count: AtomicUsize,
    next_id: AtomicU64,
    published: AtomicI64,
    closed: tokio::sync::watch::Sender<bool>,
    /// `--experimental-watch-progress-notify-interval`.
    pub progress_interval: Duration,
    /// Streams, watchers and events, as etcd counts them.
    pub counts: counts::WatchCounts,
}

impl WatchHub {
    /// A hub over `store`.
    pub fn new(store: Arc<Store>, progress_interval: Duration) -> WatchHub {
        let published = AtomicI64::new(store.current_rev());
        WatchHub {
            store,
            subscribers: RwLock::default(),
            count: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            published,
            closed: tokio::sync::watch::Sender::new(false),
            progress_interval,
            counts: counts::WatchCounts::default(),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, Subscribers> {
        // A panic elsewhere while holding the lock leaves consistent maps: go on.
        self.subscribers.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Subscribers> {
        self.subscribers.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The store watched.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Publishes a committed batch whose revision readers can already see, to the
    /// subscriptions interested in one of its keys.
    pub fn publish(&self, rev: i64, events: Vec<Event>) {
        if events.is_empty() {
            return;
        }
        let subs = self.read();
        let mut targets = Vec::new();
        for e in &events {
            if let Some(kv) = &e.kv {
                subs.routes.interested(&kv.key, &mut targets);
            }
        }
        // A batch nobody wants costs the apply thread the lookups only.
        if !targets.is_empty() {
            targets.sort_unstable();
            targets.dedup();
            let bytes = events
                .iter()
                .filter_map(|e| e.kv.as_ref())
                .map(|kv| kv.key.len() + kv.value.len())
                .sum();
            let feed = Arc::new(Feed {
                rev,
                events: Some(events),
                bytes,
                encoded: wire::EncodedEvents::default(),
            });
            for id in targets {
                if let Some(m) = subs.mailboxes.get(&id) {
                    m.deliver(&feed);
                }
            }
        }
        self.published.store(rev, Ordering::Release);
    }

    /// Whether any subscription is open (only then are events worth recording).
    pub fn has_streams(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Publishes to every subscription that the state jumped to `rev` without events (a
    /// snapshot was installed, or a batch was applied unrecorded).
    pub fn publish_gap(&self, rev: i64) {
        let subs = self.read();
        let feed = Arc::new(Feed {
            rev,
            events: None,
            bytes: 0,
            encoded: wire::EncodedEvents::default(),
        });
        for m in subs.mailboxes.values() {
            m.deliver(&feed);
        }
        self.published.store(rev, Ordering::Release);
    }

    /// The revision of the last batch routed: every batch at or below it that touches a
    /// subscription's interests is in its queue, or the subscription is marked lagged.
    pub fn published(&self) -> i64 {
        self.published.load(Ordering::Acquire)
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

    /// A new subscription with no interest yet.
    pub fn subscribe(self: &Arc<Self>) -> Subscription {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let lagged = Arc::new(AtomicBool::new(false));
        let mailbox = Mailbox {
            tx,
            lagged: lagged.clone(),
        };
        self.write().mailboxes.insert(id, mailbox);
        self.count.fetch_add(1, Ordering::AcqRel);
        Subscription {
            id,
            hub: self.clone(),
            rx,
            lagged,
        }
    }
}

/// A place in the feed: the batches that touch its interests, in revision order.
pub struct Subscription {
    id: SubId,
    hub: Arc<WatchHub>,
    rx: mpsc::Receiver<Arc<Feed>>,
    lagged: Arc<AtomicBool>,
}

impl Subscription {
    /// Receives batches touching `[key, end)` from now on: every batch made visible
    /// after this call returns (see the module's invariants).
    pub fn add_interest(&self, key: &[u8], end: &[u8]) {
        self.hub.write().routes.change(self.id, key, end, true);
    }

    /// Undoes one [`Subscription::add_interest`] of the same range.
    pub fn remove_interest(&self, key: &[u8], end: &[u8]) {
        self.hub.write().routes.change(self.id, key, end, false);
    }

    /// The next batch; None once the hub is gone.
    pub async fn recv(&mut self) -> Option<Arc<Feed>> {
        self.rx.recv().await
    }

    /// A batch already queued, if any.
    pub fn try_recv(&mut self) -> Option<Arc<Feed>> {
        self.rx.try_recv().ok()
    }

    /// `first` and the batches queued behind it, as many as one response per watcher
    /// should carry (bounded in count and bytes), in revision order.
    pub fn with_queued(&mut self, first: Arc<Feed>) -> Vec<Arc<Feed>> {
        let mut bytes = first.bytes;
        let mut feeds = vec![first];
        while feeds.len() < MERGE_BATCHES && bytes < MERGE_BYTES {
            match self.rx.try_recv() {
                Ok(f) => {
                    bytes += f.bytes;
                    feeds.push(f);
                }
                Err(_) => break,
            }
        }
        feeds
    }

    /// Whether batches were dropped because the queue was full (and clears the mark):
    /// everything up to the store's current revision must then be read from the history.
    pub fn take_lagged(&self) -> bool {
        self.lagged.swap(false, Ordering::AcqRel)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut subs = self.hub.write();
        subs.routes.remove_all(self.id);
        subs.mailboxes.remove(&self.id);
        self.hub.count.fetch_sub(1, Ordering::AcqRel);
    }
}
