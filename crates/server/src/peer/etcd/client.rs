//! Requests to an etcd member's peer port, over HTTP/1.1 as etcd's peers speak it:
//! plain `GET`s (`/members`, `/version`), the pipeline (`POST /raft`, one message, no
//! length prefix) and the dial of a stream (`GET /raft/stream/{message,msgapp}/<me>`),
//! whose answer's body is the endless stream of messages the peer sends this member.
//!
//! Every request to raft's paths carries this member's [`Identity`] in etcd's headers.
//! Each request has its own connection: etcd closes an idle peer connection after 5 s,
//! and streams hold theirs for as long as they last.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use oxcd_raft::Message;

use super::codec::{CodecError, MessageDecoder, MsgAppDecoder};
use super::headers;
use crate::domains::version::release::{MIN_CLUSTER_VERSION, Release};
use crate::peer::PeerDialer;
use crate::peer::dialer::DialError;

/// Who this member is, as its requests to etcd peers say.
#[derive(Debug, Clone)]
pub struct Identity {
    /// This member's id.
    pub member: u64,
    /// The cluster's id.
    pub cluster: u64,
    /// This member's advertised peer URLs.
    pub peer_urls: Vec<String>,
    /// The release whose versions the requests announce.
    pub release: Release,
}

impl Identity {
    /// The headers of a request to raft's paths.
    fn stamp(&self, h: &mut HeaderMap) {
        let mut put = |name: &'static str, value: String| {
            if let Ok(v) = HeaderValue::from_str(&value) {
                h.insert(name, v);
            }
        };
        put(headers::FROM, headers::id(self.member));
        put(
            headers::SERVER_VERSION,
            self.release.server_version().to_string(),
        );
        put(
            headers::MIN_CLUSTER_VERSION,
            MIN_CLUSTER_VERSION.to_string(),
        );
        put(headers::CLUSTER_ID, headers::id(self.cluster));
        put(headers::PEER_URLS, self.peer_urls.join(","));
    }
}

/// The two streams a member dials to each peer (etcd's `streamTypeMessage` and
/// `streamTypeMsgAppV2`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// Every message, each length-prefixed ([`super::codec::MessageDecoder`]).
    Message,
    /// Appends ([`super::codec::MsgAppDecoder`]).
    MsgAppV2,
}

impl StreamKind {
    /// A decoder for a stream of this kind that member `from` sends member `to`.
    pub fn decoder(self, to: u64, from: u64) -> StreamDecoder {
        match self {
            StreamKind::Message => StreamDecoder::Message(MessageDecoder),
            StreamKind::MsgAppV2 => StreamDecoder::MsgApp(MsgAppDecoder::new(to, from)),
        }
    }

    /// The path a stream of this kind for member `me` is dialed at.
    pub fn path(self, me: u64) -> String {
        let kind = match self {
            StreamKind::Message => "message",
            StreamKind::MsgAppV2 => "msgapp",
        };
        format!("/raft/stream/{kind}/{}", headers::id(me))
    }
}

/// The decoder of one dialed stream.
#[derive(Debug)]
pub enum StreamDecoder {
    /// A message stream.
    Message(MessageDecoder),
    /// A msgappv2 stream.
    MsgApp(MsgAppDecoder),
}

impl StreamDecoder {
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, CodecError> {
        match self {
            StreamDecoder::Message(d) => d.decode(buf),
            StreamDecoder::MsgApp(d) => d.decode(buf),
        }
    }
}

/// Why a dialed stream ended.
#[derive(Debug, thiserror::Error)]
pub enum StreamEnded {
    /// The peer closed it, or the connection failed.
    #[error(transparent)]
    Http(#[from] hyper::Error),
    /// Its bytes did not decode.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// Whoever read the messages has gone.
    #[error("the stream's reader has gone")]
    Dropped,
}

/// Decodes the messages of the dialed stream `body` into `out`, in order, until the
/// stream ends (Ok when the peer closed it cleanly). Every message is handed on, link
/// heartbeats too ([`super::codec::is_link_heartbeat`]): raft must not be given those.
pub async fn read_stream(
    mut body: Incoming,
    mut decoder: StreamDecoder,
    out: tokio::sync::mpsc::Sender<Message>,
) -> Result<(), StreamEnded> {
    let mut buf = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        buf.extend_from_slice(&data);
        while let Some(m) = decoder.decode(&mut buf)? {
            out.send(m).await.map_err(|_| StreamEnded::Dropped)?;
        }
    }
    Ok(())
}

