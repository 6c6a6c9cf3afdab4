//! Who applies a committed batch: the raft thread itself, when the apply thread has
//! nothing queued and the batch is small and plain, or else the apply thread.
//!
//! Why: handing a batch to the apply thread is a sleep and a wake-up on every member,
//! and on a leader it sits on the path of every write's answer. A single client's put
//! spent about a tenth of its CPU on the three apply threads' wake-ups. etcd hands every
//! batch to its apply goroutine, where a hand-off costs little; a thread's costs more.
//!
//! The raft thread applies a batch itself only when all of these hold, and otherwise
//! queues it for the apply thread as before:
//! - nothing is queued for the apply thread, and the apply thread is not applying
//!   (the raft thread only tries the lock, it never waits on it): batches are applied
//!   in log order, once;
//! - the batch needs no disk write and sync in the same raft turn (raft emits committed
//!   entries ahead of its own sync; the sync and the acknowledgements behind it come
//!   first);
//! - every entry is a plain request whose cost its size bounds ([`plain`]): a put, a
//!   single-key delete, a txn of those and single-key ranges, a lease grant, or empty.
//!   A conf change needs the raft thread itself (applying it is a call to raft), a
//!   ranged delete or a lease revoke can touch any number of keys, a switch of the
//!   log's vocabulary compacts the log;
//! - the batch is at most [`INLINE_ENTRIES`] entries and [`INLINE_BYTES`] bytes, and no
//!   durable backend commit or log compaction is due (the apply thread does those; a
//!   commit on the raft thread is never synced, even while a snapshot is streamed,
//!   when the backend syncs every commit: the raft thread then leaves batches alone);
//! - no range is reading the key index (a count over a million keys holds it for
//!   a while, and a put waits for it). A range that starts between that check and the
//!   batch's first write still holds the raft thread for its length: the window is the
//!   few microseconds between them;
//! - the backend's write transaction can be had without waiting: a compaction's
//!   deletions or a defragmentation's last catch-up holding it leave the batch to the
//!   apply thread, so the raft thread never waits on the disk for another writer.
//!
//! So a busy leader, whose batches are large or follow each other while the apply
//! thread works, keeps the apply thread beside raft; a lone writer's put is applied
//! where it committed.
//!
//! A fatal error applying on either thread drops the apply state (its progress may be
//! ahead of what the backend holds) and stops the lane while its lock is held, so
//! nothing applies or commits with that state again. An error on the raft thread is
//! kept here for the apply thread to report as the member's end, and stops raft (its
//! sink refuses events from then on).
//!
//! What a plain batch costs is bounded by its size but for the state it meets: with
//! auth on, a put with a lease checks the caller's permission on the lease's keys; a
//! batch's events reach every watcher that wants them.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use oxcd_api::etcdserverpb::request_op::Request;
use oxcd_api::etcdserverpb::{RequestOp, TxnRequest};
use oxcd_api::oxcdpb::InternalRequest;
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_raft::node::{Event, EventSink};
use oxcd_raft::{Entry, EntryType, RaftError};
use prost::Message as _;

use crate::machine::applying::Applying;
use crate::machine::fatal::Fatal;

/// What applies batches: [`Applying`] in a member (a trait so that the lane's ordering
/// can be tested on its own).
pub trait BatchApplier: Send + 'static {
    /// Applies `entries`, in log order after everything applied before.
    fn apply_entries(&mut self, entries: &[Entry]) -> Result<(), Fatal>;
    /// Applies `entries` as [`Self::apply_entries`] unless that would wait for the
    /// backend (false: nothing done).
    fn try_apply_entries(&mut self, entries: &[Entry]) -> Result<bool, Fatal>;
    /// Replaces the state with the leader's snapshot.
    fn install(&mut self, snap: &oxcd_raft::Snapshot) -> Result<(), Fatal>;
    /// Makes the last commit durable if it is not yet.
    fn make_durable(&mut self) -> Result<(), Fatal>;
    /// Whether applying `count` more entries now is plain work (no durable commit, no
    /// log compaction, the log's own vocabulary).
    fn plain_now(&self, count: usize) -> bool;
}

