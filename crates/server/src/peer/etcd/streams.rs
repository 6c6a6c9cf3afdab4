//! The streams etcd peers dial to this member to receive its messages (etcd 3.5.16
//! `rafthttp/stream.go`; design §A.2): `GET /raft/stream/{message,msgapp}/<their id>`,
//! whose answer's body this member then writes the peer's messages into. A new dial of
//! the same kind from the same peer replaces the old stream, as etcd's writer does.
//!
//! [`EtcdStreams`] holds the attached streams; the etcd link to a peer sends on them
//! ([`EtcdStreams::send`]: appends on msgappv2, the rest on the message stream) and on
//! the pipeline when none is attached. Each stream gets a link heartbeat every
//! [`HEARTBEAT_EVERY`] (etcd's `ConnReadTimeout / 3`), so that the peer's 5 s read
//! deadline never ends a quiet stream.
//!
//! Invariant: a msgappv2 stream's encoder lives and dies with that one connection, so
//! its (term, index) state is the peer decoder's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use oxcd_raft::{Message, MessageType};
use tokio::sync::mpsc;

use super::client::StreamKind;
use super::codec::{MsgAppEncoder, encode_message, link_heartbeat};

/// How often an attached stream carries a link heartbeat.
pub const HEARTBEAT_EVERY: Duration = Duration::from_millis(1666);
/// Frames queued per stream before messages are dropped (etcd's `streamBufSize`).
const QUEUE: usize = 4096;

/// One attached stream: where its frames go, and its encoder (msgappv2's state).
struct Attached {
    tx: mpsc::Sender<Bytes>,
    msgapp: Option<MsgAppEncoder>,
}

/// What became of a message offered to the streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Queued on a stream.
    Sent,
    /// A stream is attached but full: dropped (raft resends what matters).
    Dropped,
    /// No stream is attached: send it on the pipeline.
    NotAttached,
}

/// The streams etcd peers attached to this member.
#[derive(Default)]
pub struct EtcdStreams {
    attached: Mutex<HashMap<(u64, StreamKind), Attached>>,
}

impl EtcdStreams {
    /// The etcd peers with a stream attached and still open.
    pub fn peers(&self) -> std::collections::HashSet<u64> {
        self.lock()
            .iter()
            .filter(|(_, a)| !a.tx.is_closed())
            .map(|((peer, _), _)| *peer)
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(u64, StreamKind), Attached>> {
        self.attached.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Attaches a new stream of `kind` from `peer` (replacing its last one): the frames
    /// to write into the answer's body. Its link heartbeats start now.
    pub fn attach(&self, peer: u64, kind: StreamKind) -> mpsc::Receiver<Bytes> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let msgapp = (kind == StreamKind::MsgAppV2).then(MsgAppEncoder::default);
        let beat = match kind {
            StreamKind::MsgAppV2 => Bytes::from_static(&[0]),
            StreamKind::Message => {
                let mut b = BytesMut::new();
                encode_message(&link_heartbeat(), &mut b);
                b.freeze()
            }
        };
        let beats = tx.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(HEARTBEAT_EVERY);
            loop {
                tick.tick().await;
                if beats.send(beat.clone()).await.is_err() {
                    return;
                }
            }
        });
        self.lock().insert((peer, kind), Attached { tx, msgapp });
        rx
    }

    /// Offers `m` (to `m.to`) to that peer's streams: an append to its msgappv2 stream,
    /// anything else (or an append while msgappv2 is down) to its message stream.
    pub fn send(&self, m: &Message) -> Delivery {
        let mut attached = self.lock();
        let kinds: &[StreamKind] = if m.get_msg_type() == MessageType::MsgAppend {
            &[StreamKind::MsgAppV2, StreamKind::Message]
        } else {
            &[StreamKind::Message]
        };
        for kind in kinds {
            let key = (m.to, *kind);
            let Some(stream) = attached.get_mut(&key) else {
                continue;
            };
            let mut frame = BytesMut::new();
            match stream.msgapp.as_mut() {
                Some(encoder) => encoder.encode(m, &mut frame),
                None => encode_message(m, &mut frame),
            }
            match stream.tx.try_send(frame.freeze()) {
                Ok(()) => return Delivery::Sent,
                Err(mpsc::error::TrySendError::Full(_)) => return Delivery::Dropped,
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    // The peer went away: its encoder state goes with the connection.
                    attached.remove(&key);
                }
            }
        }
        Delivery::NotAttached
    }
}
