//! The task serving one gRPC Watch stream: its requests (create, cancel, progress), the
//! live feed, catch-up from the history, and progress notifications.
//!
//! Invariants (per stream):
//! - Each watcher has been sent every event it wants below its `next_rev`; every batch
//!   above the revision its range was registered at reaches the stream's subscription
//!   (or the subscription is marked lagged), so a watcher is caught up from the history
//!   to the hub's published revision when it is created and to the store's current
//!   revision after a lag, and then served by the feed; a batch at or below a watcher's
//!   `next_rev - 1` is skipped for it, so no event is sent twice or skipped.
//! - A progress revision is one every watcher has been sent everything up to: the
//!   queued batches are handled first, then no watcher is behind the hub's published
//!   revision read before.
//! - Responses leave through the stream's [`Outbox`], in the order they were made (a
//!   watcher's `created` comes before its events, its events before its `canceled`), at
//!   the latest once the request, batch or tick that made them is handled, or before
//!   the history is read.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::watch_request::RequestUnion;
use oxcd_api::etcdserverpb::{WatchCreateRequest, WatchRequest, WatchResponse};
use oxcd_api::mvccpb::Event;
use oxcd_mvcc::{KeyRange, MvccError, RangeOptions, Store};
use prost::bytes::{Bytes, BytesMut};
use tonic::Status;

use super::WatchHandles;
use super::outbox::{Gone, Outbox};
use super::routes::Routes;
use super::watcher::{DUPLICATE_ID, Watcher, fragments};
use super::wire::WatchOut;
use super::{Feed, Subscription, WatchHub};
use crate::domains::auth::caller::Credentials;
use oxcd_auth::Access;

/// The id etcd answers with when no watcher was created (and for stream-wide progress).
const NO_WATCH: i64 = -1;

/// One stream's state.
pub struct WatchStream {
    handles: Arc<WatchHandles>,
    hub: Arc<WatchHub>,
    watchers: BTreeMap<i64, Watcher>,
    /// The same watchers' ranges, to find those a batch's keys are for.
    routes: Routes<i64>,
    next_auto_id: i64,
    feed: Subscription,
    out: Outbox,
    /// The credentials the stream was opened with: each create is checked against them.
    creds: Credentials,
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        self.hub.counts.streams_add(-1);
        self.hub.counts.watchers_add(-(self.watchers.len() as i64));
    }
}

impl WatchStream {
    /// A stream over `handles` opened with `creds`, answering through `out`.
    pub fn new(handles: Arc<WatchHandles>, out: Outbox, creds: Credentials) -> WatchStream {
        let hub = handles.hub.clone();
        let feed = hub.subscribe();
        hub.counts.streams_add(1);
        WatchStream {
            handles,
            hub,
            watchers: BTreeMap::new(),
            routes: Routes::default(),
            next_auto_id: 0,
            feed,
            out,
            creds,
        }
    }

    fn store(&self) -> &Arc<Store> {
        self.hub.store()
    }

    /// Serves the stream of `requests` (gRPC's, or the gateway's read from a body) until
    /// the client closes it or goes away.
    pub async fn run<R>(mut self, mut requests: R)
    where
        R: Stream<Item = Result<WatchRequest, Status>> + Unpin,
    {
        let period = self.hub.progress_interval;
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        let _ = self.serve(&mut requests, &mut tick).await;
    }

