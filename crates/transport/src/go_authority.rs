//! Accepts the HTTP/2 `:authority` Go etcd clients send when they dial a URL directly.
//!
//! etcdctl 3.4 asks `endpoint status`/`hashkv` of `http://host:port` endpoints over a
//! connection whose `:authority` is the whole URL. grpc-go servers (etcd) do not check
//! it; the Rust HTTP/2 stack refuses it as malformed and resets the stream
//! (PROTOCOL_ERROR). This adapter sits between the socket and the HTTP/2 server and
//! looks at the first request's headers: if the authority is well formed (the usual
//! case) the connection is passed through untouched from then on; if it carries a
//! scheme, every header block of that connection is decoded and re-encoded with the
//! scheme removed. Re-encoded blocks use literals without indexing only, so the server's
//! HPACK table stays empty and in step. A connection that does not open with the HTTP/2
//! preface (HTTP/1.1 for `/health`, `/version`, `/metrics`) passes through untouched.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The HTTP/2 client connection preface.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const PREFACE_LEN: usize = PREFACE.len();
const FRAME_HEADER: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The smallest SETTINGS_MAX_FRAME_SIZE a server accepts; re-encoded blocks are split
/// to fit it.
const MAX_FRAME: usize = 16_384;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Before the client preface.
    Preface,
    /// Until the first header block.
    Inspect,
    /// The authority was fine: bytes pass as they come.
    PassThrough,
    /// The authority had a scheme: header blocks are rewritten.
    Rewrite,
}

/// A connection that fixes the client's `:authority` (see the module doc).
pub struct AuthorityFix<S> {
    inner: S,
    mode: Mode,
    /// Bytes read from the client and not yet processed.
    input: Vec<u8>,
    /// Processed bytes for the server.
    output: Vec<u8>,
    out_pos: usize,
    /// Raw frames of a header block still waiting for END_HEADERS (Inspect mode).
    held: Vec<u8>,
    /// The header block being collected: (stream, flags of HEADERS, priority bytes, block).
    block: Option<(u32, u8, Vec<u8>, Vec<u8>)>,
    decoder: hpack::Decoder<'static>,
    eof: bool,
}

