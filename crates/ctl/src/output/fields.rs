//! etcdctl's `fields` format: one `"Name" : value` line per field.

use oxcd_api::etcdserverpb::response_op::Response;
use oxcd_api::etcdserverpb::{
    DeleteRangeResponse, HashKvResponse, PutResponse, RangeResponse, ResponseHeader,
    StatusResponse, TxnResponse,
};
use oxcd_api::mvccpb::KeyValue;

use super::go_quote;

/// A response header.
pub fn header(out: &mut String, h: &Option<ResponseHeader>) {
    hdr(out, h)
}

fn hdr(out: &mut String, h: &Option<ResponseHeader>) {
    let h = (*h).unwrap_or_default();
    out.push_str(&format!(
        "\"ClusterID\" : {}\n\"MemberID\" : {}\n\"Revision\" : {}\n\"RaftTerm\" : {}\n",
        h.cluster_id, h.member_id, h.revision, h.raft_term
    ));
}

fn kv(out: &mut String, pfx: &str, kv: &KeyValue) {
    out.push_str(&format!("\"{pfx}Key\" : {}\n", go_quote(&kv.key)));
    out.push_str(&format!(
        "\"{pfx}CreateRevision\" : {}\n",
        kv.create_revision
    ));
    out.push_str(&format!("\"{pfx}ModRevision\" : {}\n", kv.mod_revision));
    out.push_str(&format!("\"{pfx}Version\" : {}\n", kv.version));
    out.push_str(&format!("\"{pfx}Value\" : {}\n", go_quote(&kv.value)));
    out.push_str(&format!("\"{pfx}Lease\" : {}\n", kv.lease));
}

/// A range response.
pub fn range(out: &mut String, r: &RangeResponse) {
    hdr(out, &r.header);
    for x in &r.kvs {
        kv(out, "", x);
    }
    out.push_str(&format!("\"More\" : {}\n\"Count\" : {}\n", r.more, r.count));
}

/// A put response.
pub fn put(out: &mut String, r: &PutResponse) {
    hdr(out, &r.header);
    if let Some(p) = &r.prev_kv {
        kv(out, "Prev", p);
    }
}

/// A delete response.
pub fn del(out: &mut String, r: &DeleteRangeResponse) {
    hdr(out, &r.header);
    out.push_str(&format!("\"Deleted\" : {}\n", r.deleted));
    for p in &r.prev_kvs {
        kv(out, "Prev", p);
    }
}

/// A txn response.
pub fn txn(out: &mut String, r: &TxnResponse) {
    hdr(out, &r.header);
    out.push_str(&format!("\"Succeeded\" : {}\n", r.succeeded));
    for op in &r.responses {
        match &op.response {
            Some(Response::ResponseRange(x)) => range(out, x),
            Some(Response::ResponsePut(x)) => put(out, x),
            Some(Response::ResponseDeleteRange(x)) => del(out, x),
            Some(Response::ResponseTxn(x)) => out.push_str(&format!(
                "\"Unknown\" : {}\n",
                go_quote(format!("{x:?}").as_bytes())
            )),
            None => {}
        }
    }
}

/// One endpoint's status.
pub fn status(out: &mut String, ep: &str, r: &StatusResponse) {
    hdr(out, &r.header);
    out.push_str(&format!(
        "\"Version\" : {}\n",
        go_quote(r.version.as_bytes())
    ));
    out.push_str(&format!(
        "\"DBSize\" : {}\n\"Leader\" : {}\n\"IsLearner\" : {}\n",
        r.db_size, r.leader, r.is_learner
    ));
    out.push_str(&format!(
        "\"RaftIndex\" : {}\n\"RaftTerm\" : {}\n\"RaftAppliedIndex\" : {}\n",
        r.raft_index, r.raft_term, r.raft_applied_index
    ));
    out.push_str(&format!("\"Errors\" : [{}]\n", r.errors.join(" ")));
    out.push_str(&format!("\"Endpoint\" : {}\n\n", go_quote(ep.as_bytes())));
}

/// One endpoint's HashKV.
pub fn hashkv(out: &mut String, ep: &str, r: &HashKvResponse) {
    hdr(out, &r.header);
    out.push_str(&format!(
        "\"Endpoint\" : {}\n\"Hash\" : {}\n\n",
        go_quote(ep.as_bytes()),
        r.hash
    ));
}
