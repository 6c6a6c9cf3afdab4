//! Checks what the watchers received against the history of the KV workload.
//!
//! Per watcher (every stream, across resumptions):
//! - ordered and atomic: each response's revisions are above every revision delivered
//!   before, so no revision is split over two responses and none comes twice;
//! - bookmarkable: a progress response's revision is at or above the last event
//!   delivered, and no later event is at or below it (the watcher resumes from it);
//! - reliable and resumable: from revision 1 to the final revision, the watcher has
//!   every revision of the reference, except the ones a compaction took (the gap
//!   between its last event and the compaction revision it was told about), and at each
//!   revision exactly the reference's events.
//!
//! The reference is a fresh watch from revision 1 after the run, or, if that was
//! compacted, what the watchers received together. It is replayed revision by revision
//! through a model of the store: each revision's events must be the effect of exactly
//! one write of the history on the state before it (the write answered with that
//! revision, or an unanswered one identified by its unique value or its key): same keys,
//! values, versions, create revisions and prev_kv; sent before the events arrived. Every
//! answered read (linearizable or serializable) must equal the replayed state at its
//! header revision, and the final state every member's final keys.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::history::{Op, Operation, Outcome, Response};
use crate::watches::{Ending, Event, Record, WatchLog};

/// What the watch check covered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchSummary {
    /// Watchers checked.
    pub watchers: usize,
    /// Events they received.
    pub events: usize,
    /// Streams opened after the first (resumptions).
    pub resumed: usize,
    /// Progress responses (bookmarks).
    pub progress: usize,
    /// Resumptions refused because the revision was compacted.
    pub compacted: usize,
    /// Revisions replayed through the model.
    pub revisions: i64,
    /// Answered reads matched to the replayed state.
    pub reads: usize,
    /// Whether a fresh watch from revision 1 was the reference.
    pub fresh_reference: bool,
}

/// A key's state in the replay: value, mod_revision, create_revision, version.
type Kv = (String, i64, i64, i64);

/// Events by revision, as one watcher (or the reference) has them.
type ByRev = BTreeMap<i64, Vec<Event>>;

/// Checks the watchers' `logs` against `history`; Err says what broke.
pub fn check(
    history: &[Operation],
    logs: &[WatchLog],
    ending: &Ending,
) -> Result<WatchSummary, String> {
    let mut summary = WatchSummary {
        watchers: logs.len(),
        ..WatchSummary::default()
    };
    let mut seen = Vec::new();
    let mut first_arrival: HashMap<i64, u64> = HashMap::new();
    for (i, log) in logs.iter().enumerate() {
        let w = stream_checks(log, &mut summary, &mut first_arrival)
            .map_err(|e| format!("watcher {i}: {e}"))?;
        seen.push(w);
    }
    let (reference, fresh) = match &ending.reference {
        Some(events) => (group(events), true),
        None => (union(&seen)?, false),
    };
    summary.fresh_reference = fresh;
    for (i, (events, gaps)) in seen.iter().enumerate() {
        coverage(events, gaps, &reference, ending.final_rev)
            .map_err(|e| format!("watcher {i}: {e}"))?;
    }
    replay(history, &reference, &first_arrival, ending, &mut summary)?;
    Ok(summary)
}

/// A watcher's events by revision and the revision ranges compactions took from it.
type Seen = (ByRev, Vec<(i64, i64)>);

