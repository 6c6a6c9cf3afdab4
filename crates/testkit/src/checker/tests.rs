use super::*;
use crate::history::{Op, Operation, Outcome, Response};
use crate::model::{Model, mix};

#[derive(Default)]
struct H(Vec<Operation>);

impl H {
    fn op(&mut self, client: usize, op: Op, t: (u64, u64), outcome: Outcome) -> &mut H {
        let id = self.0.len();
        self.0.push(Operation {
            id,
            client,
            op,
            invoke: t.0,
            complete: t.1,
            outcome,
        });
        self
    }
}

fn put(k: &str, v: &str) -> Op {
    Op::Put {
        key: k.into(),
        value: v.into(),
    }
}
fn get(k: &str) -> Op {
    Op::Get {
        key: k.into(),
        serializable: false,
    }
}
fn sget(k: &str) -> Op {
    Op::Get {
        key: k.into(),
        serializable: true,
    }
}
fn wrote(rev: i64) -> Outcome {
    Outcome::Ok(Response::Write { rev })
}
fn got(rev: i64, kv: Option<(&str, i64)>) -> Outcome {
    Outcome::Ok(Response::Get {
        rev,
        kv: kv.map(|(v, r)| (v.to_string(), r)),
    })
}
fn lost() -> Outcome {
    Outcome::Indeterminate("timed out".into())
}

#[test]
fn sequential_history_is_accepted() {
    let mut h = H::default();
    h.op(0, put("a", "1"), (0, 10), wrote(2))
        .op(0, get("a"), (11, 20), got(2, Some(("1", 2))))
        .op(
            0,
            Op::Delete { key: "a".into() },
            (21, 30),
            Outcome::Ok(Response::Delete { rev: 3, deleted: 1 }),
        )
        .op(0, get("a"), (31, 40), got(3, None));
    let s = check(&h.0).expect("linearizable");
    assert_eq!(s.linearized, 4);
    assert_eq!(s.final_rev, 3);
}

#[test]
fn concurrent_writes_in_either_order_are_accepted() {
    let mut h = H::default();
    // b was sent later but committed first: fine, they overlap.
    h.op(0, put("a", "1"), (0, 100), wrote(3))
        .op(1, put("b", "1"), (10, 50), wrote(2))
        .op(2, get("a"), (110, 120), got(3, Some(("1", 3))));
    check(&h.0).expect("linearizable");
}

#[test]
fn stale_read_is_rejected() {
    let mut h = H::default();
    h.op(0, put("a", "1"), (0, 10), wrote(2))
        .op(1, get("a"), (20, 30), got(1, None));
    let v = check(&h.0).expect_err("stale read");
    assert!(v.reason.contains("not linearizable"), "{}", v.reason);
    assert!(v.window.iter().any(|o| o.id == 1));
}

#[test]
fn lost_write_is_rejected() {
    let mut h = H::default();
    h.op(0, put("a", "1"), (0, 10), wrote(2))
        .op(0, put("b", "1"), (11, 20), wrote(3))
        .op(1, get("a"), (30, 40), got(3, None));
    check(&h.0).expect_err("lost write");
}

#[test]
fn fractured_txn_is_rejected_linearizable_and_serializable() {
    let multi = Op::MultiPut {
        kvs: vec![("x".into(), "1".into()), ("y".into(), "1".into())],
    };
    let half = Outcome::Ok(Response::Range {
        rev: 2,
        kvs: vec![("x".into(), "1".into(), 2)],
    });
    for serializable in [false, true] {
        let mut h = H::default();
        h.op(0, multi.clone(), (0, 10), wrote(2)).op(
            1,
            Op::Range {
                prefix: String::new(),
                serializable,
            },
            (20, 30),
            half.clone(),
        );
        check(&h.0).expect_err("fractured");
    }
}

#[test]
fn duplicated_revision_is_rejected() {
    let mut h = H::default();
    h.op(0, put("a", "1"), (0, 10), wrote(2))
        .op(1, put("b", "1"), (0, 10), wrote(2));
    let v = check(&h.0).expect_err("duplicate");
    assert!(v.reason.contains("two write requests"), "{}", v.reason);
}