    async fn serve<R>(
        &mut self,
        requests: &mut R,
        tick: &mut tokio::time::Interval,
    ) -> Result<(), Gone>
    where
        R: Stream<Item = Result<WatchRequest, Status>> + Unpin,
    {
        let mut reading = true;
        let stopped = stopped(self.hub.closed());
        tokio::pin!(stopped);
        loop {
            tokio::select! {
                _ = &mut stopped => {
                    self.out.fail(EtcdError::Stopped.into()).await;
                    return Ok(());
                }
                req = requests.next(), if reading => match req {
                    Some(Ok(req)) => self.on_request(req).await?,
                    // The client closed its side: as etcd, its watchers keep being served
                    // until it goes away.
                    None => reading = false,
                    Some(Err(_)) => return Ok(()),
                },
                feed = self.feed.recv() => match feed {
                    Some(feed) => {
                        let feeds = self.feed.with_queued(feed);
                        self.on_feeds(&feeds).await?
                    }
                    None => return Ok(()),
                },
                _ = tick.tick() => self.notify_progress().await?,
                _ = self.out.closed() => return Ok(()),
            }
            self.out.flush().await?;
        }
    }

    async fn send(&mut self, resp: WatchResponse) -> Result<(), Gone> {
        self.out.push(resp.into()).await
    }

    fn response(&self, rev: i64, watch_id: i64) -> WatchResponse {
        WatchResponse {
            header: Some(self.handles.reads.header(rev)),
            watch_id,
            ..Default::default()
        }
    }

    async fn on_request(&mut self, req: WatchRequest) -> Result<(), Gone> {
        match req.request_union {
            Some(RequestUnion::CreateRequest(c)) => self.create(c).await,
            Some(RequestUnion::CancelRequest(c)) => {
                // etcd answers nothing for an id it does not know.
                if self.drop_watcher(c.watch_id) {
                    let mut resp = self.response(self.store().current_rev(), c.watch_id);
                    resp.canceled = true;
                    self.send(resp).await?;
                }
                Ok(())
            }
            Some(RequestUnion::ProgressRequest(_)) => {
                // etcd answers only on a stream that has a watcher.
                if self.watchers.is_empty() {
                    return Ok(());
                }
                self.settle().await?;
                let rev = self.watchers.values().map(|w| w.next_rev - 1).min();
                let resp = self.response(rev.unwrap_or(0), NO_WATCH);
                self.send(resp).await
            }
            None => Ok(()),
        }
    }

    async fn create(&mut self, c: WatchCreateRequest) -> Result<(), Gone> {
        if let Err(e) = self.permitted(&c).await {
            let mut resp = self.response(self.store().current_rev(), NO_WATCH);
            resp.created = true;
            resp.canceled = true;
            resp.cancel_reason = refusal(e);
            return self.send(resp).await;
        }
        let current = self.store().current_rev();
        let id = if c.watch_id != 0 {
            c.watch_id
        } else {
            while self.watchers.contains_key(&self.next_auto_id) {
                self.next_auto_id += 1;
            }
            self.next_auto_id
        };
        let start = if c.start_revision == 0 {
            current + 1
        } else {
            c.start_revision
        };
        let watcher = if self.watchers.contains_key(&id) {
            Err(DUPLICATE_ID)
        } else {
            Watcher::new(&c, start)
        };
        let mut resp = self.response(current, id);
        resp.created = true;
        let watcher = match watcher {
            Ok(w) => w,
            Err(reason) => {
                resp.watch_id = NO_WATCH;
                resp.canceled = true;
                resp.cancel_reason = reason.to_string();
                return self.send(resp).await;
            }
        };
        if c.watch_id == 0 {
            self.next_auto_id += 1;
        }
        self.send(resp).await?;
        // Registered before the published revision is read: every batch after it on
        // this range reaches the subscription.
        self.feed.add_interest(watcher.key(), watcher.end());
        let published = self.hub.published();
        self.routes.change(id, watcher.key(), watcher.end(), true);
        self.watchers.insert(id, watcher);
        self.hub.counts.watchers_add(1);
        if start <= published {
            // Unsynced, as etcd calls a watcher that starts in the past, until caught up.
            let hub = self.hub.clone();
            let _slow = hub.counts.catching_up(1);
            self.catch_up(id, published).await?;
        }
        Ok(())
    }

