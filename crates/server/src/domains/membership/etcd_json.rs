//! etcd's JSON of a member and of its published attributes (etcd 3.5.16
//! `server/etcdserver/api/membership/member.go`: `Member` with its embedded
//! `RaftAttributes` and `Attributes`, marshalled by Go's `encoding/json`):
//! `{"id":<number>,"peerURLs":[..],"isLearner":true,"name":"..","clientURLs":[..]}`, the
//! last three left out when empty or false; the attributes alone are
//! `{"name":"..","clientURLs":[..]}`. etcd writes these in `/members` answers, in its
//! backend's `members` bucket, in conf change contexts and in its v2 store.
//!
//! Invariants: ids are decimal JSON numbers read and written exactly (a uint64 can pass
//! 2^53); strings are escaped as Go escapes them; a member of no peer URLs has
//! `"peerURLs":null`, as Go writes a nil slice.

use oxcd_api::oxcdpb::MemberInfo;
use oxcd_go::json::json_string;

/// A member as etcd writes it.
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
    pub client_urls: Option<Vec<String>>,
}

impl EtcdMember {
    /// The member as oxcd keeps it.
    pub fn into_info(self) -> MemberInfo {
        MemberInfo {
            id: self.id,
            name: self.name,
            peer_urls: self.peer_urls.unwrap_or_default(),
            client_urls: self.client_urls.unwrap_or_default(),
            is_learner: self.is_learner,
        }
    }
}

/// A member's published attributes as etcd writes them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct EtcdAttributes {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its client URLs.
    #[serde(rename = "clientURLs", default)]
    pub client_urls: Option<Vec<String>>,
}

/// A list of strings as a JSON array.
fn strings(v: &[String]) -> String {
    let quoted: Vec<String> = v.iter().map(|s| json_string(s)).collect();
    format!("[{}]", quoted.join(","))
}

/// The attributes' fields (`"name":..,"clientURLs":[..]`, each left out when empty),
/// after `out`'s text, comma-separated from what is there.
fn push_attributes(out: &mut String, name: &str, client_urls: &[String]) {
    let sep = |out: &mut String| {
        if !out.ends_with('{') {
            out.push(',');
        }
    };
    if !name.is_empty() {
        sep(out);
        out.push_str(&format!("\"name\":{}", json_string(name)));
    }
    if !client_urls.is_empty() {
        sep(out);
        out.push_str(&format!("\"clientURLs\":{}", strings(client_urls)));
    }
}

/// `m` as etcd writes a member, with `name` and `client_urls` as its attributes.
pub fn member_json(m: &MemberInfo, name: &str, client_urls: &[String]) -> String {
    let mut out = format!("{{\"id\":{}", m.id);
    push_raft_attributes(&mut out, m);
    push_attributes(&mut out, name, client_urls);
    out.push('}');
    out
}

/// `m`'s raft attributes as etcd writes them alone (its v2 store's `raftAttributes`):
/// `{"peerURLs":[..],"isLearner":true}`.
pub fn raft_attributes_json(m: &MemberInfo) -> String {
    let mut out = String::from("{");
    push_raft_attributes(&mut out, m);
    out.push('}');
    out
}

/// The raft attributes' fields (`"peerURLs":[..]`, `"isLearner":true` when a learner),
/// after `out`'s text, comma-separated from what is there.
fn push_raft_attributes(out: &mut String, m: &MemberInfo) {
    if !out.ends_with('{') {
        out.push(',');
    }
    if m.peer_urls.is_empty() {
        out.push_str("\"peerURLs\":null");
    } else {
        out.push_str(&format!("\"peerURLs\":{}", strings(&m.peer_urls)));
    }
    if m.is_learner {
        out.push_str(",\"isLearner\":true");
    }
}

/// Attributes as etcd writes them.
pub fn attributes_json(name: &str, client_urls: &[String]) -> String {
    let mut out = String::from("{");
    push_attributes(&mut out, name, client_urls);
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_etcds_shapes() {
        let m = MemberInfo {
            id: 13668033151171901709,
            name: "s1".into(),
            peer_urls: vec!["http://127.0.0.1:23801".into()],
            client_urls: vec![],
            is_learner: true,
        };
        assert_eq!(
            member_json(&m, "s1", &[]),
            r#"{"id":13668033151171901709,"peerURLs":["http://127.0.0.1:23801"],"isLearner":true,"name":"s1"}"#
        );
        assert_eq!(attributes_json("", &[]), "{}");
        assert_eq!(
            attributes_json("n1", &["http://h:1".into()]),
            r#"{"name":"n1","clientURLs":["http://h:1"]}"#
        );
        assert_eq!(
            attributes_json("", &["http://h:1".into()]),
            r#"{"clientURLs":["http://h:1"]}"#
        );
    }
}
