//! The search for one order of all operations that respects real time and explains
//! every response (Wing & Gong's algorithm with Lowe's cache of visited (placed set,
//! model state) pairs, as Porcupine implements it), with pruning from revisions.
//!
//! Events are calls and returns in time order in a linked list. At each step the pending
//! calls before the first return are candidates; one the model accepts is lifted out and
//! the search goes on; when none fits, the last choice is undone.
//!
//! Revisions prune almost every wrong choice. An answered operation has a *required*
//! revision: the store revision it must be placed at (its response revision, minus one
//! if it wrote). Revisions only grow, so nothing that moves the revision may be placed
//! while some unplaced answered operation requires the current revision or an earlier
//! one. Candidates are tried in order of required revision, reads before writes.
//!
//! An indeterminate write (no answer) returns at infinity: it may take effect at any
//! point after its call, or never. It is placed only where the answers leave a gap
//! (every unplaced answer requires a later revision), or at the very end; otherwise the
//! search would try every subset of the writes lost in a crash at every step. Such
//! writes wait in an ordered set beside the list and are listed only when no answered
//! call fits, and choice points keep no candidate lists (they are listed again on
//! backtracking): a 10-minute soak leaves thousands of them pending to the end.
//!
//! An indeterminate write whose value some answered read saw (values are unique per
//! write) did happen, at the mod_revision the read reported: it is checked as an
//! answered write required at that revision. Without this, a crash that leaves dozens of
//! writes without an answer makes the search try every way of filling each gap.
//!
//! Leases: a grant is placed like a read (it writes no revision); a revocation writes
//! when its client knew keys were attached. An expiry is an indeterminate write of no
//! client, possible from half the lease's TTL after its grant and after the last answered
//! put with the lease was sent; one whose revision the watchers saw is checked as a write
//! answered there (see [`crate::expiries`]).
//!
//! Serializable reads take part too: they must be placed where the store is at their
//! revision, before they returned, but may be stale, so their call is moved back to the
//! call of the write that made their revision.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::Violation;
use crate::history::{Op, Operation, Outcome, Response};
use crate::model::{Model, Undo, mix};

/// The order found: history positions, in linearization order.
#[derive(Debug, Clone)]
pub struct Order {
    /// History ids in order.
    pub ops: Vec<usize>,
    /// The revision after the last.
    pub final_rev: i64,
    /// Serializable reads placed.
    pub serializable: usize,
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
    /// When the call or return happened.
    at: u64,
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

/// What the search knows of an operation before placing it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Answered: the revision it must be placed at and whether it moves the revision.
    Answered { required: i64, writes: bool },
    /// No answer.
    Indeterminate,
}

fn kind_of(o: &Operation) -> Kind {
    let Outcome::Ok(r) = &o.outcome else {
        return Kind::Indeterminate;
    };
    let writes = match (&o.op, r) {
        (Op::Put { .. } | Op::MultiPut { .. } | Op::PutLease { .. }, _) => true,
        (Op::LeaseRevoke { attached, .. }, _) => *attached,
        // An expiry is answered only when the watchers saw its revision.
        (Op::LeaseExpire { .. }, _) => true,
        (Op::Delete { .. }, Response::Delete { deleted, .. }) => *deleted > 0,
        (Op::CasValue { .. } | Op::CasModRev { .. }, Response::Cas { succeeded, .. }) => *succeeded,
        _ => false,
    };
    Kind::Answered {
        required: r.rev() - i64::from(writes),
        writes,
    }
}

fn response(o: &Operation) -> Option<&Response> {
    match &o.outcome {
        Outcome::Ok(r) => Some(r),
        _ => None,
    }
}

/// The values a write sets.
fn written_values(op: &Op) -> Vec<&str> {
    match op {
        Op::Put { value, .. }
        | Op::CasValue { value, .. }
        | Op::CasModRev { value, .. }
        | Op::PutLease { value, .. } => vec![value.as_str()],
        Op::MultiPut { kvs } => kvs.iter().map(|(_, v)| v.as_str()).collect(),
        Op::Get { .. }
        | Op::Range { .. }
        | Op::Delete { .. }
        | Op::LeaseGrant { .. }
        | Op::LeaseRevoke { .. }
        | Op::LeaseExpire { .. } => Vec::new(),
    }
}

