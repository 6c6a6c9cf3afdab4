//! `Maintenance.Snapshot` as etcd 3.5 streams it: the backend in etcd's format
//! ([`super::etcd_file`]) in messages of 32 KiB, each with the bytes still to come, then
//! one message holding the sha256 of everything sent (which `etcdctl snapshot save`
//! checks and `snapshot restore` expects at the end of the file).
//!
//! The file is written first, from one read transaction (writes go on meanwhile), into
//! an unlinked temporary file in the backend's directory: nothing is left behind if the
//! member dies while streaming, and memory does not grow with the database. A client
//! that goes away stops the stream at its next message.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::Stream;
use oxcd_api::etcdserverpb::SnapshotResponse;
use oxcd_storage::backend::Backend;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tonic::Status;

use super::etcd_file::write_etcd_file;

/// The stream `Maintenance.Snapshot` answers with.
pub type SnapshotStream =
    Pin<Box<dyn Stream<Item = Result<SnapshotResponse, Status>> + Send + 'static>>;

/// Bytes of database per message, as etcd sends them.
pub const CHUNK: usize = 32 * 1024;

/// Starts streaming `backend`'s current state.
pub fn snapshot_stream(backend: std::sync::Arc<Backend>) -> SnapshotStream {
    let (tx, rx) = mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        if let Err(e) = send_snapshot(&backend, &tx) {
            tracing::warn!(error = %e, "failed to send database snapshot to client");
            let _ = tx.blocking_send(Err(Status::internal(e)));
        }
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// Writes the file and sends it; Ok also when the client went away.
fn send_snapshot(
    backend: &Backend,
    tx: &mpsc::Sender<Result<SnapshotResponse, Status>>,
) -> Result<(), String> {
    let dir = backend.path().parent().unwrap_or(Path::new("."));
    let file = unlinked_temp_file(dir)?;
    let (mut file, total) = write_etcd_file(backend, file)?;
    tracing::info!(total_bytes = total, "sending database snapshot to client");
    file.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
    let mut hash = Sha256::new();
    let mut sent = 0u64;
    let mut buf = vec![0u8; CHUNK];
    while sent < total {
        let n = CHUNK.min((total - sent) as usize);
        file.read_exact(&mut buf[..n]).map_err(|e| e.to_string())?;
        hash.update(&buf[..n]);
        sent += n as u64;
        let msg = SnapshotResponse {
            header: None,
            remaining_bytes: total - sent,
            blob: buf[..n].to_vec(),
        };
        if tx.blocking_send(Ok(msg)).is_err() {
            tracing::warn!(sent, total_bytes = total, "snapshot client went away");
            return Ok(());
        }
    }
    tracing::info!(
        total_bytes = total,
        checksum_size = 32,
        "sending database sha256 checksum to client"
    );
    let msg = SnapshotResponse {
        header: None,
        remaining_bytes: 0,
        blob: hash.finalize().to_vec(),
    };
    if tx.blocking_send(Ok(msg)).is_ok() {
        tracing::info!(
            total_bytes = total,
            "successfully sent database snapshot to client"
        );
    }
    Ok(())
}

/// A new file in `dir`, already unlinked: it lives as long as it is open.
fn unlinked_temp_file(dir: &Path) -> Result<std::fs::File, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!(
        ".snapshot-{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let path = dir.join(name);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::remove_file(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(file)
}