fn stream_checks(
    log: &WatchLog,
    summary: &mut WatchSummary,
    first_arrival: &mut HashMap<i64, u64>,
) -> Result<Seen, String> {
    let mut by_rev = ByRev::new();
    let mut gaps = Vec::new();
    let mut delivered = 0; // highest revision delivered (event or progress)
    let mut last_event = 0;
    let mut streams: usize = 0;
    for r in &log.records {
        match r {
            Record::Started { from, member } => {
                streams += 1;
                if *from != delivered + 1 && streams > 1 {
                    return Err(format!(
                        "resumed on member {member} from {from}, not after {delivered}"
                    ));
                }
            }
            Record::Events { at, events } => {
                let first = events.first().map(|e| e.rev).unwrap_or(0);
                if first <= delivered {
                    return Err(format!(
                        "a response starts at revision {first}, after revision {delivered} was \
                         delivered (out of order, repeated or split)"
                    ));
                }
                if let Some(w) = events.windows(2).find(|w| w[1].rev < w[0].rev) {
                    return Err(format!(
                        "revision {} after {} in one response",
                        w[1].rev, w[0].rev
                    ));
                }
                for e in events {
                    by_rev.entry(e.rev).or_default().push(e.clone());
                    let t = first_arrival.entry(e.rev).or_insert(*at);
                    *t = (*t).min(*at);
                }
                summary.events += events.len();
                last_event = events.last().map(|e| e.rev).unwrap_or(last_event);
                delivered = last_event;
            }
            Record::Progress { rev } => {
                summary.progress += 1;
                if *rev < last_event {
                    return Err(format!(
                        "progress at revision {rev} after an event at {last_event}"
                    ));
                }
                delivered = delivered.max(*rev);
            }
            Record::Compacted { rev } => {
                summary.compacted += 1;
                if *rev > delivered + 1 {
                    gaps.push((delivered + 1, rev - 1));
                }
                delivered = delivered.max(rev - 1);
            }
        }
    }
    summary.resumed += streams.saturating_sub(1);
    for (rev, events) in &by_rev {
        let mut keys = HashSet::new();
        if let Some(e) = events.iter().find(|e| !keys.insert(e.key.as_str())) {
            return Err(format!("{} twice at revision {rev}", e.key));
        }
    }
    Ok((by_rev, gaps))
}

fn group(events: &[Event]) -> ByRev {
    let mut by_rev = ByRev::new();
    for e in events {
        by_rev.entry(e.rev).or_default().push(e.clone());
    }
    by_rev
}

/// What the watchers received together; two watchers with the same revision must agree.
fn union(seen: &[Seen]) -> Result<ByRev, String> {
    let mut all = ByRev::new();
    for (i, (events, _)) in seen.iter().enumerate() {
        for (rev, evs) in events {
            match all.get(rev) {
                Some(known) if known != evs => {
                    return Err(format!(
                        "watcher {i} received {evs:?} at revision {rev}, another {known:?}"
                    ));
                }
                Some(_) => {}
                None => {
                    all.insert(*rev, evs.clone());
                }
            }
        }
    }
    Ok(all)
}

fn coverage(
    events: &ByRev,
    gaps: &[(i64, i64)],
    reference: &ByRev,
    final_rev: i64,
) -> Result<(), String> {
    let compacted = |rev: i64| gaps.iter().any(|(a, b)| (*a..=*b).contains(&rev));
    for (rev, want) in reference.range(..=final_rev) {
        match events.get(rev) {
            Some(got) if got == want => {}
            Some(got) => {
                return Err(format!(
                    "received {got:?} at revision {rev}; the history has {want:?}"
                ));
            }
            None if compacted(*rev) => {}
            None => return Err(format!("missed revision {rev}: {want:?}")),
        }
    }
    if let Some(rev) = events.keys().find(|r| !reference.contains_key(r)) {
        return Err(format!(
            "received revision {rev}, which the reference does not have"
        ));
    }
    Ok(())
}

/// The writes the history made, and how to find the one behind a revision.
struct Writers<'a> {
    by_rev: HashMap<i64, &'a Operation>,
    by_value: HashMap<&'a str, &'a Operation>,
    deletes: HashMap<&'a str, Vec<&'a Operation>>,
    /// The lease each lease key was put with (lease keys are unique to one lease).
    lease_of: HashMap<&'a str, i64>,
    /// Unanswered revocations and the expiries, by lease.
    lease_ends: HashMap<i64, Vec<&'a Operation>>,
    used: HashSet<usize>,
}

