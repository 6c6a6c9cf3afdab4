//! Output formats, as etcdctl prints them: `simple`, `json`, `fields`, `table`,
//! `protobuf`. Every printer returns what goes to stdout and to stderr, so commands stay
//! testable and the exact bytes are decided here only.

pub mod fields;
pub mod json;
pub mod table;

use std::time::Duration;

use oxcd_api::etcdserverpb::response_op::Response;
use oxcd_api::etcdserverpb::{
    DeleteRangeResponse, PutResponse, RangeResponse, StatusResponse, TxnResponse,
};
use oxcd_api::etcdserverpb::{HashKvResponse, MoveLeaderResponse};
use oxcd_api::mvccpb::KeyValue;
use prost::Message;

use crate::humanize;

/// An output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Plain lines.
    Simple,
    /// Go-style JSON.
    Json,
    /// `"Name" : value` lines.
    Fields,
    /// Boxed table (only for some commands).
    Table,
    /// The response message's protobuf bytes.
    Protobuf,
}

impl Format {
    /// Parses `-w`.
    pub fn parse(s: &str) -> Result<Format, String> {
        Ok(match s {
            "simple" => Format::Simple,
            "json" => Format::Json,
            "fields" => Format::Fields,
            "table" => Format::Table,
            "protobuf" => Format::Protobuf,
            other => return Err(format!("unknown output format {other:?}")),
        })
    }
}

/// What a command prints.
#[derive(Debug, Default)]
pub struct Out {
    /// To stdout.
    pub stdout: Vec<u8>,
    /// To stderr.
    pub stderr: String,
}

impl Out {
    fn text(s: String) -> Out {
        Out {
            stdout: s.into_bytes(),
            stderr: String::new(),
        }
    }
}

/// The error etcdctl gives for table output where it has none.
pub const TABLE_UNSUPPORTED: &str = "table not supported as output format";

/// Go's `%q` for bytes: printable ASCII as is, common escapes, `\x..` otherwise.
pub fn go_quote(b: &[u8]) -> String {
    let mut out = String::from("\"");
    match std::str::from_utf8(b) {
        Ok(s) => {
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    '\n' => out.push_str("\\n"),
                    '\t' => out.push_str("\\t"),
                    '\r' => out.push_str("\\r"),
                    c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                        out.push_str(&format!("\\x{:02x}", c as u32))
                    }
                    c => out.push(c),
                }
            }
        }
        Err(_) => {
            for &x in b {
                match x {
                    b'"' => out.push_str("\\\""),
                    b'\\' => out.push_str("\\\\"),
                    0x20..=0x7e => out.push(x as char),
                    _ => out.push_str(&format!("\\x{x:02x}")),
                }
            }
        }
    }
    out.push('"');
    out
}

/// One endpoint's health, as `endpoint health` measures it.
#[derive(Debug, Clone)]
pub struct Health {
    /// The endpoint.
    pub endpoint: String,
    /// Whether it answered.
    pub healthy: bool,
    /// How long it took.
    pub took: Duration,
    /// Why not, if not.
    pub error: String,
}

/// Prints responses in one format.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    /// The format.
    pub format: Format,
    /// `--hex` (simple format only, as etcdctl).
    pub hex: bool,
    /// `--print-value-only`.
    pub value_only: bool,
}

impl Printer {
    fn bytes(&self, b: &[u8]) -> String {
        if self.hex {
            b.iter().map(|x| format!("\\x{x:02x}")).collect()
        } else {
            String::from_utf8_lossy(b).into_owned()
        }
    }

    fn simple_kv(&self, out: &mut String, kv: &KeyValue, value_only: bool) {
        if !value_only {
            out.push_str(&self.bytes(&kv.key));
            out.push('\n');
        }
        out.push_str(&self.bytes(&kv.value));
        out.push('\n');
    }

    fn simple_range(&self, out: &mut String, r: &RangeResponse) {
        for kv in &r.kvs {
            self.simple_kv(out, kv, self.value_only);
        }
    }

    fn simple_put(&self, out: &mut String, r: &PutResponse) {
        out.push_str("OK\n");
        if let Some(p) = &r.prev_kv {
            self.simple_kv(out, p, false);
        }
    }

