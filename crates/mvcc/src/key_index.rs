//! The history of one key: its generations.
//!
//! A generation is the life of a key from creation to deletion: the revisions that put it,
//! ending with the tombstone revision if it was deleted. A key with history always ends
//! with one open generation (empty after a delete). `version` counts puts within the
//! current generation, so it restarts at 1 after a delete.
//!
//! Example: put@2, put@3, delete@4, put@6 gives generations
//! `{created 2, revs [2, 3, 4(tomb)]}`, `{created 6, revs [6]}`.
//! Compacting at 5 drops the first generation entirely (its last revision is a tombstone
//! at or below 5); compacting at 3 keeps rev 3 (the newest at or below 3) and drops 2.

use std::collections::HashSet;

use crate::revision::Revision;

/// One life of a key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generation {
    /// Revision that created the key in this generation.
    pub created: Revision,
    /// Number of puts in this generation, including compacted ones.
    pub ver: i64,
    /// Revisions still held, oldest first; a closed generation ends with its tombstone.
    pub revs: Vec<Revision>,
}

/// The history of one key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyIndex {
    /// Generations, oldest first; the last one is open.
    pub generations: Vec<Generation>,
}

/// What a read at some revision finds for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Revision of the value visible at the read revision.
    pub modified: Revision,
    /// Revision that created the key's current generation.
    pub created: Revision,
    /// Version of the visible value.
    pub version: i64,
}

/// Pushes onto a vector that starts with room for exactly one element: most keys have
/// one generation holding one revision, and a first `push` would reserve four (the
/// index of a million keys was 2x larger for it).
fn push_small<T>(v: &mut Vec<T>, item: T) {
    if v.capacity() == 0 {
        v.reserve_exact(1);
    }
    v.push(item);
}

impl KeyIndex {
    /// The open generation, created if the key has none.
    fn open_generation(&mut self) -> &mut Generation {
        if self.generations.is_empty() {
            push_small(&mut self.generations, Generation::default());
        }
        let last = self.generations.len() - 1;
        &mut self.generations[last]
    }

    /// Records a put at `rev`.
    pub fn put(&mut self, rev: Revision) {
        let g = self.open_generation();
        if g.revs.is_empty() {
            g.created = rev;
        }
        push_small(&mut g.revs, rev);
        g.ver += 1;
    }

    /// Rebuilds the first put of a generation seen on restore, where older revisions may
    /// have been compacted away: `created` and `version` come from the stored value.
    pub fn restore_put(&mut self, rev: Revision, created: Revision, version: i64) {
        let g = self.open_generation();
        if g.revs.is_empty() {
            g.created = created;
            g.ver = version - 1;
        }
        push_small(&mut g.revs, rev);
        g.ver += 1;
    }

    /// Records a delete at `rev`, closing the current generation. Returns false (and
    /// changes nothing) when the key is not live.
    pub fn tombstone(&mut self, rev: Revision) -> bool {
        match self.generations.last() {
            Some(g) if !g.revs.is_empty() => {}
            _ => return false,
        }
        self.put(rev);
        self.generations.push(Generation::default());
        true
    }

    /// Whether the key has a live value now.
    pub fn is_live(&self) -> bool {
        self.generations.last().is_some_and(|g| !g.revs.is_empty())
    }

    /// Whether nothing is left (after compaction).
    pub fn is_empty(&self) -> bool {
        self.generations.iter().all(|g| g.revs.is_empty())
    }

    /// The value visible at `at` (a main revision), if the key was live then.
    pub fn get(&self, at: i64) -> Option<Found> {
        let last = self.generations.len().checked_sub(1)?;
        for (i, g) in self.generations.iter().enumerate().rev() {
            if g.revs.is_empty() {
                continue;
            }
            if i != last && g.revs[g.revs.len() - 1].main <= at {
                // The generation containing `at` ended with a delete at or before it.
                return None;
            }
            if g.revs[0].main <= at {
                // Revisions are in ascending order: the newest at or below `at` is found
                // by bisection (a key with a long history is read at old revisions too).
                let n = g.revs.partition_point(|r| r.main <= at).checked_sub(1)?;
                return Some(Found {
                    modified: g.revs[n],
                    created: g.created,
                    version: g.ver - (g.revs.len() - n - 1) as i64,
                });
            }
        }
        None
    }

