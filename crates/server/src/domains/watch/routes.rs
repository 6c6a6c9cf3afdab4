//! Which subscriptions want which keys: the index the hub routes each published batch
//! through, so a batch wakes only the streams with a watcher on one of its keys (as
//! etcd's watcher groups do with a key map and an interval tree). A stream keeps one of
//! its own over its watchers' ids, so that a batch it receives is matched against the
//! watchers of the batch's keys only.
//!
//! Invariants: single keys are found by hash; ranges (prefixes, from-key, spans) are
//! checked one by one, in the order they were added. Each (range, id) pair carries a
//! count, so two watchers of one stream on the same range register twice and
//! unregister twice.

use std::collections::HashMap;

use oxcd_mvcc::KeyRange;

/// A subscription's number.
pub type SubId = u64;

/// The interests of every subscription (or of every watcher of a stream, by `Id`).
pub struct Routes<Id = SubId> {
    keys: HashMap<Vec<u8>, Vec<(Id, u32)>>,
    ranges: Vec<(Vec<u8>, Vec<u8>, Id, u32)>,
}

impl<Id> Default for Routes<Id> {
    fn default() -> Routes<Id> {
        Routes {
            keys: HashMap::new(),
            ranges: Vec::new(),
        }
    }
}

fn bump(count: &mut u32, up: bool) -> bool {
    if up {
        *count += 1;
    } else {
        *count = count.saturating_sub(1);
    }
    *count > 0
}

impl<Id: Copy + PartialEq> Routes<Id> {
    /// Adds (`up`) or removes one interest of `sub` in `[key, end)` (`end` empty: the key
    /// alone; `\0`: every key from `key` on).
    pub fn change(&mut self, sub: Id, key: &[u8], end: &[u8], up: bool) {
        if end.is_empty() {
            let subs = self.keys.entry(key.to_vec()).or_default();
            match subs.iter().position(|(s, _)| *s == sub) {
                Some(i) => {
                    let left = bump(&mut subs[i].1, up);
                    if !left {
                        subs.remove(i);
                    }
                }
                None if up => subs.push((sub, 1)),
                None => {}
            }
            if subs.is_empty() {
                self.keys.remove(key);
            }
            return;
        }
        let found = self
            .ranges
            .iter()
            .position(|(k, e, s, _)| *s == sub && k == key && e == end);
        match found {
            Some(i) => {
                let left = bump(&mut self.ranges[i].3, up);
                if !left {
                    self.ranges.remove(i);
                }
            }
            None if up => self.ranges.push((key.to_vec(), end.to_vec(), sub, 1)),
            None => {}
        }
    }

    /// Forgets every interest of `sub`.
    pub fn remove_all(&mut self, sub: Id) {
        self.keys.retain(|_, subs| {
            subs.retain(|(s, _)| *s != sub);
            !subs.is_empty()
        });
        self.ranges.retain(|(_, _, s, _)| *s != sub);
    }

    /// Adds to `out` every subscription interested in `key` (possibly more than once).
    pub fn interested(&self, key: &[u8], out: &mut Vec<Id>) {
        if let Some(subs) = self.keys.get(key) {
            out.extend(subs.iter().map(|(s, _)| *s));
        }
        for (k, e, s, _) in &self.ranges {
            if KeyRange::new(k, e).contains(key) {
                out.push(*s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(r: &Routes, key: &[u8]) -> Vec<SubId> {
        let mut out = Vec::new();
        r.interested(key, &mut out);
        out.sort_unstable();
        out.dedup();
        out
    }

    #[test]
    fn keys_prefixes_and_from_key_route_to_their_subscriptions() {
        let mut r = Routes::default();
        r.change(1, b"a", b"", true);
        r.change(2, b"b/", b"b0", true);
        r.change(3, b"m", &[0], true);
        assert_eq!(who(&r, b"a"), vec![1]);
        assert_eq!(who(&r, b"b/x"), vec![2]);
        assert_eq!(who(&r, b"z"), vec![3]);
        assert_eq!(who(&r, b"ab"), Vec::<SubId>::new());
    }

    #[test]
    fn interests_are_counted_and_removed() {
        let mut r = Routes::default();
        r.change(1, b"a", b"", true);
        r.change(1, b"a", b"", true);
        r.change(1, b"p", b"q", true);
        r.change(1, b"a", b"", false);
        assert_eq!(who(&r, b"a"), vec![1], "one watcher left on a");
        r.change(1, b"a", b"", false);
        assert!(who(&r, b"a").is_empty());
        r.change(2, b"p", b"q", true);
        r.remove_all(1);
        assert_eq!(who(&r, b"p1"), vec![2]);
    }
}
