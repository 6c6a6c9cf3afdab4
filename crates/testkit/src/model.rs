//! etcd's key-value semantics with revisions, as a step function the checker can undo.
//!
//! State: the store revision (1 when empty, as a fresh etcd) and each key's value and
//! mod_revision. A request that writes moves the revision up by exactly one (a txn with
//! several puts too); a delete of nothing and a failed compare write nothing and keep it.
//! [`Model::step`] refuses a response the state cannot explain, which is how the checker
//! prunes orders.
//!
//! Leases: each granted lease with the keys attached to it. A grant writes no revision;
//! revoking or expiring a lease deletes its keys in one revision (none if it has no
//! keys) and forgets it; a put with a lease that does not exist cannot be answered (one
//! that got no answer was refused and changed nothing: every unanswered request can be
//! placed, as the checker requires).

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{Op, Response};

/// The store as the model sees it.
#[derive(Debug, Clone)]
pub struct Model {
    rev: i64,
    kvs: BTreeMap<String, (String, i64)>,
    /// Live leases and their keys.
    leases: BTreeMap<i64, BTreeSet<String>>,
    /// XOR of the hashes of every (key, value, mod_revision) and every lease with its
    /// keys: order-free, so two orders that reach the same state have the same
    /// fingerprint.
    fp: u64,
}

/// What it takes to undo one step.
#[derive(Debug)]
pub struct Undo {
    rev: i64,
    prior: Vec<(String, Option<(String, i64)>)>,
    lease_prior: Vec<(i64, Option<BTreeSet<String>>)>,
}

impl Default for Model {
    fn default() -> Model {
        Model::at(1)
    }
}

impl Model {
    /// The store at revision `rev` with nothing the history touches: what was written
    /// before the history began (at or below `rev`) lies outside its keys.
    pub fn at(rev: i64) -> Model {
        Model {
            rev: rev.max(1),
            kvs: BTreeMap::new(),
            leases: BTreeMap::new(),
            fp: 0,
        }
    }
}

/// A 64-bit mix (splitmix64's finaliser).
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn hash_str(h: u64, s: &str) -> u64 {
    s.bytes()
        .fold(mix(h ^ s.len() as u64), |h, b| mix(h ^ u64::from(b)))
}

fn entry_hash(key: &str, value: &str, mod_rev: i64) -> u64 {
    mix(hash_str(hash_str(0x9e37_79b9, key), value) ^ mod_rev as u64)
}

fn lease_hash(lease: i64, keys: &BTreeSet<String>) -> u64 {
    keys.iter()
        .fold(mix(lease as u64 ^ 0x1ea5e), |h, k| hash_str(h, k))
}

impl Model {
    /// The current revision.
    pub fn rev(&self) -> i64 {
        self.rev
    }

    /// A fingerprint of the whole state, revision included.
    pub fn fingerprint(&self) -> u64 {
        self.fp ^ mix(self.rev as u64 ^ 0x5151)
    }

    /// The key's (value, mod_revision).
    pub fn get(&self, key: &str) -> Option<&(String, i64)> {
        self.kvs.get(key)
    }

