//! The membership in etcd 3.5's v2 store, as its leader sends it in a raft snapshot's
//! data (`v2store.Save()`: the node tree as Go's JSON, `{"Root":{"Children":{"0":...}}}`
//! with each node's `Value` and `Children`). etcd 3.5 restores its members from here,
//! not from its backend: the backend's member rows keep the attributes they were added
//! with (3.5 does not update a member row that exists), so the published names and
//! client URLs are only current here.
//!
//! Read and written: `/0/members/<hex id>/raftAttributes`
//! (`{"peerURLs":[..],"isLearner":..}`), `/0/members/<hex id>/attributes`
//! (`{"name":..,"clientURLs":[..]}`), `/0/removed_members/<hex id>`, `/0/version`.
//!
//! Written as etcd 3.5's `store.Recovery` reads it back: every node with its `Path`, a
//! directory with `Children` (an object, even empty: Go tells a directory by a non-nil
//! map), a key with its `Value` and `Children` null, every `ExpireTime` Go's zero time
//! (a permanent node), and the keys' directory `/1` empty (etcd 3.5 refuses v2 content).
//! The fields `store.Recovery` would keep as they are (`WatcherHub`, `Stats`) are left
//! out, so the receiver keeps its own.

use std::collections::BTreeMap;

use oxcd_api::oxcdpb::{MemberAttributes, MemberInfo};

use crate::domains::membership::MembershipState;
use crate::domains::membership::etcd_json::EtcdAttributes;

/// A node of the v2 store.
#[derive(serde::Deserialize, Default)]
struct Node {
    #[serde(rename = "Value", default)]
    value: String,
    #[serde(rename = "Children", default)]
    children: Option<BTreeMap<String, Node>>,
}

impl Node {
    fn child(&self, name: &str) -> Option<&Node> {
        self.children.as_ref()?.get(name)
    }

    fn children(&self) -> impl Iterator<Item = (&String, &Node)> {
        self.children.iter().flatten()
    }
}

/// A node of the v2 store as written.
#[derive(serde::Serialize)]
struct NodeOut {
    #[serde(rename = "Path")]
    path: String,
    #[serde(rename = "CreatedIndex")]
    created_index: u64,
    #[serde(rename = "ModifiedIndex")]
    modified_index: u64,
    #[serde(rename = "ExpireTime")]
    expire_time: &'static str,
    #[serde(rename = "Value")]
    value: String,
    #[serde(rename = "Children")]
    children: Option<BTreeMap<String, NodeOut>>,
}

/// Go's zero `time.Time` as its JSON writes it: a node that never expires.
const NEVER: &str = "0001-01-01T00:00:00Z";

impl NodeOut {
    fn dir(path: String, children: BTreeMap<String, NodeOut>) -> NodeOut {
        NodeOut {
            path,
            created_index: 0,
            modified_index: 0,
            expire_time: NEVER,
            value: String::new(),
            children: Some(children),
        }
    }

    fn key(path: String, value: String) -> NodeOut {
        NodeOut {
            path,
            created_index: 0,
            modified_index: 0,
            expire_time: NEVER,
            value,
            children: None,
        }
    }
}

/// The store as written.
#[derive(serde::Serialize)]
struct StoreOut {
    #[serde(rename = "Root")]
    root: NodeOut,
    #[serde(rename = "CurrentIndex")]
    current_index: u64,
    #[serde(rename = "CurrentVersion")]
    current_version: u64,
}

