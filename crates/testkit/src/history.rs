//! A recorded history: what each client asked, when, and what it got back.

use serde::{Deserialize, Serialize};

/// A request as the workload issued it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Put `key` = `value`.
    Put { key: String, value: String },
    /// Get one key.
    Get { key: String, serializable: bool },
    /// Delete one key.
    Delete { key: String },
    /// Txn: if the key's value is `expect` (None: the key is absent) then put `value`.
    CasValue {
        key: String,
        expect: Option<String>,
        value: String,
    },
    /// Txn: if the key's mod_revision is `expect` (0: absent) then put `value`.
    CasModRev {
        key: String,
        expect: i64,
        value: String,
    },
    /// Txn with several puts and no compare: all or nothing, one revision.
    MultiPut { kvs: Vec<(String, String)> },
    /// Range over a prefix.
    Range { prefix: String, serializable: bool },
    /// Grant lease `lease` (the client picks the id; the TTL is the workload's).
    LeaseGrant { lease: i64 },
    /// Put `key` = `value` attached to `lease` (lease keys are written by no other op).
    PutLease {
        key: String,
        value: String,
        lease: i64,
    },
    /// Revoke `lease`: its keys go in one revision. `attached`: whether the client knows
    /// a key is attached (it revokes only leases whose every put was answered), which
    /// tells whether an answered revoke moved the revision.
    LeaseRevoke { lease: i64, attached: bool },
    /// Not sent by a client: the lease's expiry, which the leader may decide at any time
    /// from half its TTL after the grant was sent (or never, if it was revoked first).
    /// Always indeterminate.
    LeaseExpire { lease: i64 },
}

impl Op {
    /// The lease the request is about, if any.
    pub fn lease(&self) -> Option<i64> {
        match self {
            Op::LeaseGrant { lease }
            | Op::PutLease { lease, .. }
            | Op::LeaseRevoke { lease, .. }
            | Op::LeaseExpire { lease } => Some(*lease),
            _ => None,
        }
    }

    /// Whether the request can change the store.
    pub fn is_write(&self) -> bool {
        !matches!(self, Op::Get { .. } | Op::Range { .. })
    }

    /// Whether this is a serializable read (checked against past states, not linearized).
    pub fn is_serializable_read(&self) -> bool {
        matches!(
            self,
            Op::Get {
                serializable: true,
                ..
            } | Op::Range {
                serializable: true,
                ..
            }
        )
    }
}

/// What the server answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// A put or multi-put: the header revision.
    Write { rev: i64 },
    /// A get: header revision and the key's (value, mod_revision) if present.
    Get { rev: i64, kv: Option<(String, i64)> },
    /// A delete: header revision and how many keys were deleted.
    Delete { rev: i64, deleted: i64 },
    /// A compare-and-set txn: header revision and whether the compare held.
    Cas { rev: i64, succeeded: bool },
    /// A range: header revision and (key, value, mod_revision) in key order.
    Range {
        rev: i64,
        kvs: Vec<(String, String, i64)>,
    },
    /// A lease grant: the header revision (a grant writes no revision).
    Lease { rev: i64 },
    /// A lease revocation: the header revision.
    Revoke { rev: i64 },
}

impl Response {
    /// The header revision.
    pub fn rev(&self) -> i64 {
        match self {
            Response::Write { rev }
            | Response::Get { rev, .. }
            | Response::Delete { rev, .. }
            | Response::Cas { rev, .. }
            | Response::Range { rev, .. }
            | Response::Lease { rev }
            | Response::Revoke { rev } => *rev,
        }
    }
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The server answered.
    Ok(Response),
    /// No answer (timeout, lost connection, unknown error): it may or may not have
    /// taken effect.
    Indeterminate(String),
    /// A refusal that guarantees no effect (e.g. a read that failed).
    Failed(String),
}

/// One operation of a history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// Position in the history.
    pub id: usize,
    /// The client that issued it (clients issue one operation at a time).
    pub client: usize,
    /// The request.
    pub op: Op,
    /// When it was sent (ns since the run started).
    pub invoke: u64,
    /// When the answer came (ns); for an indeterminate operation, when the client gave up.
    pub complete: u64,
    /// The result.
    pub outcome: Outcome,
}
