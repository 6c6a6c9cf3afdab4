//! What etcd peers send this member on its peer port (etcd 3.5.16
//! `server/etcdserver/api/rafthttp/http.go`; design §A.3-A.5):
//! - `POST /raft` (the pipeline): one raft message, its protobuf the whole body, stepped
//!   into raft before the 204;
//! - `POST /raft/snapshot`: a MsgSnapshot (length-prefixed) and, to the end of the body,
//!   the leader's bbolt backend at the snapshot's index. The backend and the snapshot's
//!   v2 store are saved as they came ([`crate::backup::etcd_received`]), durably; then
//!   the message is stepped into raft and the 204 sent, as etcd does. The apply thread
//!   imports the pair into oxcd's backend when it installs the snapshot (where etcd
//!   renames the received database into place).
//!
//! - `GET /raft/stream/{message,msgapp}/<from>`: a stream the peer reads this member's
//!   messages from ([`super::streams`]).
//!
//! All check the sender's versions, then the cluster id (412 `incompatible version`,
//! `cluster ID mismatch`); a removed sender gets 403 with etcd's JSON. Every answer
//! carries `X-Etcd-Cluster-ID`.

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{Buf, BytesMut};
use futures::StreamExt;
use oxcd_raft::node::RaftHandle;
use oxcd_raft::{Message, MessageType};
use tokio::io::AsyncWriteExt;

use super::codec::{self, CodecError};
use super::{go_error, headers, method_not_allowed};
use crate::backup::etcd_received::{self, ReceivedError};
use crate::domains::membership::MembershipHandles;
use crate::domains::version::release::Release;
use crate::peer::compat;

/// etcd's pipeline path.
pub const PIPELINE: &str = "/raft";
/// etcd's snapshot path.
pub const SNAPSHOT: &str = "/raft/snapshot";
/// Bytes of etcd's database buffered before each write to disk.
const SAVE_BUFFER: usize = 8 << 20;
/// The largest pipeline message (etcd's `connReadLimitByte`, 64 KiB).
const PIPELINE_LIMIT: usize = 64 << 10;

/// What the receiving routes need.
pub struct Receiver {
    /// Raft, which received messages are stepped into.
    pub raft: RaftHandle,
    /// The membership (who was removed), weakly: the backend must close when the
    /// member stops.
    pub membership: Weak<MembershipHandles>,
    /// `member/snap`.
    pub snap_dir: PathBuf,
    /// The release senders' versions are checked against.
    pub release: Release,
    /// One snapshot is received at a time.
    pub receiving: tokio::sync::Mutex<()>,
    /// Where the streams peers dial are attached.
    pub streams: Arc<super::streams::EtcdStreams>,
}

/// The routes.
pub fn routes(receiver: Arc<Receiver>) -> axum::Router {
    let snapshots = receiver.clone();
    let streams = receiver.clone();
    axum::Router::new()
        .route(
            "/raft/stream/{kind}/{from}",
            axum::routing::any(
                move |method: Method,
                      axum::extract::Path((kind, from)): axum::extract::Path<(String, String)>,
                      headers: HeaderMap| {
                    let r = streams.clone();
                    async move { r.stream(method, &kind, &from, &headers) }
                },
            ),
        )
        .route(
            PIPELINE,
            axum::routing::any(
                move |method: Method, headers: HeaderMap, body: axum::body::Bytes| {
                    let r = receiver.clone();
                    async move { r.pipeline(method, &headers, &body).await }
                },
            ),
        )
        .route(
            SNAPSHOT,
            axum::routing::any(move |method: Method, headers: HeaderMap, body: Body| {
                let r = snapshots.clone();
                async move { r.snapshot(method, &headers, body).await }
            }),
        )
}

/// Why a sender is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// Its versions are not compatible with ours.
    IncompatibleVersion,
    /// It is in another cluster.
    ClusterIdMismatch,
    /// It was removed from the cluster.
    Removed,
}

