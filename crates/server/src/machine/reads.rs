//! The read handle: what a handler needs to answer from this member's state. The store,
//! the ReadIndex barrier that makes a read linearizable, the applied index, response
//! headers, and the blocking pool with its admission for reads that can cover the whole
//! keyspace.
//!
//! Invariants:
//! - After [`Reads::barrier`] returns Ok, this member has applied everything committed
//!   when it was called (as confirmed by the leader): a read after it is linearizable.
//! - At most as many multi-key ranges as the machine has cores are read on the blocking pool at once
//!   ([`Reads::range_turn`]), and their answers hold at most the [`RangeBudget`]'s bytes
//!   together (one answer alone may pass it).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::ResponseHeader;
use oxcd_mvcc::Store;
use oxcd_raft::RaftError;
use oxcd_raft::node::RaftHandle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot, watch};

use crate::machine::proposal::Headers;
use crate::machine::range_budget::RangeBudget;

/// A read on the blocking pool ended without an answer (its task panicked or was
/// cancelled at shutdown).
#[derive(Debug, thiserror::Error)]
#[error("oxcd: backend read failed: {0}")]
pub struct ReadFailed(#[from] tokio::task::JoinError);

impl From<ReadFailed> for tonic::Status {
    fn from(e: ReadFailed) -> tonic::Status {
        tonic::Status::internal(e.to_string())
    }
}

/// Runs `read` against `store` on the blocking pool (see [`Reads::blocking`]).
pub async fn read_blocking<T, F>(store: Arc<Store>, read: F) -> Result<T, ReadFailed>
where
    F: FnOnce(&Store) -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(tokio::task::spawn_blocking(move || read(&store)).await?)
}

/// Who answers: the ids every response header carries.
#[derive(Debug, Clone, Copy)]
pub struct Ids {
    /// The cluster id.
    pub cluster_id: u64,
    /// This member's id.
    pub member_id: u64,
}

/// Reads this member's state. Cheap to clone (shared parts).
#[derive(Clone)]
pub struct Reads {
    ids: Ids,
    store: Arc<Store>,
    raft: RaftHandle,
    applied: watch::Receiver<u64>,
    request_timeout: Duration,
    range_turns: Arc<Semaphore>,
    range_budget: Arc<RangeBudget>,
}

/// Raft's refusal as the error a client sees.
pub(crate) fn raft_err(e: RaftError) -> EtcdError {
    match e {
        RaftError::ProposalDropped => EtcdError::NoLeader,
        RaftError::LeaderChanged | RaftError::FormatSwitched { .. } => EtcdError::LeaderChanged,
        _ => EtcdError::Stopped,
    }
}

impl Reads {
    /// Reads of `store` for the member `ids` names, its barrier through `raft`, a wait
    /// for raft or the apply thread lasting at most `request_timeout`, multi-key range
    /// answers bound by `range_budget`.
    pub fn new(
        ids: Ids,
        store: Arc<Store>,
        raft: RaftHandle,
        request_timeout: Duration,
        range_budget: Arc<RangeBudget>,
    ) -> Reads {
        Reads {
            ids,
            applied: store.applied_index(),
            store,
            raft,
            request_timeout,
            range_turns: Arc::new(Semaphore::new(cores().max(2))),
            range_budget,
        }
    }

    /// The bound on the bytes of multi-key range answers in flight.
    pub fn range_budget(&self) -> &Arc<RangeBudget> {
        &self.range_budget
    }

    /// The MVCC store, as applied here.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The ids response headers carry.
    pub fn ids(&self) -> Ids {
        self.ids
    }

    /// What fills in response headers now: this member's ids, term and revision.
    pub fn headers(&self) -> Headers {
        Headers {
            cluster_id: self.ids.cluster_id,
            member_id: self.ids.member_id,
            raft_term: self.raft.status().term(),
            current_rev: self.store.current_rev(),
        }
    }

    /// A response header at `revision`.
    pub fn header(&self, revision: i64) -> ResponseHeader {
        self.headers().at(revision)
    }

    /// A response header at the store's current revision.
    pub fn header_now(&self) -> ResponseHeader {
        let headers = self.headers();
        headers.at(headers.current_rev)
    }

    /// Runs `read` against the store on the blocking pool: scans that can cover the whole
    /// keyspace (hashes, ranges of keys) must not hold an async worker while they run.
    pub async fn blocking<T, F>(&self, read: F) -> Result<T, ReadFailed>
    where
        F: FnOnce(&Store) -> T + Send + 'static,
        T: Send + 'static,
    {
        read_blocking(self.store.clone(), read).await
    }

    /// A turn to read a multi-key range on the blocking pool: bounds the threads and the
    /// answers being built together. Err(Stopped) only if the member is shutting down.
    pub async fn range_turn(&self) -> Result<OwnedSemaphorePermit, EtcdError> {
        self.range_turns
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| EtcdError::Stopped)
    }

    /// Waits until this member has applied everything committed when it was called, as
    /// confirmed by the leader (ReadIndex): a read after this is linearizable.
    pub async fn barrier(&self) -> Result<(), EtcdError> {
        let (tx, rx) = oneshot::channel();
        self.raft.read_index(move |r| {
            let _ = tx.send(r);
        });
        let index = match tokio::time::timeout(self.request_timeout, rx).await {
            Ok(Ok(Ok(index))) => index,
            Ok(Ok(Err(e))) => return Err(raft_err(e)),
            Ok(Err(_)) => return Err(EtcdError::Stopped),
            Err(_) => return Err(EtcdError::Timeout),
        };
        self.wait_applied(index).await
    }

    /// Waits until this member has applied the entry at `index`.
    pub async fn wait_applied(&self, index: u64) -> Result<(), EtcdError> {
        let mut applied = self.applied.clone();
        match tokio::time::timeout(self.request_timeout, applied.wait_for(|a| *a >= index)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(EtcdError::Stopped),
            Err(_) => Err(EtcdError::TimeoutWaitAppliedIndex),
        }
    }

    /// The applied index.
    pub fn applied_index(&self) -> u64 {
        *self.applied.borrow()
    }
}

/// The machine's cores (1 when unknown), read once: how many multi-key ranges are read at
/// once, and how many threads read one long answer's rows.
pub(crate) fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
