//! etcd 3.5's conf change entries, read as oxcd's membership changes, for a log in
//! etcd's vocabulary (issue 35; `docs/etcd-peer-design.md` §B.3, §C.4). etcd writes
//! raftpb `ConfChange` v1 with its own type numbers (AddNode 0, RemoveNode 1,
//! UpdateNode 2, AddLearnerNode 3; raft-rs has AddLearnerNode at 2 and no UpdateNode)
//! and a JSON context: the member (`{"id":..,"peerURLs":[..],"isLearner":..,"name":..,
//! "clientURLs":[..]}`), with `"isPromote":true` for a promotion, none for a removal.
//!
//! Invariants: a pure function of the entry's bytes; what etcd panics on (a context
//! that is not JSON, a context naming another member than the change) cannot be read
//! and stops the member; raft-rs is handed its own numbering, never etcd's.

use oxcd_api::oxcdpb::MemberInfo;
use oxcd_raft::{ConfChange, ConfChangeType};

use super::Change;
use super::etcd_json::EtcdMember;

/// etcd's limit on learners (`membership.maxLearners`), which every member checks.
pub const MAX_LEARNERS: u32 = 1;

/// etcd's raftpb `ConfChange` with etcd's type numbers.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EtcdConfChange {
    /// The proposer's request id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// etcd's change type.
    #[prost(int32, tag = "2")]
    pub kind: i32,
    /// The member changed.
    #[prost(uint64, tag = "3")]
    pub node_id: u64,
    /// The JSON context.
    #[prost(bytes = "vec", tag = "4")]
    pub context: Vec<u8>,
}

/// etcd's `ConfChangeType` numbers.
pub mod kind {
    /// A voter joins (or, with `isPromote`, a learner becomes one).
    pub const ADD_NODE: i32 = 0;
    /// A member leaves.
    pub const REMOVE_NODE: i32 = 1;
    /// A member's peer URLs change (a no-op to raft).
    pub const UPDATE_NODE: i32 = 2;
    /// A learner joins.
    pub const ADD_LEARNER_NODE: i32 = 3;
}

/// A conf change as etcd proposed it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadChange {
    /// The proposer's request id (0: nobody waits, as for bootstrap entries).
    pub request_id: u64,
    /// The membership change.
    pub change: Change,
    /// What raft's configuration takes (None: an update of peer URLs).
    pub raft: Option<ConfChange>,
}

