//! Background jobs that a member runs beside serving: auto-compaction ([`compactor`]) and
//! the corruption checks ([`corrupt`]). Compaction and the periodic check act only while
//! this member leads (the initial check runs on every member before it serves); all go
//! through the same raft proposals and reads a client's request would.

pub mod compactor;
pub mod corrupt;

/// What a background job works with.
pub struct JobHandles {
    /// The store, its hashes, this member's ids.
    pub reads: crate::machine::reads::Reads,
    /// Compactions and alarms.
    pub writes: crate::machine::writes::Writes,
    /// Whether this member leads.
    pub role: crate::machine::role::Role,
    /// The peers a corruption check asks.
    pub roster: crate::domains::membership::roster::Roster,
}