    /// Whether the stream's caller may read the range `c` watches (always, auth off).
    async fn permitted(&self, c: &WatchCreateRequest) -> Result<(), EtcdError> {
        let callers = &self.handles.callers;
        if !callers.auth().enabled() {
            return Ok(());
        }
        let caller = callers.presenting(&self.creds).await?;
        callers
            .auth()
            .check(caller.as_ref(), &c.key, &c.range_end, Access::Read)
    }

    /// Removes watcher `id` and its interest; whether it existed.
    fn drop_watcher(&mut self, id: i64) -> bool {
        match self.watchers.remove(&id) {
            Some(w) => {
                self.feed.remove_interest(w.key(), w.end());
                self.routes.change(id, w.key(), w.end(), false);
                self.hub.counts.watchers_add(-1);
                true
            }
            None => false,
        }
    }

    /// Brings every watcher to at least the hub's published revision: the batches
    /// already queued are handled, and nothing at or below that revision is pending.
    async fn settle(&mut self) -> Result<(), Gone> {
        let published = self.hub.published();
        while let Some(feed) = self.feed.try_recv() {
            let feeds = self.feed.with_queued(feed);
            self.on_feeds(&feeds).await?;
        }
        if self.feed.take_lagged() {
            self.resync().await?;
        }
        for w in self.watchers.values_mut() {
            w.next_rev = w.next_rev.max(published + 1);
        }
        Ok(())
    }

    /// Handles queued batches in order: runs of event batches go out as one response per
    /// watcher; a gap is read from the history.
    async fn on_feeds(&mut self, feeds: &[Arc<Feed>]) -> Result<(), Gone> {
        if self.feed.take_lagged() {
            self.resync().await?;
        }
        let mut run = 0;
        for (i, feed) in feeds.iter().enumerate() {
            if feed.events.is_none() {
                self.deliver(&feeds[run..i]).await?;
                // A snapshot replaced the state: the skipped revisions are in the history.
                self.catch_up_all(feed.rev).await?;
                run = i + 1;
            }
        }
        self.deliver(&feeds[run..]).await
    }

    /// Sends each watcher its events of `feeds` (event batches in revision order) in one
    /// response. Each event's key is looked up in the stream's routes, and each watcher
    /// found checks only the events it was found for, so a large batch on a stream of
    /// many watchers costs a lookup per event, not a check per (watcher, event) pair; the
    /// watchers that pick the same events share one encoding of them.
    async fn deliver(&mut self, feeds: &[Arc<Feed>]) -> Result<(), Gone> {
        let Some(last) = feeds.last().map(|f| f.rev) else {
            return Ok(());
        };
        // Runs of consecutive events on one key that the routes name watchers for: each
        // run's events and the watchers of its key (looked up once per run).
        let mut runs: Vec<Run> = Vec::new();
        let mut run_key: Option<&[u8]> = None;
        // The run of `run_key`, if its key has watchers.
        let mut current = None;
        for (f, feed) in feeds.iter().enumerate() {
            for (i, e) in feed.events.iter().flatten().enumerate() {
                let Some(kv) = &e.kv else { continue };
                if run_key != Some(kv.key.as_slice()) {
                    run_key = Some(&kv.key);
                    let mut ids = Vec::new();
                    self.routes.interested(&kv.key, &mut ids);
                    current = (!ids.is_empty()).then(|| {
                        runs.push((ids, Vec::new()));
                        runs.len() - 1
                    });
                }
                if let Some(r) = current {
                    runs[r].1.push((f, i));
                }
            }
        }
        // (watcher, run) pairs by watcher, runs in revision order.
        let mut pairs: Vec<(i64, usize)> = runs
            .iter()
            .enumerate()
            .flat_map(|(r, (ids, _))| ids.iter().map(move |id| (*id, r)))
            .collect();
        pairs.sort_unstable();
        pairs.dedup();
        // Per watcher, in id order: the (feed, event) positions it wants, or (a watcher
        // that wants previous values or fragments) events of its own.
        let mut out: Vec<(i64, Picked)> = Vec::new();
        for group in pairs.chunk_by(|a, b| a.0 == b.0) {
            let id = group[0].0;
            let Some(w) = self.watchers.get(&id).filter(|w| w.next_rev <= last) else {
                continue;
            };
            let own = w.prev_kv() || w.fragment();
            let mut picked = Picked::default();
            let positions = group.iter().flat_map(|&(_, r)| &runs[r].1);
            for &(f, i) in positions {
                let Some(e) = feeds[f].events.as_ref().and_then(|es| es.get(i)) else {
                    continue;
                };
                if !w.wants(e) {
                    continue;
                }
                if own {
                    picked.own.push(e.clone());
                } else {
                    picked.shared.push((f, i));
                }
            }
            if !picked.own.is_empty() || !picked.shared.is_empty() {
                out.push((id, picked));
            }
        }
        for w in self.watchers.values_mut() {
            w.next_rev = w.next_rev.max(last + 1);
        }
        let mut shared = SharedPicks::default();
        for (id, picked) in out {
            if !picked.own.is_empty() {
                self.send_events(id, last, picked.own).await?;
            } else if !picked.shared.is_empty() {
                if let Some(w) = self.watchers.get_mut(&id) {
                    w.set_sent(true);
                }
                self.hub.counts.sent(picked.shared.len());
                let out = WatchOut {
                    resp: self.response(last, id),
                    encoded: shared.encode(feeds, picked.shared),
                };
                self.out.push(out).await?;
            }
        }
        Ok(())
    }