impl<'a> Writers<'a> {
    fn new(history: &'a [Operation]) -> Writers<'a> {
        let mut w = Writers {
            by_rev: HashMap::new(),
            by_value: HashMap::new(),
            deletes: HashMap::new(),
            lease_of: HashMap::new(),
            lease_ends: HashMap::new(),
            used: HashSet::new(),
        };
        for o in history {
            if let Some(rev) = super::surely_wrote(o) {
                w.by_rev.insert(rev, o);
            }
            let unanswered = matches!(o.outcome, Outcome::Indeterminate(_));
            match &o.op {
                Op::Put { value, .. }
                | Op::CasValue { value, .. }
                | Op::CasModRev { value, .. } => {
                    w.by_value.insert(value.as_str(), o);
                }
                Op::PutLease { key, value, lease } => {
                    w.by_value.insert(value.as_str(), o);
                    w.lease_of.insert(key.as_str(), *lease);
                }
                Op::LeaseRevoke { lease, .. } | Op::LeaseExpire { lease } if unanswered => {
                    w.lease_ends.entry(*lease).or_default().push(o);
                }
                Op::MultiPut { kvs } => {
                    if let Some((_, v)) = kvs.first() {
                        w.by_value.insert(v.as_str(), o);
                    }
                }
                Op::Delete { key } if unanswered => {
                    w.deletes.entry(key.as_str()).or_default().push(o);
                }
                _ => {}
            }
        }
        w
    }

    /// The write that made revision `rev` with `events`.
    fn find(&mut self, rev: i64, events: &[Event]) -> Result<&'a Operation, String> {
        let o = if let Some(o) = self.by_rev.get(&rev) {
            *o
        } else if let Some(v) = events.iter().find_map(|e| e.value.as_deref()) {
            let o = *self
                .by_value
                .get(v)
                .ok_or_else(|| format!("revision {rev} puts {v:?}, which no request wrote"))?;
            if !matches!(o.outcome, Outcome::Indeterminate(_)) {
                return Err(format!(
                    "revision {rev} has the value of request #{} answered with {:?}",
                    o.id, o.outcome
                ));
            }
            o
        } else if let Some(lease) = events
            .first()
            .and_then(|e| self.lease_of.get(e.key.as_str()))
        {
            // A lease's keys deleted: an unanswered revocation or its expiry, the one sent
            // first (either makes the same events).
            let used = &self.used;
            *self
                .lease_ends
                .get(lease)
                .and_then(|ends| {
                    ends.iter()
                        .filter(|o| !used.contains(&o.id))
                        .min_by_key(|o| o.invoke)
                })
                .ok_or_else(|| {
                    format!(
                        "revision {rev} deletes lease {lease}'s keys, which no revocation or expiry explains"
                    )
                })?
        } else {
            let key = events.first().map(|e| e.key.as_str()).unwrap_or("");
            let used = &self.used;
            *self
                .deletes
                .get(key)
                .and_then(|ds| ds.iter().find(|d| !used.contains(&d.id)))
                .ok_or_else(|| {
                    format!("revision {rev} deletes {key}, which no unanswered delete explains")
                })?
        };
        if !self.used.insert(o.id) {
            return Err(format!("request #{} made two revisions", o.id));
        }
        Ok(o)
    }
}

/// The events `op` makes at `rev` on `state`, or None if it would change nothing;
/// `lease_of`: the lease of each lease key.
fn effect(
    op: &Op,
    rev: i64,
    state: &BTreeMap<String, Kv>,
    lease_of: &HashMap<&str, i64>,
) -> Option<Vec<Event>> {
    let delete = |key: &str, p: &Kv| Event {
        rev,
        key: key.to_string(),
        value: None,
        create_rev: 0,
        version: 0,
        prev: Some((p.0.clone(), p.1)),
    };
    let put = |key: &str, value: &str| {
        let prior = state.get(key);
        Event {
            rev,
            key: key.to_string(),
            value: Some(value.to_string()),
            create_rev: prior.map(|p| p.2).unwrap_or(rev),
            version: prior.map(|p| p.3).unwrap_or(0) + 1,
            prev: prior.map(|p| (p.0.clone(), p.1)),
        }
    };
    match op {
        Op::Put { key, value } => Some(vec![put(key, value)]),
        Op::MultiPut { kvs } => Some(kvs.iter().map(|(k, v)| put(k, v)).collect()),
        Op::Delete { key } => state.get(key).map(|p| vec![delete(key, p)]),
        Op::PutLease { key, value, .. } => Some(vec![put(key, value)]),
        Op::LeaseRevoke { lease, .. } | Op::LeaseExpire { lease } => {
            let gone: Vec<Event> = state
                .iter()
                .filter(|(k, _)| lease_of.get(k.as_str()) == Some(lease))
                .map(|(k, p)| delete(k, p))
                .collect();
            (!gone.is_empty()).then_some(gone)
        }
        Op::CasValue { key, expect, value } => {
            let holds = state.get(key).map(|p| &p.0) == expect.as_ref();
            holds.then(|| vec![put(key, value)])
        }
        Op::CasModRev { key, expect, value } => {
            let holds = state.get(key).map(|p| p.1).unwrap_or(0) == *expect;
            holds.then(|| vec![put(key, value)])
        }
        Op::Get { .. } | Op::Range { .. } | Op::LeaseGrant { .. } => None,
    }
}

