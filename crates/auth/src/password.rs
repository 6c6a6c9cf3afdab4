//! Passwords as etcd 3.5 keeps them: bcrypt at the store's cost, base64-encoded as its
//! `hashedPassword`. Both take tens of milliseconds of CPU: callers run them on a
//! blocking thread, never in the apply path (a proposal carries the hash).

use base64::Engine as _;

/// Why a password could not be hashed (bcrypt's error, as etcd passes it on).
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct HashError(#[from] bcrypt::BcryptError);

/// `password` hashed with bcrypt at `cost` and base64-encoded: a `hashedPassword`.
pub fn hash(password: &str, cost: u32) -> Result<String, HashError> {
    let hashed = bcrypt::hash(password, cost)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(hashed))
}

/// Whether `password` matches the stored bcrypt `hash` (None: the hash is not a usable
/// bcrypt hash).
pub fn matches(hash: &[u8], password: &str) -> Option<bool> {
    let hash = std::str::from_utf8(hash).ok()?;
    bcrypt::verify(password, hash).ok()
}
