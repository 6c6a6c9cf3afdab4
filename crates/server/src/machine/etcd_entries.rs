//! etcd 3.5's normal raft log entries, read as oxcd's replicated operations, for a
//! member whose log is written in etcd's vocabulary (a member inside an etcd cluster,
//! issue 35). The rules are etcd 3.5.16's (`server/etcdserver/server.go`
//! `applyEntryNormal`, `apply.go` `Apply`, `apply_v2.go`; `docs/etcd-peer-design.md` §C.1):
//! - an entry is an `InternalRaftRequest` if it decodes as one, else a bare v2 `Request`
//!   (no tag tells them apart: a v2 request's method never decodes as the nested `v2`
//!   field), else it cannot be read and the member must stop, as etcd panics;
//! - the request id is the legacy `ID`, else the header's;
//! - of the op fields the first set in etcd's apply order is the request;
//! - the header's user and auth revision are the caller every check sees;
//! - the v2 requests 3.5 writes are its member attributes
//!   (`PUT /0/members/<id>/attributes`) and the cluster version (`PUT /0/version`);
//!   the other v2 requests only change etcd's v2 store, which oxcd does not keep;
//! - read-only requests (Range, AuthStatus, user and role gets and lists) change
//!   nothing on a member that did not propose them.
//!
//! [`write`] is the other way: a request this member proposes, as an etcd 3.5 member
//! would write it, so that etcd members apply it alike; what etcd has no entry for is
//! refused, never sent.
//!
//! Invariant: a pure function of the entry's bytes, so every member reads an entry alike.

use oxcd_api::etcdserverpb::{
    InternalAuthenticateRequest, InternalRaftRequest, Request as V2Request, RequestHeader,
};
use oxcd_api::membershippb;

use crate::domains::membership::etcd_json::{EtcdAttributes, attributes_json};
use oxcd_api::oxcdpb::internal_request::Op;
use oxcd_api::oxcdpb::{
    AuthenticateOp, ClusterVersionSet, DowngradeInfoSet, MemberAttributes, RequestAuth,
};
use prost::Message as _;

/// What an etcd entry asks of the apply path.
#[derive(Debug, Clone, PartialEq)]
pub enum EtcdEntry {
    /// A request applied as oxcd's op `op` for `caller`; `id` is the proposer's waiter.
    Request {
        /// The proposer's request id.
        id: u64,
        /// The operation.
        op: Op,
        /// Who asked, at which auth revision (None: no header).
        caller: Option<RequestAuth>,
    },
    /// A request that changes nothing oxcd keeps; `what` names it for the log.
    NoEffect {
        /// The proposer's request id.
        id: u64,
        /// What it was.
        what: &'static str,
    },
}

