//! Bytes to and from clients (`etcd_network_client_grpc_{received,sent}_bytes_total`),
//! counted on the client connections themselves: etcd counts its gRPC messages, this
//! counts every byte of the client port, HTTP/2 framing and the gateway's JSON included.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::text::{Exposition, Kind};

/// The totals of one member's client port.
#[derive(Debug, Default)]
pub struct ClientBytes {
    received: AtomicU64,
    sent: AtomicU64,
}

impl ClientBytes {
    /// Adds the two families to `e`.
    pub fn add(&self, e: &mut Exposition) {
        e.single(
            "etcd_network_client_grpc_received_bytes_total",
            Kind::Counter,
            "The total number of bytes received from grpc clients.",
            self.received.load(Ordering::Relaxed) as f64,
        );
        e.single(
            "etcd_network_client_grpc_sent_bytes_total",
            Kind::Counter,
            "The total number of bytes sent to grpc clients.",
            self.sent.load(Ordering::Relaxed) as f64,
        );
    }
}

/// A connection whose bytes are counted in a [`ClientBytes`].
pub struct Counting<S> {
    inner: S,
    totals: Arc<ClientBytes>,
}

impl<S> Counting<S> {
    /// Counts `inner`'s bytes in `totals`.
    pub fn new(inner: S, totals: Arc<ClientBytes>) -> Counting<S> {
        Counting { inner, totals }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Counting<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before) as u64;
        if n > 0 {
            self.totals.received.fetch_add(n, Ordering::Relaxed);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counting<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &polled {
            self.totals.sent.fetch_add(*n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &polled {
            self.totals.sent.fetch_add(*n as u64, Ordering::Relaxed);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
