//! Checks a history: one order of all its operations, against the KV model, that
//! respects real time for writes and linearizable reads and places each serializable
//! read at a state that existed at its revision before it returned ([`linearizable`],
//! Wing–Gong search with Lowe's memoization, as Porcupine, pruned by revisions).
//!
//! Revisions make the search nearly linear: every write that changes the store takes the
//! next revision, and a response's revision must equal the model's, so few orders survive
//! a step. The model couples all keys through the revision, so the history is checked
//! as one partition, not per key.

pub mod linearizable;
pub mod watch;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::history::{Op, Operation, Outcome, Response};

/// Why a history is not linearizable, with the operations around the failure.
#[derive(Debug, Clone)]
pub struct Violation {
    /// What went wrong.
    pub reason: String,
    /// The smallest set of operations the checker could point at.
    pub window: Vec<Operation>,
}

/// What a successful check covered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Writes and linearizable reads placed in one order.
    pub linearized: usize,
    /// Serializable reads matched to a state that existed.
    pub serializable: usize,
    /// The revision the linearized history ends at.
    pub final_rev: i64,
}

/// Whether a write surely changed the store (and so owns its response's revision): the
/// revision it made.
pub(crate) fn surely_wrote(o: &Operation) -> Option<i64> {
    match (&o.op, &o.outcome) {
        (
            Op::Put { .. } | Op::MultiPut { .. } | Op::PutLease { .. },
            Outcome::Ok(Response::Write { rev }),
        ) => Some(*rev),
        (
            Op::LeaseRevoke { attached: true, .. } | Op::LeaseExpire { .. },
            Outcome::Ok(Response::Revoke { rev }),
        ) => Some(*rev),
        (Op::Delete { .. }, Outcome::Ok(Response::Delete { rev, deleted })) if *deleted > 0 => {
            Some(*rev)
        }
        (
            Op::CasValue { .. } | Op::CasModRev { .. },
            Outcome::Ok(Response::Cas {
                rev,
                succeeded: true,
            }),
        ) => Some(*rev),
        _ => None,
    }
}

/// Each revision belongs to at most one write request.
fn unique_revisions(history: &[Operation]) -> Result<(), Violation> {
    let mut owner: HashMap<i64, &Operation> = HashMap::new();
    for o in history {
        if let Some(rev) = surely_wrote(o)
            && let Some(first) = owner.insert(rev, o)
        {
            return Err(Violation {
                reason: format!(
                    "revision {rev} was given to two write requests (#{} and #{})",
                    first.id, o.id
                ),
                window: vec![first.clone(), o.clone()],
            });
        }
    }
    Ok(())
}

/// Checks `history`, begun on an empty store; Ok says what was covered.
pub fn check(history: &[Operation]) -> Result<Summary, Violation> {
    check_from(history, 1)
}

/// Checks `history`, begun on a store at revision `base_rev` whose keys it never
/// touches (a scenario's setup wrote them).
pub fn check_from(history: &[Operation], base_rev: i64) -> Result<Summary, Violation> {
    unique_revisions(history)?;
    let order = linearizable::linearize(history, base_rev)?;
    Ok(Summary {
        linearized: order.ops.len() - order.serializable,
        serializable: order.serializable,
        final_rev: order.final_rev,
    })
}

/// Writes the history and the violation to `<dir>/violation-<n>.json`; returns the path.
pub fn write_violation(
    dir: &Path,
    history: &[Operation],
    v: &Violation,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let mut n = 0;
    let path = loop {
        let p = dir.join(format!("violation-{n}.json"));
        if !p.exists() {
            break p;
        }
        n += 1;
    };
    let doc = serde_json::json!({
        "reason": v.reason,
        "window": v.window,
        "history": history,
    });
    std::fs::write(&path, serde_json::to_vec_pretty(&doc)?)?;
    Ok(path)
}
