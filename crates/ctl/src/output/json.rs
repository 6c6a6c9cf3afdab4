//! JSON as etcdctl prints it: Go's encoding/json over etcd's message structs — fields in
//! declaration order, zero values omitted, int64 as numbers, bytes as base64, and
//! `oneof` responses wrapped as `{"Response":{"ResponsePut":{...}}}`. Lease answers are
//! clientv3's wrappers instead: the header's fields inline, Go's field names or the
//! wrapper's own, every field present.

use base64::Engine;
use oxcd_api::etcdserverpb::response_op::Response;
use oxcd_api::etcdserverpb::{
    DeleteRangeResponse, HashKvResponse, LeaseGrantResponse, LeaseKeepAliveResponse,
    LeaseLeasesResponse, LeaseRevokeResponse, LeaseTimeToLiveResponse, MoveLeaderResponse,
    PutResponse, RangeResponse, ResponseHeader, StatusResponse, TxnResponse,
};
use oxcd_api::mvccpb::KeyValue;
use oxcd_go::json::json_string as quote;

/// Builds one JSON object, skipping zero values like Go's `omitempty`.
#[derive(Default)]
pub struct Obj(Vec<String>);

impl Obj {
    /// A number, omitted when zero.
    pub fn num(mut self, k: &str, v: impl Into<i128>) -> Obj {
        let v = v.into();
        if v != 0 {
            self.0.push(format!("{}:{v}", quote(k)));
        }
        self
    }
    /// A boolean, omitted when false.
    pub fn bool(mut self, k: &str, v: bool) -> Obj {
        if v {
            self.0.push(format!("{}:true", quote(k)));
        }
        self
    }
    /// A string, omitted when empty.
    pub fn str(mut self, k: &str, v: &str) -> Obj {
        if !v.is_empty() {
            self.0.push(format!("{}:{}", quote(k), quote(v)));
        }
        self
    }
    /// Bytes as base64, omitted when empty.
    pub fn bytes(mut self, k: &str, v: &[u8]) -> Obj {
        if !v.is_empty() {
            let b = base64::engine::general_purpose::STANDARD.encode(v);
            self.0.push(format!("{}:{}", quote(k), quote(&b)));
        }
        self
    }
    /// A number, always present.
    pub fn int(self, k: &str, v: impl Into<i128>) -> Obj {
        self.raw(k, Some(v.into().to_string()))
    }
    /// A nested value, omitted when `None`.
    pub fn raw(mut self, k: &str, v: Option<String>) -> Obj {
        if let Some(v) = v {
            self.0.push(format!("{}:{v}", quote(k)));
        }
        self
    }
    /// A list, omitted when empty.
    pub fn list(self, k: &str, items: Vec<String>) -> Obj {
        let v = if items.is_empty() {
            None
        } else {
            Some(format!("[{}]", items.join(",")))
        };
        self.raw(k, v)
    }
    /// The object's text.
    pub fn done(self) -> String {
        format!("{{{}}}", self.0.join(","))
    }
}

/// A response header.
pub fn header(h: &Option<ResponseHeader>) -> Option<String> {
    h.as_ref().map(|h| {
        Obj::default()
            .num("cluster_id", h.cluster_id)
            .num("member_id", h.member_id)
            .num("revision", h.revision)
            .num("raft_term", h.raft_term)
            .done()
    })
}

/// A header embedded in one of clientv3's lease answers: its fields promoted into the
/// answer's object (still omitted when zero).
fn embedded_header(h: &Option<ResponseHeader>) -> Obj {
    let h = (*h).unwrap_or_default();
    Obj::default()
        .num("cluster_id", h.cluster_id)
        .num("member_id", h.member_id)
        .num("revision", h.revision)
        .num("raft_term", h.raft_term)
}

/// A key-value.
pub fn kv(kv: &KeyValue) -> String {
    Obj::default()
        .bytes("key", &kv.key)
        .num("create_revision", kv.create_revision)
        .num("mod_revision", kv.mod_revision)
        .num("version", kv.version)
        .bytes("value", &kv.value)
        .num("lease", kv.lease)
        .done()
}

/// A range response.
pub fn range(r: &RangeResponse) -> String {
    Obj::default()
        .raw("header", header(&r.header))
        .list("kvs", r.kvs.iter().map(kv).collect())
        .bool("more", r.more)
        .num("count", r.count)
        .done()
}

/// A put response.
pub fn put(r: &PutResponse) -> String {
    Obj::default()
        .raw("header", header(&r.header))
        .raw("prev_kv", r.prev_kv.as_ref().map(kv))
        .done()
}

/// A delete response.
pub fn del(r: &DeleteRangeResponse) -> String {
    Obj::default()
        .raw("header", header(&r.header))
        .num("deleted", r.deleted)
        .list("prev_kvs", r.prev_kvs.iter().map(kv).collect())
        .done()
}