/// Why an etcd conf change could not be read (etcd panics on each).
#[derive(Debug, thiserror::Error)]
pub enum UnreadableChange {
    /// Not a raftpb ConfChange.
    #[error("not a conf change: {0}")]
    Protobuf(#[from] prost::DecodeError),
    /// A context that is not etcd's member JSON.
    #[error("its context is not a member: {0}")]
    Context(#[from] serde_json::Error),
    /// The context names another member than the change.
    #[error("the context names member {context:x}, the change {node:x}")]
    OtherMember {
        /// The change's node id.
        node: u64,
        /// The context's member id.
        context: u64,
    },
    /// A type etcd does not have.
    #[error("unknown conf change type {0}")]
    UnknownType(i32),
}

/// etcd's `ConfigChangeContext`: the member and whether it is a promotion.
#[derive(serde::Deserialize)]
struct Context {
    #[serde(flatten)]
    member: EtcdMember,
    #[serde(rename = "isPromote", default)]
    is_promote: bool,
}

/// The conf change entry an etcd 3.5 member would propose for a change of raft-rs type
/// `change` of member `node`, described by `ctx`, for waiter `request_id` (etcd's
/// `ConfChange.ID`): etcd's type number and its JSON context (the member; for a
/// promotion `{"id":..,"peerURLs":null,"isPromote":true}`; none for a removal).
pub fn write(
    request_id: u64,
    change: ConfChangeType,
    node: u64,
    ctx: &oxcd_api::oxcdpb::ConfChangeContext,
) -> Vec<u8> {
    let given = ctx.member.clone().unwrap_or_default();
    let member = |is_learner| {
        let m = MemberInfo {
            id: node,
            is_learner,
            ..given.clone()
        };
        super::etcd_json::member_json(&m, &m.name, &m.client_urls)
    };
    let (kind, context) = match change {
        ConfChangeType::RemoveNode => (kind::REMOVE_NODE, String::new()),
        ConfChangeType::AddNode if ctx.is_promote => {
            let bare = MemberInfo {
                id: node,
                ..Default::default()
            };
            let json = super::etcd_json::member_json(&bare, "", &[]);
            let promote = format!("{},\"isPromote\":true}}", &json[..json.len() - 1]);
            (kind::ADD_NODE, promote)
        }
        ConfChangeType::AddNode => (kind::ADD_NODE, member(false)),
        ConfChangeType::AddLearnerNode => (kind::ADD_LEARNER_NODE, member(true)),
    };
    prost::Message::encode_to_vec(&EtcdConfChange {
        id: request_id,
        kind,
        node_id: node,
        context: context.into_bytes(),
    })
}

/// etcd's UpdateNode conf change for `update`, as etcd 3.5's `UpdateMember` proposes it
/// (the member's id and new peer URLs as its JSON context); request `request_id`.
pub fn write_update(request_id: u64, update: &oxcd_api::oxcdpb::MemberUpdate) -> Vec<u8> {
    let member = MemberInfo {
        id: update.id,
        peer_urls: update.peer_urls.clone(),
        ..Default::default()
    };
    prost::Message::encode_to_vec(&EtcdConfChange {
        id: request_id,
        kind: kind::UPDATE_NODE,
        node_id: update.id,
        context: super::etcd_json::member_json(&member, "", &[]).into_bytes(),
    })
}

/// Reads the conf change entry `data` as etcd 3.5 applies it.
pub fn read(data: &[u8]) -> Result<ReadChange, UnreadableChange> {
    let cc: EtcdConfChange = prost::Message::decode(data)?;
    let id = cc.node_id;
    let raft = |t: ConfChangeType| {
        let mut r = ConfChange::default();
        r.set_change_type(t);
        r.node_id = id;
        Some(r)
    };
    if cc.kind == kind::REMOVE_NODE {
        return Ok(ReadChange {
            request_id: cc.id,
            change: Change::Remove { id },
            raft: raft(ConfChangeType::RemoveNode),
        });
    }
    if ![kind::ADD_NODE, kind::UPDATE_NODE, kind::ADD_LEARNER_NODE].contains(&cc.kind) {
        return Err(UnreadableChange::UnknownType(cc.kind));
    }
    let ctx: Context = serde_json::from_slice(&cc.context)?;
    if ctx.member.id != id {
        return Err(UnreadableChange::OtherMember {
            node: id,
            context: ctx.member.id,
        });
    }
    let is_promote = ctx.is_promote;
    let as_given = ctx.member.into_info();
    let peer_urls = as_given.peer_urls.clone();
    let member = |is_learner| MemberInfo {
        is_learner,
        ..as_given.clone()
    };
    let (change, raft) = match cc.kind {
        kind::ADD_NODE if is_promote => (Change::Promote { id }, raft(ConfChangeType::AddNode)),
        kind::ADD_NODE => (
            Change::Add {
                member: member(as_given.is_learner),
                max_learners: MAX_LEARNERS,
            },
            raft(ConfChangeType::AddNode),
        ),
        kind::ADD_LEARNER_NODE => (
            Change::Add {
                member: member(true),
                max_learners: MAX_LEARNERS,
            },
            raft(ConfChangeType::AddLearnerNode),
        ),
        _ => (
            Change::Update {
                id,
                peer_urls: peer_urls.clone(),
            },
            None,
        ),
    };
    Ok(ReadChange {
        request_id: cc.id,
        change,
        raft,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message as _;

    fn entry(id: u64, kind: i32, node: u64, context: &str) -> Vec<u8> {
        EtcdConfChange {
            id,
            kind,
            node_id: node,
            context: context.as_bytes().to_vec(),
        }
        .encode_to_vec()
    }

    #[test]
    fn etcds_changes_read_as_oxcds_with_raft_rs_numbering() {
        // A bootstrap entry as etcd 3.5 writes it: id 0, the member with its name.
        let boot = read(&entry(
            0,
            kind::ADD_NODE,
            10276657743932975437,
            r#"{"id":10276657743932975437,"peerURLs":["http://localhost:2380"],"name":"default"}"#,
        ))
        .expect("reads");
        assert_eq!(boot.request_id, 0);
        assert!(
            matches!(&boot.change, Change::Add { member, max_learners: 1 }
            if member.name == "default" && !member.is_learner && member.peer_urls == ["http://localhost:2380"])
        );
        assert_eq!(
            boot.raft.expect("raft").get_change_type(),
            ConfChangeType::AddNode
        );
        let learner = read(&entry(
            7,
            kind::ADD_LEARNER_NODE,
            5,
            r#"{"id":5,"peerURLs":["http://h:3"],"isLearner":true}"#,
        ))
        .expect("reads");
        assert_eq!(learner.request_id, 7);
        assert!(matches!(&learner.change, Change::Add { member, .. } if member.is_learner));
        assert_eq!(
            learner.raft.expect("raft").get_change_type(),
            ConfChangeType::AddLearnerNode
        );
        let promote = read(&entry(
            8,
            kind::ADD_NODE,
            5,
            r#"{"id":5,"peerURLs":null,"isPromote":true}"#,
        ))
        .expect("reads");
        assert_eq!(promote.change, Change::Promote { id: 5 });
        let update = read(&entry(
            9,
            kind::UPDATE_NODE,
            5,
            r#"{"id":5,"peerURLs":["http://h:4"]}"#,
        ))
        .expect("reads");
        assert_eq!(
            update.change,
            Change::Update {
                id: 5,
                peer_urls: vec!["http://h:4".into()]
            }
        );
        assert!(update.raft.is_none(), "an update leaves raft alone");
        let remove = read(&entry(10, kind::REMOVE_NODE, 5, "")).expect("reads");
        assert_eq!(remove.change, Change::Remove { id: 5 });
    }

    #[test]
    fn what_is_written_is_etcds_and_reads_back() {
        let ctx = |member: Option<MemberInfo>, is_promote| oxcd_api::oxcdpb::ConfChangeContext {
            member,
            is_promote,
            ..Default::default()
        };
        let learner = MemberInfo {
            id: 5,
            peer_urls: vec!["http://h:3".into()],
            ..Default::default()
        };
        let bytes = write(
            7,
            ConfChangeType::AddLearnerNode,
            5,
            &ctx(Some(learner), false),
        );
        let cc = EtcdConfChange::decode(bytes.as_slice()).expect("decodes");
        assert_eq!((cc.id, cc.kind, cc.node_id), (7, kind::ADD_LEARNER_NODE, 5));
        assert_eq!(
            String::from_utf8(cc.context).expect("utf8"),
            r#"{"id":5,"peerURLs":["http://h:3"],"isLearner":true}"#
        );
        let promote = write(8, ConfChangeType::AddNode, 5, &ctx(None, true));
        let cc = EtcdConfChange::decode(promote.as_slice()).expect("decodes");
        assert_eq!(
            String::from_utf8(cc.context).expect("utf8"),
            r#"{"id":5,"peerURLs":null,"isPromote":true}"#
        );
        assert_eq!(
            read(&promote).expect("reads").change,
            Change::Promote { id: 5 }
        );
        let remove = write(9, ConfChangeType::RemoveNode, 5, &ctx(None, false));
        assert_eq!(
            read(&remove).expect("reads").change,
            Change::Remove { id: 5 }
        );
    }

    #[test]
    fn what_etcd_panics_on_cannot_be_read() {
        assert!(matches!(
            read(&entry(1, kind::ADD_NODE, 5, "not json")),
            Err(UnreadableChange::Context(_))
        ));
        assert!(matches!(
            read(&entry(1, kind::ADD_NODE, 5, r#"{"id":6}"#)),
            Err(UnreadableChange::OtherMember {
                node: 5,
                context: 6
            })
        ));
        assert!(matches!(
            read(&entry(1, 9, 5, "")),
            Err(UnreadableChange::UnknownType(9))
        ));
    }
}
