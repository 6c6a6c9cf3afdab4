//! etcdctl's `simple` format: keys and values as raw bytes on their own lines (`\x..`
//! per byte with `--hex`), `OK` for puts, the count for deletes, `SUCCESS`/`FAILURE`
//! then each response for txns, one line per lease answer with its id as Go's `%016x`.

use oxcd_api::etcdserverpb::WatchResponse;
use oxcd_api::etcdserverpb::response_op::Response;
use oxcd_api::etcdserverpb::{
    DeleteRangeResponse, LeaseGrantResponse, LeaseKeepAliveResponse, LeaseLeasesResponse,
    LeaseTimeToLiveResponse, PutResponse, RangeResponse, TxnResponse,
};
use oxcd_api::mvccpb::KeyValue;
use oxcd_api::mvccpb::event::EventType;
use oxcd_go::hex::hex016;

/// The simple printer's options.
pub struct Simple {
    /// `--hex`.
    pub hex: bool,
    /// `--print-value-only`.
    pub value_only: bool,
}

impl Simple {
    fn line(&self, out: &mut Vec<u8>, b: &[u8]) {
        if self.hex {
            for x in b {
                out.extend_from_slice(format!("\\x{x:02x}").as_bytes());
            }
        } else {
            out.extend_from_slice(b);
        }
        out.push(b'\n');
    }

    fn kv(&self, out: &mut Vec<u8>, kv: &KeyValue, value_only: bool) {
        if !value_only {
            self.line(out, &kv.key);
        }
        self.line(out, &kv.value);
    }

    fn range_into(&self, out: &mut Vec<u8>, r: &RangeResponse) {
        for kv in &r.kvs {
            self.kv(out, kv, self.value_only);
        }
    }

    fn put_into(&self, out: &mut Vec<u8>, r: &PutResponse) {
        out.extend_from_slice(b"OK\n");
        if let Some(p) = &r.prev_kv {
            self.kv(out, p, false);
        }
    }

    fn del_into(&self, out: &mut Vec<u8>, r: &DeleteRangeResponse) {
        out.extend_from_slice(format!("{}\n", r.deleted).as_bytes());
        for p in &r.prev_kvs {
            self.kv(out, p, false);
        }
    }

    /// `watch`: each event's type, then its previous key-value if any, then its key-value.
    pub fn watch(&self, r: &WatchResponse) -> Vec<u8> {
        let mut out = Vec::new();
        for e in &r.events {
            out.extend_from_slice(event_type(e.r#type).as_bytes());
            out.push(b'\n');
            if let Some(prev) = &e.prev_kv {
                self.kv(&mut out, prev, self.value_only);
            }
            if let Some(kv) = &e.kv {
                self.kv(&mut out, kv, self.value_only);
            }
        }
        out
    }

    /// `get`.
    pub fn range(&self, r: &RangeResponse) -> Vec<u8> {
        let mut out = Vec::new();
        self.range_into(&mut out, r);
        out
    }

    /// `put`.
    pub fn put(&self, r: &PutResponse) -> Vec<u8> {
        let mut out = Vec::new();
        self.put_into(&mut out, r);
        out
    }

    /// `del`.
    pub fn del(&self, r: &DeleteRangeResponse) -> Vec<u8> {
        let mut out = Vec::new();
        self.del_into(&mut out, r);
        out
    }

    /// `txn`.
    pub fn txn(&self, r: &TxnResponse) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(if r.succeeded {
            b"SUCCESS\n"
        } else {
            b"FAILURE\n"
        });
        for op in &r.responses {
            out.push(b'\n');
            match &op.response {
                Some(Response::ResponseRange(x)) => self.range_into(&mut out, x),
                Some(Response::ResponsePut(x)) => self.put_into(&mut out, x),
                Some(Response::ResponseDeleteRange(x)) => self.del_into(&mut out, x),
                Some(Response::ResponseTxn(x)) => {
                    out.extend_from_slice(format!("unexpected response {x:?}\n").as_bytes())
                }
                None => {}
            }
        }
        out
    }
}

/// An event's type as Go prints it (`PUT`, `DELETE`).
pub fn event_type(t: i32) -> &'static str {
    match EventType::try_from(t) {
        Ok(EventType::Delete) => "DELETE",
        _ => "PUT",
    }
}

/// `lease grant`.
pub fn grant(r: &LeaseGrantResponse) -> String {
    format!("lease {} granted with TTL({}s)\n", hex016(r.id), r.ttl)
}

/// `lease revoke` of lease `id` (the id asked for: the answer has none).
pub fn revoke(id: i64) -> String {
    format!("lease {} revoked\n", hex016(id))
}

/// `lease keep-alive`: one answer.
pub fn keep_alive(r: &LeaseKeepAliveResponse) -> String {
    format!("lease {} keepalived with TTL({})\n", hex016(r.id), r.ttl)
}

/// `lease keep-alive` once the lease is gone (or no answer came in time).
pub fn keep_alive_end(id: i64) -> String {
    format!("lease {} expired or revoked.\n", hex016(id))
}

/// `lease timetolive`; `keys`: with the attached keys, as Go prints a `[]string`
/// (`[k1 k2]`, the keys' raw bytes).
pub fn time_to_live(r: &LeaseTimeToLiveResponse, keys: bool) -> Vec<u8> {
    if r.granted_ttl == 0 && r.ttl == -1 {
        return format!("lease {} already expired\n", hex016(r.id)).into_bytes();
    }
    let mut out = format!(
        "lease {} granted with TTL({}s), remaining({}s)",
        hex016(r.id),
        r.granted_ttl,
        r.ttl
    )
    .into_bytes();
    if keys {
        out.extend_from_slice(b", attached keys([");
        out.extend_from_slice(&r.keys.join(&b' '));
        out.extend_from_slice(b"])");
    }
    out.push(b'\n');
    out
}

/// `lease list`.
pub fn leases(r: &LeaseLeasesResponse) -> String {
    let mut out = format!("found {} leases\n", r.leases.len());
    for l in &r.leases {
        out.push_str(&hex016(l.id));
        out.push('\n');
    }
    out
}
