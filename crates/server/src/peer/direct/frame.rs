//! A direct link's frames: a 4-byte big-endian length, then one raft message in its
//! protobuf encoding (the bytes a gRPC peer stream's `RaftEnvelope` carries). A frame of
//! length 0 is a keepalive ([`KEEPALIVE`]): a raft message always names its sender and
//! receiver, so it never encodes to nothing.
//!
//! Invariant: a reader that meets a length over [`MAX_FRAME`] or a message that does
//! not decode stops with an error; it never skips ahead, so it never reads the middle
//! of a frame as the start of one.

use std::io::{self, Read};

use oxcd_raft::Message;
use oxcd_raft::persist::decode_message;
use protobuf::Message as _;

/// The largest message a link carries: raft's appends are capped at 1 MiB of entries
/// plus one entry, and an entry is at most a request (`--max-request-bytes`, at most
/// 2 GiB in etcd, far less in practice). A larger length is a broken stream.
pub const MAX_FRAME: usize = 1 << 30;

/// The keepalive frame a sender writes when it has had nothing else to write for a
/// while, so the receiver can tell a quiet link from a dead one.
pub const KEEPALIVE: [u8; 4] = [0; 4];

/// Appends `m` as one frame to `buf`.
pub fn append(buf: &mut Vec<u8>, m: &Message) {
    let start = buf.len();
    buf.extend_from_slice(&[0; 4]);
    if m.write_to_vec(buf).is_err() {
        // protobuf writes a message it holds in memory; nothing to send if it refuses.
        buf.truncate(start);
        return;
    }
    let len = (buf.len() - start - 4) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// Why a link's stream of frames ended.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The connection failed or closed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A length no frame may have.
    #[error("a frame of {0} bytes is over the limit")]
    TooLarge(usize),
    /// The message does not decode.
    #[error(transparent)]
    Decode(#[from] oxcd_raft::RaftError),
}

/// One frame read.
#[derive(Debug)]
pub enum Frame {
    /// A raft message and its size on the wire.
    Message(Message, usize),
    /// A keepalive.
    Keepalive,
}

/// Reads frames from a connection (buffered by the caller).
pub struct FrameReader<R> {
    input: R,
    body: Vec<u8>,
}

impl<R: Read> FrameReader<R> {
    /// Reads frames from `input`.
    pub fn new(input: R) -> FrameReader<R> {
        FrameReader {
            input,
            body: Vec::new(),
        }
    }

    /// The input frames are read from.
    pub fn input_mut(&mut self) -> &mut R {
        &mut self.input
    }

    /// The next frame; `Ok(None)` at a clean end (the connection closed between
    /// frames).
    pub fn read_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        let mut len = [0u8; 4];
        match self.input.read_exact(&mut len[..1]) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        self.input.read_exact(&mut len[1..])?;
        let len = u32::from_be_bytes(len) as usize;
        if len == 0 {
            return Ok(Some(Frame::Keepalive));
        }
        if len > MAX_FRAME {
            return Err(FrameError::TooLarge(len));
        }
        self.body.clear();
        self.body.resize(len, 0);
        self.input.read_exact(&mut self.body)?;
        let m = decode_message(&self.body)?;
        // Keep a large message's buffer from staying allocated for the link's life.
        if self.body.capacity() > 1 << 20 {
            self.body = Vec::new();
        }
        Ok(Some(Frame::Message(m, len + 4)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_raft::MessageType;

    fn message(to: u64, index: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.to = to;
        m.from = 1;
        m.index = index;
        m
    }

    #[test]
    fn frames_read_back_in_order_and_end_cleanly() {
        let mut buf = Vec::new();
        for i in 0..3 {
            append(&mut buf, &message(2, i));
        }
        buf.extend_from_slice(&KEEPALIVE);
        let mut reader = FrameReader::new(&buf[..]);
        for i in 0..3 {
            let Some(Frame::Message(m, size)) = reader.read_frame().expect("frame") else {
                panic!("expected a message");
            };
            assert_eq!((m.to, m.index), (2, i));
            assert!(size > 4);
        }
        assert!(matches!(reader.read_frame(), Ok(Some(Frame::Keepalive))));
        assert!(reader.read_frame().expect("clean end").is_none());
    }

    #[test]
    fn a_cut_frame_is_an_error_not_an_end() {
        let mut buf = Vec::new();
        append(&mut buf, &message(2, 7));
        let cut = &buf[..buf.len() - 1];
        assert!(matches!(
            FrameReader::new(cut).read_frame(),
            Err(FrameError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof
        ));
    }

    #[test]
    fn a_length_over_the_limit_is_refused_before_reading_it() {
        let buf = ((MAX_FRAME + 1) as u32).to_be_bytes();
        assert!(matches!(
            FrameReader::new(&buf[..]).read_frame(),
            Err(FrameError::TooLarge(_))
        ));
    }

    #[test]
    fn garbage_does_not_decode() {
        let mut buf = 3u32.to_be_bytes().to_vec();
        buf.extend_from_slice(&[0xff, 0xff, 0xff]);
        assert!(matches!(
            FrameReader::new(&buf[..]).read_frame(),
            Err(FrameError::Decode(_))
        ));
    }
}
