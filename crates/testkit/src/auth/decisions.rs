//! The check of permission decisions against the order of the auth changes.
//!
//! The admin's changes form a sequence; `perm(u, j, n)` is whether user `u` holds role
//! `r<j>` (and so may read and write `ku<j>/`) after the first `n` changes. For each
//! decision a user's request got, the changes that may have applied before it are a
//! range `[lo, hi]` of `n`, and some `n` in it must explain the decision:
//! - real time: every change answered before the request was sent applied before it;
//!   none sent after it was answered did;
//! - revisions, for granted requests: a change applied at store revision `c` precedes a
//!   write that made revision `p` exactly when `c < p`, and a read at revision `r` when
//!   `c < r` (when `c == r` either order is possible).
//!
//! A change whose answer was lost was settled by a later read of the grant: it is known
//! only to have applied between the previous change's revision and that read's.

use crate::history::{Op, Operation, Outcome, Response};

use super::{USERS, user_of};

/// One change of a grant, in the order the admin made them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The user.
    pub user: usize,
    /// The role (`r<role>`).
    pub role: usize,
    /// Whether the user holds the role after it.
    pub granted: bool,
    /// The store revision it applied at is at least this...
    pub rev_lo: i64,
    /// ...and at most this (equal when its answer came).
    pub rev_hi: i64,
    /// Sent at (ns since the start).
    pub t_lo: u64,
    /// Known applied by (its answer, or the read that settled it).
    pub t_hi: u64,
}

/// What the check counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DecisionSummary {
    /// Grant changes (and how many of them were settled by a read).
    pub changes: usize,
    /// Changes whose answer was lost.
    pub settled_by_read: usize,
    /// Writes granted.
    pub writes_granted: usize,
    /// Writes denied.
    pub writes_denied: usize,
    /// Reads granted.
    pub reads_granted: usize,
    /// Reads denied.
    pub reads_denied: usize,
    /// Requests refused because the auth store moved while they were in flight.
    pub old_revision: usize,
}

/// etcd's refusals that prove a request took no effect.
pub fn refused(e: &str) -> bool {
    denied(e) || old_revision(e)
}

fn denied(e: &str) -> bool {
    e.contains("etcdserver: permission denied")
}

fn old_revision(e: &str) -> bool {
    e.contains("etcdserver: revision of auth store is old")
}

/// Which role's prefix `key` is under.
fn role_of(key: &str) -> Option<usize> {
    let rest = key.strip_prefix("ku")?;
    rest.split('/').next()?.parse().ok()
}

/// For one (user, role): how many of the first `n` states grant it, for every `n`.
struct Grants {
    /// `counts[n]`: states `0..n` that grant.
    counts: Vec<usize>,
}

impl Grants {
    fn new(user: usize, role: usize, changes: &[Change]) -> Grants {
        let mut state = user == role;
        let mut counts = Vec::with_capacity(changes.len() + 2);
        counts.push(0);
        counts.push(usize::from(state));
        for c in changes {
            if c.user == user && c.role == role {
                state = c.granted;
            }
            let last = counts[counts.len() - 1];
            counts.push(last + usize::from(state));
        }
        Grants { counts }
    }

    /// Whether some state `n` in `lo..=hi` grants (`want`) or denies (`!want`).
    fn some(&self, lo: usize, hi: usize, want: bool) -> bool {
        if lo > hi {
            return false;
        }
        let granting = self.counts[hi + 1] - self.counts[lo];
        if want {
            granting > 0
        } else {
            granting < hi - lo + 1
        }
    }
}

