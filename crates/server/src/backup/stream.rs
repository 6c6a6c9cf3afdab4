//! `Maintenance.Snapshot` as etcd 3.5 streams it: the backend in etcd's format
//! ([`super::etcd_file`]) in messages of 32 KiB, each with the bytes still to come, then
//! one message holding the sha256 of everything sent (which `etcdctl snapshot save`
//! checks and `snapshot restore` expects at the end of the file).
//!
//! The file is written straight into the messages, from one read transaction (writes go
//! on meanwhile), in two passes: the first learns the database's size and where its
//! pages fall, the second sends them. Nothing touches the disk, nothing is left behind if
//! the member dies while streaming, and memory holds a few messages whatever the
//! database's size. A client that goes away stops the stream at its next message.

use std::io::Write;
use std::pin::Pin;

use futures::Stream;
use oxcd_api::etcdserverpb::SnapshotResponse;
use oxcd_storage::backend::Backend;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tonic::Status;

use super::etcd_file::{EtcdFileError, stream_etcd_file};

/// The stream `Maintenance.Snapshot` answers with.
pub type SnapshotStream =
    Pin<Box<dyn Stream<Item = Result<SnapshotResponse, Status>> + Send + 'static>>;

/// Bytes of database per message, as etcd sends them.
pub const CHUNK: usize = 32 * 1024;

/// Why a snapshot could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotSendError {
    /// The backend could not be written in etcd's format.
    #[error(transparent)]
    File(#[from] EtcdFileError),
    /// Fewer or more bytes were sent than announced.
    #[error("snapshot of {sent} bytes announced as {announced}")]
    Size {
        /// The bytes sent.
        sent: u64,
        /// The size announced in the first message.
        announced: u64,
    },
}

/// Starts streaming `backend`'s current state.
pub fn snapshot_stream(backend: std::sync::Arc<Backend>, version: String) -> SnapshotStream {
    let (tx, rx) = mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        if let Err(e) = send_snapshot(&backend, &tx, &version) {
            tracing::warn!(error = %e, "failed to send database snapshot to client");
            let _ = tx.blocking_send(Err(Status::internal(e.to_string())));
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Streams the file; Ok also when the client went away.
fn send_snapshot(
    backend: &Backend,
    tx: &mpsc::Sender<Result<SnapshotResponse, Status>>,
    version: &str,
) -> Result<(), SnapshotSendError> {
    let mut total = 0;
    let sent = stream_etcd_file(backend, |size| {
        total = size;
        tracing::info!(total_bytes = size, "sending database snapshot to client");
        Messages::new(tx, size, version)
    });
    let messages = match sent {
        Ok(m) => m,
        Err(_) if tx.is_closed() => {
            tracing::warn!(total_bytes = total, "snapshot client went away");
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    // `finish_stream` flushed the last message.
    if messages.sent != total {
        return Err(SnapshotSendError::Size {
            sent: messages.sent,
            announced: total,
        });
    }
    tracing::info!(
        total_bytes = total,
        checksum_size = 32,
        "sending database sha256 checksum to client"
    );
    let msg = SnapshotResponse {
        header: None,
        remaining_bytes: 0,
        blob: messages.hash.finalize().to_vec(),
        version: version.to_string(),
    };
    if tx.blocking_send(Ok(msg)).is_ok() {
        tracing::info!(
            total_bytes = total,
            "successfully sent database snapshot to client"
        );
    }
    Ok(())
}

/// The database's bytes cut into messages of [`CHUNK`] and hashed on their way.
struct Messages<'a> {
    tx: &'a mpsc::Sender<Result<SnapshotResponse, Status>>,
    total: u64,
    sent: u64,
    hash: Sha256,
    buf: Vec<u8>,
    /// The storage version every message carries (etcd 3.6; empty for 3.5).
    version: &'a str,
}

impl<'a> Messages<'a> {
    fn new(
        tx: &'a mpsc::Sender<Result<SnapshotResponse, Status>>,
        total: u64,
        version: &'a str,
    ) -> Self {
        Messages {
            version,
            tx,
            total,
            sent: 0,
            hash: Sha256::new(),
            buf: Vec::with_capacity(CHUNK),
        }
    }

    /// Sends what is buffered as one message.
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let blob = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
        self.hash.update(&blob);
        self.sent += blob.len() as u64;
        let msg = SnapshotResponse {
            header: None,
            remaining_bytes: self.total.saturating_sub(self.sent),
            blob,
            version: self.version.to_string(),
        };
        self.tx
            .blocking_send(Ok(msg))
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))
    }
}

impl Write for Messages<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        let n = data.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK {
            self.send()?;
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}
