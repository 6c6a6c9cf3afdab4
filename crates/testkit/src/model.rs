//! etcd's key-value semantics with revisions, as a step function the checker can undo.
//!
//! State: the store revision (1 when empty, as a fresh etcd) and each key's value and
//! mod_revision. A request that writes moves the revision up by exactly one (a txn with
//! several puts too); a delete of nothing and a failed compare write nothing and keep it.
//! [`Model::step`] refuses a response the state cannot explain, which is how the checker
//! prunes orders.

use std::collections::BTreeMap;

use crate::history::{Op, Response};

/// The store as the model sees it.
#[derive(Debug, Clone)]
pub struct Model {
    rev: i64,
    kvs: BTreeMap<String, (String, i64)>,
    /// XOR of the hashes of every (key, value, mod_revision): order-free, so two orders
    /// that reach the same state have the same fingerprint.
    fp: u64,
}

/// What it takes to undo one step.
#[derive(Debug)]
pub struct Undo {
    rev: i64,
    prior: Vec<(String, Option<(String, i64)>)>,
}

impl Default for Model {
    fn default() -> Model {
        Model {
            rev: 1,
            kvs: BTreeMap::new(),
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

    /// Applies `op` with its response (`None`: indeterminate, apply as the state says).
    /// Returns `None`, changing nothing, if the response cannot happen in this state.
    pub fn step(&mut self, op: &Op, resp: Option<&Response>) -> Option<Undo> {
        let mut undo = Undo {
            rev: self.rev,
            prior: Vec::new(),
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
        self.rev = undo.rev;
    }
}
