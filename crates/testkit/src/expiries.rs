//! When each lease expired, as the watchers saw it: the history's lease expiries are
//! operations of no client, so without more they could fill any gap in the revisions,
//! and the checker's search would try each of them at each gap. The watchers see every
//! revision: a lease whose keys were all deleted in one revision that no answered request
//! made, and that no unanswered revocation could have made, expired at that revision.
//! Such an expiry is then checked as a write answered at that revision (as a write whose
//! value a read saw). The model still has to agree: the lease must exist and hold those
//! keys there, and every read around it must fit, so a watch that lied would be caught.

use std::collections::{BTreeSet, HashMap, HashSet};

use crate::history::{Op, Operation, Outcome, Response};
use crate::watches::{Record, WatchLog};

/// The revision each key was deleted at, as any watcher saw it.
fn deletions(logs: &[WatchLog]) -> HashMap<&str, i64> {
    let mut out = HashMap::new();
    for log in logs {
        for r in &log.records {
            if let Record::Events { events, .. } = r {
                for e in events.iter().filter(|e| e.value.is_none()) {
                    out.insert(e.key.as_str(), e.rev);
                }
            }
        }
    }
    out
}

/// Gives each expiry in `history` that the watchers in `logs` place its revision.
/// Returns how many were placed.
pub fn resolve(history: &mut [Operation], logs: &[WatchLog]) -> usize {
    let deleted = deletions(logs);
    let mut keys: HashMap<i64, Vec<&str>> = HashMap::new();
    let mut unanswered_revoke: HashSet<i64> = HashSet::new();
    for o in history.iter() {
        match (&o.op, &o.outcome) {
            (Op::PutLease { key, lease, .. }, Outcome::Ok(_) | Outcome::Indeterminate(_)) => {
                keys.entry(*lease).or_default().push(key.as_str());
            }
            (Op::LeaseRevoke { lease, .. }, Outcome::Indeterminate(_)) => {
                unanswered_revoke.insert(*lease);
            }
            _ => {}
        }
    }
    let mut placed: Vec<(usize, i64)> = Vec::new();
    for (i, o) in history.iter().enumerate() {
        let Op::LeaseExpire { lease } = o.op else {
            continue;
        };
        if unanswered_revoke.contains(&lease) {
            continue;
        }
        let Some(ks) = keys.get(&lease) else { continue };
        let revs: BTreeSet<Option<i64>> = ks.iter().map(|k| deleted.get(k).copied()).collect();
        // Keys of one lease all go in one revision; a key never deleted (a put that
        // did not happen) says nothing.
        let seen: Vec<i64> = revs.into_iter().flatten().collect();
        if let [rev] = seen[..] {
            placed.push((i, rev));
        }
    }
    for (i, rev) in &placed {
        history[*i].outcome = Outcome::Ok(Response::Revoke { rev: *rev });
        // When it happened is known only by its revision.
        history[*i].complete = u64::MAX;
    }
    placed.len()
}
