//! Output formats, as etcdctl prints them: `simple`, `json`, `fields`, `table`,
//! `protobuf`. Every printer returns what goes to stdout and to stderr, so commands stay
//! testable and the exact bytes are decided here only. A format etcdctl lacks for a
//! response is refused with its message (`table not supported as output format`).

pub mod auth;
pub mod fields;
pub mod json;
mod lease;
mod member;
pub mod simple;
pub mod table;

use std::time::Duration;

use oxcd_api::etcdserverpb::{
    DeleteRangeResponse, HashKvResponse, MoveLeaderResponse, PutResponse, RangeResponse,
    StatusResponse, TxnResponse,
};
use prost::Message;

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
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "simple" => Format::Simple,
            "json" => Format::Json,
            "fields" => Format::Fields,
            "table" => Format::Table,
            "protobuf" => Format::Protobuf,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Format::Simple => "simple",
            Format::Json => "json",
            Format::Fields => "fields",
            Format::Table => "table",
            Format::Protobuf => "protobuf",
        }
    }

    /// etcdctl's refusal of this format for a response it cannot print.
    pub fn unsupported(self) -> String {
        format!("{} not supported as output format", self.name())
    }
}

/// What a command prints: writes to stdout and stderr, in the order etcdctl makes them.
#[derive(Debug, Default)]
pub struct Out {
    parts: Vec<(Stream, Vec<u8>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

impl Out {
    /// Text for stdout.
    pub fn text(s: String) -> Out {
        Out::bytes(s.into_bytes())
    }

    /// Bytes for stdout.
    pub fn bytes(b: Vec<u8>) -> Out {
        Out {
            parts: vec![(Stream::Stdout, b)],
        }
    }

    /// Text for stderr.
    pub fn err(s: impl Into<String>) -> Out {
        Out {
            parts: vec![(Stream::Stderr, s.into().into_bytes())],
        }
    }

    /// This, then `next`.
    pub fn then(mut self, next: Out) -> Out {
        self.parts.extend(next.parts);
        self
    }

    #[cfg(test)]
    fn collect(&self, stream: Stream) -> Vec<u8> {
        self.parts
            .iter()
            .filter(|(s, _)| *s == stream)
            .flat_map(|(_, b)| b.iter().copied())
            .collect()
    }

    /// Everything for stdout (for tests: the program writes with [`Out::write`]).
    #[cfg(test)]
    pub fn stdout(&self) -> Vec<u8> {
        self.collect(Stream::Stdout)
    }

    /// Everything for stderr (for tests).
    #[cfg(test)]
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.collect(Stream::Stderr)).into_owned()
    }

    /// Writes it out, in order.
    pub fn write(&self) {
        use std::io::Write;
        for (s, b) in &self.parts {
            let _ = match s {
                Stream::Stdout => {
                    let mut o = std::io::stdout();
                    o.write_all(b).and_then(|_| o.flush())
                }
                Stream::Stderr => std::io::stderr().write_all(b),
            };
        }
    }
}

/// One endpoint's health, as `endpoint health` measures it.
#[derive(Debug, Clone)]
pub struct Health {
    /// The endpoint.
    pub endpoint: String,
    /// Whether it answered.
    pub healthy: bool,
    /// How long it took; `None` when no client could be made (etcdctl prints "").
    pub took: Option<Duration>,
    /// Why not, if not.
    pub error: String,
}

impl Health {
    fn took(&self) -> String {
        self.took
            .map(oxcd_go::duration::format_std)
            .unwrap_or_default()
    }
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

fn pb(msg: &impl Message) -> Out {
    Out::bytes(msg.encode_to_vec())
}

impl Printer {
    fn simple(&self) -> simple::Simple {
        simple::Simple {
            hex: self.hex,
            value_only: self.value_only,
        }
    }

    /// `get`.
    pub fn range(&self, r: &RangeResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::bytes(self.simple().range(r)),
            Format::Json => Out::text(json::range(r) + "\n"),
            Format::Fields => Out::text(fields::range(r)),
            Format::Protobuf => pb(r),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `watch`: one response.
    pub fn watch(&self, r: &oxcd_api::etcdserverpb::WatchResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::bytes(self.simple().watch(r)),
            Format::Json => Out::text(json::watch(r) + "\n"),
            Format::Fields => Out::text(fields::watch(r)),
            // What clientv3 keeps of the response, as etcdctl re-encodes it.
            Format::Protobuf => pb(&oxcd_api::etcdserverpb::WatchResponse {
                header: Some(r.header.unwrap_or_default()),
                events: r.events.clone(),
                compact_revision: r.compact_revision,
                canceled: r.canceled,
                created: r.created,
                ..Default::default()
            }),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `put`.
    pub fn put(&self, r: &PutResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::bytes(self.simple().put(r)),
            Format::Json => Out::text(json::put(r) + "\n"),
            Format::Fields => Out::text(fields::put(r)),
            Format::Protobuf => pb(r),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `del`.
    pub fn del(&self, r: &DeleteRangeResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::bytes(self.simple().del(r)),
            Format::Json => Out::text(json::del(r) + "\n"),
            Format::Fields => Out::text(fields::del(r)),
            Format::Protobuf => pb(r),
            Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `txn`.
    pub fn txn(&self, r: &TxnResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::bytes(self.simple().txn(r)),
            Format::Json => Out::text(json::txn(r) + "\n"),
            Format::Fields => Out::text(fields::txn(r)),
            Format::Protobuf => pb(r),
            Format::Table => return Err(self.format.unsupported()),
        })
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
                    oxcd_go::humanize::bytes(s.db_size.max(0) as u64),
                    (s.leader == id).to_string(),
                    s.is_learner.to_string(),
                    s.raft_term.to_string(),
                    s.raft_index.to_string(),
                    s.raft_applied_index.to_string(),
                    s.errors.join(", "),
                ]
            })
            .collect();
        Ok(Out::text(match self.format {
            Format::Simple => rows.iter().map(|r| r.join(", ") + "\n").collect(),
            Format::Table => table::render(&HEADER, &rows),
            Format::Json => json::endpoint_list(list, "Status", json::status),
            Format::Fields => list.iter().map(|(ep, st)| fields::status(ep, st)).collect(),
            Format::Protobuf => return Err(self.format.unsupported()),
        }))
    }

