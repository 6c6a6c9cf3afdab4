//! Background jobs that a member runs beside serving: auto-compaction ([`compactor`]) and
//! the corruption checks ([`corrupt`]). Both act only while this member leads and go
//! through the same raft proposals and reads a client's request would.

pub mod compactor;
pub mod corrupt;
