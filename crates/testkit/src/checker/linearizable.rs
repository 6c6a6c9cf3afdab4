//! The search for one order of writes and linearizable reads that respects real time and
//! explains every response (Wing & Gong's algorithm with Lowe's cache of visited
//! (linearized set, model state) pairs, as Porcupine implements it).
//!
//! Events are calls and returns in time order in a linked list. At each step the first
//! pending calls (those before the first return) are candidates; one the model accepts
//! is lifted out and the search continues; when a return comes first, nothing pending
//! can be placed and the last choice is undone. An indeterminate operation returns at
//! infinity: it may take effect at any point after its call, or never.

use std::collections::HashSet;

use super::Violation;
use crate::history::{Operation, Outcome, Response};
use crate::model::{Model, Undo, mix};

/// The order found: history positions, in linearization order.
#[derive(Debug, Clone)]
pub struct Order {
    /// History ids in order.
    pub ops: Vec<usize>,
    /// The revision after the last.
    pub final_rev: i64,
}

const NIL: usize = usize::MAX;

#[derive(Clone, Copy)]
struct Node {
    prev: usize,
    next: usize,
    /// Index into the checked operations.
    op: usize,
    /// The return node of a call (NIL on a return node).
    ret: usize,
}

struct List {
    nodes: Vec<Node>,
}

impl List {
    fn head(&self) -> usize {
        self.nodes[0].next
    }

    fn unlink(&mut self, i: usize) {
        let Node { prev, next, .. } = self.nodes[i];
        self.nodes[prev].next = next;
        if next != NIL {
            self.nodes[next].prev = prev;
        }
    }

    fn relink(&mut self, i: usize) {
        let Node { prev, next, .. } = self.nodes[i];
        self.nodes[prev].next = i;
        if next != NIL {
            self.nodes[next].prev = i;
        }
    }

    /// Removes a call and its return.
    fn lift(&mut self, call: usize) {
        self.unlink(call);
        self.unlink(self.nodes[call].ret);
    }

    /// Puts back what `lift` removed (in reverse order of lifting).
    fn unlift(&mut self, call: usize) {
        self.relink(self.nodes[call].ret);
        self.relink(call);
    }
}

fn response(o: &Operation) -> Option<&Response> {
    match &o.outcome {
        Outcome::Ok(r) => Some(r),
        _ => None,
    }
}

/// Finds an order, or the window where none exists.
pub fn linearize(history: &[Operation]) -> Result<Order, Violation> {
    let ops: Vec<&Operation> = history
        .iter()
        .filter(|o| !o.op.is_serializable_read())
        .filter(|o| match &o.outcome {
            Outcome::Ok(_) => true,
            // A write that got no answer may have happened; a read that got none did nothing.
            Outcome::Indeterminate(_) => o.op.is_write(),
            Outcome::Failed(_) => false,
        })
        .collect();
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(ops.len() * 2);
    for (i, o) in ops.iter().enumerate() {
        let end = if matches!(o.outcome, Outcome::Indeterminate(_)) {
            u64::MAX
        } else {
            o.complete
        };
        events.push((o.invoke, 0, i));
        events.push((end, 1, i));
    }
    events.sort_unstable();
    let mut nodes = vec![Node {
        prev: NIL,
        next: NIL,
        op: NIL,
        ret: NIL,
    }];
    let mut call_node = vec![NIL; ops.len()];
    for (pos, (_, kind, op)) in events.iter().enumerate() {
        let idx = pos + 1;
        nodes.push(Node {
            prev: idx - 1,
            next: if pos + 1 < events.len() { idx + 1 } else { NIL },
            op: *op,
            ret: NIL,
        });
        if *kind == 0 {
            call_node[*op] = idx;
        } else {
            nodes[call_node[*op]].ret = idx;
        }
    }
    if !events.is_empty() {
        nodes[0].next = 1;
    }
    let mut list = List { nodes };
    let salt: Vec<(u64, u64)> = (0..ops.len() as u64)
        .map(|i| (mix(i ^ 0xa5a5), mix(i.wrapping_mul(31) ^ 0x3c3c)))
        .collect();
    let mut model = Model::default();
    let mut bits = (0u64, 0u64);
    let mut cache: HashSet<(u64, u64, u64)> = HashSet::new();
    let mut stack: Vec<(usize, Undo)> = Vec::new();
    let mut deepest = Deepest {
        depth: 0,
        pending: Vec::new(),
        blocker: NIL,
        rev: 1,
    };
    let mut entry = list.head();
    while list.head() != NIL {
        let node = list.nodes[entry];
        if node.ret != NIL {
            // A call: try to place it now.
            let o = ops[node.op];
            if let Some(undo) = model.step(&o.op, response(o)) {
                let next_bits = (bits.0 ^ salt[node.op].0, bits.1 ^ salt[node.op].1);
                if cache.insert((next_bits.0, next_bits.1, model.fingerprint())) {
                    bits = next_bits;
                    stack.push((entry, undo));
                    list.lift(entry);
                    entry = list.head();
                    continue;
                }
                model.undo(undo);
            }
            entry = node.next;
        } else {
            // A return before any pending call could be placed: back up.
            if stack.len() >= deepest.depth {
                let mut pending = Vec::new();
                let mut e = list.head();
                while e != NIL && list.nodes[e].ret != NIL {
                    pending.push(list.nodes[e].op);
                    e = list.nodes[e].next;
                }
                deepest = Deepest {
                    depth: stack.len(),
                    pending,
                    blocker: node.op,
                    rev: model.rev(),
                };
            }
            let Some((call, undo)) = stack.pop() else {
                return Err(stuck(&ops, &deepest));
            };
            model.undo(undo);
            let op = list.nodes[call].op;
            bits = (bits.0 ^ salt[op].0, bits.1 ^ salt[op].1);
            list.unlift(call);
            entry = list.nodes[call].next;
        }
    }
    let order: Vec<usize> = stack
        .iter()
        .map(|(call, _)| ops[list.nodes[*call].op].id)
        .collect();
    Ok(Order {
        ops: order,
        final_rev: model.rev(),
    })
}

/// Where the search got furthest: how many operations were placed, which calls were
/// pending, whose return stopped it, and the revision there.
struct Deepest {
    depth: usize,
    pending: Vec<usize>,
    blocker: usize,
    rev: i64,
}

fn stuck(ops: &[&Operation], deepest: &Deepest) -> Violation {
    let Deepest {
        depth,
        pending,
        blocker,
        rev,
    } = deepest;
    let mut window: Vec<Operation> = pending.iter().map(|i| ops[*i].clone()).collect();
    if *blocker != NIL {
        window.push(ops[*blocker].clone());
    }
    window.sort_by_key(|o| o.id);
    window.dedup_by_key(|o| o.id);
    let blocked = if *blocker != NIL {
        format!(
            "operation #{} ({:?} -> {:?}) completed but no order of the {} operations pending with it explains the responses",
            ops[*blocker].id,
            ops[*blocker].op,
            ops[*blocker].outcome,
            pending.len()
        )
    } else {
        "no order explains the responses".to_string()
    };
    Violation {
        reason: format!(
            "not linearizable: after {depth} operations placed in order (store at revision {rev}), {blocked}"
        ),
        window,
    }
}
