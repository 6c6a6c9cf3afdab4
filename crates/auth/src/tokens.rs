//! Simple tokens (`--auth-token simple`): `<16 random letters>.<raft index>`, made when a
//! user authenticates. The letters are chosen by the member that checked the password;
//! every member applies the Authenticate entry and records the token with the entry's
//! index, so the token works on any member once it has applied that index.
//!
//! Not replicated state: each member holds its own table, with its own clock. A token
//! lives `--auth-token-ttl` after its last use (etcd's rule), and goes when its user is
//! deleted or changes password, or when auth is disabled.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// etcd's letters and length for a token's random part.
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
const PREFIX_LEN: usize = 16;

/// A random prefix for a new token, from the OS's generator.
pub fn new_prefix() -> std::io::Result<String> {
    use std::io::Read;
    // Bytes at or above the largest multiple of 52 are skipped, so every letter is as
    // likely as the others.
    let fair = (256 / LETTERS.len() * LETTERS.len()) as u8;
    let mut out = String::with_capacity(PREFIX_LEN);
    let mut urandom = std::fs::File::open("/dev/urandom")?;
    while out.len() < PREFIX_LEN {
        let mut bytes = [0u8; 32];
        urandom.read_exact(&mut bytes)?;
        for b in bytes
            .iter()
            .filter(|b| **b < fair)
            .take(PREFIX_LEN - out.len())
        {
            out.push(LETTERS[usize::from(*b) % LETTERS.len()] as char);
        }
    }
    Ok(out)
}

/// The raft index a simple token names (the entry that made it); None if it is not a
/// simple token.
pub fn index_of(token: &str) -> Option<u64> {
    let (_, index) = token.split_once('.')?;
    index.parse().ok()
}

/// One member's simple tokens.
#[derive(Debug)]
pub struct SimpleTokens {
    ttl: Duration,
    tokens: Mutex<HashMap<String, (String, Instant)>>,
}

impl SimpleTokens {
    /// An empty table whose tokens live `ttl` after their last use.
    pub fn new(ttl: Duration) -> SimpleTokens {
        SimpleTokens {
            ttl,
            tokens: Mutex::new(HashMap::new()),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Instant)>> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `token` for `user` (applying an Authenticate entry); expired tokens are
    /// dropped on the way.
    pub fn assign(&self, token: String, user: &str, now: Instant) {
        let mut t = self.table();
        t.retain(|_, (_, expiry)| *expiry > now);
        t.insert(token, (user.to_string(), now + self.ttl));
    }

    /// The user of `token` if it is live, and its life restarts.
    pub fn user(&self, token: &str, now: Instant) -> Option<String> {
        let mut t = self.table();
        match t.get_mut(token) {
            Some((user, expiry)) if *expiry > now => {
                *expiry = now + self.ttl;
                Some(user.clone())
            }
            Some(_) => {
                t.remove(token);
                None
            }
            None => None,
        }
    }

    /// Drops every token of `user` (deleted, or its password changed).
    pub fn invalidate_user(&self, user: &str) {
        self.table().retain(|_, (u, _)| u != user);
    }

    /// Drops every token (auth disabled).
    pub fn clear(&self) {
        self.table().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_letters_and_differ() {
        let (a, b) = (new_prefix().expect("a"), new_prefix().expect("b"));
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|c| c.is_ascii_alphabetic()));
        assert_ne!(a, b);
        assert_eq!(index_of(&format!("{a}.42")), Some(42));
        assert_eq!(index_of("no-index"), None);
    }

    #[test]
    fn tokens_live_from_their_last_use_and_go_with_their_user() {
        let t = SimpleTokens::new(Duration::from_secs(10));
        let start = Instant::now();
        t.assign("a.1".into(), "u", start);
        t.assign("b.2".into(), "v", start);
        let later = start + Duration::from_secs(8);
        assert_eq!(t.user("a.1", later).as_deref(), Some("u"));
        let after_ttl = start + Duration::from_secs(12);
        assert_eq!(t.user("a.1", after_ttl).as_deref(), Some("u"), "used at 8s");
        assert_eq!(t.user("b.2", after_ttl), None, "unused for 12s");
        t.invalidate_user("u");
        assert_eq!(t.user("a.1", after_ttl), None);
    }
}