impl BatchApplier for Applying {
    fn apply_entries(&mut self, entries: &[Entry]) -> Result<(), Fatal> {
        Applying::apply_entries(self, entries)
    }
    fn try_apply_entries(&mut self, entries: &[Entry]) -> Result<bool, Fatal> {
        Applying::try_apply_entries(self, entries)
    }
    fn install(&mut self, snap: &oxcd_raft::Snapshot) -> Result<(), Fatal> {
        Applying::install(self, snap)
    }
    fn make_durable(&mut self) -> Result<(), Fatal> {
        Applying::make_durable(self)
    }
    fn plain_now(&self, count: usize) -> bool {
        Applying::plain_now(self, count)
    }
}

/// The most entries the raft thread applies in one batch.
pub const INLINE_ENTRIES: usize = 64;
/// The most bytes of entry data the raft thread applies in one batch.
pub const INLINE_BYTES: usize = 256 * 1024;

/// The apply state, shared by the raft thread and the apply thread.
pub struct ApplyLane<A = Applying> {
    /// The apply state; None until the apply thread has readied it.
    applying: Mutex<Option<A>>,
    /// Events sent to the apply thread and not yet applied by it.
    queued: AtomicUsize,
    /// Applying has stopped (a fatal error on either thread).
    stopped: AtomicBool,
    /// The fatal error the raft thread met applying, for the apply thread to report.
    fatal: Mutex<Option<Fatal>>,
}

impl<A: BatchApplier> ApplyLane<A> {
    /// A lane with no apply state yet: every event is queued until [`Self::ready`].
    pub fn new() -> Arc<ApplyLane<A>> {
        Arc::new(ApplyLane {
            applying: Mutex::new(None),
            queued: AtomicUsize::new(0),
            stopped: AtomicBool::new(false),
            fatal: Mutex::new(None),
        })
    }

    /// The sink raft hands events to: applies on the raft thread or queues on `queue`.
    pub fn sink(self: &Arc<Self>, queue: SyncSender<Event>) -> LaneSink<A> {
        LaneSink {
            lane: self.clone(),
            queue,
        }
    }

    /// Puts the apply state in place; from here the raft thread may apply.
    pub fn ready(&self, applying: A) -> Result<(), Fatal> {
        *self.lock()? = Some(applying);
        Ok(())
    }

    /// The apply state, for the apply thread (which waits for the raft thread to finish
    /// a batch it is applying).
    pub fn lock(&self) -> Result<MutexGuard<'_, Option<A>>, Fatal> {
        self.applying.lock().map_err(|_| Fatal::ApplyInterrupted)
    }

    /// The apply thread applied `count` events it took off the queue.
    pub fn dequeued(&self, count: usize) {
        self.queued.fetch_sub(count, Ordering::AcqRel);
    }

    /// Applying stopped (a fatal error, or the apply thread's end): the raft thread
    /// applies no more and raft's sink refuses events.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// The fatal error the raft thread met applying, if any.
    pub fn take_fatal(&self) -> Option<Fatal> {
        self.fatal.lock().ok().and_then(|mut f| f.take())
    }

    /// Applies `entries` on the calling (raft) thread if the lane allows it now: None
    /// when applied (or failed: the error is kept), Some(entries) to queue instead.
    fn try_apply(&self, entries: Vec<Entry>) -> Option<Vec<Entry>> {
        if self.queued.load(Ordering::Acquire) != 0 || !small_and_plain(&entries) {
            return Some(entries);
        }
        let mut guard = match self.applying.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::WouldBlock) => return Some(entries),
            // The apply thread met a panic holding it: it reports that as the member's end.
            Err(TryLockError::Poisoned(_)) => return Some(entries),
        };
        // Read under the lock: the apply thread lowers it only holding the lock, after
        // applying what it took, so zero here means nothing before this batch waits.
        if self.queued.load(Ordering::Acquire) != 0 {
            return Some(entries);
        }
        let Some(applying) = guard.as_mut().filter(|a| a.plain_now(entries.len())) else {
            return Some(entries);
        };
        match applying.try_apply_entries(&entries) {
            Ok(true) => None,
            Ok(false) => Some(entries),
            Err(fatal) => {
                tracing::error!("apply on the raft thread stopped: {fatal}");
                // Its progress may have moved past what the backend holds: no one may
                // apply or commit with it again.
                *guard = None;
                self.stop();
                if let Ok(mut slot) = self.fatal.lock() {
                    *slot = Some(fatal);
                }
                None
            }
        }
    }
}