    /// Revisions of this key with main revision greater than `since`, oldest first,
    /// tombstones included (for watchers catching up).
    pub fn since(&self, since: i64) -> Vec<Revision> {
        self.generations
            .iter()
            .flat_map(|g| g.revs.iter())
            .filter(|r| r.main > since)
            .copied()
            .collect()
    }

    /// The revision a compaction at `at` would keep for this key, as etcd's `keep`
    /// decides it (the newest at or below `at`, unless that is the generation's
    /// tombstone); added to `keep`. Used to hash history as etcd does.
    pub fn keep(&self, at: i64, keep: &mut HashSet<Revision>) {
        if self.is_empty() {
            return;
        }
        let last = self.generations.len() - 1;
        let mut gi = 0;
        while gi < last {
            match self.generations[gi].revs.last() {
                Some(tomb) if tomb.main >= at => break,
                _ => gi += 1,
            }
        }
        let g = &self.generations[gi];
        if let Some(n) = g.revs.iter().rposition(|r| r.main <= at)
            && !(n == g.revs.len() - 1 && gi != last)
        {
            keep.insert(g.revs[n]);
        }
    }

    /// Drops history not needed to read at `at` or later. Revisions kept that are at or
    /// below `at` are added to `keep`, so the caller can delete all other old rows.
    pub fn compact(&mut self, at: i64, keep: &mut HashSet<Revision>) {
        if self.generations.is_empty() {
            return;
        }
        // The first generation still in use at `at`: one not closed at or before it.
        let mut gi = 0;
        while gi + 1 < self.generations.len() {
            let g = &self.generations[gi];
            match g.revs.last() {
                Some(tomb) if tomb.main > at => break,
                _ => gi += 1,
            }
        }
        let is_last = gi + 1 == self.generations.len();
        let g = &mut self.generations[gi];
        if let Some(n) = g.revs.iter().rposition(|r| r.main <= at) {
            keep.insert(g.revs[n]);
            g.revs.drain(..n);
            // A closed generation reduced to its tombstone is gone entirely.
            if g.revs.len() == 1 && !is_last && g.revs[0].main <= at {
                keep.remove(&g.revs[0]);
                gi += 1;
            }
        }
        self.generations.drain(..gi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(main: i64) -> Revision {
        Revision::new(main, 0)
    }

    fn example() -> KeyIndex {
        let mut ki = KeyIndex::default();
        ki.put(r(2));
        ki.put(r(3));
        assert!(ki.tombstone(r(4)));
        ki.put(r(6));
        ki
    }

    #[test]
    fn get_across_generations() {
        let ki = example();
        assert_eq!(ki.get(1), None);
        assert_eq!(
            ki.get(2),
            Some(Found {
                modified: r(2),
                created: r(2),
                version: 1
            })
        );
        assert_eq!(
            ki.get(3),
            Some(Found {
                modified: r(3),
                created: r(2),
                version: 2
            })
        );
        assert_eq!(ki.get(4), None);
        assert_eq!(ki.get(5), None);
        assert_eq!(
            ki.get(7),
            Some(Found {
                modified: r(6),
                created: r(6),
                version: 1
            })
        );
        assert_eq!(ki.since(3), vec![r(4), r(6)]);
    }

    #[test]
    fn tombstone_of_dead_key_is_refused() {
        let mut ki = example();
        assert!(ki.tombstone(r(7)));
        assert!(!ki.tombstone(r(8)));
        assert!(!ki.is_live());
    }

    #[test]
    fn compaction_keeps_newest_at_or_below() {
        let mut ki = example();
        let mut keep = HashSet::new();
        ki.compact(3, &mut keep);
        assert_eq!(keep, HashSet::from([r(3)]));
        assert_eq!(ki.get(3).map(|f| f.version), Some(2));
        assert_eq!(ki.get(4), None);

        let mut keep = HashSet::new();
        ki.compact(5, &mut keep);
        assert!(keep.is_empty(), "deleted generation is dropped: {keep:?}");
        assert_eq!(ki.generations.len(), 1);
        assert_eq!(ki.get(6).map(|f| f.modified), Some(r(6)));

        let mut keep = HashSet::new();
        ki.compact(9, &mut keep);
        assert_eq!(keep, HashSet::from([r(6)]));
    }

    #[test]
    fn compacting_a_deleted_key_empties_it() {
        let mut ki = KeyIndex::default();
        ki.put(r(1));
        ki.tombstone(r(2));
        let mut keep = HashSet::new();
        ki.compact(2, &mut keep);
        assert!(ki.is_empty() && keep.is_empty(), "{ki:?} {keep:?}");
    }
}
