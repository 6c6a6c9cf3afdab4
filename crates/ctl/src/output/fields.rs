//! etcdctl's `fields` format: one `"Name" : value` line per field, bytes as Go's `%q`.

use std::fmt::Write as _;

use oxcd_api::etcdserverpb::response_op::Response;
use oxcd_api::etcdserverpb::{
    DeleteRangeResponse, HashKvResponse, LeaseGrantResponse, LeaseKeepAliveResponse,
    LeaseLeasesResponse, LeaseRevokeResponse, LeaseTimeToLiveResponse, PutResponse, RangeResponse,
    ResponseHeader, StatusResponse, TxnResponse, WatchResponse,
};
use oxcd_api::mvccpb::KeyValue;
use oxcd_go::quote::{quote, quote_str};

/// A response header.
pub fn header(h: &Option<ResponseHeader>) -> String {
    let h = (*h).unwrap_or_default();
    format!(
        "\"ClusterID\" : {}\n\"MemberID\" : {}\n\"Revision\" : {}\n\"RaftTerm\" : {}\n",
        h.cluster_id, h.member_id, h.revision, h.raft_term
    )
}

fn kv(out: &mut String, pfx: &str, kv: &KeyValue) {
    let _ = writeln!(out, "\"{pfx}Key\" : {}", quote(&kv.key));
    let _ = writeln!(out, "\"{pfx}CreateRevision\" : {}", kv.create_revision);
    let _ = writeln!(out, "\"{pfx}ModRevision\" : {}", kv.mod_revision);
    let _ = writeln!(out, "\"{pfx}Version\" : {}", kv.version);
    let _ = writeln!(out, "\"{pfx}Value\" : {}", quote(&kv.value));
    let _ = writeln!(out, "\"{pfx}Lease\" : {}", kv.lease);
}

/// A range response.
pub fn range(r: &RangeResponse) -> String {
    let mut out = header(&r.header);
    for x in &r.kvs {
        kv(&mut out, "", x);
    }
    let _ = write!(out, "\"More\" : {}\n\"Count\" : {}\n", r.more, r.count);
    out
}

/// A put response.
pub fn put(r: &PutResponse) -> String {
    let mut out = header(&r.header);
    if let Some(p) = &r.prev_kv {
        kv(&mut out, "Prev", p);
    }
    out
}

/// A delete response.
pub fn del(r: &DeleteRangeResponse) -> String {
    let mut out = header(&r.header);
    let _ = writeln!(out, "\"Deleted\" : {}", r.deleted);
    for p in &r.prev_kvs {
        kv(&mut out, "Prev", p);
    }
    out
}

/// A txn response.
pub fn txn(r: &TxnResponse) -> String {
    let mut out = header(&r.header);
    let _ = writeln!(out, "\"Succeeded\" : {}", r.succeeded);
    for op in &r.responses {
        match &op.response {
            Some(Response::ResponseRange(x)) => out.push_str(&range(x)),
            Some(Response::ResponsePut(x)) => out.push_str(&put(x)),
            Some(Response::ResponseDeleteRange(x)) => out.push_str(&del(x)),
            Some(Response::ResponseTxn(x)) => {
                let _ = writeln!(out, "\"Unknown\" : {}", quote_str(&format!("{x:?}")));
            }
            None => {}
        }
    }
    out
}

/// One endpoint's status.
pub fn status(ep: &str, r: &StatusResponse) -> String {
    let mut out = header(&r.header);
    let _ = writeln!(out, "\"Version\" : {}", quote_str(&r.version));
    let _ = write!(
        out,
        "\"DBSize\" : {}\n\"Leader\" : {}\n\"IsLearner\" : {}\n",
        r.db_size, r.leader, r.is_learner
    );
    let _ = write!(
        out,
        "\"RaftIndex\" : {}\n\"RaftTerm\" : {}\n\"RaftAppliedIndex\" : {}\n",
        r.raft_index, r.raft_term, r.raft_applied_index
    );
    let _ = writeln!(out, "\"Errors\" : [{}]", r.errors.join(" "));
    let _ = write!(out, "\"Endpoint\" : {}\n\n", quote_str(ep));
    out
}

/// One endpoint's HashKV (with etcdctl 3.6's `"HashRevision"` line when asked).
pub fn hashkv(ep: &str, r: &HashKvResponse, with_revision: bool) -> String {
    let mut out = header(&r.header);
    let _ = write!(
        out,
        "\"Endpoint\" : {}\n\"Hash\" : {}\n",
        quote_str(ep),
        r.hash
    );
    if with_revision {
        let _ = writeln!(out, "\"HashRevision\" : {}", r.hash_revision);
    }
    out.push('\n');
    out
}

/// A watch response: the header, then each event's type, previous key-value and key-value.
pub fn watch(r: &WatchResponse) -> String {
    let mut out = header(&r.header);
    for e in &r.events {
        let _ = writeln!(out, "\"Type\" : {}", super::simple::event_type(e.r#type));
        if let Some(prev) = &e.prev_kv {
            kv(&mut out, "Prev", prev);
        }
        if let Some(x) = &e.kv {
            kv(&mut out, "", x);
        }
    }
    out
}

/// `lease grant`.
pub fn grant(r: &LeaseGrantResponse) -> String {
    let mut out = header(&r.header);
    let _ = write!(out, "\"ID\" : {}\n\"TTL\" : {}\n", r.id, r.ttl);
    out
}

/// `lease revoke`: the header alone.
pub fn revoke(r: &LeaseRevokeResponse) -> String {
    header(&r.header)
}

/// `lease keep-alive`: one answer.
pub fn keep_alive(r: &LeaseKeepAliveResponse) -> String {
    let mut out = header(&r.header);
    let _ = write!(out, "\"ID\" : {}\n\"TTL\" : {}\n", r.id, r.ttl);
    out
}

/// `lease timetolive`: the lease, then each attached key.
pub fn time_to_live(r: &LeaseTimeToLiveResponse) -> String {
    let mut out = header(&r.header);
    let _ = write!(
        out,
        "\"ID\" : {}\n\"TTL\" : {}\n\"GrantedTTL\" : {}\n",
        r.id, r.ttl, r.granted_ttl
    );
    for k in &r.keys {
        let _ = writeln!(out, "\"Key\" : {}", quote(k));
    }
    out
}

/// `lease list`: each lease's id.
pub fn leases(r: &LeaseLeasesResponse) -> String {
    let mut out = header(&r.header);
    for l in &r.leases {
        let _ = writeln!(out, "\"ID\" : {}", l.id);
    }
    out
}
