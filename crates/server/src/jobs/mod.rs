//! Background jobs that a member runs beside serving: auto-compaction ([`compactor`]) and
//! the corruption checks ([`corrupt`]). Compaction and the periodic check act only while
//! this member leads (the initial check runs on every member before it serves); all go
//! through the same raft proposals and reads a client's request would.

pub mod compactor;
pub mod corrupt;
