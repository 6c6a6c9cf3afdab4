//! The way out of one Watch stream: responses are gathered into batches, a batch crosses
//! the bounded channel to the gRPC body in one send, and the body takes them one by one.
//! A delivery to a thousand watchers is then a few channel sends and task wake-ups, not a
//! thousand.
//!
//! Invariants: responses leave in the order they were pushed; a batch holds at most
//! [`BATCH_RESPONSES`] responses and, unless it is a single response, at most
//! [`BATCH_BYTES`] encoded bytes; the channel holds at most [`QUEUED_BATCHES`] batches,
//! so a client that reads slowly makes the stream wait with a bounded amount queued.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tonic::Status;

use super::wire::WatchOut;

/// Batches a stream may have queued for a client that reads slowly; beyond them the
/// stream waits, and the feed it stops reading is made up from the history later.
pub const QUEUED_BATCHES: usize = 16;
/// At most this many responses go in one batch...
pub const BATCH_RESPONSES: usize = 64;
/// ... and at most this many encoded bytes (a larger response goes alone).
pub const BATCH_BYTES: usize = 256 << 10;

type Item = Result<Vec<WatchOut>, Status>;

/// The client went away: the stream ends.
#[derive(Debug)]
pub struct Gone;

/// The sending side, owned by the stream's task.
pub struct Outbox {
    tx: mpsc::Sender<Item>,
    pending: Vec<WatchOut>,
    pending_bytes: usize,
}

/// A new way out: the stream task's side and the gRPC body's side.
pub fn outbox() -> (Outbox, Outgoing) {
    let (tx, rx) = mpsc::channel(QUEUED_BATCHES);
    let outbox = Outbox {
        tx,
        pending: Vec::new(),
        pending_bytes: 0,
    };
    let outgoing = Outgoing {
        rx,
        ready: Vec::new().into_iter(),
    };
    (outbox, outgoing)
}

impl Outbox {
    /// Adds `out` to the batch; sends the batch when it is full.
    pub async fn push(&mut self, out: WatchOut) -> Result<(), Gone> {
        let len = out.encoded_len();
        if !self.pending.is_empty() && self.pending_bytes + len > BATCH_BYTES {
            self.flush().await?;
        }
        self.pending_bytes += len;
        self.pending.push(out);
        if self.pending.len() >= BATCH_RESPONSES || self.pending_bytes >= BATCH_BYTES {
            self.flush().await?;
        }
        Ok(())
    }

    /// Sends the responses pushed so far.
    pub async fn flush(&mut self) -> Result<(), Gone> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let batch = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        self.tx.send(Ok(batch)).await.map_err(|_| Gone)
    }

    /// Sends what was pushed, then ends the stream with `status`.
    pub async fn fail(&mut self, status: Status) {
        if self.flush().await.is_ok() {
            let _ = self.tx.send(Err(status)).await;
        }
    }

    /// Completes when the client went away (the body was dropped).
    pub async fn closed(&self) {
        self.tx.closed().await
    }
}

/// The receiving side: the gRPC body's stream of responses.
pub struct Outgoing {
    rx: mpsc::Receiver<Item>,
    ready: std::vec::IntoIter<WatchOut>,
}

impl Stream for Outgoing {
    type Item = Result<WatchOut, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(out) = this.ready.next() {
                return Poll::Ready(Some(Ok(out)));
            }
            match ready!(this.rx.poll_recv(cx)) {
                Some(Ok(batch)) => this.ready = batch.into_iter(),
                Some(Err(status)) => return Poll::Ready(Some(Err(status))),
                None => return Poll::Ready(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::etcdserverpb::WatchResponse;
    use tokio_stream::StreamExt;

    fn response(id: i64, bytes: usize) -> WatchOut {
        WatchOut {
            resp: WatchResponse {
                watch_id: id,
                cancel_reason: "x".repeat(bytes),
                ..Default::default()
            },
            encoded: Vec::new(),
        }
    }

    #[tokio::test]
    async fn responses_leave_in_order_in_bounded_batches() {
        let (mut outbox, mut outgoing) = outbox();
        let sizes = [10, BATCH_BYTES / 2, BATCH_BYTES / 2, 2 * BATCH_BYTES, 10];
        let reader = tokio::spawn(async move {
            let mut ids = Vec::new();
            while let Some(Ok(out)) = outgoing.next().await {
                ids.push(out.resp.watch_id);
            }
            ids
        });
        let mut n = 0;
        for (i, size) in sizes.iter().enumerate() {
            outbox.push(response(i as i64, *size)).await.expect("open");
            n += 1;
        }
        for i in 0..200 {
            outbox.push(response(n + i, 1)).await.expect("open");
            assert!(outbox.pending.len() < BATCH_RESPONSES);
        }
        outbox.flush().await.expect("open");
        drop(outbox);
        let ids = reader.await.expect("reader");
        assert_eq!(ids, (0..n + 200).collect::<Vec<i64>>());
    }

    #[tokio::test]
    async fn a_batch_never_exceeds_its_bytes_unless_alone() {
        let (mut outbox, mut outgoing) = outbox();
        outbox
            .push(response(1, BATCH_BYTES - 100))
            .await
            .expect("open");
        outbox.push(response(2, 200)).await.expect("open");
        outbox.flush().await.expect("open");
        let first = outgoing.rx.recv().await.expect("batch").expect("ok");
        let second = outgoing.rx.recv().await.expect("batch").expect("ok");
        assert_eq!((first.len(), second.len()), (1, 1));
    }
}