    /// The subscription's queue overflowed: batches were dropped, so every watcher reads
    /// what it missed from the history, up to the store's current revision (at or above
    /// every dropped batch, which was visible before it was routed).
    async fn resync(&mut self) -> Result<(), Gone> {
        let to = self.store().current_rev();
        tracing::debug!(
            to,
            "watch stream fell behind the live feed; catching up from the history"
        );
        self.catch_up_all(to).await
    }

    async fn catch_up_all(&mut self, to: i64) -> Result<(), Gone> {
        let behind: Vec<i64> = self
            .watchers
            .iter()
            .filter(|(_, w)| w.next_rev <= to)
            .map(|(id, _)| *id)
            .collect();
        let hub = self.hub.clone();
        let mut slow = hub.counts.catching_up(behind.len());
        for id in behind {
            self.catch_up(id, to).await?;
            slow.done_one();
        }
        Ok(())
    }

    /// Sends watcher `id` its events up to revision `to` from the history, in chunks of
    /// whole revisions; cancels it, as etcd, when its next revision was compacted.
    async fn catch_up(&mut self, id: i64, to: i64) -> Result<(), Gone> {
        let max_bytes = self.handles.max_request_bytes;
        loop {
            let Some(from) = self
                .watchers
                .get(&id)
                .map(|w| w.next_rev)
                .filter(|r| *r <= to)
            else {
                return Ok(());
            };
            self.out.flush().await?;
            let store = self.store().clone();
            let chunk =
                tokio::task::spawn_blocking(move || store.history(from, to, max_bytes)).await;
            let chunk = match chunk {
                Ok(Ok(chunk)) => chunk,
                Ok(Err(MvccError::Compacted)) => {
                    self.drop_watcher(id);
                    // etcd's compaction notice carries no revision in its header.
                    let mut resp = self.response(0, id);
                    resp.compact_revision = self.store().compact_rev();
                    resp.canceled = true;
                    return self.send(resp).await;
                }
                Ok(Err(e)) => return self.fail(id, e.to_string()).await,
                Err(e) => return self.fail(id, e.to_string()).await,
            };
            let Some(w) = self.watchers.get_mut(&id) else {
                return Ok(());
            };
            let mine = w.select(&chunk.events);
            w.next_rev = chunk.through + 1;
            if !mine.is_empty() {
                self.send_events(id, to, mine).await?;
            }
        }
    }