/// Why a request to an etcd peer failed.
#[derive(Debug, thiserror::Error)]
pub enum PeerHttpError {
    /// The peer could not be reached.
    #[error(transparent)]
    Dial(#[from] DialError),
    /// The HTTP exchange failed.
    #[error(transparent)]
    Http(#[from] hyper::Error),
    /// The request could not be built (a URL or header of ours).
    #[error(transparent)]
    Request(#[from] http::Error),
    /// No answer in time.
    #[error("request to {0} timed out")]
    TimedOut(String),
    /// The peer refused: its status and its text (etcd's, newline trimmed).
    #[error("{status}: {text}")]
    Refused {
        /// The status.
        status: StatusCode,
        /// The body, trimmed of Go's newline.
        text: String,
        /// The answer's headers (the dialer of a stream reads the version first).
        headers: HeaderMap,
    },
}

/// A whole answer.
#[derive(Debug)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: HeaderMap,
    /// Its body.
    pub body: Bytes,
}

/// A new HTTP/1.1 connection to the peer at `url`, made within `timeout`, and the host
/// its requests name.
async fn connect<B>(
    dialer: &PeerDialer,
    url: &str,
    timeout: Duration,
) -> Result<(SendRequest<B>, Option<HeaderValue>), PeerHttpError>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (conn, uri) = dialer.connection(url, timeout).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(conn)).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "etcd peer connection ended");
        }
    });
    let host = uri
        .authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok());
    Ok((sender, host))
}

/// Sends `req` to the peer at `url` on a new connection; the answer's head within
/// `timeout`.
async fn send(
    dialer: &PeerDialer,
    url: &str,
    mut req: Request<Full<Bytes>>,
    timeout: Duration,
) -> Result<http::Response<Incoming>, PeerHttpError> {
    let exchange = async {
        let (mut sender, host) = connect(dialer, url, timeout).await?;
        if let Some(host) = host {
            req.headers_mut().insert(http::header::HOST, host);
        }
        Ok::<_, PeerHttpError>(sender.send_request(req).await?)
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| PeerHttpError::TimedOut(url.to_string()))?
}

/// The pipeline to one peer (`POST /raft`), on one kept connection, made again when
/// the peer closed it (etcd closes a peer connection idle for 5 s).
pub struct Pipeline {
    dialer: PeerDialer,
    url: String,
    me: Identity,
    connection: Option<(SendRequest<Full<Bytes>>, Option<HeaderValue>)>,
}

impl Pipeline {
    /// The pipeline to the peer at `url`, for the member `me`.
    pub fn new(dialer: PeerDialer, url: String, me: Identity) -> Pipeline {
        Pipeline {
            dialer,
            url,
            me,
            connection: None,
        }
    }

    /// Sends `m`; Ok once the peer has handed it to raft (204), within `timeout`.
    pub async fn post(&mut self, m: &Message, timeout: Duration) -> Result<(), PeerHttpError> {
        let sent = tokio::time::timeout(timeout, self.exchange(m, timeout)).await;
        let sent = sent.unwrap_or_else(|_| Err(PeerHttpError::TimedOut(self.url.clone())));
        if sent.is_err() {
            self.connection = None;
        }
        sent
    }

    async fn exchange(&mut self, m: &Message, timeout: Duration) -> Result<(), PeerHttpError> {
        let reusable = self
            .connection
            .as_ref()
            .is_some_and(|(sender, _)| !sender.is_closed());
        if !reusable {
            self.connection = Some(connect(&self.dialer, &self.url, timeout).await?);
        }
        let Some((sender, host)) = self.connection.as_mut() else {
            return Err(PeerHttpError::TimedOut(self.url.clone()));
        };
        let body = Bytes::from(oxcd_raft::persist::encode_message(m));
        let mut req = Request::builder()
            .method(Method::POST)
            .uri("/raft")
            .header(http::header::CONTENT_TYPE, "application/protobuf")
            .body(Full::new(body))?;
        self.me.stamp(req.headers_mut());
        if let Some(host) = host {
            req.headers_mut().insert(http::header::HOST, host.clone());
        }
        sender.ready().await?;
        let answer = sender.send_request(req).await?;
        let answer = read_all(&self.url, answer, timeout).await?;
        if answer.status == StatusCode::NO_CONTENT {
            return Ok(());
        }
        Err(refused(answer))
    }
}