/// Raft's [`EventSink`] for a member: see the module doc.
pub struct LaneSink<A = Applying> {
    lane: Arc<ApplyLane<A>>,
    queue: SyncSender<Event>,
}

impl<A: BatchApplier> LaneSink<A> {
    fn queue(&mut self, ev: Event) -> Result<(), RaftError> {
        self.lane.queued.fetch_add(1, Ordering::AcqRel);
        self.queue.send(ev).map_err(|_| {
            self.lane.queued.fetch_sub(1, Ordering::AcqRel);
            RaftError::Stopped
        })
    }
}

impl<A: BatchApplier> EventSink for LaneSink<A> {
    fn emit(&mut self, ev: Event) -> Result<(), RaftError> {
        if self.lane.stopped.load(Ordering::Acquire) {
            return Err(RaftError::Stopped);
        }
        match ev {
            Event::Committed(entries) => match self.lane.try_apply(entries) {
                Some(entries) => self.queue(Event::Committed(entries)),
                None if self.lane.stopped.load(Ordering::Acquire) => Err(RaftError::Stopped),
                None => Ok(()),
            },
            ev => self.queue(ev),
        }
    }

    fn emit_ahead_of_sync(&mut self, ev: Event) -> Result<(), RaftError> {
        if self.lane.stopped.load(Ordering::Acquire) {
            return Err(RaftError::Stopped);
        }
        self.queue(ev)
    }
}

/// Whether the raft thread may apply `entries`: few and small enough, each [`plain`].
fn small_and_plain(entries: &[Entry]) -> bool {
    entries.len() <= INLINE_ENTRIES
        && entries.iter().map(|e| e.data.len()).sum::<usize>() <= INLINE_BYTES
        && entries.iter().all(plain)
}

/// Whether applying `e` costs what its size says: an empty entry, or a request (in
/// oxcd's vocabulary) that is a put, a single-key delete, a txn of plain ops comparing
/// single keys, or a lease grant. Anything else (a conf change, a switch of vocabulary,
/// a ranged delete, a lease revoke, compaction, auth and membership changes) is the
/// apply thread's.
pub fn plain(e: &Entry) -> bool {
    if e.entry_type != EntryType::EntryNormal {
        return false;
    }
    if e.data.is_empty() {
        return true;
    }
    if oxcd_raft::node::format::switched_to(&e.data).is_some() {
        return false;
    }
    match InternalRequest::decode(e.data.as_ref()) {
        Ok(InternalRequest { op: Some(op), .. }) => match op {
            Op::Put(_) | Op::LeaseGrant(_) => true,
            Op::DeleteRange(d) => d.range_end.is_empty(),
            Op::Txn(t) => plain_txn(&t),
            _ => false,
        },
        // The apply thread logs and skips what does not decode.
        _ => false,
    }
}

fn plain_txn(t: &TxnRequest) -> bool {
    t.compare.iter().all(|c| c.range_end.is_empty())
        && t.success.iter().chain(&t.failure).all(plain_op)
}