    /// Cancels watcher `id` after a backend failure, with the reason.
    async fn fail(&mut self, id: i64, reason: String) -> Result<(), Gone> {
        tracing::error!(watch_id = id, "watch: reading the history failed: {reason}");
        self.drop_watcher(id);
        let mut resp = self.response(self.store().current_rev(), id);
        resp.canceled = true;
        resp.cancel_reason = reason;
        self.send(resp).await
    }

    async fn send_events(&mut self, id: i64, rev: i64, mut events: Vec<Event>) -> Result<(), Gone> {
        let Some(w) = self.watchers.get_mut(&id) else {
            return Ok(());
        };
        w.set_sent(true);
        let (prev_kv, fragment) = (w.prev_kv(), w.fragment());
        if prev_kv {
            let store = self.store().clone();
            events = tokio::task::spawn_blocking(move || with_prev_kvs(&store, events))
                .await
                .map_err(|_| Gone)?;
        }
        self.hub.counts.sent(events.len());
        let mut resp = self.response(rev, id);
        resp.events = events;
        let pieces = if fragment {
            // etcd's threshold: the request limit plus gRPC's overhead allowance.
            let limit = self.handles.max_grpc_message;
            fragments(resp, limit)
        } else {
            vec![resp]
        };
        for piece in pieces {
            self.send(piece).await?;
        }
        Ok(())
    }

    /// Every `--experimental-watch-progress-notify-interval`: an empty response with the
    /// revision every idle watcher that asked for it has seen everything up to.
    async fn notify_progress(&mut self) -> Result<(), Gone> {
        self.settle().await?;
        let idle: Vec<(i64, i64)> = self
            .watchers
            .iter()
            .filter(|(_, w)| w.progress_notify() && !w.sent())
            .map(|(id, w)| (*id, w.next_rev - 1))
            .collect();
        for w in self.watchers.values_mut() {
            w.set_sent(false);
        }
        for (id, rev) in idle {
            let resp = self.response(rev, id);
            self.send(resp).await?;
        }
        Ok(())
    }
}

/// Consecutive events of a delivery on one key: the watchers of the key, and the events'
/// (feed, event) positions.
type Run = (Vec<i64>, Vec<(usize, usize)>);

/// One watcher's events of a delivery.
#[derive(Default)]
struct Picked {
    /// (feed, event) positions of events sent with their shared encoding.
    shared: Vec<(usize, usize)>,
    /// Events of its own (with previous values, or to fragment).
    own: Vec<Event>,
}

/// Joined encodings larger than this are not made: the pieces go out as they are.
const JOIN_LIMIT: usize = 64 << 10;

/// The encodings of the events each watcher of a delivery picked, taken in watcher order.
/// Watchers that pick the same events as the one before them (many watchers of one key)
/// share one joined piece, made when the second of them comes; any other watcher gets the
/// batch's own pieces (references, no copy). So a joined copy exists only where it is
/// shared, and is at most [`JOIN_LIMIT`] bytes.
#[derive(Default)]
struct SharedPicks {
    before: Vec<(usize, usize)>,
    joined: Option<Bytes>,
}

impl SharedPicks {
    fn encode(&mut self, feeds: &[Arc<Feed>], picks: Vec<(usize, usize)>) -> Vec<Bytes> {
        let piece = |&(f, i): &(usize, usize)| {
            let feed = &feeds[f];
            let events = feed.events.as_deref().unwrap_or_default();
            feed.encoded.get(events).get(i).cloned().unwrap_or_default()
        };
        if picks.len() < 2 {
            return picks.iter().map(piece).collect();
        }
        if picks != self.before {
            self.before = picks;
            self.joined = None;
            return self.before.iter().map(piece).collect();
        }
        if let Some(joined) = &self.joined {
            return vec![joined.clone()];
        }
        let pieces: Vec<Bytes> = picks.iter().map(piece).collect();
        if pieces.iter().map(Bytes::len).sum::<usize>() > JOIN_LIMIT {
            return pieces;
        }
        let mut joined = BytesMut::new();
        for p in &pieces {
            joined.extend_from_slice(p);
        }
        let joined = joined.freeze();
        self.joined = Some(joined.clone());
        vec![joined]
    }
}

