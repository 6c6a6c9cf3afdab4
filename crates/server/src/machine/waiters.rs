//! The proposal registry: request ids, and the waiters the apply path completes.
//!
//! A waiter is held through a [`Registration`]: when its caller goes away (the request
//! was cancelled, timed out, or raft dropped the proposal) the registration's drop
//! removes it, so no waiter outlives its caller.
//!
//! A request id is unique across this member's restarts: the member id's low 16 bits,
//! then a 48-bit counter seeded from the clock at start. Other members never complete
//! our ids (they have no waiter for them), so collisions across members are harmless.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use oxcd_api::errors::EtcdError;
use tokio::sync::oneshot;

use crate::machine::applied::Outcome;

const COUNTER_MASK: u64 = (1 << 48) - 1;

/// Issues request ids and holds the waiters for them.
#[derive(Debug)]
pub struct Waiters {
    prefix: u64,
    counter: AtomicU64,
    // std Mutex: held only to insert or remove, never across an await.
    pending: Mutex<HashMap<u64, oneshot::Sender<Outcome>>>,
}

impl Waiters {
    /// A registry for `member_id`.
    pub fn new(member_id: u64) -> Waiters {
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Waiters {
            prefix: (member_id & 0xffff) << 48,
            counter: AtomicU64::new((now_ms << 8) & COUNTER_MASK),
            pending: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Outcome>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh id with a receiver for its outcome; the waiter stays registered while the
    /// returned [`Registration`] lives.
    pub fn register(&self) -> (Registration<'_>, oneshot::Receiver<Outcome>) {
        let id = self.prefix | (self.counter.fetch_add(1, Ordering::Relaxed) & COUNTER_MASK);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        let registration = Registration {
            waiters: self,
            id,
            settled: false,
        };
        (registration, rx)
    }

    /// How many proposals wait for their outcome.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no proposal waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets a waiter (its caller went away).
    fn cancel(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Completes the waiter for `id`, if this member has one.
    pub fn complete(&self, id: u64, outcome: Outcome) {
        if let Some(tx) = self.lock().remove(&id) {
            let _ = tx.send(outcome);
        }
    }

    /// Fails every waiter (the member is stopping).
    pub fn fail_all(&self, err: EtcdError) {
        for (_, tx) in self.lock().drain() {
            let _ = tx.send(Err(err));
        }
    }
}

/// One registered waiter: dropped, it removes the waiter unless its outcome arrived
/// ([`Registration::settled`]).
#[derive(Debug)]
pub struct Registration<'a> {
    waiters: &'a Waiters,
    id: u64,
    settled: bool,
}

impl Registration<'_> {
    /// The request id the apply path completes.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The outcome arrived: the apply path already removed the waiter.
    pub fn settled(mut self) {
        self.settled = true;
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.waiters.cancel(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiter_whose_caller_goes_away_is_removed() {
        let waiters = Waiters::new(1);
        let (registration, done) = waiters.register();
        assert_eq!(waiters.len(), 1);
        // The caller is dropped before raft answered or the entry applied.
        drop(done);
        drop(registration);
        assert!(waiters.is_empty(), "the waiter outlived its caller");
    }

    #[test]
    fn a_completed_waiter_gets_its_outcome_once() {
        let waiters = Waiters::new(1);
        let (registration, mut done) = waiters.register();
        waiters.complete(registration.id(), Err(EtcdError::Stopped));
        assert!(waiters.is_empty());
        assert!(matches!(done.try_recv(), Ok(Err(EtcdError::Stopped))));
        registration.settled();
        assert!(waiters.is_empty());
    }

    #[test]
    fn ids_are_distinct_and_carry_the_member() {
        let waiters = Waiters::new(0xabcd);
        let (a, _da) = waiters.register();
        let (b, _db) = waiters.register();
        assert_ne!(a.id(), b.id());
        assert_eq!(a.id() >> 48, 0xabcd);
    }
}
