//! The headers of etcd's peer requests and answers (etcd 3.5.16
//! `server/etcdserver/api/rafthttp/util.go`, `http.go`), and ids as etcd writes them in
//! headers and paths: `types.ID.String()`, lowercase hex without leading zeros, compared
//! as strings by the receiver.

/// The sender's member id.
pub const FROM: &str = "x-server-from";
/// The sender's server version (semver), as oxcd's own peer traffic carries it.
pub const SERVER_VERSION: &str = crate::peer::compat::SERVER_VERSION_KEY;
/// The lowest cluster version the sender works in.
pub const MIN_CLUSTER_VERSION: &str = crate::peer::compat::MIN_CLUSTER_VERSION_KEY;
/// The cluster id, on requests and answers.
pub const CLUSTER_ID: &str = "x-etcd-cluster-id";
/// The member a stream is dialed for.
pub const RAFT_TO: &str = "x-raft-to";
/// The sender's peer URLs, comma-separated.
pub const PEER_URLS: &str = "x-peerurls";

/// `id` as etcd writes it in headers and paths.
pub fn id(id: u64) -> String {
    format!("{id:x}")
}

/// An id as etcd parses it from a header or a path (`types.IDFromString`).
pub fn parse_id(text: &str) -> Option<u64> {
    // Go takes no sign; Rust would take a `+`.
    if text.starts_with('+') {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_bare_lowercase_hex() {
        assert_eq!(super::id(0x8e9e05c52164694d), "8e9e05c52164694d");
        assert_eq!(super::id(0x0f), "f");
        assert_eq!(
            super::parse_id("8E9E05C52164694D"),
            Some(0x8e9e05c52164694d)
        );
        assert_eq!(super::parse_id("xyz"), None);
        assert_eq!(super::parse_id("+f"), None);
    }
}