    /// Every (key, value, mod_revision) under `prefix`, in key order.
    pub fn range(&self, prefix: &str) -> Vec<(String, String, i64)> {
        self.kvs
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, (v, r))| (k.clone(), v.clone(), *r))
            .collect()
    }

    fn set(&mut self, undo: &mut Undo, key: &str, new: Option<(String, i64)>) {
        let old = match &new {
            Some((v, r)) => self.kvs.insert(key.to_string(), (v.clone(), *r)),
            None => self.kvs.remove(key),
        };
        if let Some((v, r)) = &old {
            self.fp ^= entry_hash(key, v, *r);
        }
        if let Some((v, r)) = &new {
            self.fp ^= entry_hash(key, v, *r);
        }
        undo.prior.push((key.to_string(), old));
    }

    fn set_lease(&mut self, undo: &mut Undo, lease: i64, new: Option<BTreeSet<String>>) {
        let old = match &new {
            Some(keys) => self.leases.insert(lease, keys.clone()),
            None => self.leases.remove(&lease),
        };
        if let Some(keys) = &old {
            self.fp ^= lease_hash(lease, keys);
        }
        if let Some(keys) = &new {
            self.fp ^= lease_hash(lease, keys);
        }
        undo.lease_prior.push((lease, old));
    }

    /// Ends `lease` (revoked or expired): its keys go in one revision, if it has any.
    /// `want_rev`: the revision the response reported, if answered.
    fn end_lease(&mut self, mut undo: Undo, lease: i64, want_rev: Option<i64>) -> Option<Undo> {
        let Some(keys) = self.leases.get(&lease).cloned() else {
            // Unanswered: the server refused it (no such lease), changing nothing.
            return want_rev.is_none().then_some(undo);
        };
        let rev = if keys.is_empty() {
            self.rev
        } else {
            self.rev + 1
        };
        if want_rev.is_some_and(|r| r != rev) {
            return None;
        }
        for k in &keys {
            self.set(&mut undo, k, None);
        }
        self.set_lease(&mut undo, lease, None);
        self.rev = rev;
        Some(undo)
    }

    /// Applies `op` with its response (`None`: indeterminate, apply as the state says).
    /// Returns `None`, changing nothing, if the response cannot happen in this state.
    pub fn step(&mut self, op: &Op, resp: Option<&Response>) -> Option<Undo> {
        let mut undo = Undo {
            rev: self.rev,
            prior: Vec::new(),
            lease_prior: Vec::new(),
        };
        let next = self.rev + 1;
        match op {
            Op::Get { key, .. } => match resp {
                Some(Response::Get { rev, kv }) if *rev == self.rev => {
                    (kv.as_ref() == self.kvs.get(key)).then_some(undo)
                }
                _ => None,
            },
            Op::Range { prefix, .. } => match resp {
                Some(Response::Range { rev, kvs }) if *rev == self.rev => {
                    (*kvs == self.range(prefix)).then_some(undo)
                }
                _ => None,
            },
            Op::Put { key, value } => {
                if !resp.is_none_or(|r| matches!(r, Response::Write { rev } if *rev == next)) {
                    return None;
                }
                self.set(&mut undo, key, Some((value.clone(), next)));
                self.rev = next;
                Some(undo)
            }
            Op::MultiPut { kvs } => {
                if !resp.is_none_or(|r| matches!(r, Response::Write { rev } if *rev == next)) {
                    return None;
                }
                for (k, v) in kvs {
                    self.set(&mut undo, k, Some((v.clone(), next)));
                }
                self.rev = next;
                Some(undo)
            }
            Op::Delete { key } => {
                let exists = self.kvs.contains_key(key);
                let (want_rev, want_deleted) = if exists { (next, 1) } else { (self.rev, 0) };
                if !resp.is_none_or(|r| {
                    matches!(r, Response::Delete { rev, deleted } if *rev == want_rev && *deleted == want_deleted)
                }) {
                    return None;
                }
                if exists {
                    self.set(&mut undo, key, None);
                    self.rev = next;
                }
                Some(undo)
            }
            Op::CasValue { key, expect, value } => {
                let holds = self.kvs.get(key).map(|(v, _)| v) == expect.as_ref();
                self.cas(undo, key, value, holds, resp)
            }
            Op::CasModRev { key, expect, value } => {
                let holds = self.kvs.get(key).map(|(_, r)| *r).unwrap_or(0) == *expect;
                self.cas(undo, key, value, holds, resp)
            }
            Op::LeaseGrant { lease } => {
                if self.leases.contains_key(lease)
                    || !resp
                        .is_none_or(|r| matches!(r, Response::Lease { rev } if *rev == self.rev))
                {
                    return None;
                }
                self.set_lease(&mut undo, *lease, Some(BTreeSet::new()));
                Some(undo)
            }
            Op::PutLease { key, value, lease } => {
                let Some(mut keys) = self.leases.get(lease).cloned() else {
                    // Unanswered: refused (no such lease), changing nothing.
                    return resp.is_none().then_some(undo);
                };
                if !resp.is_none_or(|r| matches!(r, Response::Write { rev } if *rev == next)) {
                    return None;
                }
                keys.insert(key.clone());
                self.set_lease(&mut undo, *lease, Some(keys));
                self.set(&mut undo, key, Some((value.clone(), next)));
                self.rev = next;
                Some(undo)
            }
            Op::LeaseRevoke { lease, .. } => match resp {
                None => self.end_lease(undo, *lease, None),
                Some(Response::Revoke { rev }) => self.end_lease(undo, *lease, Some(*rev)),
                Some(_) => None,
            },
            Op::LeaseExpire { lease } => match resp {
                None => self.end_lease(undo, *lease, None),
                Some(Response::Revoke { rev }) => self.end_lease(undo, *lease, Some(*rev)),
                Some(_) => None,
            },
        }
    }

    fn cas(
        &mut self,
        mut undo: Undo,
        key: &str,
        value: &str,
        holds: bool,
        resp: Option<&Response>,
    ) -> Option<Undo> {
        let next = self.rev + 1;
        let want_rev = if holds { next } else { self.rev };
        if !resp.is_none_or(|r| {
            matches!(r, Response::Cas { rev, succeeded } if *rev == want_rev && *succeeded == holds)
        }) {
            return None;
        }
        if holds {
            self.set(&mut undo, key, Some((value.to_string(), next)));
            self.rev = next;
        }
        Some(undo)
    }

    /// Reverts the step that returned `undo` (steps are undone last first).
    pub fn undo(&mut self, undo: Undo) {
        for (key, old) in undo.prior.into_iter().rev() {
            let cur = match &old {
                Some((v, r)) => self.kvs.insert(key.clone(), (v.clone(), *r)),
                None => self.kvs.remove(&key),
            };
            if let Some((v, r)) = &cur {
                self.fp ^= entry_hash(&key, v, *r);
            }
            if let Some((v, r)) = &old {
                self.fp ^= entry_hash(&key, v, *r);
            }
        }
        for (lease, old) in undo.lease_prior.into_iter().rev() {
            let cur = match &old {
                Some(keys) => self.leases.insert(lease, keys.clone()),
                None => self.leases.remove(&lease),
            };
            if let Some(keys) = &cur {
                self.fp ^= lease_hash(lease, keys);
            }
            if let Some(keys) = &old {
                self.fp ^= lease_hash(lease, keys);
            }
        }
        self.rev = undo.rev;
    }
}
