//! Passwords this member has already checked with bcrypt, remembered for a while, so
//! that a client logging in again (its token expired, it reconnected, thousands of
//! clients at once after a leader change) costs a SHA-256 rather than a bcrypt check of
//! about 70 ms of CPU. etcd checks bcrypt on every Authenticate; its users asked for this
//! cache (etcd issues 9615 and 9713) and it was never built. `--auth-password-cache-ttl`
//! (oxcd's own flag, `0s` turns it off) bounds how long an entry is used.
//!
//! Invariants:
//! - Only a successful bcrypt check is remembered: a wrong password always costs a full
//!   bcrypt check, so guessing online is as slow as with etcd.
//! - An entry is used only while the user's stored bcrypt hash is the one it was made
//!   from: a changed password, or a user deleted and added again, misses.
//! - The cache never holds a password: each entry keeps a SHA-256 of the password with a
//!   random salt of its own, compared in constant time.
//! - It is this member's memory only, never replicated, never on disk; entries expire
//!   after the TTL and there are at most [`MAX_ENTRIES`].

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

/// `--auth-password-cache-ttl`'s default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(300);
/// The most users remembered at once; beyond, the oldest entry makes room.
pub const MAX_ENTRIES: usize = 10_000;

/// A password known good for a user's stored hash.
#[derive(Debug)]
struct Entry {
    stored_hash: Vec<u8>,
    salt: [u8; 16],
    digest: [u8; 32],
    at: Instant,
    /// Insertion order: the lowest is evicted first.
    seq: u64,
}

/// Successful password checks, by user name.
#[derive(Debug)]
pub struct PasswordCache {
    ttl: Duration,
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    by_user: HashMap<String, Entry>,
    next_seq: u64,
}

impl PasswordCache {
    /// A cache whose entries are used for `ttl` (zero: never used).
    pub fn new(ttl: Duration) -> PasswordCache {
        PasswordCache {
            ttl,
            entries: Mutex::default(),
        }
    }

    /// Whether `password` was checked good for `user` while its stored hash was
    /// `stored_hash`, less than the TTL ago.
    pub fn verified(&self, user: &str, stored_hash: &[u8], password: &str) -> bool {
        if self.ttl.is_zero() {
            return false;
        }
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(e) = entries.by_user.get(user) else {
            return false;
        };
        e.stored_hash == stored_hash
            && e.at.elapsed() < self.ttl
            && same(&digest(&e.salt, password), &e.digest)
    }

    /// Remembers that bcrypt found `password` good for `user` with `stored_hash`.
    pub fn remember(&self, user: &str, stored_hash: &[u8], password: &str) {
        if self.ttl.is_zero() {
            return;
        }
        let mut salt = [0u8; 16];
        if getrandom::getrandom(&mut salt).is_err() {
            // No randomness: nothing is remembered, every login checks bcrypt.
            return;
        }
        let digest = digest(&salt, password);
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let seq = entries.next_seq;
        entries.next_seq += 1;
        let by_user = &mut entries.by_user;
        if by_user.len() >= MAX_ENTRIES && !by_user.contains_key(user) {
            let ttl = self.ttl;
            by_user.retain(|_, e| e.at.elapsed() < ttl);
            if by_user.len() >= MAX_ENTRIES
                && let Some(oldest) = by_user
                    .iter()
                    .min_by_key(|(_, e)| e.seq)
                    .map(|(name, _)| name.clone())
            {
                by_user.remove(&oldest);
            }
        }
        by_user.insert(
            user.to_string(),
            Entry {
                stored_hash: stored_hash.to_vec(),
                salt,
                digest,
                at: Instant::now(),
                seq,
            },
        );
    }

    /// How many users are remembered.
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_user
            .len()
    }

    /// Whether no user is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for PasswordCache {
    fn default() -> PasswordCache {
        PasswordCache::new(DEFAULT_TTL)
    }
}

fn digest(salt: &[u8; 16], password: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(password.as_bytes());
    h.finalize().into()
}

/// Equal, in a time that does not depend on where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_password_is_remembered_for_its_hash() {
        let c = PasswordCache::default();
        assert!(!c.verified("alice", b"h1", "secret"));
        c.remember("alice", b"h1", "secret");
        assert!(c.verified("alice", b"h1", "secret"));
        assert!(!c.verified("alice", b"h1", "Secret"), "another password");
        assert!(
            !c.verified("alice", b"h2", "secret"),
            "the password changed"
        );
        assert!(!c.verified("bob", b"h1", "secret"), "another user");
    }

    #[test]
    fn the_password_itself_is_not_kept() {
        let c = PasswordCache::default();
        c.remember("alice", b"h1", "secret");
        let entries = c.entries.lock().expect("lock");
        let e = entries.by_user.get("alice").expect("entry");
        assert_ne!(e.digest, digest(&[0; 16], "secret"), "salted");
        assert!(!format!("{e:?}").contains("secret"));
    }

    #[test]
    fn entries_expire_and_a_zero_ttl_remembers_nothing() {
        let c = PasswordCache::new(Duration::from_millis(1));
        c.remember("alice", b"h1", "secret");
        std::thread::sleep(Duration::from_millis(5));
        assert!(!c.verified("alice", b"h1", "secret"));
        let off = PasswordCache::new(Duration::ZERO);
        off.remember("alice", b"h1", "secret");
        assert!(off.is_empty());
        assert!(!off.verified("alice", b"h1", "secret"));
    }

    #[test]
    fn the_oldest_entry_makes_room() {
        let c = PasswordCache::default();
        for i in 0..MAX_ENTRIES {
            c.remember(&format!("u{i}"), b"h", "pw");
        }
        c.remember("late", b"h", "pw");
        assert_eq!(c.len(), MAX_ENTRIES);
        assert!(c.verified("late", b"h", "pw"));
        assert!(!c.verified("u0", b"h", "pw"), "the oldest went");
    }
}