/// The v2 store etcd 3.5 restores `members` (each with the name and client URLs it
/// published), `removed` and the cluster `version` from. `index` is the store's own
/// counter (etcd's counts v2 writes; only v2 clients, which 3.5 refuses, see it).
pub fn write(
    members: &[MemberInfo],
    removed: &[u64],
    version: Option<&str>,
    index: u64,
) -> Vec<u8> {
    use crate::domains::membership::etcd_json::{attributes_json, raft_attributes_json};
    let mut member_nodes = BTreeMap::new();
    for m in members {
        let dir = format!("/0/members/{:x}", m.id);
        let mut fields = BTreeMap::new();
        fields.insert(
            "raftAttributes".to_string(),
            NodeOut::key(format!("{dir}/raftAttributes"), raft_attributes_json(m)),
        );
        if !m.name.is_empty() || !m.client_urls.is_empty() {
            fields.insert(
                "attributes".to_string(),
                NodeOut::key(
                    format!("{dir}/attributes"),
                    attributes_json(&m.name, &m.client_urls),
                ),
            );
        }
        member_nodes.insert(format!("{:x}", m.id), NodeOut::dir(dir, fields));
    }
    let removed_nodes = removed
        .iter()
        .map(|id| {
            let hex = format!("{id:x}");
            let node = NodeOut::key(format!("/0/removed_members/{hex}"), "removed".into());
            (hex, node)
        })
        .collect();
    let mut zero = BTreeMap::new();
    zero.insert(
        "members".to_string(),
        NodeOut::dir("/0/members".into(), member_nodes),
    );
    zero.insert(
        "removed_members".to_string(),
        NodeOut::dir("/0/removed_members".into(), removed_nodes),
    );
    if let Some(v) = version {
        zero.insert(
            "version".to_string(),
            NodeOut::key("/0/version".into(), v.into()),
        );
    }
    let mut root = BTreeMap::new();
    root.insert("0".to_string(), NodeOut::dir("/0".into(), zero));
    root.insert("1".to_string(), NodeOut::dir("/1".into(), BTreeMap::new()));
    let store = StoreOut {
        root: NodeOut::dir("/".into(), root),
        current_index: index,
        current_version: 2,
    };
    // Plain structs of strings and numbers: serialising cannot fail.
    serde_json::to_vec(&store).unwrap_or_default()
}

/// The store.
#[derive(serde::Deserialize)]
struct Store {
    #[serde(rename = "Root")]
    root: Node,
}

/// `raftAttributes`.
#[derive(serde::Deserialize)]
struct RaftAttributes {
    #[serde(rename = "peerURLs", default)]
    peer_urls: Option<Vec<String>>,
    #[serde(rename = "isLearner", default)]
    is_learner: bool,
}

/// The cluster a v2 store describes.
#[derive(Debug, Default, PartialEq)]
pub struct V2Cluster {
    /// The members and the ids removed.
    pub membership: MembershipState,
    /// The members' published attributes.
    pub attributes: Vec<MemberAttributes>,
    /// The cluster version, once decided.
    pub version: Option<String>,
}

