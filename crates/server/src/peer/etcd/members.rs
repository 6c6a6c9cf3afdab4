//! etcd's member list as its peers exchange it in JSON (`GET /members`, the answer of a
//! forwarded promotion): etcd 3.5.16's `membership.Member` marshalled by Go's
//! `encoding/json` (`server/etcdserver/api/membership/member.go`), its embedded structs
//! flattened: `{"id":<number>,"peerURLs":[...],"isLearner":true,"name":"...",
//! "clientURLs":[...]}`, the last three left out when empty or false.
//!
//! Invariants: ids are JSON numbers in decimal (a uint64 can pass 2^53; it is read and
//! written exactly); strings are escaped as Go escapes them; a list is sorted by id and
//! ends with the newline Go's `json.Encoder` writes.

use oxcd_api::etcdserverpb::Member;
use oxcd_go::json::json_string;

/// One member as etcd's peers read it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct EtcdMember {
    /// The member's id.
    pub id: u64,
    /// Its peer URLs.
    #[serde(rename = "peerURLs", default)]
    pub peer_urls: Option<Vec<String>>,
    /// A learner.
    #[serde(rename = "isLearner", default)]
    pub is_learner: bool,
    /// Its name, once it has started (or from the bootstrap configuration).
    #[serde(default)]
    pub name: String,
    /// Its client URLs, once it has published them.
    #[serde(rename = "clientURLs", default)]
    pub client_urls: Vec<String>,
}

/// `members` as etcd's `/members` answers: sorted by id, one JSON array, a newline.
pub fn list_json(members: &[Member]) -> String {
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by_key(|m| m.id);
    let items: Vec<String> = sorted.into_iter().map(member_json).collect();
    format!("[{}]\n", items.join(","))
}

/// One member's JSON.
fn member_json(m: &Member) -> String {
    let strings = |v: &[String]| {
        let quoted: Vec<String> = v.iter().map(|s| json_string(s)).collect();
        format!("[{}]", quoted.join(","))
    };
    let mut out = format!("{{\"id\":{}", m.id);
    // A nil slice in Go: `null`, as etcd writes a member of no peer URLs.
    if m.peer_ur_ls.is_empty() {
        out.push_str(",\"peerURLs\":null");
    } else {
        out.push_str(&format!(",\"peerURLs\":{}", strings(&m.peer_ur_ls)));
    }
    if m.is_learner {
        out.push_str(",\"isLearner\":true");
    }
    if !m.name.is_empty() {
        out.push_str(&format!(",\"name\":{}", json_string(&m.name)));
    }
    if !m.client_ur_ls.is_empty() {
        out.push_str(&format!(",\"clientURLs\":{}", strings(&m.client_ur_ls)));
    }
    out.push('}');
    out
}

/// The members in an etcd peer's `/members` answer.
pub fn parse_list(body: &[u8]) -> Result<Vec<EtcdMember>, serde_json::Error> {
    serde_json::from_slice(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: u64, name: &str, learner: bool, clients: &[&str]) -> Member {
        Member {
            id,
            name: name.into(),
            peer_ur_ls: vec![format!("http://127.0.0.1:{}", id % 65536)],
            client_ur_ls: clients.iter().map(|c| c.to_string()).collect(),
            is_learner: learner,
        }
    }

    #[test]
    fn writes_and_reads_etcds_shape() {
        let list = [
            member(0xfedcba9876543210, "", true, &[]),
            member(
                0x8e9e05c52164694d,
                "default",
                false,
                &["http://localhost:2379"],
            ),
        ];
        let json = list_json(&list);
        // etcd's shape (the integration test etcd_peer compares with a running etcd):
        // sorted by id, empty fields left out, a newline after the array.
        assert_eq!(
            json,
            "[{\"id\":10276657743932975437,\"peerURLs\":[\"http://127.0.0.1:26957\"],\
             \"name\":\"default\",\"clientURLs\":[\"http://localhost:2379\"]},\
             {\"id\":18364758544493064720,\"peerURLs\":[\"http://127.0.0.1:12816\"],\
             \"isLearner\":true}]\n"
        );
        let back = parse_list(json.as_bytes()).expect("parses");
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].id, 0x8e9e05c52164694d);
        assert_eq!(back[0].name, "default");
        assert!(back[1].is_learner);
        assert!(back[1].client_urls.is_empty());
    }
}
