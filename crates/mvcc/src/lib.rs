//! oxcd-mvcc: the multi-version key-value store, etcd's data model.
//!
//! Owns: [`Revision`]s, the per-key history ([`key_index`]), the ordered key index
//! ([`index`]), and the [`Store`] that writes rows to the redb backend and reads them back
//! at any revision that is not compacted.
//!
//! Invariants:
//! - One main revision per write request that changes something; sub-revisions number
//!   the changes inside it. A fresh store is at revision 1, so the first write is 2.
//! - Rows are written once and never changed; compaction deletes the rows no read at or
//!   after the compaction revision needs.
//! - Readers see only committed revisions: the published revision moves after the backend
//!   commit. Writes happen on one thread (the apply path) through [`ApplyBatch`].

pub mod index;
pub mod key_index;
pub mod revision;
mod store;

pub use index::KeyRange;
pub use revision::Revision;
pub use store::counts::{OpCounts, Tally};
pub use store::{
    ApplyBatch, EncodedRange, History, Page, RangeOptions, RangeResult, Store, TxnWrite, Written,
};

/// Errors from the MVCC store.
#[derive(Debug, thiserror::Error)]
pub enum MvccError {
    /// The revision asked for was compacted away.
    #[error("mvcc: required revision has been compacted")]
    Compacted,
    /// The revision asked for is in the future.
    #[error("mvcc: required revision is a future revision")]
    FutureRev,
    /// The backend failed (not deterministic: the member must stop).
    #[error(transparent)]
    Storage(#[from] oxcd_storage::StorageError),
    /// A stored row does not decode.
    #[error("mvcc: corrupt row at revision {0:?}: {1}")]
    Corrupt(Revision, String),
    /// The reader of [`Store::range_encoded`] stopped the read (its visitor said no
    /// more: e.g. the answer's memory bound ran out). Nothing is wrong with the store.
    #[error("mvcc: the read was stopped by its reader")]
    ReadStopped,
}

/// Result alias for MVCC operations.
pub type Result<T> = std::result::Result<T, MvccError>;