/// The whole body of `answer`, within `timeout`.
async fn read_all(
    url: &str,
    answer: http::Response<Incoming>,
    timeout: Duration,
) -> Result<Answer, PeerHttpError> {
    let (head, body) = answer.into_parts();
    let body = tokio::time::timeout(timeout, body.collect())
        .await
        .map_err(|_| PeerHttpError::TimedOut(url.to_string()))??
        .to_bytes();
    Ok(Answer {
        status: head.status,
        headers: head.headers,
        body,
    })
}

/// `GET path` at the peer `url`, with no identity (as etcd asks `/members` and
/// `/version`), whatever its status.
pub async fn get(
    dialer: &PeerDialer,
    url: &str,
    path: &str,
    timeout: Duration,
) -> Result<Answer, PeerHttpError> {
    request(dialer, url, Method::GET, path, Bytes::new(), timeout).await
}

/// `POST path` at the peer `url` with no body and no identity (as etcd forwards a
/// promotion), whatever its status.
pub async fn post_empty(
    dialer: &PeerDialer,
    url: &str,
    path: &str,
    timeout: Duration,
) -> Result<Answer, PeerHttpError> {
    request(dialer, url, Method::POST, path, Bytes::new(), timeout).await
}

/// A request with no identity (a GET with a body too, as etcd's corruption checks send
/// `/members/hashkv`), whatever its answer's status.
pub async fn request(
    dialer: &PeerDialer,
    url: &str,
    method: Method,
    path: &str,
    body: Bytes,
    timeout: Duration,
) -> Result<Answer, PeerHttpError> {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .body(Full::new(body))?;
    let answer = send(dialer, url, req, timeout).await?;
    read_all(url, answer, timeout).await
}

/// A body whose chunks come from a channel (a snapshot's database as it is written).
pub type ChannelBody = http_body_util::StreamBody<
    tokio_stream::wrappers::ReceiverStream<Result<hyper::body::Frame<Bytes>, std::io::Error>>,
>;

/// Posts a snapshot to the peer at `url` (etcd's snapshot sender: `POST /raft/snapshot`
/// on a connection of its own, the body chunked): `body` carries the MsgSnap,
/// length-prefixed as on a message stream, then the database. Ok once the peer answered
/// 204, having saved the database and handed the message to raft. The connection must
/// be made within `dial_timeout`; the transfer takes as long as the database needs,
/// up to `timeout`.
pub async fn post_snapshot(
    dialer: &PeerDialer,
    url: &str,
    me: &Identity,
    body: ChannelBody,
    dial_timeout: Duration,
    timeout: Duration,
) -> Result<(), PeerHttpError> {
    let (mut sender, host) = connect::<ChannelBody>(dialer, url, dial_timeout).await?;
    let mut req = Request::builder()
        .method(Method::POST)
        .uri("/raft/snapshot")
        .header(http::header::CONTENT_TYPE, "application/octet-stream")
        .body(body)?;
    me.stamp(req.headers_mut());
    if let Some(host) = host {
        req.headers_mut().insert(http::header::HOST, host);
    }
    let answer = tokio::time::timeout(timeout, sender.send_request(req))
        .await
        .map_err(|_| PeerHttpError::TimedOut(url.to_string()))??;
    let answer = read_all(url, answer, dial_timeout).await?;
    if answer.status == StatusCode::NO_CONTENT {
        return Ok(());
    }
    Err(refused(answer))
}

/// Dials the stream of `kind` that the peer `to` at `url` sends this member; the
/// answer's body is the stream.
pub async fn dial_stream(
    dialer: &PeerDialer,
    url: &str,
    me: &Identity,
    to: u64,
    kind: StreamKind,
    timeout: Duration,
) -> Result<Incoming, PeerHttpError> {
    let mut req = Request::builder()
        .method(Method::GET)
        .uri(kind.path(me.member))
        .body(Full::new(Bytes::new()))?;
    me.stamp(req.headers_mut());
    if let Ok(v) = HeaderValue::from_str(&headers::id(to)) {
        req.headers_mut().insert(headers::RAFT_TO, v);
    }
    let answer = send(dialer, url, req, timeout).await?;
    if answer.status() == StatusCode::OK {
        return Ok(answer.into_body());
    }
    Err(refused(read_all(url, answer, timeout).await?))
}

/// A refusal from an answer that was not the one hoped for.
fn refused(answer: Answer) -> PeerHttpError {
    let text = String::from_utf8_lossy(&answer.body);
    PeerHttpError::Refused {
        status: answer.status,
        text: text.strip_suffix('\n').unwrap_or(&text).to_string(),
        headers: answer.headers,
    }
}
