//! Which watchers of one stream may want an event's key: single-key watchers found by
//! hash, range watchers (prefixes, from-key, spans) listed for a check each. The stream
//! routes each event of a batch through it, so a batch costs a lookup per event rather
//! than a check per (watcher, event) pair.
//!
//! Invariants: every watcher of the stream is in exactly one place (its key's list or
//! the ranged list) from its creation to its removal; candidates are a superset of the
//! watchers whose range holds the key — the watcher itself decides (`Watcher::wants`).

use std::collections::HashMap;

/// The watchers of one stream, by what they watch.
#[derive(Debug, Default)]
pub struct WatcherIndex {
    by_key: HashMap<Vec<u8>, Vec<i64>>,
    ranged: Vec<i64>,
}

impl WatcherIndex {
    /// Adds watcher `id` on `[key, end)` (`end` empty: the key alone).
    pub fn add(&mut self, id: i64, key: &[u8], end: &[u8]) {
        if end.is_empty() {
            self.by_key.entry(key.to_vec()).or_default().push(id);
        } else {
            self.ranged.push(id);
        }
    }

    /// Removes watcher `id`, added with the same `key` and `end`.
    pub fn remove(&mut self, id: i64, key: &[u8], end: &[u8]) {
        if end.is_empty() {
            if let Some(ids) = self.by_key.get_mut(key) {
                ids.retain(|w| *w != id);
                if ids.is_empty() {
                    self.by_key.remove(key);
                }
            }
        } else {
            self.ranged.retain(|w| *w != id);
        }
    }

    /// Calls `f` with every watcher that may want an event on `key`.
    pub fn candidates(&self, key: &[u8], mut f: impl FnMut(i64)) {
        if let Some(ids) = self.by_key.get(key) {
            ids.iter().for_each(|id| f(*id));
        }
        self.ranged.iter().for_each(|id| f(*id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(ix: &WatcherIndex, key: &[u8]) -> Vec<i64> {
        let mut out = Vec::new();
        ix.candidates(key, |id| out.push(id));
        out.sort_unstable();
        out
    }

    #[test]
    fn keys_by_hash_ranges_always_and_removal_undoes_addition() {
        let mut ix = WatcherIndex::default();
        ix.add(1, b"a", b"");
        ix.add(2, b"a", b"");
        ix.add(3, b"p", b"q");
        assert_eq!(of(&ix, b"a"), vec![1, 2, 3]);
        assert_eq!(of(&ix, b"b"), vec![3]);
        ix.remove(1, b"a", b"");
        ix.remove(3, b"p", b"q");
        assert_eq!(of(&ix, b"a"), vec![2]);
        ix.remove(2, b"a", b"");
        assert!(of(&ix, b"a").is_empty());
        assert!(ix.by_key.is_empty());
    }
}