/// Indeterminate writes that answered reads prove happened: the revision each made,
/// by position in `ops`. Only values written by exactly one operation count.
fn observed_writes(ops: &[&Operation]) -> HashMap<usize, i64> {
    let mut writers: HashMap<&str, Option<usize>> = HashMap::new();
    for (i, o) in ops.iter().enumerate() {
        for v in written_values(&o.op) {
            writers
                .entry(v)
                .and_modify(|w| *w = None)
                .or_insert(Some(i));
        }
    }
    let mut seen: HashMap<usize, i64> = HashMap::new();
    let mut note = |value: &str, mod_rev: i64| {
        if let Some(Some(i)) = writers.get(value)
            && matches!(ops[*i].outcome, Outcome::Indeterminate(_))
        {
            seen.insert(*i, mod_rev);
        }
    };
    for o in ops {
        match &o.outcome {
            Outcome::Ok(Response::Get {
                kv: Some((v, m)), ..
            }) => note(v, *m),
            Outcome::Ok(Response::Range { kvs, .. }) => {
                for (_, v, m) in kvs {
                    note(v, *m);
                }
            }
            _ => {}
        }
    }
    seen
}

/// The required revisions of the answered operations not placed yet.
#[derive(Default)]
struct Unplaced {
    reads: BTreeMap<i64, usize>,
    writes: BTreeMap<i64, usize>,
}

impl Unplaced {
    fn set(&mut self, writes: bool) -> &mut BTreeMap<i64, usize> {
        if writes {
            &mut self.writes
        } else {
            &mut self.reads
        }
    }

    fn add(&mut self, required: i64, writes: bool) {
        *self.set(writes).entry(required).or_default() += 1;
    }

    fn remove(&mut self, required: i64, writes: bool) {
        let set = self.set(writes);
        if let Some(n) = set.get_mut(&required) {
            *n -= 1;
            if *n == 0 {
                set.remove(&required);
            }
        }
    }

    fn min_read(&self) -> i64 {
        self.reads.keys().next().copied().unwrap_or(i64::MAX)
    }

    fn min_any(&self) -> i64 {
        self.min_read()
            .min(self.writes.keys().next().copied().unwrap_or(i64::MAX))
    }

    fn is_empty(&self) -> bool {
        self.reads.is_empty() && self.writes.is_empty()
    }
}

/// An operation the search can place: an answered one by its call node in the list, or
/// an unanswered one (kept out of the list: it may wait there to the end, and thousands
/// of lease expiries that no watcher saw would make every step walk past them).
#[derive(Clone, Copy)]
enum Choice {
    Node(usize),
    Open(usize),
}

/// A choice point: the next candidate to try and what was placed from it. Its
/// candidates are not stored: they are a function of the list and the open set, which
/// backtracking restores exactly, so they are listed again when the search returns to
/// the frame (a list per placed operation took gigabytes on long histories).
struct Frame {
    next: usize,
    placed: Option<(Choice, Undo)>,
}

/// The answered calls pending before the first return, in the order the search tries
/// them, and that return (the blocker) if any.
fn answered_candidates(list: &List, kinds: &[Kind], out: &mut Vec<Choice>) -> Option<usize> {
    out.clear();
    let mut answered = Vec::new();
    let mut e = list.head();
    while e != NIL && list.nodes[e].ret != NIL {
        if let Kind::Answered { required, writes } = kinds[list.nodes[e].op] {
            answered.push((required, writes, e));
        }
        e = list.nodes[e].next;
    }
    answered.sort_by_key(|(r, w, _)| (*r, *w));
    out.extend(answered.into_iter().map(|(_, _, e)| Choice::Node(e)));
    (e != NIL).then_some(e)
}