    fn simple_del(&self, out: &mut String, r: &DeleteRangeResponse) {
        out.push_str(&format!("{}\n", r.deleted));
        for p in &r.prev_kvs {
            self.simple_kv(out, p, false);
        }
    }

    fn simple_txn(&self, out: &mut String, r: &TxnResponse) {
        out.push_str(if r.succeeded {
            "SUCCESS\n"
        } else {
            "FAILURE\n"
        });
        for op in &r.responses {
            out.push('\n');
            match &op.response {
                Some(Response::ResponseRange(x)) => self.simple_range(out, x),
                Some(Response::ResponsePut(x)) => self.simple_put(out, x),
                Some(Response::ResponseDeleteRange(x)) => self.simple_del(out, x),
                Some(Response::ResponseTxn(x)) => {
                    out.push_str(&format!("unexpected response {x:?}\n"))
                }
                None => {}
            }
        }
    }

    fn pb(msg: &impl Message) -> Out {
        Out {
            stdout: msg.encode_to_vec(),
            stderr: String::new(),
        }
    }

    /// `get`.
    pub fn range(&self, r: &RangeResponse) -> Result<Out, String> {
        let mut s = String::new();
        match self.format {
            Format::Simple => self.simple_range(&mut s, r),
            Format::Json => s = json::range(r) + "\n",
            Format::Fields => fields::range(&mut s, r),
            Format::Protobuf => return Ok(Self::pb(r)),
            Format::Table => return Err(TABLE_UNSUPPORTED.into()),
        }
        Ok(Out::text(s))
    }

    /// `put`.
    pub fn put(&self, r: &PutResponse) -> Result<Out, String> {
        let mut s = String::new();
        match self.format {
            Format::Simple => self.simple_put(&mut s, r),
            Format::Json => s = json::put(r) + "\n",
            Format::Fields => fields::put(&mut s, r),
            Format::Protobuf => return Ok(Self::pb(r)),
            Format::Table => return Err(TABLE_UNSUPPORTED.into()),
        }
        Ok(Out::text(s))
    }

    /// `del`.
    pub fn del(&self, r: &DeleteRangeResponse) -> Result<Out, String> {
        let mut s = String::new();
        match self.format {
            Format::Simple => self.simple_del(&mut s, r),
            Format::Json => s = json::del(r) + "\n",
            Format::Fields => fields::del(&mut s, r),
            Format::Protobuf => return Ok(Self::pb(r)),
            Format::Table => return Err(TABLE_UNSUPPORTED.into()),
        }
        Ok(Out::text(s))
    }

    /// `txn`.
    pub fn txn(&self, r: &TxnResponse) -> Result<Out, String> {
        let mut s = String::new();
        match self.format {
            Format::Simple => self.simple_txn(&mut s, r),
            Format::Json => s = json::txn(r) + "\n",
            Format::Fields => fields::txn(&mut s, r),
            Format::Protobuf => return Ok(Self::pb(r)),
            Format::Table => return Err(TABLE_UNSUPPORTED.into()),
        }
        Ok(Out::text(s))
    }

    /// `compaction` (every format prints the same line, as etcdctl).
    pub fn compaction(&self, rev: i64) -> Out {
        Out::text(format!("compacted revision {rev}\n"))
    }