/// Why a snapshot's v2 store could not be read (etcd panics: "failed to restore v2
/// store").
#[derive(Debug, thiserror::Error)]
pub enum V2StoreError {
    /// Not the store's JSON, or a member's attributes are not JSON.
    #[error("v2 store: {0}")]
    Json(#[from] serde_json::Error),
    /// A member or removed member named by something that is not a hex id.
    #[error("v2 store: {0:?} is not a member id")]
    Id(String),
}

/// The cluster in the v2 store `data`.
pub fn read(data: &[u8]) -> Result<V2Cluster, V2StoreError> {
    let store: Store = serde_json::from_slice(data)?;
    let mut out = V2Cluster::default();
    let Some(zero) = store.root.child("0") else {
        return Ok(out);
    };
    let id = |hex: &str| u64::from_str_radix(hex, 16).map_err(|_| V2StoreError::Id(hex.into()));
    for (hex, node) in zero.child("members").into_iter().flat_map(Node::children) {
        let id = id(hex)?;
        let raft: RaftAttributes = match node.child("raftAttributes") {
            Some(n) => serde_json::from_str(&n.value)?,
            None => continue,
        };
        let attrs: Option<EtcdAttributes> = node
            .child("attributes")
            .map(|n| serde_json::from_str(&n.value))
            .transpose()?;
        let (name, client_urls) = attrs
            .map(|a| (a.name, a.client_urls.unwrap_or_default()))
            .unwrap_or_default();
        if !name.is_empty() || !client_urls.is_empty() {
            out.attributes.push(MemberAttributes {
                id,
                name: name.clone(),
                client_urls: client_urls.clone(),
            });
        }
        out.membership.members.insert(
            id,
            MemberInfo {
                id,
                name,
                peer_urls: raft.peer_urls.unwrap_or_default(),
                client_urls,
                is_learner: raft.is_learner,
            },
        );
    }
    for (hex, _) in zero
        .child("removed_members")
        .into_iter()
        .flat_map(Node::children)
    {
        out.membership.removed.insert(id(hex)?);
    }
    out.version = zero
        .child("version")
        .map(|n| n.value.clone())
        .filter(|v| !v.is_empty());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use oxcd_api::oxcdpb::MemberInfo;

    #[test]
    fn what_is_written_reads_back() {
        let members = [
            MemberInfo {
                id: 0xa,
                name: "n1".into(),
                peer_urls: vec!["http://h:1".into()],
                client_urls: vec!["http://h:2".into()],
                is_learner: false,
            },
            MemberInfo {
                id: 0xb,
                name: String::new(),
                peer_urls: vec!["http://h:3".into()],
                client_urls: Vec::new(),
                is_learner: true,
            },
        ];
        let data = super::write(&members, &[0xc], Some("3.5.0"), 7);
        let text = String::from_utf8(data.clone()).expect("utf8");
        assert!(text.contains(r#""Path":"/1","CreatedIndex":0,"ModifiedIndex":0,"ExpireTime":"0001-01-01T00:00:00Z","Value":"","Children":{}"#), "{text}");
        let c = super::read(&data).expect("reads");
        assert_eq!(c.membership.members.len(), 2);
        assert_eq!(c.membership.members[&0xa], members[0]);
        assert_eq!(c.membership.members[&0xb], members[1]);
        assert!(c.membership.removed.contains(&0xc));
        assert_eq!(c.version.as_deref(), Some("3.5.0"));
    }

    #[test]
    fn reads_the_members_their_attributes_the_removed_and_the_version() {
        // The shape of etcd 3.5's `v2store.Save()` (paths, values; other fields left out).
        let data = r#"{"Root":{"Path":"/","Children":{"0":{"Path":"/0","Children":{
            "members":{"Path":"/0/members","Children":{
              "a":{"Path":"/0/members/a","Children":{
                "raftAttributes":{"Path":"/0/members/a/raftAttributes","Value":"{\"peerURLs\":[\"http://h:1\"]}"},
                "attributes":{"Path":"/0/members/a/attributes","Value":"{\"name\":\"n1\",\"clientURLs\":[\"http://h:2\"]}"}}},
              "b":{"Path":"/0/members/b","Children":{
                "raftAttributes":{"Path":"/0/members/b/raftAttributes","Value":"{\"peerURLs\":[\"http://h:3\"],\"isLearner\":true}"}}}}},
            "removed_members":{"Path":"/0/removed_members","Children":{"c":{"Path":"/0/removed_members/c","Value":"removed"}}},
            "version":{"Path":"/0/version","Value":"3.5.0"}}},
          "1":{"Path":"/1"}}},"CurrentIndex":12}"#;
        let c = super::read(data.as_bytes()).expect("reads");
        assert_eq!(c.membership.members.len(), 2);
        assert_eq!(c.membership.members[&0xa].client_urls, ["http://h:2"]);
        assert_eq!(c.membership.members[&0xa].name, "n1");
        assert!(c.membership.members[&0xb].is_learner);
        assert_eq!(c.attributes.len(), 1);
        assert!(c.membership.removed.contains(&0xc));
        assert_eq!(c.version.as_deref(), Some("3.5.0"));
    }
}