/// The cancel reason of a create refused by auth: etcd sends its gRPC error's text
/// (grpc-go's "rpc error: code = ... desc = ..."); anything but a bad token, a stale
/// revision or no user reads as permission denied.
fn refusal(e: EtcdError) -> String {
    let e = match e {
        EtcdError::InvalidAuthToken | EtcdError::AuthOldRevision | EtcdError::UserEmpty => e,
        _ => EtcdError::PermissionDenied,
    };
    format!("rpc error: code = {:?} desc = {}", e.code(), e.message())
}

/// Completes when the member stops.
async fn stopped(mut closed: tokio::sync::watch::Receiver<bool>) {
    // An error means the hub is gone: stopped as well.
    let _ = closed.wait_for(|c| *c).await;
}

/// Attaches to each event the key's previous version (at the revision before the event),
/// when the history still has it.
fn with_prev_kvs(store: &Store, mut events: Vec<Event>) -> Vec<Event> {
    for e in &mut events {
        let Some(kv) = e.kv.as_ref().filter(|kv| kv.mod_revision > 1) else {
            continue;
        };
        let opts = RangeOptions {
            rev: kv.mod_revision - 1,
            ..Default::default()
        };
        if let Ok(found) = store.range(KeyRange::new(&kv.key, b""), opts) {
            e.prev_kv = found.kvs.into_iter().next();
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::mvccpb::KeyValue;

    fn feed(rev: i64, values: &[usize]) -> Arc<Feed> {
        let events: Vec<Event> = values
            .iter()
            .enumerate()
            .map(|(i, size)| Event {
                kv: Some(KeyValue {
                    key: format!("k{i}").into_bytes(),
                    value: vec![b'v'; *size],
                    mod_revision: rev,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect();
        Arc::new(Feed {
            rev,
            bytes: 0,
            events: Some(events),
            encoded: super::super::wire::EncodedEvents::default(),
        })
    }

    fn bytes_of(pieces: &[Bytes]) -> Vec<u8> {
        pieces.iter().flat_map(|p| p.iter().copied()).collect()
    }

    #[test]
    fn watchers_picking_the_same_events_share_one_joined_piece() {
        let feeds = vec![feed(5, &[10, 10, 10]), feed(6, &[10])];
        let mut shared = SharedPicks::default();
        let picks = vec![(0, 0), (0, 2), (1, 0)];
        let first = shared.encode(&feeds, picks.clone());
        assert_eq!(
            first.len(),
            3,
            "the first of a group gets the batch's own pieces"
        );
        let second = shared.encode(&feeds, picks.clone());
        let third = shared.encode(&feeds, picks.clone());
        assert_eq!(second.len(), 1, "the second gets one joined piece");
        assert_eq!(bytes_of(&second), bytes_of(&first), "same bytes either way");
        assert_eq!(
            second[0].as_ptr(),
            third[0].as_ptr(),
            "the third shares the second's piece"
        );
        let other = shared.encode(&feeds, vec![(0, 1)]);
        assert_eq!(other.len(), 1);
        let after = shared.encode(&feeds, vec![(0, 0), (0, 1)]);
        assert_eq!(after.len(), 2, "a different pick set starts over");
    }

    #[test]
    fn large_pick_sets_are_not_copied() {
        let feeds = vec![feed(5, &[JOIN_LIMIT, JOIN_LIMIT])];
        let mut shared = SharedPicks::default();
        let picks = vec![(0, 0), (0, 1)];
        shared.encode(&feeds, picks.clone());
        let again = shared.encode(&feeds, picks);
        assert_eq!(again.len(), 2, "above the limit the pieces go as they are");
    }
}