#[test]
fn indeterminate_writes_may_or_may_not_have_happened() {
    // Observed: it happened.
    let mut h = H::default();
    h.op(0, put("a", "1"), (0, 10), lost())
        .op(1, get("a"), (50, 60), got(2, Some(("1", 2))));
    check(&h.0).expect("happened");
    // Never observed, and another write took revision 2: it did not happen (or later).
    let mut h = H::default();
    h.op(0, put("a", "1"), (0, 10), lost())
        .op(1, put("b", "1"), (20, 30), wrote(2))
        .op(1, get("a"), (40, 50), got(2, None));
    check(&h.0).expect("did not happen");
    // But it cannot have happened before it was sent.
    let mut h = H::default();
    h.op(1, get("a"), (0, 5), got(2, Some(("1", 2))))
        .op(0, put("a", "1"), (10, 20), lost());
    check(&h.0).expect_err("read from the future");
}

#[test]
fn compare_and_set_cannot_both_succeed() {
    let cas = |v: &str| Op::CasValue {
        key: "a".into(),
        expect: None,
        value: v.into(),
    };
    let ok = |rev| {
        Outcome::Ok(Response::Cas {
            rev,
            succeeded: true,
        })
    };
    let mut h = H::default();
    h.op(0, cas("1"), (0, 10), ok(2))
        .op(1, cas("2"), (0, 10), ok(3));
    check(&h.0).expect_err("both created the key");
    let mut h = H::default();
    h.op(0, cas("1"), (0, 10), ok(2)).op(
        1,
        cas("2"),
        (0, 10),
        Outcome::Ok(Response::Cas {
            rev: 2,
            succeeded: false,
        }),
    );
    check(&h.0).expect("one won");
}

#[test]
fn serializable_reads_need_a_state_that_existed() {
    let mut h = H::default();
    h.op(0, put("a", "1"), (0, 10), wrote(2))
        .op(0, put("a", "2"), (11, 20), wrote(3))
        // Stale but real: fine.
        .op(1, sget("a"), (30, 40), got(2, Some(("1", 2))));
    check(&h.0).expect("stale serializable read is allowed");
    let mut h = H::default();
    h.op(0, put("a", "1"), (0, 10), wrote(2))
        .op(1, sget("a"), (30, 40), got(2, Some(("9", 2))));
    check(&h.0).expect_err("never held");
    let mut h = H::default();
    h.op(0, put("a", "1"), (0, 10), wrote(2))
        .op(1, sget("a"), (30, 40), got(7, None));
    check(&h.0).expect_err("future revision");
}

/// A correct history of `n` operations by `clients` concurrent clients: each operation
/// takes effect at a point inside its interval, in that order.
pub fn generated(n: usize, clients: usize, seed: u64) -> Vec<Operation> {
    let mut rng = seed;
    let mut rand = |m: u64| {
        rng = mix(rng.wrapping_add(0x9e37_79b9_7f4a_7c15));
        rng % m.max(1)
    };
    let mut model = Model::default();
    let mut free = vec![0u64; clients];
    let mut at = 0u64;
    let mut out = Vec::with_capacity(n);
    for id in 0..n {
        at += 1 + rand(5);
        let c = (0..clients).min_by_key(|c| free[*c]).unwrap_or(0);
        at = at.max(free[c]);
        let invoke = free[c] + rand(at - free[c] + 1);
        let key = format!("k{}", rand(20));
        let op = match rand(10) {
            0..=2 => put(&key, &format!("v{id}")),
            3..=4 => get(&key),
            5 => sget(&key),
            6 => Op::Delete { key },
            7 => Op::CasModRev {
                expect: model.get(&key).map(|(_, r)| *r).unwrap_or(0),
                key,
                value: format!("v{id}"),
            },
            8 => Op::MultiPut {
                kvs: vec![(key, format!("v{id}")), ("k0".into(), format!("w{id}"))],
            },
            _ => Op::Range {
                prefix: "k1".into(),
                serializable: false,
            },
        };
        let resp = match &op {
            Op::Get { key, .. } => Response::Get {
                rev: model.rev(),
                kv: model.get(key).cloned(),
            },
            Op::Range { prefix, .. } => Response::Range {
                rev: model.rev(),
                kvs: model.range(prefix),
            },
            Op::Delete { key } => {
                let deleted = i64::from(model.get(key).is_some());
                let _ = model.step(&op, None);
                Response::Delete {
                    rev: model.rev(),
                    deleted,
                }
            }
            Op::CasModRev { key, expect, .. } => {
                let holds = model.get(key).map(|(_, r)| *r).unwrap_or(0) == *expect;
                let _ = model.step(&op, None);
                Response::Cas {
                    rev: model.rev(),
                    succeeded: holds,
                }
            }
            _ => {
                let _ = model.step(&op, None);
                Response::Write { rev: model.rev() }
            }
        };
        let complete = at + rand(40);
        free[c] = complete + 1;
        let outcome = if op.is_write() && rand(100) == 0 {
            Outcome::Indeterminate("timed out".into())
        } else {
            Outcome::Ok(resp)
        };
        out.push(Operation {
            id,
            client: c,
            op,
            invoke,
            complete,
            outcome,
        });
    }
    out
}