/// The unanswered writes called by `until` (all when None), latest call first: the
/// writes that fill a gap in the revisions are almost always the ones in flight when
/// the gap opened (a crash), not ones sent long before. Only the order of the search
/// changes, not what it accepts.
fn open_candidates(open: &BTreeSet<(u64, usize)>, until: Option<u64>, out: &mut Vec<Choice>) {
    let last = until.map_or((u64::MAX, usize::MAX), |t| (t, usize::MAX));
    out.extend(open.range(..=last).rev().map(|(_, op)| Choice::Open(*op)));
}

/// Where the search got furthest.
struct Deepest {
    depth: usize,
    pending: Vec<usize>,
    blocker: usize,
    rev: i64,
}

/// Finds an order, or the window where none exists.
pub fn linearize(history: &[Operation], base_rev: i64) -> Result<Order, Violation> {
    let ops: Vec<&Operation> = history
        .iter()
        .filter(|o| match &o.outcome {
            Outcome::Ok(_) => true,
            // A write that got no answer may have happened; a read that got none did nothing.
            Outcome::Indeterminate(_) => o.op.is_write(),
            Outcome::Failed(_) => false,
        })
        .collect();
    let observed = observed_writes(&ops);
    let kinds: Vec<Kind> = ops
        .iter()
        .enumerate()
        .map(|(i, o)| match observed.get(&i) {
            Some(made) => Kind::Answered {
                required: made - 1,
                writes: true,
            },
            None => kind_of(o),
        })
        .collect();
    // When the write that made each revision was sent, for stale serializable reads.
    let mut made_at: HashMap<i64, u64> = HashMap::new();
    for (o, k) in ops.iter().zip(&kinds) {
        if let Kind::Answered {
            required,
            writes: true,
        } = k
        {
            made_at.insert(required + 1, o.invoke);
        }
    }
    let mut events: Vec<(u64, u8, usize)> = Vec::with_capacity(ops.len() * 2);
    let mut unplaced = Unplaced::default();
    let mut open: BTreeSet<(u64, usize)> = BTreeSet::new();
    for (i, o) in ops.iter().enumerate() {
        let (call, end) = match kinds[i] {
            Kind::Indeterminate => {
                open.insert((o.invoke, i));
                continue;
            }
            Kind::Answered { required, writes } => {
                unplaced.add(required, writes);
                let call = if o.op.is_serializable_read() {
                    made_at.get(&required).copied().unwrap_or(0).min(o.invoke)
                } else {
                    o.invoke
                };
                // A write seen by a read: when it took effect is known only by revision.
                let end = if observed.contains_key(&i) {
                    u64::MAX
                } else {
                    o.complete
                };
                (call, end)
            }
        };
        events.push((call, 0, i));
        events.push((end, 1, i));
    }
    events.sort_unstable();
    let mut nodes = vec![Node {
        prev: NIL,
        next: NIL,
        op: NIL,
        ret: NIL,
        at: 0,
    }];
    let mut call_node = vec![NIL; ops.len()];
    for (pos, (at, kind, op)) in events.iter().enumerate() {
        let idx = pos + 1;
        nodes.push(Node {
            prev: idx - 1,
            next: if pos + 1 < events.len() { idx + 1 } else { NIL },
            op: *op,
            ret: NIL,
            at: *at,
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
    let mut model = Model::at(base_rev);
    let mut bits = (0u64, 0u64);
    let mut cache: HashSet<(u64, u64, u64)> = HashSet::new();
    let mut deepest = Deepest {
        depth: 0,
        pending: Vec::new(),
        blocker: NIL,
        rev: base_rev.max(1),
    };
    let mut stack: Vec<Frame> = Vec::new();
    let mut frame = Frame {
        next: 0,
        placed: None,
    };
    let mut pending = Vec::new();
    let mut blocker = answered_candidates(&list, &kinds, &mut pending);
    // Whether `pending` holds the open candidates too (listed only when no answered
    // one fits, which is rare).
    let mut open_listed = false;
    let op_of = |list: &List, c: Choice| match c {
        Choice::Node(e) => list.nodes[e].op,
        Choice::Open(op) => op,
    };
    while list.head() != NIL || !open.is_empty() {
        let mut placed = false;
        loop {
            if frame.next >= pending.len() && !open_listed {
                open_candidates(&open, blocker.map(|e| list.nodes[e].at), &mut pending);
                open_listed = true;
            }
            let Some(&choice) = pending.get(frame.next) else {
                break;
            };
            frame.next += 1;
            let op = op_of(&list, choice);
            let rev = model.rev();
            match kinds[op] {
                Kind::Answered { required, writes } => {
                    if required != rev || (writes && unplaced.min_read() <= rev) {
                        continue;
                    }
                }
                Kind::Indeterminate => {
                    if unplaced.min_any() <= rev {
                        continue;
                    }
                }
            }
            let o = ops[op];
            let Some(undo) = model.step(&o.op, response(o)) else {
                continue;
            };
            // A write seen by a read must make the revision the read reported.
            if observed.contains_key(&op) && model.rev() != rev + 1 {
                model.undo(undo);
                continue;
            }
            // An indeterminate write that would change nothing here waits for the end.
            if kinds[op] == Kind::Indeterminate && model.rev() == rev && !unplaced.is_empty() {
                model.undo(undo);
                continue;
            }
            let next_bits = (bits.0 ^ salt[op].0, bits.1 ^ salt[op].1);
            if !cache.insert((next_bits.0, next_bits.1, model.fingerprint())) {
                model.undo(undo);
                continue;
            }
            bits = next_bits;
            match choice {
                Choice::Node(entry) => {
                    if let Kind::Answered { required, writes } = kinds[op] {
                        unplaced.remove(required, writes);
                    }
                    list.lift(entry);
                }
                Choice::Open(op) => {
                    open.remove(&(ops[op].invoke, op));
                }
            }
            frame.placed = Some((choice, undo));
            stack.push(std::mem::replace(
                &mut frame,
                Frame {
                    next: 0,
                    placed: None,
                },
            ));
            blocker = answered_candidates(&list, &kinds, &mut pending);
            open_listed = false;
            placed = true;
            break;
        }
        if placed {
            continue;
        }
        // Nothing pending can be placed before the next return: back up.
        if stack.len() >= deepest.depth {
            deepest = Deepest {
                depth: stack.len(),
                pending: pending.iter().map(|c| op_of(&list, *c)).collect(),
                blocker: blocker.map(|e| list.nodes[e].op).unwrap_or(NIL),
                rev: model.rev(),
            };
        }
        let Some(mut parent) = stack.pop() else {
            return Err(stuck(&ops, &kinds, &deepest));
        };
        if let Some((choice, undo)) = parent.placed.take() {
            model.undo(undo);
            let op = op_of(&list, choice);
            bits = (bits.0 ^ salt[op].0, bits.1 ^ salt[op].1);
            match choice {
                Choice::Node(entry) => {
                    if let Kind::Answered { required, writes } = kinds[op] {
                        unplaced.add(required, writes);
                    }
                    list.unlift(entry);
                }
                Choice::Open(op) => {
                    open.insert((ops[op].invoke, op));
                }
            }
        }
        frame = parent;
        blocker = answered_candidates(&list, &kinds, &mut pending);
        open_listed = false;
    }
    let placed: Vec<&Operation> = stack
        .iter()
        .filter_map(|f| f.placed.as_ref())
        .map(|(choice, _)| ops[op_of(&list, *choice)])
        .collect();
    Ok(Order {
        serializable: placed
            .iter()
            .filter(|o| o.op.is_serializable_read())
            .count(),
        ops: placed.iter().map(|o| o.id).collect(),
        final_rev: model.rev(),
    })
}

fn stuck(ops: &[&Operation], kinds: &[Kind], deepest: &Deepest) -> Violation {
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
    // And the answers that needed the store where the search stopped.
    for (o, k) in ops.iter().zip(kinds) {
        if let Kind::Answered { required, .. } = k
            && *required == *rev
        {
            window.push((*o).clone());
        }
    }
    window.sort_by_key(|o| o.id);
    window.dedup_by_key(|o| o.id);
    let blocked = if *blocker != NIL {
        format!(
            "operation #{} ({:?} -> {:?}) returned but no order of the {} operations pending with it explains the responses",
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
