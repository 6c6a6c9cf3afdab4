//! Snapshots to an etcd peer, as an etcd 3.5.16 leader sends them (rafthttp's
//! `snapshot_sender.go`, etcdserver's `createMergedSnapshotMessage`): one
//! `POST /raft/snapshot` on a connection of its own whose body is the MsgSnap
//! (length-prefixed as on a message stream) and then the bbolt database.
//!
//! Like etcd's, the snapshot is taken when it is sent, not when raft compacted: one read
//! transaction of the backend gives the database (in etcd's format,
//! [`crate::backup::etcd_file`]), the index and term it has applied (the snapshot's
//! position), the configuration in force there, and the members and cluster version
//! written as etcd's v2 store in the snapshot's data ([`crate::backup::v2store`]): etcd 3.5
//! restores its members from that store, and its consistent index from the database's
//! `meta` bucket, so the two must describe the same index.
//!
//! Invariant: the database is written by a thread of its own at a lowered priority
//! while the POST streams it; nothing but the chunks in flight is held in memory.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use hyper::body::Frame;
use oxcd_raft::Message;
use oxcd_storage::backend::Backend;
use tokio::sync::{mpsc, oneshot};

use super::client::{self, ChannelBody, Identity, PeerHttpError};
use super::codec;
use crate::backup::etcd_file::{EtcdFileError, EtcdFileSource};
use crate::backup::v2store;
use crate::peer::PeerDialer;
use crate::peer::transport::{Behind, place_snapshot};

/// Bytes of database per chunk of the body.
const CHUNK: usize = 256 * 1024;
/// Chunks written ahead of the connection.
const CHUNKS_AHEAD: usize = 8;
/// How long the whole transfer may take (etcd's has no bound but the connection's).
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a snapshot did not reach an etcd peer.
#[derive(Debug, thiserror::Error)]
pub enum EtcdSnapshotError {
    /// The backend could not be read or written in etcd's format.
    #[error("snapshot for an etcd member: {0}")]
    Backend(#[from] EtcdFileError),
    /// The backend is behind the snapshot raft asked for.
    #[error(transparent)]
    Behind(#[from] Behind),
    /// The writer's thread could not start.
    #[error("cannot start the snapshot writer: {0}")]
    Spawn(std::io::Error),
    /// The writer's thread went away without a result.
    #[error("the snapshot writer stopped")]
    WriterStopped,
    /// The body was dropped before the writer finished (the POST ended).
    #[error("the snapshot's body was dropped")]
    BodyDropped,
    /// The peer could not be reached, or refused the snapshot.
    #[error(transparent)]
    Post(#[from] Box<PeerHttpError>),
}

/// What was sent.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    /// The snapshot's index.
    pub index: u64,
    /// The database's bytes.
    pub bytes: u64,
}

/// Sends the backend's state now, as the snapshot `m` raft asked for, to the etcd peer
/// at `url`; Ok once the peer has saved it and handed it to its raft.
pub async fn send(
    me: &Identity,
    dialer: &PeerDialer,
    url: &str,
    backend: Arc<Backend>,
    m: Message,
    dial_timeout: Duration,
) -> Result<Sent, EtcdSnapshotError> {
    let (tx, rx) = mpsc::channel(CHUNKS_AHEAD);
    let (done_tx, done_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("snapshot-to-etcd".into())
        .spawn(move || {
            crate::backup::priority::yield_to_requests();
            let _ = done_tx.send(write_body(&backend, m, tx));
        })
        .map_err(EtcdSnapshotError::Spawn)?;
    let body = ChannelBody::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    let posted = client::post_snapshot(dialer, url, me, body, dial_timeout, TRANSFER_TIMEOUT).await;
    let written = done_rx
        .await
        .map_err(|_| EtcdSnapshotError::WriterStopped)?;
    // Whichever side failed first says why: the POST when it dropped the body, the
    // writer when its failure broke the body.
    match (written, posted) {
        (Ok(sent), Ok(())) => Ok(sent),
        (Ok(_) | Err(EtcdSnapshotError::BodyDropped), Err(p)) => Err(Box::new(p).into()),
        (Err(w), _) => Err(w),
    }
}

/// Writes the body into `out` ([`write_into`]); a failure that is not the body's own
/// ends the body with it, so the POST fails too.
fn write_body(
    backend: &Backend,
    m: Message,
    out: mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
) -> Result<Sent, EtcdSnapshotError> {
    let written = write_into(backend, m, &out);
    if let Err(e) = &written
        && !matches!(e, EtcdSnapshotError::BodyDropped)
    {
        let _ = out.blocking_send(Err(std::io::Error::other(e.to_string())));
    }
    written
}

/// Writes the message into `out`, its snapshot moved to the backend's position with
/// the v2 store as its data, then the database.
fn write_into(
    backend: &Backend,
    mut m: Message,
    out: &mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
) -> Result<Sent, EtcdSnapshotError> {
    let source = EtcdFileSource::open(backend)?;
    let (index, term) = source.position()?;
    let (members, removed) = source.members()?;
    let data = v2store::write(
        &members,
        &removed,
        source.cluster_version().as_deref(),
        index,
    );
    place_snapshot(&mut m, (index, term), source.conf_state()?)?;
    m.mut_snapshot().data = data.into();
    let mut framed = BytesMut::new();
    codec::encode_message(&m, &mut framed);
    if out.blocking_send(Ok(Frame::data(framed.freeze()))).is_err() {
        return Err(EtcdSnapshotError::BodyDropped);
    }
    let mut bytes = 0;
    let written = source.stream(|size| {
        bytes = size;
        Chunks {
            out: out.clone(),
            buf: BytesMut::with_capacity(CHUNK),
        }
    });
    match written.and_then(|mut w| w.flush().map_err(|e| EtcdFileError::Write(e.into()))) {
        Ok(()) => Ok(Sent { index, bytes }),
        Err(_) if out.is_closed() => Err(EtcdSnapshotError::BodyDropped),
        Err(e) => Err(e.into()),
    }
}

/// A writer that hands its bytes to the body in chunks of [`CHUNK`].
struct Chunks {
    out: mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>,
    buf: BytesMut,
}

impl Write for Chunks {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = self.buf.split().freeze();
        self.out
            .blocking_send(Ok(Frame::data(chunk)))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
}