/// Checks every decision a users' client recorded in `history` against `changes`.
pub fn check(changes: &[Change], history: &[Operation]) -> Result<DecisionSummary, String> {
    let mut s = DecisionSummary {
        changes: changes.len(),
        settled_by_read: changes.iter().filter(|c| c.rev_lo != c.rev_hi).count(),
        ..DecisionSummary::default()
    };
    let grants: Vec<Vec<Grants>> = (0..USERS)
        .map(|u| (0..USERS).map(|r| Grants::new(u, r, changes)).collect())
        .collect();
    // The changes are made one after another: their times and revisions only grow.
    let count = |f: &dyn Fn(&Change) -> bool| changes.partition_point(|c| f(c));
    for o in history {
        let Some(user) = user_of(o.client) else {
            continue;
        };
        let (key, write) = match &o.op {
            Op::Put { key, .. } => (key, true),
            Op::Get { key, .. } => (key, false),
            _ => continue,
        };
        let Some(role) = role_of(key) else {
            return Err(format!("operation {}: key {key} is no role's", o.id));
        };
        // Real time: those answered before it was sent are in, those sent after it was
        // answered are out.
        let mut lo = count(&|c| c.t_hi < o.invoke);
        let mut hi = count(&|c| c.t_lo <= o.complete);
        let granted = match &o.outcome {
            Outcome::Ok(r) => {
                let (rev_lo, rev_hi) = match r {
                    Response::Write { rev } => {
                        (count(&|c| c.rev_hi < *rev), count(&|c| c.rev_lo < *rev))
                    }
                    Response::Get { rev, .. } => {
                        (count(&|c| c.rev_hi < *rev), count(&|c| c.rev_lo <= *rev))
                    }
                    other => return Err(format!("operation {}: answer {other:?}", o.id)),
                };
                lo = lo.max(rev_lo);
                hi = hi.min(rev_hi);
                true
            }
            Outcome::Failed(e) if denied(e) => false,
            Outcome::Failed(e) if old_revision(e) => {
                s.old_revision += 1;
                continue;
            }
            _ => continue,
        };
        match (write, granted) {
            (true, true) => s.writes_granted += 1,
            (true, false) => s.writes_denied += 1,
            (false, true) => s.reads_granted += 1,
            (false, false) => s.reads_denied += 1,
        }
        if !grants[user][role].some(lo, hi, granted) {
            return Err(format!(
                "operation {} (u{user} {} {key}, sent at {} ns, answered at {} ns) was {} although the auth changes that may precede it ({lo}..={hi} of {}) {} r{role}",
                o.id,
                if write { "put" } else { "get" },
                o.invoke,
                o.complete,
                if granted { "granted" } else { "denied" },
                changes.len(),
                if granted {
                    "never give it"
                } else {
                    "always give it"
                },
            ));
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::FIRST_USER_CLIENT;

    fn change(user: usize, role: usize, granted: bool, rev: i64, t: u64) -> Change {
        Change {
            user,
            role,
            granted,
            rev_lo: rev,
            rev_hi: rev,
            t_lo: t,
            t_hi: t + 10,
        }
    }

    fn put(user: usize, key: &str, at: u64, outcome: Outcome) -> Operation {
        Operation {
            id: 0,
            client: FIRST_USER_CLIENT + user,
            op: Op::Put {
                key: key.into(),
                value: "v".into(),
            },
            invoke: at,
            complete: at + 5,
            outcome,
        }
    }

    fn wrote(rev: i64) -> Outcome {
        Outcome::Ok(Response::Write { rev })
    }

    fn denied_answer() -> Outcome {
        Outcome::Failed("etcdserver: permission denied".into())
    }

    #[test]
    fn decisions_that_follow_the_changes_pass() {
        // u0 loses r0 at revision 10 (time 100), gains r1 at revision 20 (time 200).
        let changes = vec![change(0, 0, false, 10, 100), change(0, 1, true, 20, 200)];
        let history = vec![
            put(0, "ku0/a", 50, wrote(9)),
            put(0, "ku0/a", 150, denied_answer()),
            put(0, "ku1/a", 150, denied_answer()),
            put(0, "ku1/a", 250, wrote(25)),
            // Sent while the revocation was in flight: either answer is right.
            put(0, "ku0/b", 98, wrote(10)),
        ];
        let s = check(&changes, &history).expect("consistent");
        assert_eq!((s.writes_granted, s.writes_denied), (3, 2));
    }

    #[test]
    fn a_write_granted_after_its_revocation_is_caught() {
        let changes = vec![change(0, 0, false, 10, 100)];
        // Answered after the revocation and at a later revision: it was applied after.
        let history = vec![put(0, "ku0/a", 150, wrote(11))];
        assert!(check(&changes, &history).is_err());
        // Denied before anything changed.
        let history = vec![put(0, "ku0/a", 10, denied_answer())];
        assert!(check(&changes, &history).is_err());
        // Granted by time (in flight) but its revision says it came after.
        let history = vec![put(0, "ku0/a", 98, wrote(12))];
        assert!(check(&changes, &history).is_err());
    }

    #[test]
    fn a_change_settled_by_a_read_allows_both_answers_in_its_window() {
        let changes = vec![Change {
            user: 1,
            role: 1,
            granted: false,
            rev_lo: 10,
            rev_hi: 30,
            t_lo: 100,
            t_hi: 1000,
        }];
        let history = vec![
            put(1, "ku1/a", 500, wrote(20)),
            put(1, "ku1/a", 600, denied_answer()),
            put(1, "ku1/a", 2000, denied_answer()),
        ];
        assert!(check(&changes, &history).is_ok());
        let history = vec![put(1, "ku1/a", 2000, wrote(31))];
        assert!(check(&changes, &history).is_err());
    }
}
