//! The context every apply function works in ([`Applier`]: one batch's backend
//! transaction, its MVCC writes and the replicated domains' state), and how applying a
//! request fails ([`ApplyError`]: refused alike on every member, or fatal).

use oxcd_api::errors::EtcdError;
use oxcd_mvcc::{ApplyBatch, MvccError, Store, Written};
use oxcd_raft::node::RaftHandle;
use oxcd_raft::{ConfChange, ConfState, RaftError};
use oxcd_storage::batch::BatchTx;

use crate::domains::lease::Lessor;
use crate::domains::membership::Membership;
use oxcd_auth::AuthStore;

/// What a committed conf change asks of raft: to take it into raft's configuration (on
/// the raft thread) and give back the configuration after it. [`RaftHandle`] is the
/// member's; a tool that applies no conf change can refuse.
pub trait RaftConf {
    /// Applies the conf change committed at `index` to raft's configuration.
    fn apply_conf_change(&self, index: u64, cc: ConfChange) -> Result<ConfState, RaftError>;
    /// This member's id.
    fn member_id(&self) -> u64;
}

impl RaftConf for RaftHandle {
    fn apply_conf_change(&self, index: u64, cc: ConfChange) -> Result<ConfState, RaftError> {
        RaftHandle::apply_conf_change(self, index, cc)
    }
    fn member_id(&self) -> u64 {
        self.id()
    }
}

/// What apply functions work with, for one batch of log entries. Modules with replicated
/// state of their own (leases, auth, membership) join here, each writing its tables in
/// `tx`, so one commit covers all of them and the applied index.
pub struct Applier<'a> {
    /// The batch's backend transaction.
    pub tx: &'a BatchTx<'a>,
    /// The MVCC writes of the batch.
    pub mvcc: ApplyBatch<'a>,
    /// Every lease and its keys.
    pub leases: &'a Lessor,
    /// Users, roles and the auth revision.
    pub auth: &'a AuthStore,
    /// The members and the ids removed.
    pub membership: &'a Membership,
    /// Raft, for conf changes.
    pub raft: &'a dyn RaftConf,
    /// The raft index of the entry being applied.
    pub index: u64,
}

impl<'a> Applier<'a> {
    /// Starts applying a batch to `store` in `tx`, recording its events when
    /// `record_events`.
    pub fn new(
        store: &'a Store,
        leases: &'a Lessor,
        auth: &'a AuthStore,
        membership: &'a Membership,
        raft: &'a dyn RaftConf,
        tx: &'a BatchTx<'a>,
        record_events: bool,
    ) -> Applier<'a> {
        Applier {
            tx,
            mvcc: store.begin_apply(tx, record_events),
            leases,
            auth,
            membership,
            raft,
            index: 0,
        }
    }

    /// Ends the batch: what MVCC wrote, to publish once `tx` has committed.
    pub fn finish(self) -> Written {
        self.mvcc.finish()
    }
}

/// Why applying failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The request is refused, identically on every member.
    #[error(transparent)]
    Request(#[from] EtcdError),
    /// The backend failed or holds damaged data: stop the member.
    #[error("apply: {0}")]
    Fatal(MvccError),
}

impl From<MvccError> for ApplyError {
    fn from(e: MvccError) -> ApplyError {
        match e {
            MvccError::Compacted => ApplyError::Request(EtcdError::Compacted),
            MvccError::FutureRev => ApplyError::Request(EtcdError::FutureRev),
            // Only a range's memory bound stops a read: the range is refused.
            MvccError::ReadStopped => ApplyError::Request(EtcdError::TooManyRequests),
            other => ApplyError::Fatal(other),
        }
    }
}

impl From<oxcd_storage::StorageError> for ApplyError {
    fn from(e: oxcd_storage::StorageError) -> ApplyError {
        ApplyError::Fatal(MvccError::Storage(e))
    }
}

impl ApplyError {
    /// The error a read answers with: a backend failure on the read path is logged and
    /// answered as etcd's corrupt-cluster error (the member keeps serving).
    pub fn into_read_error(self) -> EtcdError {
        match self {
            ApplyError::Request(e) => e,
            ApplyError::Fatal(e) => mvcc_err(e),
        }
    }
}

/// Maps MVCC errors on the read path to etcd's errors. A backend failure is logged and
/// becomes `Corrupt`.
pub fn mvcc_err(e: MvccError) -> EtcdError {
    match e {
        MvccError::Compacted => EtcdError::Compacted,
        MvccError::FutureRev => EtcdError::FutureRev,
        // Only a range's memory bound stops a read.
        MvccError::ReadStopped => EtcdError::TooManyRequests,
        MvccError::Storage(_) | MvccError::Corrupt(..) => {
            tracing::error!("mvcc read failed: {e}");
            EtcdError::Corrupt
        }
    }
}
