//! Serializable reads may be stale but must return a state that existed: the store as it
//! was at their header revision, with no part of a later write (no fractured txn) and
//! no revision that no write had been sent for yet when the read returned (no future).

use std::collections::HashMap;

use super::Violation;
use super::linearizable::Order;
use crate::history::{Op, Operation, Outcome, Response};
use crate::model::Model;

fn explains(model: &Model, op: &Op, resp: &Response) -> bool {
    match (op, resp) {
        (Op::Get { key, .. }, Response::Get { kv, .. }) => kv.as_ref() == model.get(key),
        (Op::Range { prefix, .. }, Response::Range { kvs, .. }) => *kvs == model.range(prefix),
        _ => false,
    }
}

/// Replays the linearized order and checks every answered serializable read against
/// the state at its revision. Returns how many were checked.
pub fn check(history: &[Operation], order: &Order) -> Result<usize, Violation> {
    let by_id: HashMap<usize, &Operation> = history.iter().map(|o| (o.id, o)).collect();
    let mut reads: Vec<(&Operation, &Response)> = history
        .iter()
        .filter(|o| o.op.is_serializable_read())
        .filter_map(|o| match &o.outcome {
            Outcome::Ok(r) => Some((o, r)),
            _ => None,
        })
        .collect();
    reads.sort_by_key(|(o, r)| (r.rev(), o.id));
    let mut model = Model::default();
    // Which operation brought the store to each revision.
    let mut made_by: HashMap<i64, &Operation> = HashMap::new();
    let mut next = 0;
    let check_at = |model: &Model, made_by: &HashMap<i64, &Operation>, next: &mut usize| {
        while *next < reads.len() && reads[*next].1.rev() == model.rev() {
            let (o, r) = reads[*next];
            if !explains(model, &o.op, r) {
                return Err(Violation {
                    reason: format!(
                        "serializable read #{} at revision {} returned {:?}, but the store at that revision held something else",
                        o.id,
                        r.rev(),
                        r
                    ),
                    window: vec![o.clone()],
                });
            }
            if let Some(w) = made_by.get(&model.rev())
                && w.invoke > o.complete
            {
                return Err(Violation {
                    reason: format!(
                        "serializable read #{} returned revision {}, made by #{} which was sent after the read returned",
                        o.id,
                        r.rev(),
                        w.id
                    ),
                    window: vec![(*w).clone(), o.clone()],
                });
            }
            *next += 1;
        }
        Ok(())
    };
    check_at(&model, &made_by, &mut next)?;
    for id in &order.ops {
        let Some(o) = by_id.get(id) else { continue };
        let resp = match &o.outcome {
            Outcome::Ok(r) => Some(r),
            _ => None,
        };
        let before = model.rev();
        if model.step(&o.op, resp).is_none() {
            return Err(Violation {
                reason: format!("internal: linearized operation #{} does not replay", o.id),
                window: vec![(*o).clone()],
            });
        }
        if model.rev() != before {
            made_by.insert(model.rev(), o);
            check_at(&model, &made_by, &mut next)?;
        }
    }
    if let Some((o, r)) = reads.get(next) {
        return Err(Violation {
            reason: format!(
                "serializable read #{} returned revision {}, which no write reached (the store ends at {})",
                o.id,
                r.rev(),
                model.rev()
            ),
            window: vec![(*o).clone()],
        });
    }
    Ok(reads.len())
}
