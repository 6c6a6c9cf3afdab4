//! A user's permissions as key intervals, and whether they cover a request's keys (as
//! etcd's range permission cache: the union of the user's roles' grants must contain the
//! whole range asked, not only overlap it).
//!
//! Invariants: `read` and `write` are sorted, disjoint and not adjacent (merged), so a
//! range is covered exactly when one interval contains it.

use oxcd_api::authpb::Permission;
use oxcd_api::authpb::permission::Type;

/// A half-open key interval; `end` None: every key from `start` on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Interval {
    start: Vec<u8>,
    end: Option<Vec<u8>>,
}

impl Interval {
    /// The keys of etcd's (key, range_end): empty range_end is the key alone, `\0` every
    /// key from it on. None for an empty range.
    fn of(key: &[u8], range_end: &[u8]) -> Option<Interval> {
        let end = match range_end {
            [] => Some(point_end(key)),
            [0] => None,
            end if end <= key => return None,
            end => Some(end.to_vec()),
        };
        Some(Interval {
            start: key.to_vec(),
            end,
        })
    }

    fn contains(&self, other: &Interval) -> bool {
        self.start <= other.start
            && match (&self.end, &other.end) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(mine), Some(theirs)) => theirs <= mine,
            }
    }
}

/// The end of the interval holding `key` alone: the next key after it.
fn point_end(key: &[u8]) -> Vec<u8> {
    let mut end = key.to_vec();
    end.push(0);
    end
}

/// Sorts and merges overlapping or touching intervals.
fn merge(mut all: Vec<Interval>) -> Vec<Interval> {
    all.sort_by(|a, b| a.start.cmp(&b.start));
    let mut out: Vec<Interval> = Vec::with_capacity(all.len());
    for i in all {
        match out.last_mut() {
            Some(last) if last.end.as_ref().is_none_or(|e| i.start <= *e) => {
                last.end = match (last.end.take(), i.end) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
            }
            _ => out.push(i),
        }
    }
    out
}

/// What one user may read and write.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UserPerms {
    read: Vec<Interval>,
    write: Vec<Interval>,
}

impl UserPerms {
    /// No grant at all.
    pub const NONE: UserPerms = UserPerms {
        read: Vec::new(),
        write: Vec::new(),
    };

    /// The union of `perms` (every grant of every role of the user).
    pub fn new<'a>(perms: impl IntoIterator<Item = &'a Permission>) -> UserPerms {
        let (mut read, mut write) = (Vec::new(), Vec::new());
        for p in perms {
            let Some(i) = Interval::of(&p.key, &p.range_end) else {
                continue;
            };
            match Type::try_from(p.perm_type) {
                Ok(Type::Read) => read.push(i),
                Ok(Type::Write) => write.push(i),
                Ok(Type::Readwrite) => {
                    read.push(i.clone());
                    write.push(i);
                }
                Err(_) => {}
            }
        }
        UserPerms {
            read: merge(read),
            write: merge(write),
        }
    }

    /// Whether the user may read every key of (key, range_end).
    pub fn may_read(&self, key: &[u8], range_end: &[u8]) -> bool {
        covered(&self.read, key, range_end)
    }

    /// Whether the user may write every key of (key, range_end).
    pub fn may_write(&self, key: &[u8], range_end: &[u8]) -> bool {
        covered(&self.write, key, range_end)
    }
}

fn covered(granted: &[Interval], key: &[u8], range_end: &[u8]) -> bool {
    let Some(asked) = Interval::of(key, range_end) else {
        // An empty range touches no key: etcd still refuses it unless some grant holds
        // its start key.
        return Interval::of(key, b"").is_some_and(|k| granted.iter().any(|g| g.contains(&k)));
    };
    // The one interval that could hold it: the last starting at or before its start.
    let i = granted.partition_point(|g| g.start <= asked.start);
    i > 0 && granted[i - 1].contains(&asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perm(t: Type, key: &str, end: &[u8]) -> Permission {
        Permission {
            perm_type: t as i32,
            key: key.as_bytes().to_vec(),
            range_end: end.to_vec(),
        }
    }

    #[test]
    fn keys_prefixes_and_from_key_grants() {
        let p = UserPerms::new(&[
            perm(Type::Read, "a", b""),
            perm(Type::Readwrite, "dir/", b"dir0"),
            perm(Type::Write, "z", &[0]),
        ]);
        assert!(p.may_read(b"a", b"") && !p.may_write(b"a", b""));
        assert!(!p.may_read(b"ab", b""), "a key grant is that key alone");
        assert!(p.may_read(b"dir/x", b"") && p.may_write(b"dir/x", b""));
        assert!(p.may_read(b"dir/", b"dir0"), "the whole prefix");
        assert!(!p.may_read(b"dir/", b"dir1"), "more than the prefix");
        assert!(p.may_write(b"zzz", &[0]) && !p.may_read(b"zzz", b""));
        assert!(!p.may_write(b"y", &[0]));
    }

    #[test]
    fn grants_of_several_roles_cover_a_range_together() {
        let p = UserPerms::new(&[perm(Type::Read, "a", b"c"), perm(Type::Read, "c", b"e")]);
        assert!(p.may_read(b"a", b"e"), "adjacent grants merge");
        let gap = UserPerms::new(&[perm(Type::Read, "a", b"c"), perm(Type::Read, "d", b"e")]);
        assert!(!gap.may_read(b"a", b"e"), "a gap at c..d");
        assert!(gap.may_read(b"d", b"e"));
    }

    #[test]
    fn nothing_granted_nothing_allowed() {
        let p = UserPerms::default();
        assert!(!p.may_read(b"a", b"") && !p.may_write(b"", &[0]));
    }
}
