//! KV: keys, values and their revisions (the state is [`oxcd_mvcc::Store`]).
//!
//! [`validate`] checks a request's shape before it is proposed; [`service`] serves Put,
//! DeleteRange, Txn and Compact by proposing them, [`range`] answers Range (with the
//! ReadIndex barrier unless serializable), [`stream`] answers RangeStream in chunks,
//! [`routes`] puts the KV service on the router;
//! [`apply`] is what a committed Put, DeleteRange, Txn or Compaction does to the store,
//! [`mod@write`] the put and delete they are made of, [`txn`] a transaction's compares and operations,
//! [`read`] a range read inside and outside the apply path.

pub mod apply;
pub mod handles;
pub mod range;
pub mod read;
pub mod routes;
pub mod service;
pub mod stream;
pub mod txn;
pub mod validate;
pub mod write;

pub use handles::KvHandles;
