//! Write coalescing for server connections that carry many streams.
//!
//! The HTTP/2 server flushes its connection every time it has run, and on a busy
//! multi-threaded runtime it runs as soon as any one stream has a response: a
//! connection with ten streams answering at about the same time sends ten small TCP
//! segments, each a `writev` and a trip through the loopback or network stack on both
//! sides. grpc-go (etcd) batches them in its writer goroutine. [`CoalescedWrites`] does
//! the same below the HTTP/2 layer: writes are gathered in a buffer, and a flush first
//! yields to the runtime once, so the streams woken together queue their frames before
//! the bytes leave in one `write`.
//!
//! Invariants: bytes leave in the order they were written; a flush completes only when
//! everything written before it reached the socket (after at most one yield); a write
//! of `PASS_THROUGH` bytes or more with nothing buffered goes straight to the socket
//! (large answers are not copied); the buffer never holds more than `BUFFER_LIMIT`
//! bytes plus one write.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A write at least this large, with nothing buffered, is not copied.
const PASS_THROUGH: usize = 16 * 1024;

/// Buffered bytes beyond which a write first drains the buffer to the socket.
const BUFFER_LIMIT: usize = 64 * 1024;

/// A connection whose writes are coalesced (see the module doc).
pub struct CoalescedWrites<S> {
    inner: S,
    buf: Vec<u8>,
    /// Bytes of `buf` already written to `inner`.
    sent: usize,
    /// The current flush has yielded once already.
    yielded: bool,
}

impl<S> CoalescedWrites<S> {
    /// Wraps `inner`.
    pub fn new(inner: S) -> CoalescedWrites<S> {
        CoalescedWrites {
            inner,
            buf: Vec::new(),
            sent: 0,
            yielded: false,
        }
    }
}

impl<S: AsyncWrite + Unpin> CoalescedWrites<S> {
    /// Writes the buffer to `inner` until it is empty.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.buf.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    /// Makes room for a write of `len` bytes: drains the buffer when the write would
    /// take it past the limit. `Ok(true)` when the write should go straight to `inner`.
    fn poll_room(&mut self, cx: &mut Context<'_>, len: usize) -> Poll<io::Result<bool>> {
        if self.buf.len() + len > BUFFER_LIMIT {
            ready!(self.poll_drain(cx))?;
        }
        Poll::Ready(Ok(self.buf.is_empty() && len >= PASS_THROUGH))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for CoalescedWrites<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for CoalescedWrites<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if ready!(this.poll_room(cx, data.len()))? {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        this.buf.extend_from_slice(data);
        Poll::Ready(Ok(data.len()))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if ready!(this.poll_room(cx, len))? {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        for b in bufs {
            this.buf.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.buf.is_empty() {
            this.yielded = false;
            return Pin::new(&mut this.inner).poll_flush(cx);
        }
        if !this.yielded {
            // Let the tasks woken with this one add their frames first.
            this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        ready!(this.poll_drain(cx))?;
        this.yielded = false;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        ready!(this.poll_drain(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn bytes_arrive_in_order_after_flush() {
        let (a, mut b) = tokio::io::duplex(64 * 1024);
        let mut expected = Vec::new();
        let mut chunks = Vec::new();
        for i in 0..200u32 {
            // Small writes are gathered, large ones pass through, in between the
            // buffer drains at its limit.
            let chunk = vec![(i % 251) as u8; (i as usize * 397) % 40_000 + 1];
            expected.extend_from_slice(&chunk);
            chunks.push(chunk);
        }
        let writer = tokio::spawn(async move {
            let mut w = CoalescedWrites::new(a);
            for chunk in chunks {
                w.write_all(&chunk).await.expect("write");
            }
            w.flush().await.expect("flush");
            w
        });
        let mut got = vec![0u8; expected.len()];
        b.read_exact(&mut got).await.expect("read");
        assert!(got == expected);
        writer.await.expect("writer");
    }

    #[tokio::test]
    async fn a_flush_yields_once_then_completes() {
        let (a, mut b) = tokio::io::duplex(1024);
        let mut w = CoalescedWrites::new(a);
        w.write_all(b"hello").await.expect("write");
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(Pin::new(&mut w).poll_flush(&mut cx).is_pending());
        assert!(matches!(
            Pin::new(&mut w).poll_flush(&mut cx),
            Poll::Ready(Ok(()))
        ));
        let mut got = [0u8; 5];
        b.read_exact(&mut got).await.expect("read");
        assert_eq!(&got, b"hello");
        // Nothing buffered: a flush does not yield.
        assert!(Pin::new(&mut w).poll_flush(&mut cx).is_ready());
    }

    #[tokio::test]
    async fn shutdown_sends_what_is_buffered() {
        let (a, mut b) = tokio::io::duplex(1024);
        let mut w = CoalescedWrites::new(a);
        w.write_all(b"bye").await.expect("write");
        w.shutdown().await.expect("shutdown");
        let mut got = Vec::new();
        b.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, b"bye");
    }
}
