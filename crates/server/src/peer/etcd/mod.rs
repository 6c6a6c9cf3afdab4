//! etcd's peer protocol (etcd 3.5.16's rafthttp and peer handlers; the design and its
//! evidence are in `docs/etcd-peer-design.md`), spoken to etcd members so that oxcd
//! members can sit in an etcd cluster. oxcd members keep their own gRPC protocol among
//! themselves ([`super::service`], [`super::transport`]); this module is the second,
//! HTTP/1.1 one, served on the same peer listener.
//!
//! - [`client`]: requests to an etcd member's peer port (GETs, the pipeline, stream
//!   dials);
//! - [`codec`]: the raft message encodings of etcd's streams (message, msgappv2);
//! - [`guard`]: no etcd member in a cluster whose log is in oxcd's vocabulary;
//! - [`leases`]: keepalives forwarded to the leader (`POST /leases`);
//! - [`link`]: the link to one etcd peer (its streams received, the pipeline sent on);
//! - [`members`]: etcd's member list in JSON;
//! - [`headers`]: the headers etcd's peer requests and answers carry, and ids as etcd
//!   writes them;
//! - [`receive`]: what etcd peers send this member (the pipeline, snapshots);
//! - [`snapshot_sender`]: snapshots to an etcd peer (`POST /raft/snapshot`);
//! - [`streams`]: the streams etcd peers dial to receive this member's messages;
//! - [`routes`]: the read-only endpoints (`/members`, `/raft/probing`,
//!   `/members/hashkv`).
//!
//! Invariant: what goes to an etcd member is what an etcd 3.5 member would send, byte for
//! byte where etcd checks bytes (ids as lowercase hex, texts of errors); anything etcd
//! would panic on is never sent.

pub mod client;
pub mod codec;
pub mod guard;
pub mod headers;
pub mod leases;
pub mod link;
pub mod members;
pub mod receive;
pub mod routes;
pub mod snapshot_sender;
pub mod streams;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// An error as Go's `http.Error` answers it: `text` and a newline, as plain text.
pub fn go_error(status: StatusCode, text: &str) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        format!("{text}\n"),
    )
        .into_response()
}

/// A method the path does not take, as etcd's handlers refuse it (`allowMethod`): 405,
/// naming the one it takes.
pub fn method_not_allowed(allow: &'static str) -> Response {
    let mut r = go_error(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
    r.headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static(allow));
    r
}