/// Why a snapshot from an etcd peer could not be taken.
#[derive(Debug, thiserror::Error)]
enum SnapshotError {
    /// The body ended or failed before the message.
    #[error("failed to decode raft message ({0})")]
    Message(#[from] CodecError),
    /// The body ended early.
    #[error("failed to decode raft message (unexpected EOF)")]
    Truncated,
    /// The body's stream failed.
    #[error("failed to save KV snapshot ({0})")]
    Body(axum::Error),
    /// A file could not be written.
    #[error("failed to save KV snapshot ({0})")]
    File(#[from] std::io::Error),
    /// The v2 store could not be saved beside the backend.
    #[error("failed to save KV snapshot ({0})")]
    Saved(#[from] ReceivedError),
    /// The snapshot's v2 store does not read (etcd panics).
    #[error("failed to restore v2 store ({0})")]
    V2Store(#[from] crate::backup::v2store::V2StoreError),
    /// The saving thread failed.
    #[error("failed to save KV snapshot ({0})")]
    Task(#[from] tokio::task::JoinError),
}

impl Receiver {
    /// The versions and cluster checks (etcd's order); the sender's id, or the refusal.
    fn admit(&self, h: &HeaderMap) -> Result<u64, Refused> {
        let text = |k: &str| h.get(k).and_then(|v| v.to_str().ok());
        let from = text(headers::FROM).and_then(headers::parse_id).unwrap_or(0);
        if let Err(e) = compat::check(
            from,
            text(headers::SERVER_VERSION),
            text(headers::MIN_CLUSTER_VERSION),
            self.release,
        ) {
            tracing::warn!(remote_member_id = %format!("{from:x}"), error = %e, "failed version compatibility check");
            return Err(Refused::IncompatibleVersion);
        }
        if text(headers::CLUSTER_ID) != Some(headers::id(self.raft.cluster_id()).as_str()) {
            return Err(Refused::ClusterIdMismatch);
        }
        if let Some(m) = self.membership.upgrade()
            && m.roster.membership().state().removed.contains(&from)
        {
            return Err(Refused::Removed);
        }
        Ok(from)
    }

    /// The answer refusing a sender, as etcd answers it.
    fn refuse(&self, why: Refused) -> Response {
        let mut r = match why {
            Refused::IncompatibleVersion => {
                go_error(StatusCode::PRECONDITION_FAILED, "incompatible version")
            }
            Refused::ClusterIdMismatch => {
                go_error(StatusCode::PRECONDITION_FAILED, "cluster ID mismatch")
            }
            Refused::Removed => removed(),
        };
        if let Ok(v) = HeaderValue::from_str(&headers::id(self.raft.cluster_id())) {
            r.headers_mut().insert(headers::CLUSTER_ID, v);
        }
        r
    }

    /// The answer after the message was handed to raft.
    fn accepted(&self) -> Response {
        let mut r = StatusCode::NO_CONTENT.into_response();
        if let Ok(v) = HeaderValue::from_str(&headers::id(self.raft.cluster_id())) {
            r.headers_mut().insert(headers::CLUSTER_ID, v);
        }
        r
    }

    /// Steps `m` into raft: 403 if it is for another member, as etcd answers.
    fn step(&self, m: Message) -> Response {
        if m.to != self.raft.id() {
            return go_error(StatusCode::FORBIDDEN, "to field mismatch");
        }
        if codec::is_link_heartbeat(&m) {
            return self.accepted();
        }
        match self.raft.step(m) {
            Ok(()) => self.accepted(),
            Err(e) => go_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("failed to process raft message ({e})"),
            ),
        }
    }

    /// `GET /raft/stream/{message,msgapp}/<from>`: etcd's checks in etcd's order, then
    /// the stream, which the link to `from` writes this member's messages into. Every
    /// answer carries this member's version (an etcd dialer reads it before the status).
    fn stream(&self, method: Method, kind: &str, from: &str, h: &HeaderMap) -> Response {
        let mut answer = self.stream_answer(method, kind, from, h);
        let version = self.release.server_version().to_string();
        if let Ok(v) = HeaderValue::from_str(&version) {
            answer.headers_mut().insert(headers::SERVER_VERSION, v);
        }
        if let Ok(v) = HeaderValue::from_str(&headers::id(self.raft.cluster_id())) {
            answer.headers_mut().insert(headers::CLUSTER_ID, v);
        }
        answer
    }

    fn stream_answer(&self, method: Method, kind: &str, from: &str, h: &HeaderMap) -> Response {
        use super::client::StreamKind;
        if method != Method::GET {
            return method_not_allowed("GET");
        }
        if let Err(why) = self.admit(h) {
            return match why {
                Refused::Removed => go_error(StatusCode::GONE, "removed member"),
                other => self.refuse(other),
            };
        }
        let kind = match kind {
            "message" => StreamKind::Message,
            "msgapp" => StreamKind::MsgAppV2,
            _ => return go_error(StatusCode::NOT_FOUND, "invalid path"),
        };
        let Some(from) = headers::parse_id(from) else {
            return go_error(StatusCode::NOT_FOUND, "invalid from");
        };
        let Some(m) = self.membership.upgrade() else {
            return StatusCode::SERVICE_UNAVAILABLE.into_response();
        };
        let state = m.roster.membership().state().clone();
        if state.removed.contains(&from) {
            return go_error(StatusCode::GONE, "removed member");
        }
        if !state.members.contains_key(&from) {
            return go_error(StatusCode::NOT_FOUND, "error sender not found");
        }
        let to = h.get(headers::RAFT_TO).and_then(|v| v.to_str().ok());
        if to != Some(headers::id(self.raft.id()).as_str()) {
            return go_error(StatusCode::PRECONDITION_FAILED, "to field mismatch");
        }
        let frames = self.streams.attach(from, kind);
        let body = Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(frames).map(Ok::<_, std::io::Error>),
        );
        (StatusCode::OK, body).into_response()
    }

    async fn pipeline(&self, method: Method, h: &HeaderMap, body: &[u8]) -> Response {
        if method != Method::POST {
            return method_not_allowed("POST");
        }
        if let Err(why) = self.admit(h) {
            return self.refuse(why);
        }
        if body.len() > PIPELINE_LIMIT {
            return go_error(StatusCode::BAD_REQUEST, "error reading raft message");
        }
        match oxcd_raft::persist::decode_message(body) {
            Ok(m) => self.step(m),
            Err(_) => go_error(StatusCode::BAD_REQUEST, "error unmarshalling raft message"),
        }
    }

    async fn snapshot(&self, method: Method, h: &HeaderMap, body: Body) -> Response {
        if method != Method::POST {
            return method_not_allowed("POST");
        }
        let from = match self.admit(h) {
            Ok(from) => from,
            Err(why) => return self.refuse(why),
        };
        let _one = self.receiving.lock().await;
        let started = std::time::Instant::now();
        let m = match self.receive_snapshot(body).await {
            Ok(m) => m,
            Err(e @ (SnapshotError::Message(_) | SnapshotError::Truncated)) => {
                return go_error(StatusCode::BAD_REQUEST, &e.to_string());
            }
            Err(e) => {
                tracing::warn!(from = %format!("{from:x}"), "failed to save a snapshot: {e}");
                return go_error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
            }
        };
        if m.get_msg_type() != MessageType::MsgSnapshot {
            return go_error(StatusCode::BAD_REQUEST, "wrong raft message type");
        }
        tracing::info!(
            from = %format!("{from:x}"),
            index = m.get_snapshot().get_metadata().index,
            took_ms = started.elapsed().as_millis() as u64,
            "received a snapshot from an etcd member"
        );
        self.step(m)
    }

    /// Reads the message and etcd's backend after it into the received pair
    /// ([`etcd_received`]), durable before the message is returned for raft.
    async fn receive_snapshot(&self, body: Body) -> Result<Message, SnapshotError> {
        let mut stream = body.into_data_stream();
        let mut buf = BytesMut::new();
        let mut m = loop {
            if let Some(m) = codec::MessageDecoder.decode(&mut buf)? {
                break m;
            }
            match stream.next().await {
                Some(chunk) => buf.extend_from_slice(&chunk.map_err(SnapshotError::Body)?),
                None => return Err(SnapshotError::Truncated),
            }
        };
        if m.get_msg_type() != MessageType::MsgSnapshot {
            return Ok(m);
        }
        let index = m.get_snapshot().get_metadata().index;
        // etcd 3.5 takes the membership from here, as this member does: refused now if
        // it does not read, before the leader is told the snapshot arrived.
        crate::backup::v2store::read(&m.get_snapshot().data)?;
        if etcd_received::is_saved(&self.snap_dir, index) {
            // The whole pair is here already: the leader sends the snapshot again to a
            // member that restarted before installing it, and the apply thread may be
            // importing that file right now. Writing it again would truncate it under
            // the import; its bytes are the same, so the body is read and let go.
            while let Some(chunk) = stream.next().await {
                chunk.map_err(SnapshotError::Body)?;
            }
            m.mut_snapshot().data = Default::default();
            tracing::info!(
                index,
                "etcd's database for this snapshot is already saved: kept"
            );
            return Ok(m);
        }
        tokio::fs::create_dir_all(&self.snap_dir).await?;
        let db = etcd_received::db_path(&self.snap_dir, index);
        // Written in large pieces: each write of a tokio file is a trip to the blocking
        // pool, and the body arrives in pieces of tens of KiB.
        let mut file =
            tokio::io::BufWriter::with_capacity(SAVE_BUFFER, tokio::fs::File::create(&db).await?);
        let mut behind = etcd_received::WriteBehind::new(&db).map_err(ReceivedError::from)?;
        let mut db_len = buf.len() as u64;
        file.write_all(&buf).await?;
        buf.advance(buf.len());
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(SnapshotError::Body)?;
            db_len += chunk.len() as u64;
            file.write_all(&chunk).await?;
            behind.wrote(db_len).await.map_err(ReceivedError::from)?;
        }
        file.flush().await?;
        behind.finish().await.map_err(ReceivedError::from)?;
        file.get_ref().sync_all().await?;
        drop(file);
        let dir = self.snap_dir.clone();
        // etcd's v2 store travels in the snapshot's data: it moves into the file beside
        // the db for the import at install (the members and the cluster version), and
        // raft gets the snapshot without it.
        let v2 = std::mem::take(&mut m.mut_snapshot().data);
        tokio::task::spawn_blocking(move || etcd_received::save_v2(&dir, index, &v2)).await??;
        tracing::info!(index, bytes = db_len, "saved etcd's database");
        Ok(m)
    }
}

/// What etcd answers a removed member's message (`http.go`: 403 and its JSON).
fn removed() -> Response {
    (
        StatusCode::FORBIDDEN,
        [(header::CONTENT_TYPE, "application/json")],
        "{\"message\":\"cannot process message from removed member\"}",
    )
        .into_response()
}
