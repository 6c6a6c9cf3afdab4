//! The apply thread: takes the committed entries and snapshots raft queued for it
//! ([`super::apply_lane`]: those the raft thread did not apply itself), applies them
//! through the lane's [`Applying`] state, and makes the backend durable every
//! [`DURABLE_EVERY`] while writes flow and at shutdown.
//!
//! The thread's end, and its [`Fatal`] error if any (its own, or one the raft thread met
//! applying), is sent on a channel that serving waits on.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;

use oxcd_api::errors::EtcdError;
use oxcd_raft::node::Event;
use tokio::sync::oneshot;

use crate::machine::apply_lane::{ApplyLane, BatchApplier};
use crate::machine::applying::{ApplyParts, Applying, DURABLE_EVERY};
use crate::machine::fatal::Fatal;

/// The most entries the thread takes off its queue for one backend commit.
const BATCH_ENTRIES: usize = 10_000;

/// What the apply thread needs.
pub struct ApplyLoop {
    /// What applying needs, handed to the lane's [`Applying`] state once it is ready.
    pub parts: ApplyParts,
    /// What raft queued for this thread.
    pub events: Receiver<Event>,
    /// The apply state this thread shares with the raft thread.
    pub lane: Arc<ApplyLane>,
}

impl ApplyLoop {
    /// Runs the loop on its own thread until the raft loop's events end. Its end (the
    /// fatal error that stopped it, if any) is sent on `ended` as it exits.
    pub fn spawn(
        self,
        ended: oneshot::Sender<Result<(), Fatal>>,
    ) -> std::io::Result<JoinHandle<()>> {
        std::thread::Builder::new()
            .name("apply".into())
            .spawn(move || {
                let waiters = self.parts.waiters.clone();
                let lane = self.lane.clone();
                let res = self.run();
                lane.stop();
                waiters.fail_all(EtcdError::Stopped);
                if let Err(e) = &res {
                    tracing::error!("apply loop stopped: {e}");
                }
                let _ = ended.send(res);
            })
    }

    fn run(self) -> Result<(), Fatal> {
        let ApplyLoop {
            parts,
            events,
            lane,
        } = self;
        let applying = Applying::start(parts)?;
        lane.ready(applying)?;
        serve_queue(&lane, &events)
    }
}

/// Applies what raft queues on `events` through `lane` until raft's end (its sink
/// dropped), making the backend durable after [`DURABLE_EVERY`] without events and at
/// the end. Returns the first fatal error of either thread.
pub fn serve_queue<A: BatchApplier>(
    lane: &ApplyLane<A>,
    events: &Receiver<Event>,
) -> Result<(), Fatal> {
    loop {
        if let Some(fatal) = lane.take_fatal() {
            return Err(fatal);
        }
        match events.recv_timeout(DURABLE_EVERY) {
            Ok(first) => {
                let (taken, entries, snapshot) = take_queued(first, events);
                let mut guard = lane.lock()?;
                let Some(applying) = guard.as_mut() else {
                    // The raft thread failed applying and left its fatal error.
                    return Err(lane.take_fatal().unwrap_or(Fatal::ApplyInterrupted));
                };
                let applied = (|| {
                    if !entries.is_empty() {
                        applying.apply_entries(&entries)?;
                    }
                    if let Some(s) = snapshot {
                        applying.install(&s)?;
                    }
                    Ok(())
                })();
                settle(lane, &mut guard, applied)?;
                lane.dequeued(taken);
            }
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected)
                if lane.lock()?.is_none() =>
            {
                return Err(lane.take_fatal().unwrap_or(Fatal::ApplyInterrupted));
            }
            Err(RecvTimeoutError::Timeout) => make_durable(lane)?,
            Err(RecvTimeoutError::Disconnected) => {
                if let Some(fatal) = lane.take_fatal() {
                    return Err(fatal);
                }
                return make_durable(lane);
            }
        }
    }
}

/// Makes what was applied durable (the timer's commit, and the last one at the end),
/// under the lane's lock.
fn make_durable<A: BatchApplier>(lane: &ApplyLane<A>) -> Result<(), Fatal> {
    let mut guard = lane.lock()?;
    let synced = guard.as_mut().map_or(Ok(()), |a| a.make_durable());
    settle(lane, &mut guard, synced)
}

/// After the apply thread worked on the state in `guard`: on a fatal error the state
/// is dropped and the lane stopped while the lock is still held, so the raft thread
/// never applies or commits with progress the backend may not hold.
fn settle<A: BatchApplier>(
    lane: &ApplyLane<A>,
    guard: &mut Option<A>,
    result: Result<(), Fatal>,
) -> Result<(), Fatal> {
    if result.is_err() {
        *guard = None;
        lane.stop();
    }
    result
}

/// `first` and whatever else is already queued, for one backend commit: how many events
/// were taken, their entries, and the snapshot that ended the batch, if one did.
fn take_queued(
    first: Event,
    events: &Receiver<Event>,
) -> (usize, Vec<oxcd_raft::Entry>, Option<oxcd_raft::Snapshot>) {
    let mut entries = match first {
        Event::Committed(entries) => entries,
        Event::Snapshot(s) => return (1, Vec::new(), Some(s)),
    };
    let mut taken = 1;
    while entries.len() < BATCH_ENTRIES {
        match events.try_recv() {
            Ok(Event::Committed(more)) => {
                taken += 1;
                entries.extend(more);
            }
            Ok(Event::Snapshot(s)) => return (taken + 1, entries, Some(s)),
            Err(_) => break,
        }
    }
    (taken, entries, None)
}