    /// `endpoint hashkv`: etcdctl 3.6's columns, with the hash revision
    /// (v3.6.14 etcdctl/ctlv3/command/printer.go makeEndpointHashKVTable), when a server
    /// answered one; etcdctl 3.4/3.5's otherwise (an etcd 3.5 server never sets it, and
    /// an etcd 3.6 server always does: it hashes at a revision of at least 1).
    pub fn hashkv(&self, list: &[(String, HashKvResponse)]) -> Result<Out, String> {
        let with_revision = list.iter().any(|(_, h)| h.hash_revision != 0);
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|(ep, h)| {
                let mut row = vec![ep.clone(), h.hash.to_string()];
                if with_revision {
                    row.push(h.hash_revision.to_string());
                }
                row
            })
            .collect();
        let header: &[&str] = if with_revision {
            &["endpoint", "hash", "hash_revision"]
        } else {
            &["endpoint", "hash"]
        };
        Ok(Out::text(match self.format {
            Format::Simple => rows.iter().map(|r| r.join(", ") + "\n").collect(),
            Format::Table => table::render(header, &rows),
            Format::Json => json::endpoint_list(list, "HashKV", json::hashkv),
            Format::Fields => list
                .iter()
                .map(|(ep, h)| fields::hashkv(ep, h, with_revision))
                .collect(),
            Format::Protobuf => return Err(self.format.unsupported()),
        }))
    }

    /// `move-leader`: etcdctl has no `fields` or `table` form for it.
    pub fn move_leader(&self, from: u64, to: u64, r: &MoveLeaderResponse) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => {
                Out::text(format!("Leadership transferred from {from:x} to {to:x}\n"))
            }
            Format::Json => Out::text(json::move_leader(r) + "\n"),
            Format::Protobuf => pb(r),
            Format::Fields | Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `downgrade validate|enable|cancel` (etcdctl 3.6's `printer_simple.go`): `verb` is
    /// `validate`, `enable` or `cancel`.
    pub fn downgrade(
        &self,
        verb: &str,
        r: &oxcd_api::etcdserverpb::DowngradeResponse,
    ) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::text(format!(
                "Downgrade {verb} success, cluster version {}\n",
                r.version
            )),
            Format::Json => Out::text(json::downgrade(r) + "\n"),
            Format::Protobuf => pb(r),
            Format::Fields | Format::Table => return Err(self.format.unsupported()),
        })
    }

    /// `endpoint health`; simple output goes to stderr, as etcdctl's does.
    pub fn health(&self, list: &[Health]) -> Result<Out, String> {
        Ok(match self.format {
            Format::Simple => Out::err(
                list.iter()
                    .map(|h| {
                        if h.healthy {
                            format!(
                                "{} is healthy: successfully committed proposal: took = {}\n",
                                h.endpoint,
                                h.took()
                            )
                        } else {
                            format!(
                                "{} is unhealthy: failed to commit proposal: {}\n",
                                h.endpoint, h.error
                            )
                        }
                    })
                    .collect::<String>(),
            ),
            Format::Table => {
                let rows: Vec<Vec<String>> = list
                    .iter()
                    .map(|h| {
                        vec![
                            h.endpoint.clone(),
                            h.healthy.to_string(),
                            h.took(),
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
                        format!(
                            "{{\"endpoint\":{},\"health\":{},\"took\":{}{}}}",
                            oxcd_go::json::json_string(&h.endpoint),
                            h.healthy,
                            oxcd_go::json::json_string(&h.took()),
                            if h.error.is_empty() {
                                String::new()
                            } else {
                                format!(",\"error\":{}", oxcd_go::json::json_string(&h.error))
                            }
                        )
                    })
                    .collect();
                Out::text(format!("[{}]\n", items.join(",")))
            }
            Format::Fields => Out::text(
                list.iter()
                    .map(|h| {
                        format!(
                            "\"Endpoint\" : {}\n\"Health\" : {}\n\"Took\" : {}\n\"Error\" : {}\n\n",
                            oxcd_go::quote::quote_str(&h.endpoint),
                            h.healthy,
                            h.took(),
                            h.error
                        )
                    })
                    .collect(),
            ),
            Format::Protobuf => return Err(self.format.unsupported()),
        })
    }
}