fn plain_op(op: &RequestOp) -> bool {
    match &op.request {
        Some(Request::RequestPut(_)) => true,
        Some(Request::RequestRange(r)) => r.range_end.is_empty(),
        Some(Request::RequestDeleteRange(d)) => d.range_end.is_empty(),
        Some(Request::RequestTxn(t)) => plain_txn(t),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};

    use oxcd_api::etcdserverpb::{Compare, DeleteRangeRequest, PutRequest, RangeRequest};
    use oxcd_raft::node::{Event, EventSink};
    use oxcd_raft::{Entry, EntryType, Snapshot};
    use prost::Message as _;

    use super::*;
    use crate::machine::apply_thread::serve_queue;

    /// Records which indexes were applied, in order, and on which thread.
    struct Recorder {
        applied: Arc<Mutex<Vec<(u64, bool)>>>,
        raft_thread: std::thread::ThreadId,
        /// The index whose apply fails, if any.
        fails_at: Option<u64>,
    }

    impl BatchApplier for Recorder {
        fn apply_entries(&mut self, entries: &[Entry]) -> Result<(), Fatal> {
            let on_raft = std::thread::current().id() == self.raft_thread;
            let mut applied = self.applied.lock().expect("recorder");
            for e in entries {
                if self.fails_at == Some(e.index) {
                    return Err(Fatal::UnknownLogFormat {
                        index: e.index,
                        format: 0,
                    });
                }
                applied.push((e.index, on_raft));
            }
            Ok(())
        }
        fn try_apply_entries(&mut self, entries: &[Entry]) -> Result<bool, Fatal> {
            self.apply_entries(entries).map(|()| true)
        }
        fn install(&mut self, _: &Snapshot) -> Result<(), Fatal> {
            Ok(())
        }
        fn make_durable(&mut self) -> Result<(), Fatal> {
            Ok(())
        }
        fn plain_now(&self, _: usize) -> bool {
            true
        }
    }

    fn request(op: Op) -> Vec<u8> {
        InternalRequest {
            id: 1,
            op: Some(op),
            auth: None,
        }
        .encode_to_vec()
    }

    fn entry(index: u64, data: Vec<u8>) -> Entry {
        Entry {
            index,
            term: 1,
            data: data.into(),
            ..Default::default()
        }
    }

    fn put(index: u64) -> Entry {
        entry(
            index,
            request(Op::Put(PutRequest {
                key: b"k".to_vec(),
                value: vec![0; 100],
                ..Default::default()
            })),
        )
    }

    fn ranged_delete(index: u64) -> Entry {
        entry(
            index,
            request(Op::DeleteRange(DeleteRangeRequest {
                key: b"a".to_vec(),
                range_end: b"z".to_vec(),
                ..Default::default()
            })),
        )
    }

    #[test]
    fn what_the_raft_thread_may_apply() {
        assert!(plain(&put(1)));
        assert!(plain(&entry(1, Vec::new())));
        assert!(!plain(&ranged_delete(1)));
        let single_delete = request(Op::DeleteRange(DeleteRangeRequest {
            key: b"a".to_vec(),
            ..Default::default()
        }));
        assert!(plain(&entry(1, single_delete)));
        let txn = |compare_end: &[u8], range_end: &[u8]| {
            request(Op::Txn(TxnRequest {
                compare: vec![Compare {
                    key: b"a".to_vec(),
                    range_end: compare_end.to_vec(),
                    ..Default::default()
                }],
                success: vec![RequestOp {
                    request: Some(Request::RequestPut(PutRequest::default())),
                }],
                failure: vec![RequestOp {
                    request: Some(Request::RequestRange(RangeRequest {
                        key: b"a".to_vec(),
                        range_end: range_end.to_vec(),
                        ..Default::default()
                    })),
                }],
            }))
        };
        assert!(plain(&entry(1, txn(b"", b""))));
        assert!(!plain(&entry(1, txn(b"z", b""))));
        assert!(!plain(&entry(1, txn(b"", b"z"))));
        let revoke = request(Op::LeaseRevoke(Default::default()));
        assert!(!plain(&entry(1, revoke)));
        let mut conf_change = put(1);
        conf_change.entry_type = EntryType::EntryConfChange;
        assert!(!plain(&conf_change));
        let many: Vec<Entry> = (1..=INLINE_ENTRIES as u64 + 1).map(put).collect();
        assert!(small_and_plain(&many[..INLINE_ENTRIES]));
        assert!(!small_and_plain(&many));
    }

    /// Raft (this thread) emits batches, some plain and some not, some ahead of a sync,
    /// while the apply thread serves its queue: every index is applied once, in order,
    /// and both threads applied some.
    #[test]
    fn batches_are_applied_once_in_order_by_either_thread() {
        let applied = Arc::new(Mutex::new(Vec::new()));
        let lane: Arc<ApplyLane<Recorder>> = ApplyLane::new();
        let (queue, events) = mpsc::sync_channel(1024);
        let mut sink = lane.sink(queue);
        // Emitted before the lane is ready: queued.
        sink.emit(Event::Committed(vec![put(1)])).expect("emit");
        lane.ready(Recorder {
            applied: applied.clone(),
            raft_thread: std::thread::current().id(),
            fails_at: None,
        })
        .expect("ready");
        let apply_lane = lane.clone();
        let apply_thread = std::thread::spawn(move || serve_queue(&apply_lane, &events));
        let mut index = 1;
        for round in 0..20_000u64 {
            let count = 1 + round % 3;
            let batch: Vec<Entry> = (0..count)
                .map(|_| {
                    index += 1;
                    if round % 7 == 3 {
                        ranged_delete(index)
                    } else {
                        put(index)
                    }
                })
                .collect();
            let ev = Event::Committed(batch);
            if round % 5 == 0 {
                sink.emit_ahead_of_sync(ev).expect("emit");
            } else {
                sink.emit(ev).expect("emit");
            }
        }
        drop(sink);
        apply_thread
            .join()
            .expect("apply thread")
            .expect("no fatal");
        let applied = applied.lock().expect("recorder");
        let indexes: Vec<u64> = applied.iter().map(|(i, _)| *i).collect();
        assert_eq!(indexes, (1..=index).collect::<Vec<_>>());
        let on_raft = applied.iter().filter(|(_, r)| *r).count();
        assert!(on_raft > 0, "the raft thread applied nothing");
        assert!(on_raft < applied.len(), "the apply thread applied nothing");
    }

    /// A batch that fails on the raft thread stops raft's sink and is the member's end,
    /// as the apply thread reports it; nothing after it is applied.
    #[test]
    fn a_failure_on_the_raft_thread_ends_the_lane_with_its_error() {
        let applied = Arc::new(Mutex::new(Vec::new()));
        let lane: Arc<ApplyLane<Recorder>> = ApplyLane::new();
        let (queue, events) = mpsc::sync_channel(1024);
        let mut sink = lane.sink(queue);
        lane.ready(Recorder {
            applied: applied.clone(),
            raft_thread: std::thread::current().id(),
            fails_at: Some(5),
        })
        .expect("ready");
        sink.emit(Event::Committed((1..=4).map(put).collect()))
            .expect("applied on this thread");
        assert!(matches!(
            sink.emit(Event::Committed(vec![put(5)])),
            Err(RaftError::Stopped)
        ));
        assert!(matches!(
            sink.emit(Event::Committed(vec![put(6)])),
            Err(RaftError::Stopped)
        ));
        drop(sink);
        let end = serve_queue(&lane, &events);
        assert!(
            matches!(end, Err(Fatal::UnknownLogFormat { index: 5, .. })),
            "{end:?}"
        );
        let applied = applied.lock().expect("recorder");
        assert_eq!(
            applied.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            vec![1, 2, 3, 4]
        );
        assert!(applied.iter().all(|(_, on_raft)| *on_raft));
    }
}