fn encode_int(out: &mut Vec<u8>, mut v: usize, prefix_bits: u8, first: u8) {
    let max = (1usize << prefix_bits) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// HPACK "literal header field without indexing, new name", no Huffman.
fn encode_block(headers: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in headers {
        out.push(0x00);
        encode_int(&mut out, name.len(), 7, 0);
        out.extend_from_slice(name);
        encode_int(&mut out, value.len(), 7, 0);
        out.extend_from_slice(value);
    }
    out
}

fn frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

fn strip_scheme(v: &[u8]) -> Option<Vec<u8>> {
    let s = std::str::from_utf8(v).ok()?;
    let rest = s.split_once("://")?.1;
    Some(rest.trim_end_matches('/').as_bytes().to_vec())
}

impl<S> AuthorityFix<S> {
    /// Wraps a fresh connection.
    pub fn new(inner: S) -> AuthorityFix<S> {
        AuthorityFix {
            inner,
            mode: Mode::Preface,
            input: Vec::new(),
            output: Vec::new(),
            out_pos: 0,
            held: Vec::new(),
            block: None,
            decoder: hpack::Decoder::new(),
            eof: false,
        }
    }

    /// Moves what can be processed from `input` to `output`.
    fn process(&mut self) -> io::Result<()> {
        loop {
            match self.mode {
                Mode::PassThrough => {
                    self.output.append(&mut self.input);
                    return Ok(());
                }
                Mode::Preface => {
                    let seen = self.input.len().min(PREFACE_LEN);
                    if self.input[..seen] != PREFACE[..seen] {
                        // Not HTTP/2 with prior knowledge (HTTP/1.1: /health, /metrics).
                        self.mode = Mode::PassThrough;
                        continue;
                    }
                    if seen < PREFACE_LEN {
                        return Ok(());
                    }
                    self.output.extend(self.input.drain(..PREFACE_LEN));
                    self.mode = Mode::Inspect;
                }
                Mode::Inspect | Mode::Rewrite => {
                    if self.input.len() < FRAME_HEADER {
                        return Ok(());
                    }
                    let len = u32::from_be_bytes([0, self.input[0], self.input[1], self.input[2]])
                        as usize;
                    if self.input.len() < FRAME_HEADER + len {
                        return Ok(());
                    }
                    let frame: Vec<u8> = self.input.drain(..FRAME_HEADER + len).collect();
                    self.frame(frame)?;
                }
            }
        }
    }

    fn frame(&mut self, frame: Vec<u8>) -> io::Result<()> {
        let kind = frame[3];
        let flags = frame[4];
        let stream = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
        let payload = &frame[FRAME_HEADER..];
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_string());
        match kind {
            HEADERS => {
                let mut p = payload;
                let mut pad = 0;
                if flags & PADDED != 0 {
                    pad = usize::from(*p.first().ok_or_else(|| bad("short HEADERS"))?);
                    p = &p[1..];
                }
                let mut priority = Vec::new();
                if flags & PRIORITY != 0 {
                    priority = p.get(..5).ok_or_else(|| bad("short HEADERS"))?.to_vec();
                    p = &p[5..];
                }
                let end = p.len().checked_sub(pad).ok_or_else(|| bad("bad padding"))?;
                self.block = Some((stream, flags, priority, p[..end].to_vec()));
            }
            CONTINUATION => match self.block.as_mut() {
                Some((_, _, _, block)) => block.extend_from_slice(payload),
                None => return Err(bad("CONTINUATION without HEADERS")),
            },
            _ => {
                self.output.extend_from_slice(&frame);
                return Ok(());
            }
        }
        let raw_frame = frame;
        if flags & END_HEADERS == 0 {
            if self.mode == Mode::Inspect {
                self.held.extend_from_slice(&raw_frame);
            }
            return Ok(());
        }
        let Some((stream, hflags, priority, block)) = self.block.take() else {
            return Err(bad("header block without HEADERS"));
        };
        let mut headers = self
            .decoder
            .decode(&block)
            .map_err(|e| bad(&format!("HPACK: {e:?}")))?;
        let mut fixed = false;
        for (name, value) in headers.iter_mut() {
            if name.as_slice() == b":authority"
                && let Some(v) = strip_scheme(value)
            {
                *value = v;
                fixed = true;
            }
        }
        if self.mode == Mode::Inspect && !fixed {
            // Well formed: hand the original frames on and stop looking.
            self.output.append(&mut self.held);
            self.output.extend_from_slice(&raw_frame);
            self.mode = Mode::PassThrough;
            return Ok(());
        }
        self.held.clear();
        self.mode = Mode::Rewrite;
        let mut body = priority.clone();
        body.extend(encode_block(&headers));
        let head_flags = (hflags & (END_STREAM | PRIORITY)) | END_HEADERS;
        let mut chunks = body.chunks(MAX_FRAME).peekable();
        let first = chunks.next().unwrap_or(&[]);
        let more = chunks.peek().is_some();
        frame_header(
            &mut self.output,
            first.len(),
            HEADERS,
            if more {
                head_flags & !END_HEADERS
            } else {
                head_flags
            },
            stream,
        );
        self.output.extend_from_slice(first);
        while let Some(c) = chunks.next() {
            let last = chunks.peek().is_none();
            frame_header(
                &mut self.output,
                c.len(),
                CONTINUATION,
                if last { END_HEADERS } else { 0 },
                stream,
            );
            self.output.extend_from_slice(c);
        }
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for AuthorityFix<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.out_pos < this.output.len() {
                let n = buf.remaining().min(this.output.len() - this.out_pos);
                buf.put_slice(&this.output[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.output.len() {
                    this.output.clear();
                    this.out_pos = 0;
                }
                return Poll::Ready(Ok(()));
            }
            if this.mode == Mode::PassThrough && this.input.is_empty() {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            let mut chunk = [0u8; 16 * 1024];
            let mut rb = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut rb))?;
            if rb.filled().is_empty() {
                this.eof = true;
                // Whatever is left unparsed goes as is; the server reports it.
                this.output.append(&mut this.held);
                this.output.append(&mut this.input);
                continue;
            }
            this.input.extend_from_slice(rb.filled());
            this.process()?;
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for AuthorityFix<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn headers_frame(headers: &[(&[u8], &[u8])]) -> Vec<u8> {
        let block = hpack::Encoder::new().encode(headers.iter().copied());
        let mut out = Vec::new();
        frame_header(&mut out, block.len(), HEADERS, END_HEADERS, 1);
        out.extend_from_slice(&block);
        out
    }

    /// Feeds `input` through the adapter and returns what the server would read.
    async fn through(input: Vec<u8>) -> Vec<u8> {
        let (mut client, server) = tokio::io::duplex(1 << 20);
        client.write_all(&input).await.expect("write");
        client.shutdown().await.expect("shutdown");
        let mut fixed = AuthorityFix::new(server);
        let mut out = Vec::new();
        fixed.read_to_end(&mut out).await.expect("read");
        out
    }

    fn authority_of(frames: &[u8]) -> Vec<u8> {
        let len = u32::from_be_bytes([0, frames[0], frames[1], frames[2]]) as usize;
        let headers = hpack::Decoder::new()
            .decode(&frames[FRAME_HEADER..FRAME_HEADER + len])
            .expect("decodes");
        headers
            .into_iter()
            .find(|(n, _)| n.as_slice() == b":authority")
            .map(|(_, v)| v)
            .expect(":authority present")
    }

    #[tokio::test]
    async fn http1_requests_pass_through_untouched() {
        let short = b"GET / HTTP/1.0\r\n\r\n".to_vec();
        assert_eq!(through(short.clone()).await, short);
        let long = b"GET /health HTTP/1.1\r\nhost: 127.0.0.1:2379\r\n\r\n".to_vec();
        assert_eq!(through(long.clone()).await, long);
    }

    #[tokio::test]
    async fn a_well_formed_authority_is_left_byte_for_byte() {
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(&[
            (b":method", b"POST"),
            (b":authority", b"127.0.0.1:2379"),
            (b":path", b"/etcdserverpb.KV/Range"),
        ]));
        input.extend(b"rest of the stream");
        assert_eq!(through(input.clone()).await, input);
    }

    #[tokio::test]
    async fn an_authority_with_a_scheme_loses_the_scheme() {
        let mut input = PREFACE.to_vec();
        input.extend(headers_frame(&[
            (b":method", b"POST"),
            (b":authority", b"http://127.0.0.1:2379"),
            (b":path", b"/etcdserverpb.Maintenance/Status"),
        ]));
        let out = through(input).await;
        assert_eq!(&out[..PREFACE_LEN], PREFACE);
        assert_eq!(authority_of(&out[PREFACE_LEN..]), b"127.0.0.1:2379");
    }
}
