//! Member and cluster ids, derived as etcd derives them, so the same flags give the same
//! ids on every member and on every restart.
//!
//! member id = first 8 bytes (big-endian) of SHA-1(sorted peer URLs joined, then the
//! cluster token); cluster id = first 8 bytes of SHA-1(the sorted member ids, 8 bytes
//! big-endian each).

use sha1::{Digest, Sha1};

fn first_u64(hash: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&hash[..8]);
    u64::from_be_bytes(b)
}

/// A member's id from its peer URLs and the cluster token.
pub fn member_id(peer_urls: &[String], token: &str) -> u64 {
    let mut urls: Vec<&str> = peer_urls.iter().map(String::as_str).collect();
    urls.sort_unstable();
    let mut h = Sha1::new();
    h.update(urls.concat().as_bytes());
    h.update(token.as_bytes());
    first_u64(&h.finalize())
}

/// The cluster id from its members' ids.
pub fn cluster_id(member_ids: &[u64]) -> u64 {
    let mut ids = member_ids.to_vec();
    ids.sort_unstable();
    let mut h = Sha1::new();
    for id in ids {
        h.update(id.to_be_bytes());
    }
    first_u64(&h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_etcd_for_the_default_member() {
        // etcd 3.x started with all defaults reports member 8e9e05c52164694d and cluster
        // cdf818194e3a8c32 (etcdctl member list / endpoint status -w json).
        let m = member_id(&["http://localhost:2380".to_string()], "etcd-cluster");
        assert_eq!(format!("{m:x}"), "8e9e05c52164694d");
        assert_eq!(format!("{:x}", cluster_id(&[m])), "cdf818194e3a8c32");
    }
}