fn sorted(events: &[Event]) -> Vec<Event> {
    let mut v = events.to_vec();
    v.sort_by(|a, b| a.key.cmp(&b.key));
    v
}

/// Answered reads by header revision.
fn reads_by_rev(history: &[Operation]) -> BTreeMap<i64, Vec<&Operation>> {
    let mut reads: BTreeMap<i64, Vec<&Operation>> = BTreeMap::new();
    for o in history {
        if let Outcome::Ok(r @ (Response::Get { .. } | Response::Range { .. })) = &o.outcome {
            reads.entry(r.rev()).or_default().push(o);
        }
    }
    reads
}

fn read_matches(o: &Operation, state: &BTreeMap<String, Kv>) -> bool {
    match (&o.op, &o.outcome) {
        (Op::Get { key, .. }, Outcome::Ok(Response::Get { kv, .. })) => {
            state.get(key).map(|p| (p.0.clone(), p.1)) == *kv
        }
        (Op::Range { prefix, .. }, Outcome::Ok(Response::Range { kvs, .. })) => {
            let want: Vec<(String, String, i64)> = state
                .range(prefix.clone()..)
                .take_while(|(k, _)| k.starts_with(prefix.as_str()))
                .map(|(k, p)| (k.clone(), p.0.clone(), p.1))
                .collect();
            want == *kvs
        }
        _ => true,
    }
}

fn replay(
    history: &[Operation],
    reference: &ByRev,
    first_arrival: &HashMap<i64, u64>,
    ending: &Ending,
    summary: &mut WatchSummary,
) -> Result<(), String> {
    let mut writers = Writers::new(history);
    let reads = reads_by_rev(history);
    let mut state: BTreeMap<String, Kv> = BTreeMap::new();
    let check_reads = |rev: i64, state: &BTreeMap<String, Kv>, n: &mut usize| {
        for o in reads.get(&rev).into_iter().flatten() {
            if !read_matches(o, state) {
                return Err(format!(
                    "read #{} at revision {rev} got {:?}; the watched history has {:?}",
                    o.id,
                    o.outcome,
                    state
                        .iter()
                        .map(|(k, p)| (k, &p.0, p.1))
                        .collect::<Vec<_>>()
                ));
            }
            *n += 1;
        }
        Ok(())
    };
    let base = ending.base_rev.max(1);
    check_reads(base, &state, &mut summary.reads)?;
    for rev in base + 1..=ending.final_rev {
        let Some(events) = reference.get(&rev) else {
            // Every revision of this workload has events; one missing from a reference
            // made of compacted watchers ends what can be replayed.
            if ending.reference.is_some() {
                return Err(format!("the watch from revision 1 has no revision {rev}"));
            }
            return Ok(());
        };
        let o = writers.find(rev, events)?;
        let want = effect(&o.op, rev, &state, &writers.lease_of).ok_or_else(|| {
            format!(
                "revision {rev} is attributed to request #{} ({:?}), which changes nothing there",
                o.id, o.op
            )
        })?;
        if sorted(&want) != sorted(events) {
            return Err(format!(
                "revision {rev}: watchers received {events:?}; request #{} makes {want:?}",
                o.id
            ));
        }
        if let Some(at) = first_arrival.get(&rev)
            && *at < o.invoke
        {
            return Err(format!(
                "revision {rev} arrived at {at} ns, before request #{} was sent at {} ns",
                o.id, o.invoke
            ));
        }
        for e in events {
            match &e.value {
                Some(v) => state.insert(e.key.clone(), (v.clone(), rev, e.create_rev, e.version)),
                None => state.remove(&e.key),
            };
        }
        summary.revisions += 1;
        check_reads(rev, &state, &mut summary.reads)?;
    }
    if let Some(rev) = writers
        .by_rev
        .keys()
        .find(|r| **r > ending.final_rev || !reference.contains_key(r))
    {
        return Err(format!(
            "an answered write has revision {rev}, which no watcher received"
        ));
    }
    let last: Vec<(String, String, i64)> = state
        .iter()
        .map(|(k, p)| (k.clone(), p.0.clone(), p.1))
        .collect();
    if let Some((i, _)) = ending.finals.iter().enumerate().find(|(_, f)| **f != last) {
        return Err(format!(
            "member {i}'s final keys differ from the watched history's last state"
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