#[test]
fn generated_concurrent_histories_are_accepted() {
    for seed in 0..20 {
        let h = generated(2_000, 8, seed);
        if let Err(v) = check(&h) {
            panic!("seed {seed}: {}", v.reason);
        }
    }
}

#[test]
fn a_changed_response_in_a_generated_history_is_caught() {
    let mut h = generated(2_000, 8, 7);
    // Make one linearizable get answer as if a write never happened.
    let i = h
        .iter()
        .position(|o| {
            matches!(
                o.op,
                Op::Get {
                    serializable: false,
                    ..
                }
            ) && matches!(o.outcome, Outcome::Ok(Response::Get { kv: Some(_), .. }))
        })
        .expect("a get that found something");
    if let Outcome::Ok(Response::Get { kv, .. }) = &mut h[i].outcome {
        *kv = None;
    }
    check(&h).expect_err("tampered");
}

#[test]
fn a_large_history_checks() {
    let h = generated(100_000, 16, 42);
    let started = std::time::Instant::now();
    let s = check(&h).expect("linearizable");
    eprintln!(
        "checked {} operations ({} linearized, {} serializable reads) in {:?}",
        h.len(),
        s.linearized,
        s.serializable,
        started.elapsed()
    );
}

#[test]
fn thousands_of_unresolved_expiries_wait_outside_the_search() {
    // A long soak leaves thousands of expiries that no watcher saw (leases that never got
    // keys) unanswered to the end; grants without answers too. They must neither make the
    // search walk past them at every step nor be stored in every choice point.
    let mut h = generated(20_000, 8, 5);
    let end = h.iter().map(|o| o.complete).max().unwrap_or(0);
    for i in 0..3_000u64 {
        let lease = 1_000 + i as i64;
        let at = end * i / 3_000;
        for op in [grant(lease), expiry(lease)] {
            h.push(Operation {
                id: h.len(),
                client: 100,
                op,
                invoke: at,
                complete: at,
                outcome: lost(),
            });
        }
    }
    let s = check(&h).expect("linearizable");
    assert_eq!(
        s.linearized + s.serializable,
        h.iter()
            .filter(|o| !matches!(o.outcome, Outcome::Failed(_)))
            .count()
    );
}

#[test]
fn a_gap_is_filled_by_the_writes_in_flight_at_the_crash_and_by_what_reads_saw() {
    // Forty puts sent early got no answer and never happened (later reads see none of
    // them); a crash then leaves revisions 3..=5 to three unanswered puts in flight,
    // one of which a read saw. Oldest-first, the search would try the forty for each
    // slot of the gap before the reads refuted them.
    let mut h = H::default();
    for i in 0..40 {
        h.op(
            i,
            put(&format!("old{i}"), &format!("o{i}")),
            (i as u64, 0),
            lost(),
        );
    }
    h.op(40, put("x", "1"), (100, 110), wrote(2));
    for i in 0..3 {
        let k = format!("late{i}");
        h.op(41 + i, put(&k, &format!("l{i}")), (200, 0), lost());
    }
    h.op(44, put("y", "2"), (300, 310), wrote(6)).op(
        44,
        get("late1"),
        (320, 330),
        got(6, Some(("l1", 4))),
    );
    for i in 0..40 {
        h.op(
            45,
            get(&format!("old{i}")),
            (400 + i as u64, 401 + i as u64),
            got(6, None),
        );
    }
    check(&h.0).expect("linearizable");
}

