//! The proposal registry: request ids, and the waiters the apply path completes.
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

    /// A fresh id with a receiver for its outcome.
    pub fn register(&self) -> (u64, oneshot::Receiver<Outcome>) {
        let id = self.prefix | (self.counter.fetch_add(1, Ordering::Relaxed) & COUNTER_MASK);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        (id, rx)
    }

    /// How many proposals wait for their outcome.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no proposal waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets a waiter (timed out or never proposed).
    pub fn cancel(&self, id: u64) {
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
