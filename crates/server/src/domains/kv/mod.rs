//! KV: keys, values and their revisions (the state is [`oxcd_mvcc::Store`]).
//!
//! [`validate`] checks a request's shape before it is proposed; [`service`] serves Put,
//! DeleteRange, Txn and Compact by proposing them, [`range`] serves Range (with the
//! ReadIndex barrier unless serializable) and routes the KV service; [`apply`] is what a
//! committed Put, DeleteRange, Txn or Compaction does to the store, [`txn`] a
//! transaction's compares and operations, [`read`] a range read inside and outside the
//! apply path.

pub mod apply;
pub mod range;
pub mod read;
pub mod service;
pub mod txn;
pub mod validate;