/// A txn response.
pub fn txn(r: &TxnResponse) -> String {
    let responses = r
        .responses
        .iter()
        .map(|op| {
            let inner = match &op.response {
                Some(Response::ResponseRange(x)) => {
                    Some(format!("{{\"ResponseRange\":{}}}", range(x)))
                }
                Some(Response::ResponsePut(x)) => Some(format!("{{\"ResponsePut\":{}}}", put(x))),
                Some(Response::ResponseDeleteRange(x)) => {
                    Some(format!("{{\"ResponseDeleteRange\":{}}}", del(x)))
                }
                Some(Response::ResponseTxn(x)) => Some(format!("{{\"ResponseTxn\":{}}}", txn(x))),
                None => None,
            };
            Obj::default().raw("Response", inner).done()
        })
        .collect();
    Obj::default()
        .raw("header", header(&r.header))
        .bool("succeeded", r.succeeded)
        .list("responses", responses)
        .done()
}

/// A status response.
pub fn status(r: &StatusResponse) -> String {
    Obj::default()
        .raw("header", header(&r.header))
        .str("version", &r.version)
        .num("dbSize", r.db_size)
        .num("leader", r.leader)
        .num("raftIndex", r.raft_index)
        .num("raftTerm", r.raft_term)
        .num("raftAppliedIndex", r.raft_applied_index)
        .list("errors", r.errors.iter().map(|e| quote(e)).collect())
        .num("dbSizeInUse", r.db_size_in_use)
        .bool("isLearner", r.is_learner)
        .done()
}

/// A HashKV response.
pub fn hashkv(r: &HashKvResponse) -> String {
    Obj::default()
        .raw("header", header(&r.header))
        .num("hash", r.hash)
        .num("compact_revision", r.compact_revision)
        .num("hash_revision", r.hash_revision)
        .done()
}

/// A move-leader response.
pub fn move_leader(r: &MoveLeaderResponse) -> String {
    Obj::default().raw("header", header(&r.header)).done()
}

/// A Downgrade answer.
pub fn downgrade(r: &oxcd_api::etcdserverpb::DowngradeResponse) -> String {
    Obj::default()
        .raw("header", header(&r.header))
        .str("version", &r.version)
        .done()
}

/// A list of `{"Endpoint":..., "<field>":...}`, as `endpoint status` and `hashkv` print.
pub fn endpoint_list<T>(list: &[(String, T)], field: &str, f: fn(&T) -> String) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|(ep, r)| format!("{{\"Endpoint\":{},\"{field}\":{}}}", quote(ep), f(r)))
        .collect();
    format!("[{}]\n", items.join(","))
}

/// A watch response as clientv3's `WatchResponse` marshals: Go field names, every field
/// present; the header and events as their protobuf JSON.
pub fn watch(r: &oxcd_api::etcdserverpb::WatchResponse) -> String {
    let events: Vec<String> = r
        .events
        .iter()
        .map(|e| {
            Obj::default()
                .num("type", e.r#type)
                .raw("kv", e.kv.as_ref().map(kv))
                .raw("prev_kv", e.prev_kv.as_ref().map(kv))
                .done()
        })
        .collect();
    format!(
        "{{\"Header\":{},\"Events\":[{}],\"CompactRevision\":{},\"Canceled\":{},\"Created\":{}}}",
        header(&r.header).unwrap_or_else(|| "{}".into()),
        events.join(","),
        r.compact_revision,
        r.canceled,
        r.created
    )
}

/// `lease grant`: clientv3's `LeaseGrantResponse`.
pub fn grant(r: &LeaseGrantResponse) -> String {
    embedded_header(&r.header)
        .int("ID", r.id)
        .int("TTL", r.ttl)
        .raw("Error", Some(quote(&r.error)))
        .done()
}

/// `lease revoke`: the protobuf message itself.
pub fn revoke(r: &LeaseRevokeResponse) -> String {
    Obj::default().raw("header", header(&r.header)).done()
}

/// `lease keep-alive`: clientv3's `LeaseKeepAliveResponse`.
pub fn keep_alive(r: &LeaseKeepAliveResponse) -> String {
    embedded_header(&r.header)
        .int("ID", r.id)
        .int("TTL", r.ttl)
        .done()
}

/// `lease timetolive`: clientv3's `LeaseTimeToLiveResponse` (`"keys":null` without keys).
pub fn time_to_live(r: &LeaseTimeToLiveResponse) -> String {
    let keys = if r.keys.is_empty() {
        "null".to_string()
    } else {
        let b64 = |k: &Vec<u8>| quote(&base64::engine::general_purpose::STANDARD.encode(k));
        format!("[{}]", r.keys.iter().map(b64).collect::<Vec<_>>().join(","))
    };
    embedded_header(&r.header)
        .int("id", r.id)
        .int("ttl", r.ttl)
        .int("granted-ttl", r.granted_ttl)
        .raw("keys", Some(keys))
        .done()
}

/// `lease list`: clientv3's `LeaseLeasesResponse` (`"leases":[]` when there are none).
pub fn leases(r: &LeaseLeasesResponse) -> String {
    let items: Vec<String> = r
        .leases
        .iter()
        .map(|l| Obj::default().int("id", l.id).done())
        .collect();
    embedded_header(&r.header)
        .raw("leases", Some(format!("[{}]", items.join(","))))
        .done()
}