    /// `endpoint status`.
    pub fn status(&self, list: &[(String, StatusResponse)]) -> Result<Out, String> {
        const HEADER: [&str; 10] = [
            "endpoint",
            "ID",
            "version",
            "db size",
            "is leader",
            "is learner",
            "raft term",
            "raft index",
            "raft applied index",
            "errors",
        ];
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|(ep, s)| {
                let id = s.header.as_ref().map(|h| h.member_id).unwrap_or(0);
                vec![
                    ep.clone(),
                    format!("{id:x}"),
                    s.version.clone(),
                    humanize::bytes(s.db_size.max(0) as u64),
                    (s.leader == id).to_string(),
                    s.is_learner.to_string(),
                    s.raft_term.to_string(),
                    s.raft_index.to_string(),
                    s.raft_applied_index.to_string(),
                    s.errors.join(", "),
                ]
            })
            .collect();
        let s = match self.format {
            Format::Simple => rows.iter().map(|r| r.join(", ") + "\n").collect(),
            Format::Table => table::render(&HEADER, &rows),
            Format::Json => {
                let items: Vec<String> = list
                    .iter()
                    .map(|(ep, st)| {
                        format!(
                            "{{\"Endpoint\":{},\"Status\":{}}}",
                            json::string(ep),
                            json::status(st)
                        )
                    })
                    .collect();
                format!("[{}]\n", items.join(","))
            }
            Format::Fields => {
                let mut s = String::new();
                for (ep, st) in list {
                    fields::status(&mut s, ep, st);
                }
                s
            }
            Format::Protobuf => return Err("protobuf is not supported for endpoint status".into()),
        };
        Ok(Out::text(s))
    }

    /// `move-leader`.
    pub fn move_leader(&self, from: u64, to: u64, r: &MoveLeaderResponse) -> Result<Out, String> {
        let s = match self.format {
            Format::Simple | Format::Table => {
                format!("Leadership transferred from {from:x} to {to:x}\n")
            }
            Format::Json => format!(
                "{}\n",
                json::Obj::default()
                    .raw("header", json::header(&r.header))
                    .done()
            ),
            Format::Fields => {
                let mut s = String::new();
                fields::header(&mut s, &r.header);
                s
            }
            Format::Protobuf => return Ok(Self::pb(r)),
        };
        Ok(Out::text(s))
    }

    /// `endpoint hashkv`.
    pub fn hashkv(&self, list: &[(String, HashKvResponse)]) -> Result<Out, String> {
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|(ep, h)| vec![ep.clone(), h.hash.to_string()])
            .collect();
        let s = match self.format {
            Format::Simple => rows.iter().map(|r| r.join(", ") + "\n").collect(),
            Format::Table => table::render(&["endpoint", "hash"], &rows),
            Format::Json => {
                let items: Vec<String> = list
                    .iter()
                    .map(|(ep, h)| {
                        format!(
                            "{{\"Endpoint\":{},\"HashKV\":{}}}",
                            json::string(ep),
                            json::hashkv(h)
                        )
                    })
                    .collect();
                format!("[{}]\n", items.join(","))
            }
            Format::Fields => {
                let mut s = String::new();
                for (ep, h) in list {
                    fields::hashkv(&mut s, ep, h);
                }
                s
            }
            Format::Protobuf => return Err("protobuf is not supported for endpoint hashkv".into()),
        };
        Ok(Out::text(s))
    }

    /// `endpoint health`; simple output goes to stderr, as etcdctl's does.
    pub fn health(&self, list: &[Health]) -> Result<Out, String> {
        let took = |h: &Health| humanize::go_duration(h.took);
        Ok(match self.format {
            Format::Simple => Out {
                stdout: Vec::new(),
                stderr: list
                    .iter()
                    .map(|h| {
                        if h.healthy {
                            format!(
                                "{} is healthy: successfully committed proposal: took = {}\n",
                                h.endpoint,
                                took(h)
                            )
                        } else {
                            format!(
                                "{} is unhealthy: failed to commit proposal: {}\n",
                                h.endpoint, h.error
                            )
                        }
                    })
                    .collect(),
            },
            Format::Table => {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|h| {
                        vec![
                            h.endpoint.clone(),
                            h.healthy.to_string(),
                            took(h),
                            h.error.clone(),
                        ]
                    })
                    .collect();
                Out::text(table::render(
                    &["endpoint", "health", "took", "error"],
                    &rows,
                ))
            }
            Format::Json => {
                let items: Vec<String> = list
                    .iter()
                    .map(|h| {
                        json::Obj::default()
                            .str("endpoint", &h.endpoint)
                            .bool("health", h.healthy)
                            .str("took", &took(h))
                            .str("error", &h.error)
                            .done()
                    })
                    .collect();
                Out::text(format!("[{}]\n", items.join(",")))
            }
            Format::Fields => Out::text(
                list.iter()
                    .map(|h| {
                        format!(
                            "\"Endpoint\" : {}\n\"Health\" : {}\n\"Took\" : {}\n\"Error\" : {}\n\n",
                            go_quote(h.endpoint.as_bytes()),
                            h.healthy,
                            took(h),
                            h.error
                        )
                    })
                    .collect(),
            ),
            Format::Protobuf => return Err("protobuf is not supported for endpoint health".into()),
        })
    }
}
