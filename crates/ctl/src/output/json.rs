//! JSON as etcdctl prints it: Go's encoding/json over etcd's message structs — fields in
//! declaration order, zero values omitted, int64 as numbers, bytes as base64, and
//! `oneof` responses wrapped as `{"Response":{"ResponsePut":{...}}}`.

use base64::Engine;
use oxcd_api::etcdserverpb::response_op::Response;
use oxcd_api::etcdserverpb::{
    DeleteRangeResponse, HashKvResponse, MoveLeaderResponse, PutResponse, RangeResponse,
    ResponseHeader, StatusResponse, TxnResponse,
};
use oxcd_api::mvccpb::KeyValue;

use crate::gofmt::json_string as quote;

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
        .done()
}

/// A move-leader response.
pub fn move_leader(r: &MoveLeaderResponse) -> String {
    Obj::default().raw("header", header(&r.header)).done()
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
