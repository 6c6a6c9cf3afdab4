//! etcd's member list as its peers exchange it in JSON (`GET /members`, the answer of a
//! forwarded promotion): etcd 3.5.16's `membership.Member` marshalled by Go's
//! `encoding/json` (`server/etcdserver/api/membership/member.go`), its embedded structs
//! flattened: `{"id":<number>,"peerURLs":[...],"isLearner":true,"name":"...",
//! "clientURLs":[...]}`, the last three left out when empty or false.
//!
//! Invariants: a list is sorted by id and ends with the newline Go's `json.Encoder`
//! writes; each member is [`crate::domains::membership::etcd_json`]'s.

use oxcd_api::etcdserverpb::Member;
use oxcd_api::oxcdpb::MemberInfo;

pub use crate::domains::membership::etcd_json::EtcdMember;
use crate::domains::membership::etcd_json::member_json;

/// `members` as etcd's `/members` answers: sorted by id, one JSON array, a newline.
pub fn list_json(members: &[Member]) -> String {
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by_key(|m| m.id);
    let items: Vec<String> = sorted
        .into_iter()
        .map(|m| {
            let info = MemberInfo {
                id: m.id,
                name: m.name.clone(),
                peer_urls: m.peer_ur_ls.clone(),
                client_urls: m.client_ur_ls.clone(),
                is_learner: m.is_learner,
            };
            member_json(&info, &m.name, &m.client_ur_ls)
        })
        .collect();
    format!("[{}]\n", items.join(","))
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
        assert!(back[1].client_urls.is_none());
    }
}