/// Why an etcd entry could not be read (etcd panics on each of these).
#[derive(Debug, thiserror::Error)]
pub enum UnreadableEntry {
    /// Neither an `InternalRaftRequest` nor a v2 request.
    #[error("neither an etcd request nor a v2 request: {0}")]
    Neither(#[from] prost::DecodeError),
    /// A v2 attributes write whose value is not etcd's attributes JSON.
    #[error("member attributes at {path}: {reason}")]
    Attributes {
        /// The v2 path.
        path: String,
        /// Why.
        reason: String,
    },
    /// An `InternalRaftRequest` with none of the requests etcd 3.5 applies.
    #[error("an etcd request with no operation (request id {0:x})")]
    NoOperation(u64),
}

/// An operation etcd 3.5 has no entry for (oxcd's own extensions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{0} cannot be proposed in a cluster of etcd members")]
pub struct NotInEtcdsVocabulary(pub &'static str);

/// The entry an etcd 3.5 member would propose for `op`, request `id`, made by `caller`:
/// its attributes and the cluster version as v2 PUTs (as 3.5 writes them), the rest as
/// an `InternalRaftRequest` with the header.
pub fn write(
    id: u64,
    op: Op,
    caller: Option<RequestAuth>,
) -> Result<Vec<u8>, NotInEtcdsVocabulary> {
    let mut r = InternalRaftRequest {
        header: Some(RequestHeader {
            id,
            username: caller
                .as_ref()
                .map(|c| c.username.clone())
                .unwrap_or_default(),
            auth_revision: caller.as_ref().map_or(0, |c| c.revision),
        }),
        ..Default::default()
    };
    match op {
        Op::MemberAttributes(a) => {
            let val = attributes_json(&a.name, &a.client_urls);
            return Ok(v2_put(
                id,
                &format!("/0/members/{:x}/attributes", a.id),
                val,
            ));
        }
        Op::ClusterVersionSet(v) => return Ok(v2_put(id, "/0/version", v.ver)),
        Op::Put(x) => r.put = Some(x),
        Op::DeleteRange(x) => r.delete_range = Some(x),
        Op::Txn(x) => r.txn = Some(x),
        Op::Compaction(x) => r.compaction = Some(x),
        Op::LeaseGrant(x) => r.lease_grant = Some(x),
        Op::LeaseRevoke(x) => r.lease_revoke = Some(x),
        Op::Alarm(x) => r.alarm = Some(x),
        Op::Authenticate(x) => {
            // etcd's header of an Authenticate holds the id only.
            r.header = Some(RequestHeader {
                id,
                ..Default::default()
            });
            r.authenticate = Some(InternalAuthenticateRequest {
                name: x.name,
                password: String::new(),
                simple_token: x.simple_token,
            });
        }
        Op::AuthEnable(x) => r.auth_enable = Some(x),
        Op::AuthDisable(x) => r.auth_disable = Some(x),
        Op::AuthUserAdd(x) => r.auth_user_add = Some(x),
        Op::AuthUserDelete(x) => r.auth_user_delete = Some(x),
        Op::AuthUserChangePassword(x) => r.auth_user_change_password = Some(x),
        Op::AuthUserGrantRole(x) => r.auth_user_grant_role = Some(x),
        Op::AuthUserRevokeRole(x) => r.auth_user_revoke_role = Some(x),
        Op::AuthRoleAdd(x) => r.auth_role_add = Some(x),
        Op::AuthRoleDelete(x) => r.auth_role_delete = Some(x),
        Op::AuthRoleGrantPermission(x) => r.auth_role_grant_permission = Some(x),
        Op::AuthRoleRevokePermission(x) => r.auth_role_revoke_permission = Some(x),
        Op::DowngradeInfoSet(x) => {
            r.downgrade_info_set = Some(membershippb::DowngradeInfoSetRequest {
                enabled: x.enabled,
                ver: x.ver,
            })
        }
        Op::LeaseRenew(_) => return Err(NotInEtcdsVocabulary("a replicated keepalive")),
        Op::LeaseExpire(_) => return Err(NotInEtcdsVocabulary("a conditional lease expiry")),
        Op::MemberUpdate(_) => {
            return Err(NotInEtcdsVocabulary("a member update as a normal entry"));
        }
    }
    Ok(r.encode_to_vec())
}

/// A v2 PUT as etcd 3.5 writes it: proto2 with every non-nullable field present.
fn v2_put(id: u64, path: &str, val: String) -> Vec<u8> {
    V2Request {
        id: Some(id),
        method: Some("PUT".into()),
        path: Some(path.into()),
        val: Some(val),
        dir: Some(false),
        prev_value: Some(String::new()),
        prev_index: Some(0),
        prev_exist: None,
        expiration: Some(0),
        wait: Some(false),
        since: Some(0),
        recursive: Some(false),
        sorted: Some(false),
        quorum: Some(false),
        time: Some(0),
        stream: Some(false),
        refresh: None,
    }
    .encode_to_vec()
}

/// Reads the normal entry `data` (not empty) as etcd 3.5 would apply it.
pub fn read(data: &[u8]) -> Result<EtcdEntry, UnreadableEntry> {
    match InternalRaftRequest::decode(data) {
        Ok(r) => internal(r),
        Err(_) => v2(V2Request::decode(data)?),
    }
}

/// An `InternalRaftRequest`.
fn internal(r: InternalRaftRequest) -> Result<EtcdEntry, UnreadableEntry> {
    let id = match r.id {
        0 => r.header.as_ref().map_or(0, |h| h.id),
        id => id,
    };
    if let Some(v2_request) = r.v2 {
        return v2(v2_request);
    }
    let caller = r.header.as_ref().map(|h| RequestAuth {
        username: h.username.clone(),
        revision: h.auth_revision,
    });
    let request = |op: Op| {
        Ok(EtcdEntry::Request {
            id,
            op,
            caller: caller.clone(),
        })
    };
    let no_effect = |what| Ok(EtcdEntry::NoEffect { id, what });
    // etcd's apply order (apply.go `Apply`): the first op set is the request.
    if r.range.is_some() {
        return no_effect("range");
    }
    if let Some(x) = r.put {
        return request(Op::Put(x));
    }
    if let Some(x) = r.delete_range {
        return request(Op::DeleteRange(x));
    }
    if let Some(x) = r.txn {
        return request(Op::Txn(x));
    }
    if let Some(x) = r.compaction {
        return request(Op::Compaction(x));
    }
    if let Some(x) = r.lease_grant {
        return request(Op::LeaseGrant(x));
    }
    if let Some(x) = r.lease_revoke {
        return request(Op::LeaseRevoke(x));
    }
    if r.lease_checkpoint.is_some() {
        // Proposed only under --experimental-enable-lease-checkpoint (off by
        // default); oxcd keeps remaining TTLs its own way.
        return no_effect("lease checkpoint");
    }
    if let Some(x) = r.alarm {
        return request(Op::Alarm(x));
    }
    if let Some(x) = r.authenticate {
        return request(Op::Authenticate(AuthenticateOp {
            name: x.name,
            simple_token: x.simple_token,
        }));
    }
    if let Some(x) = r.auth_enable {
        return request(Op::AuthEnable(x));
    }
    if let Some(x) = r.auth_disable {
        return request(Op::AuthDisable(x));
    }
    if r.auth_status.is_some() {
        return no_effect("auth status");
    }
    if let Some(x) = r.auth_user_add {
        return request(Op::AuthUserAdd(x));
    }
    if let Some(x) = r.auth_user_delete {
        return request(Op::AuthUserDelete(x));
    }
    if r.auth_user_get.is_some() {
        return no_effect("user get");
    }
    if let Some(x) = r.auth_user_change_password {
        return request(Op::AuthUserChangePassword(x));
    }
    if let Some(x) = r.auth_user_grant_role {
        return request(Op::AuthUserGrantRole(x));
    }
    if let Some(x) = r.auth_user_revoke_role {
        return request(Op::AuthUserRevokeRole(x));
    }
    if r.auth_user_list.is_some() {
        return no_effect("user list");
    }
    if r.auth_role_list.is_some() {
        return no_effect("role list");
    }
    if let Some(x) = r.auth_role_add {
        return request(Op::AuthRoleAdd(x));
    }
    if let Some(x) = r.auth_role_delete {
        return request(Op::AuthRoleDelete(x));
    }
    if r.auth_role_get.is_some() {
        return no_effect("role get");
    }
    if let Some(x) = r.auth_role_grant_permission {
        return request(Op::AuthRoleGrantPermission(x));
    }
    if let Some(x) = r.auth_role_revoke_permission {
        return request(Op::AuthRoleRevokePermission(x));
    }
    if let Some(x) = r.cluster_version_set {
        return request(Op::ClusterVersionSet(ClusterVersionSet { ver: x.ver }));
    }
    if let Some(x) = r.cluster_member_attr_set {
        let attrs = x.member_attributes.unwrap_or_default();
        return request(Op::MemberAttributes(MemberAttributes {
            id: x.member_id,
            name: attrs.name,
            client_urls: attrs.client_urls,
        }));
    }
    if let Some(x) = r.downgrade_info_set {
        return request(Op::DowngradeInfoSet(DowngradeInfoSet {
            enabled: x.enabled,
            ver: x.ver,
        }));
    }
    Err(UnreadableEntry::NoOperation(id))
}

/// A v2 request.
fn v2(r: V2Request) -> Result<EtcdEntry, UnreadableEntry> {
    let id = r.id();
    let path = r.path();
    let plain_put = r.method() == "PUT"
        && r.prev_exist.is_none()
        && r.prev_index() == 0
        && r.prev_value().is_empty();
    if !plain_put {
        return Ok(EtcdEntry::NoEffect {
            id,
            what: "v2 store request",
        });
    }
    if let Some(member) = attributes_member(path) {
        let attrs: EtcdAttributes =
            serde_json::from_str(r.val()).map_err(|e| UnreadableEntry::Attributes {
                path: path.to_string(),
                reason: e.to_string(),
            })?;
        return Ok(EtcdEntry::Request {
            id,
            op: Op::MemberAttributes(MemberAttributes {
                id: member,
                name: attrs.name,
                client_urls: attrs.client_urls.unwrap_or_default(),
            }),
            caller: None,
        });
    }
    if path == "/0/version" {
        return Ok(EtcdEntry::Request {
            id,
            op: Op::ClusterVersionSet(ClusterVersionSet {
                ver: r.val().to_string(),
            }),
            caller: None,
        });
    }
    Ok(EtcdEntry::NoEffect {
        id,
        what: "v2 store write",
    })
}

/// The member whose attributes `path` names, as etcd matches it
/// (`/0/members/[[:xdigit:]]{1,16}/attributes` anywhere in the path; the id is the
/// base of the path's directory).
fn attributes_member(path: &str) -> Option<u64> {
    let at = path.find("/0/members/")?;
    let rest = &path[at + "/0/members/".len()..];
    let digits = rest.chars().take_while(char::is_ascii_hexdigit).count();
    if !(1..=16).contains(&digits) || !rest[digits..].starts_with("/attributes") {
        return None;
    }
    let dir = path.rsplit_once('/')?.0;
    let base = dir.rsplit_once('/').map_or(dir, |(_, b)| b);
    u64::from_str_radix(base, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::etcdserverpb::{
        AuthRoleGetRequest, InternalAuthenticateRequest, PutRequest, RequestHeader,
    };

    fn put_entry() -> InternalRaftRequest {
        InternalRaftRequest {
            header: Some(RequestHeader {
                id: 0x390d_a221_604b_0401,
                username: "root".into(),
                auth_revision: 4,
            }),
            put: Some(PutRequest {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_put_is_a_put_for_its_caller_with_the_headers_id() {
        let e = read(&put_entry().encode_to_vec()).expect("reads");
        let EtcdEntry::Request { id, op, caller } = e else {
            panic!("a request: {e:?}")
        };
        assert_eq!(id, 0x390d_a221_604b_0401);
        assert!(matches!(op, Op::Put(p) if p.key == b"k"));
        assert_eq!(
            caller,
            Some(RequestAuth {
                username: "root".into(),
                revision: 4
            })
        );
    }

    #[test]
    fn the_first_op_in_etcds_order_wins_and_reads_change_nothing() {
        let mut both = put_entry();
        both.range = Some(Default::default());
        assert!(matches!(
            read(&both.encode_to_vec()),
            Ok(EtcdEntry::NoEffect { what: "range", .. })
        ));
        let get = InternalRaftRequest {
            auth_role_get: Some(AuthRoleGetRequest { role: "r".into() }),
            ..Default::default()
        };
        assert!(matches!(
            read(&get.encode_to_vec()),
            Ok(EtcdEntry::NoEffect { .. })
        ));
        let auth = InternalRaftRequest {
            authenticate: Some(InternalAuthenticateRequest {
                name: "alice".into(),
                password: String::new(),
                simple_token: "abcdefghijklmnop".into(),
            }),
            ..Default::default()
        };
        assert!(matches!(
            read(&auth.encode_to_vec()),
            Ok(EtcdEntry::Request { op: Op::Authenticate(a), .. }) if a.simple_token == "abcdefghijklmnop"
        ));
    }

    /// A v2 request as etcd 3.5.16 writes it.
    fn v2_put(path: &str, val: &str) -> Vec<u8> {
        super::v2_put(0x390d_a221_604b_0402, path, val.to_string())
    }

    #[test]
    fn what_is_written_reads_back_the_same() {
        let attrs = Op::MemberAttributes(MemberAttributes {
            id: 0xbdae_9bbc_11dd_390d,
            name: "n1".into(),
            client_urls: vec!["http://127.0.0.1:23791".into()],
        });
        let bytes = write(7, attrs.clone(), None).expect("writes");
        assert_eq!(
            read(&bytes).expect("reads"),
            EtcdEntry::Request {
                id: 7,
                op: attrs,
                caller: None
            }
        );
        let caller = Some(RequestAuth {
            username: "root".into(),
            revision: 4,
        });
        let put = put_entry().put.map(Op::Put).expect("a put");
        let bytes = write(8, put.clone(), caller.clone()).expect("writes");
        assert_eq!(
            read(&bytes).expect("reads"),
            EtcdEntry::Request {
                id: 8,
                op: put,
                caller
            }
        );
        assert!(write(9, Op::LeaseRenew(Default::default()), None).is_err());
    }

    #[test]
    fn etcds_v2_writes_are_its_attributes_and_cluster_version() {
        let attrs = v2_put(
            "/0/members/bdae9bbc11dd390d/attributes",
            r#"{"name":"n1","clientURLs":["http://127.0.0.1:23791"]}"#,
        );
        assert_eq!(
            read(&attrs).expect("reads"),
            EtcdEntry::Request {
                id: 0x390d_a221_604b_0402,
                op: Op::MemberAttributes(MemberAttributes {
                    id: 0xbdae_9bbc_11dd_390d,
                    name: "n1".into(),
                    client_urls: vec!["http://127.0.0.1:23791".into()],
                }),
                caller: None,
            }
        );
        assert!(matches!(
            read(&v2_put("/0/version", "3.5.0")),
            Ok(EtcdEntry::Request { op: Op::ClusterVersionSet(v), .. }) if v.ver == "3.5.0"
        ));
        assert!(matches!(
            read(&v2_put("/1/foo", "bar")),
            Ok(EtcdEntry::NoEffect { .. })
        ));
        assert!(matches!(
            read(&v2_put("/0/members/abc/attributes", "not json")),
            Err(UnreadableEntry::Attributes { .. })
        ));
    }

    #[test]
    fn bytes_that_are_neither_cannot_be_read() {
        assert!(matches!(
            read(&[0xff, 0xff, 0xff]),
            Err(UnreadableEntry::Neither(_))
        ));
        assert!(matches!(
            read(&InternalRaftRequest::default().encode_to_vec()),
            Err(UnreadableEntry::NoOperation(0))
        ));
    }

    #[test]
    fn attribute_paths_match_as_etcds_pattern_does() {
        assert_eq!(attributes_member("/0/members/1f/attributes"), Some(0x1f));
        assert_eq!(attributes_member("/0/members/1f/raftAttributes"), None);
        assert_eq!(attributes_member("/0/members//attributes"), None);
        assert_eq!(
            attributes_member("/0/members/0123456789abcdef0/attributes"),
            None
        );
    }
}