fn grant(lease: i64) -> Op {
    Op::LeaseGrant { lease }
}
fn put_lease(k: &str, v: &str, lease: i64) -> Op {
    Op::PutLease {
        key: k.into(),
        value: v.into(),
        lease,
    }
}
fn granted(rev: i64) -> Outcome {
    Outcome::Ok(Response::Lease { rev })
}
fn expiry(lease: i64) -> Op {
    Op::LeaseExpire { lease }
}

#[test]
fn a_revocation_deletes_the_lease_keys_in_one_revision() {
    let mut h = H::default();
    h.op(0, grant(7), (0, 10), granted(1))
        .op(0, put_lease("kl-a", "1", 7), (11, 20), wrote(2))
        .op(0, put_lease("kl-b", "2", 7), (21, 30), wrote(3))
        .op(
            0,
            Op::LeaseRevoke {
                lease: 7,
                attached: true,
            },
            (31, 40),
            Outcome::Ok(Response::Revoke { rev: 4 }),
        )
        .op(0, get("kl-a"), (41, 50), got(4, None));
    let s = check(&h.0).expect("linearizable");
    assert_eq!(s.final_rev, 4);
}

#[test]
fn a_put_with_a_lease_never_granted_is_rejected() {
    let mut h = H::default();
    h.op(0, put_lease("kl-a", "1", 9), (0, 10), wrote(2));
    assert!(check(&h.0).is_err());
}

#[test]
fn an_expiry_explains_lease_keys_gone_without_a_request() {
    let mut h = H::default();
    h.op(0, grant(7), (0, 10), granted(1))
        .op(0, put_lease("kl-a", "1", 7), (11, 20), wrote(2))
        .op(1, put("k1", "x"), (100, 110), wrote(4))
        .op(1, get("kl-a"), (111, 120), got(4, None))
        .op(9, expiry(7), (50, 50), lost());
    check(&h.0).expect("the expiry fills revision 3");
}

#[test]
fn lease_keys_gone_before_the_expiry_could_happen_are_rejected() {
    let mut h = H::default();
    // The expiry cannot come before t=500, but the key was gone at t=120.
    h.op(0, grant(7), (0, 10), granted(1))
        .op(0, put_lease("kl-a", "1", 7), (11, 20), wrote(2))
        .op(1, put("k1", "x"), (100, 110), wrote(4))
        .op(1, get("kl-a"), (111, 120), got(4, None))
        .op(9, expiry(7), (500, 500), lost());
    assert!(check(&h.0).is_err());
}

#[test]
fn a_revocation_that_claims_to_write_nothing_for_a_lease_with_keys_is_rejected() {
    let mut h = H::default();
    h.op(0, grant(7), (0, 10), granted(1))
        .op(0, put_lease("kl-a", "1", 7), (11, 20), wrote(2))
        .op(
            0,
            Op::LeaseRevoke {
                lease: 7,
                attached: false,
            },
            (31, 40),
            Outcome::Ok(Response::Revoke { rev: 2 }),
        );
    assert!(check(&h.0).is_err());
}

#[test]
fn the_model_undoes_lease_steps() {
    let mut m = Model::default();
    let before = m.fingerprint();
    let u1 = m.step(&grant(3), None).expect("granted");
    let u2 = m.step(&put_lease("kl-a", "v", 3), None).expect("put");
    let u3 = m
        .step(&Op::LeaseExpire { lease: 3 }, None)
        .expect("expired");
    assert_eq!(m.get("kl-a"), None);
    assert_eq!(m.rev(), 3);
    m.undo(u3);
    assert_eq!(m.get("kl-a"), Some(&("v".to_string(), 2)));
    m.undo(u2);
    m.undo(u1);
    assert_eq!(m.fingerprint(), before);
    // Without the lease, an answered put cannot happen; an unanswered one did nothing.
    assert!(
        m.step(
            &put_lease("kl-a", "v", 3),
            Some(&Response::Write { rev: 2 })
        )
        .is_none()
    );
    let nothing = m.step(&put_lease("kl-a", "v", 3), None).expect("refused");
    assert_eq!((m.rev(), m.fingerprint()), (1, before));
    m.undo(nothing);
}
