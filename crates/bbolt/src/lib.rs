//! bbolt's file format, the one etcd keeps its backend in and streams as a snapshot:
//! [`writer::BoltWriter`] writes a file in one pass from sorted buckets of sorted keys,
//! [`reader::BoltReader`] reads one (etcd's or ours) without trusting it.
//!
//! This crate owns only the format: etcd's buckets and encodings are its callers'. It
//! depends on nothing of oxcd's. Format notes: pages 0 and 1 hold two copies of the meta
//! (the one with the higher transaction id wins); every other page is a branch, leaf or
//! freelist page; buckets are leaf values pointing at their own trees.

pub mod page;
pub mod reader;
pub mod writer;

pub use reader::{BoltReader, BucketRoot, KeyVisitor, ReadError};
pub use writer::{BoltWriter, Layout, WriteError};

#[cfg(test)]
mod tests;
