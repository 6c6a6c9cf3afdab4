//! The in-memory key index: every key's [`KeyIndex`], ordered by key.
//!
//! Rebuilt from the backend's rows at start; updated by the apply path before the backend
//! commit; readers only act on revisions at or below the published (committed) revision.

use std::collections::{BTreeMap, HashSet};
use std::ops::Bound;

use crate::key_index::{Found, KeyIndex};
use crate::revision::Revision;

/// Keys found by a range lookup, in key order, with what a read finds for each.
pub type Matches = Vec<(Vec<u8>, Found)>;

/// Start and end bounds of a key range, as BTreeMap::range takes them.
type KeyBounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

/// A key range as etcd defines it: `end` empty is the single key `key`; `end == [0]` is
/// every key from `key` on; otherwise `[key, end)`.
#[derive(Debug, Clone, Copy)]
pub struct KeyRange<'a> {
    /// First key.
    pub key: &'a [u8],
    /// End as in the request.
    pub end: &'a [u8],
}

impl<'a> KeyRange<'a> {
    /// A range.
    pub fn new(key: &'a [u8], end: &'a [u8]) -> KeyRange<'a> {
        KeyRange { key, end }
    }

    /// Whether `k` is in the range.
    pub fn contains(&self, k: &[u8]) -> bool {
        if self.end.is_empty() {
            k == self.key
        } else if self.end == [0] {
            k >= self.key
        } else {
            k >= self.key && k < self.end
        }
    }

    fn bounds(&self) -> Option<KeyBounds<'a>> {
        if self.end.is_empty() {
            return Some((Bound::Included(self.key), Bound::Included(self.key)));
        }
        if self.end == [0] {
            return Some((Bound::Included(self.key), Bound::Unbounded));
        }
        if self.end <= self.key {
            return None;
        }
        Some((Bound::Included(self.key), Bound::Excluded(self.end)))
    }
}

/// The key index.
#[derive(Debug, Default)]
pub struct TreeIndex {
    keys: BTreeMap<Vec<u8>, KeyIndex>,
    /// Keys live now (etcd's `etcd_debugging_mvcc_keys_total`: a put that opens a
    /// generation adds one, a tombstone takes one away).
    live: usize,
}

impl TreeIndex {
    /// Records a put.
    pub fn put(&mut self, key: &[u8], rev: Revision) {
        // Overwrites are the common case: no key copy for them.
        if let Some(ki) = self.keys.get_mut(key) {
            self.live += usize::from(!ki.is_live());
            ki.put(rev);
            return;
        }
        self.live += 1;
        self.keys.entry(key.to_vec()).or_default().put(rev);
    }

    /// Records a put seen while rebuilding from the backend.
    pub fn restore_put(&mut self, key: &[u8], rev: Revision, created: Revision, version: i64) {
        let ki = self.keys.entry(key.to_vec()).or_default();
        self.live += usize::from(!ki.is_live());
        ki.restore_put(rev, created, version);
    }

    /// Records a delete; false if the key was not live.
    pub fn tombstone(&mut self, key: &[u8], rev: Revision) -> bool {
        let deleted = self.keys.get_mut(key).is_some_and(|ki| ki.tombstone(rev));
        self.live -= usize::from(deleted);
        deleted
    }

    /// Keys live now.
    pub fn live(&self) -> usize {
        self.live
    }

    /// What a read of `key` at `at` finds.
    pub fn get(&self, key: &[u8], at: i64) -> Option<Found> {
        self.keys.get(key).and_then(|ki| ki.get(at))
    }

    /// Visits keys live at `at` in `range`, in key order, until `visit` returns false.
    pub fn visit(&self, range: KeyRange<'_>, at: i64, mut visit: impl FnMut(&[u8], Found) -> bool) {
        let Some(bounds) = range.bounds() else { return };
        for (k, ki) in self.keys.range::<[u8], _>(bounds) {
            if let Some(found) = ki.get(at)
                && !visit(k, found)
            {
                return;
            }
        }
    }

    /// Keys live at `at` in `range`, with what a read finds, up to `limit` (0: no limit),
    /// and the total number of live keys in the range.
    pub fn range(&self, range: KeyRange<'_>, at: i64, limit: usize) -> (Matches, usize) {
        let mut out = Vec::new();
        let mut total = 0;
        self.visit(range, at, |k, f| {
            total += 1;
            if limit == 0 || out.len() < limit {
                out.push((k.to_vec(), f));
            }
            true
        });
        (out, total)
    }

    /// Compacts every key at `at`; returns the revisions at or below `at` still needed.
    pub fn compact(&mut self, at: i64) -> HashSet<Revision> {
        let mut keep = HashSet::new();
        self.keys.retain(|_, ki| {
            ki.compact(at, &mut keep);
            !ki.is_empty()
        });
        keep
    }

    /// The revisions a compaction at `at` would keep (etcd's `Keep`), for hashing.
    pub fn keep(&self, at: i64) -> HashSet<Revision> {
        let mut keep = HashSet::new();
        for ki in self.keys.values() {
            ki.keep(at, &mut keep);
        }
        keep
    }

    /// Number of keys with any history.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether no key has history.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}
