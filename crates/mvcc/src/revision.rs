//! Revisions: `(main, sub)` pairs, ordered, and their on-disk encoding.
//!
//! `main` counts write requests (one per put, delete or txn that changed something);
//! `sub` counts changes within that request. On disk a revision is 17 bytes: `main` as
//! big-endian u64, `_`, `sub` as big-endian u64 (so byte order is revision order), plus a
//! trailing `t` for a tombstone row — etcd's layout.

/// A point in the store's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Revision {
    /// The write request's revision.
    pub main: i64,
    /// The change's position within the request.
    pub sub: i64,
}

/// Length of an encoded revision without the tombstone mark.
pub const REV_BYTES_LEN: usize = 17;

impl Revision {
    /// A revision.
    pub fn new(main: i64, sub: i64) -> Revision {
        Revision { main, sub }
    }

    /// The row key for this revision; `tombstone` appends the `t` mark.
    pub fn to_bytes(self, tombstone: bool) -> Vec<u8> {
        let mut b = Vec::with_capacity(REV_BYTES_LEN + 1);
        b.extend_from_slice(&(self.main as u64).to_be_bytes());
        b.push(b'_');
        b.extend_from_slice(&(self.sub as u64).to_be_bytes());
        if tombstone {
            b.push(b't');
        }
        b
    }

    /// Parses a row key: the revision and whether it marks a tombstone.
    pub fn from_bytes(b: &[u8]) -> Option<(Revision, bool)> {
        if b.len() < REV_BYTES_LEN || b[8] != b'_' {
            return None;
        }
        let main = u64::from_be_bytes(b[0..8].try_into().ok()?) as i64;
        let sub = u64::from_be_bytes(b[9..17].try_into().ok()?) as i64;
        let tombstone = match &b[REV_BYTES_LEN..] {
            [] => false,
            [b't'] => true,
            _ => return None,
        };
        Some((Revision { main, sub }, tombstone))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_orders_like_revisions() {
        let a = Revision::new(2, 9).to_bytes(false);
        let b = Revision::new(10, 0).to_bytes(true);
        assert!(a < b);
        assert_eq!(Revision::from_bytes(&b), Some((Revision::new(10, 0), true)));
        assert_eq!(Revision::from_bytes(&a), Some((Revision::new(2, 9), false)));
        assert_eq!(Revision::from_bytes(b"short"), None);
    }
}
