//! etcd's encodings of raft messages on its peer streams, as etcd 3.5.16's rafthttp
//! writes and reads them (`server/etcdserver/api/rafthttp/msg_codec.go` and
//! `msgappv2_codec.go`):
//! - the *message* encoding ([`MessageDecoder`], [`encode_message`]): each message as a
//!   big-endian u64 length and its protobuf; the pipeline and the snapshot POST frame
//!   their one message the same way;
//! - the *msgappv2* encoding ([`MsgAppEncoder`], [`MsgAppDecoder`]): frames opening with
//!   a type byte: `0` a link heartbeat, `1` appended entries relative to the state the
//!   previous frames left, `2` a whole message.
//!
//! Decoders are incremental: fed bytes as they arrive, they hand out whole messages and
//! leave a partial frame in the buffer.
//!
//! Invariants: the msgappv2 encoder and decoder of one connection start at term 0,
//! index 0 and change their state on the same frames, exactly as etcd's do, so that an
//! etcd decoder rebuilds the very message this encoder was given (and the other way
//! round); a length above [`READ_LIMIT`] is refused before anything is allocated for it.

use bytes::{Buf, BufMut, BytesMut};
use oxcd_raft::persist::{decode_message, decode_sent_entry, encode_entry, encode_message as pb};
use oxcd_raft::{Message, MessageType, RaftError};

/// The largest message or entry a decoder accepts (etcd's `readBytesLimit`, 512 MiB).
pub const READ_LIMIT: u64 = 512 << 20;

/// msgappv2 frame types (etcd's `msgTypeLinkHeartbeat`, `msgTypeAppEntries`,
/// `msgTypeApp`).
const LINK_HEARTBEAT: u8 = 0;
const APP_ENTRIES: u8 = 1;
const APP: u8 = 2;

/// Why a stream's bytes could not be decoded; the stream is then closed.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// A msgappv2 frame of an unknown type (etcd's text).
    #[error("failed to parse type {0} in msgappv2 stream")]
    UnknownFrame(u8),
    /// A length above [`READ_LIMIT`] (etcd's `ErrExceedSizeLimit`).
    #[error("rafthttp: error limit exceeded")]
    TooLarge(u64),
    /// A message or entry whose protobuf does not decode.
    #[error(transparent)]
    Protobuf(#[from] RaftError),
}

/// etcd's link heartbeat: a heartbeat from and to nobody, which stream writers send
/// to keep a quiet stream alive. Receivers drop it: raft must never step it (raft-rs
/// would take it for a heartbeat from a leader of no id).
pub fn is_link_heartbeat(m: &Message) -> bool {
    m.get_msg_type() == MessageType::MsgHeartbeat && m.from == 0 && m.to == 0
}

/// A link heartbeat, for the *message* stream.
pub fn link_heartbeat() -> Message {
    let mut m = Message::default();
    m.set_msg_type(MessageType::MsgHeartbeat);
    m
}

/// Appends `m` in the *message* encoding (length, then protobuf) to `out`.
pub fn encode_message(m: &Message, out: &mut BytesMut) {
    let body = pb(m);
    out.reserve(8 + body.len());
    out.put_u64(body.len() as u64);
    out.put_slice(&body);
}

/// Reads a big-endian u64 length at the front of `buf` (not consumed), None when fewer
/// than 8 bytes are there.
fn peek_len(buf: &[u8]) -> Result<Option<u64>, CodecError> {
    let Some(head) = buf.get(..8) else {
        return Ok(None);
    };
    let mut raw = [0u8; 8];
    raw.copy_from_slice(head);
    let len = u64::from_be_bytes(raw);
    if len > READ_LIMIT {
        return Err(CodecError::TooLarge(len));
    }
    Ok(Some(len))
}

/// Takes one length-prefixed record off the front of `buf`, None (nothing consumed)
/// while it is incomplete.
fn take_record(buf: &mut BytesMut) -> Result<Option<BytesMut>, CodecError> {
    let Some(len) = peek_len(buf)? else {
        return Ok(None);
    };
    let end = 8 + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    let mut record = buf.split_to(end);
    record.advance(8);
    Ok(Some(record))
}

/// Decodes the *message* encoding.
#[derive(Debug, Default)]
pub struct MessageDecoder;

impl MessageDecoder {
    /// The next whole message at the front of `buf` (consumed), None while it is
    /// incomplete.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, CodecError> {
        match take_record(buf)? {
            Some(body) => Ok(Some(decode_message(&body)?)),
            None => Ok(None),
        }
    }
}

/// The state both ends of a msgappv2 connection keep: the term and the index of the
/// last entry the frames so far carried.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct AppState {
    term: u64,
    index: u64,
}

impl AppState {
    /// After a whole message: its term, and its last entry's index (or its index).
    fn after_message(m: &Message) -> AppState {
        AppState {
            term: m.term,
            index: m.get_entries().last().map_or(m.index, |e| e.index),
        }
    }
}

/// Encodes a msgappv2 stream to one peer (a new one for each connection).
#[derive(Debug, Default)]
pub struct MsgAppEncoder {
    state: AppState,
}

impl MsgAppEncoder {
    /// Appends `m` to `out`: a link heartbeat as one byte, an append that continues the
    /// previous one in the same term as its entries and commit only, anything else
    /// whole.
    pub fn encode(&mut self, m: &Message, out: &mut BytesMut) {
        if is_link_heartbeat(m) {
            out.put_u8(LINK_HEARTBEAT);
            return;
        }
        let continues = self.state.index == m.index
            && self.state.term == m.log_term
            && m.log_term == m.term
            && m.get_msg_type() == MessageType::MsgAppend;
        if continues {
            out.put_u8(APP_ENTRIES);
            out.put_u64(m.get_entries().len() as u64);
            for e in m.get_entries() {
                let body = encode_entry(e);
                out.put_u64(body.len() as u64);
                out.put_slice(&body);
            }
            out.put_u64(m.commit);
            self.state.index += m.get_entries().len() as u64;
            return;
        }
        out.put_u8(APP);
        encode_message(m, out);
        self.state = AppState::after_message(m);
    }
}

/// Decodes a msgappv2 stream from peer `from` to this member `to` (a new one for each
/// connection).
#[derive(Debug)]
pub struct MsgAppDecoder {
    to: u64,
    from: u64,
    state: AppState,
}

impl MsgAppDecoder {
    /// A decoder of the stream `from` sends to member `to`.
    pub fn new(to: u64, from: u64) -> MsgAppDecoder {
        MsgAppDecoder {
            to,
            from,
            state: AppState::default(),
        }
    }

    /// The next whole message at the front of `buf` (consumed), None while it is
    /// incomplete. Link heartbeats come out as [`link_heartbeat`]s.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Message>, CodecError> {
        let Some(&kind) = buf.first() else {
            return Ok(None);
        };
        match kind {
            LINK_HEARTBEAT => {
                buf.advance(1);
                Ok(Some(link_heartbeat()))
            }
            APP => {
                let Some(len) = peek_len(&buf[1..])? else {
                    return Ok(None);
                };
                let end = 9 + len as usize;
                if buf.len() < end {
                    return Ok(None);
                }
                let frame = buf.split_to(end);
                let m = decode_message(&frame[9..])?;
                self.state = AppState::after_message(&m);
                Ok(Some(m))
            }
            APP_ENTRIES => {
                let Some(end) = app_entries_len(&buf[1..])? else {
                    return Ok(None);
                };
                buf.advance(1);
                let mut frame = buf.split_to(end);
                let count = frame.get_u64();
                let mut entries = Vec::with_capacity(count.min(4096) as usize);
                for _ in 0..count {
                    let len = frame.get_u64() as usize;
                    entries.push(decode_sent_entry(&frame.split_to(len))?);
                }
                let commit = frame.get_u64();
                let mut m = Message::default();
                m.set_msg_type(MessageType::MsgAppend);
                m.from = self.from;
                m.to = self.to;
                m.term = self.state.term;
                m.log_term = self.state.term;
                m.index = self.state.index;
                m.commit = commit;
                self.state.index += count;
                m.set_entries(entries.into());
                Ok(Some(m))
            }
            other => Err(CodecError::UnknownFrame(other)),
        }
    }
}

/// The length of the append-entries frame at the front of `body` (after its type byte),
/// None while it is incomplete.
fn app_entries_len(body: &[u8]) -> Result<Option<usize>, CodecError> {
    let Some(count) = peek_len(body)? else {
        return Ok(None);
    };
    let mut at = 8usize;
    for _ in 0..count {
        let Some(len) = peek_len(&body[at..])? else {
            return Ok(None);
        };
        at += 8 + len as usize;
        if body.len() < at {
            return Ok(None);
        }
    }
    if body.len() < at + 8 {
        return Ok(None);
    }
    Ok(Some(at + 8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_raft::Entry;

    fn entry(term: u64, index: u64, data: &[u8]) -> Entry {
        Entry {
            term,
            index,
            data: data.to_vec().into(),
            ..Default::default()
        }
    }

    fn append(term: u64, log_term: u64, index: u64, entries: Vec<Entry>, commit: u64) -> Message {
        let mut m = Message::default();
        m.set_msg_type(MessageType::MsgAppend);
        m.from = 1;
        m.to = 2;
        m.term = term;
        m.log_term = log_term;
        m.index = index;
        m.commit = commit;
        m.set_entries(entries.into());
        m
    }

    /// Feeds `bytes` one at a time, as a slow connection would, collecting messages.
    fn trickle(
        bytes: &[u8],
        mut decode: impl FnMut(&mut BytesMut) -> Result<Option<Message>, CodecError>,
    ) -> Vec<Message> {
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for b in bytes {
            buf.put_u8(*b);
            while let Some(m) = decode(&mut buf).expect("decodes") {
                out.push(m);
            }
        }
        assert!(buf.is_empty(), "nothing left over");
        out
    }

    #[test]
    fn etcds_link_heartbeat_on_the_message_stream_decodes_as_one() {
        // What etcd 3.5's gogo-generated code writes for `raftpb.Message{Type:
        // MsgHeartbeat}`: every non-nullable field, the empty snapshot included.
        let go: [u8; 38] = [
            0, 0, 0, 0, 0, 0, 0, 0x1e, 0x08, 0x08, 0x10, 0x00, 0x18, 0x00, 0x20, 0x00, 0x28, 0x00,
            0x30, 0x00, 0x40, 0x00, 0x4a, 0x0a, 0x12, 0x08, 0x0a, 0x02, 0x28, 0x00, 0x10, 0x00,
            0x18, 0x00, 0x50, 0x00, 0x58, 0x00,
        ];
        let got = trickle(&go, |b| MessageDecoder.decode(b));
        assert_eq!(got.len(), 1);
        assert!(is_link_heartbeat(&got[0]));
        // Ours is the short form etcd decodes to the same message.
        let mut ours = BytesMut::new();
        encode_message(&link_heartbeat(), &mut ours);
        assert_eq!(&ours[..], &[0, 0, 0, 0, 0, 0, 0, 2, 0x08, 0x08]);
    }

    #[test]
    fn messages_round_trip_through_the_message_encoding() {
        let sent = vec![
            append(3, 3, 7, vec![entry(3, 8, b"a"), entry(3, 9, b"")], 8),
            link_heartbeat(),
        ];
        let mut wire = BytesMut::new();
        for m in &sent {
            encode_message(m, &mut wire);
        }
        assert_eq!(trickle(&wire, |b| MessageDecoder.decode(b)), sent);
    }

    #[test]
    fn an_append_continuing_the_last_one_goes_as_entries_only_and_comes_back_whole() {
        let sent = vec![
            append(5, 5, 10, vec![entry(5, 11, b"x")], 10),
            // Continues at 11 in term 5: an entries-only frame.
            append(5, 5, 11, vec![entry(5, 12, b"y"), entry(5, 13, b"z")], 12),
            link_heartbeat(),
            append(5, 5, 13, vec![], 13),
            // Another log term: whole again.
            append(6, 5, 13, vec![entry(6, 14, b"w")], 13),
            append(6, 6, 14, vec![entry(6, 15, b"v")], 14),
        ];
        let mut enc = MsgAppEncoder::default();
        let mut wire = BytesMut::new();
        let mut kinds = Vec::new();
        for m in &sent {
            kinds.push(enc.encode_kind(m, &mut wire));
        }
        assert_eq!(
            kinds,
            [
                APP,
                APP_ENTRIES,
                LINK_HEARTBEAT,
                APP_ENTRIES,
                APP,
                APP_ENTRIES
            ]
        );
        let mut dec = MsgAppDecoder::new(2, 1);
        let got = trickle(&wire, |b| dec.decode(b));
        assert_eq!(got, sent);
    }

    #[test]
    fn an_entries_frame_is_read_as_etcd_lays_it_out() {
        // Type 1, one entry, the entry's length and protobuf, the commit: built by hand
        // from etcd's layout, after a whole MsgApp that set term 4 and index 9.
        let mut wire = BytesMut::new();
        wire.put_u8(APP);
        encode_message(&append(4, 4, 8, vec![entry(4, 9, b"k")], 8), &mut wire);
        let e = encode_entry(&entry(4, 10, b"v"));
        wire.put_u8(APP_ENTRIES);
        wire.put_u64(1);
        wire.put_u64(e.len() as u64);
        wire.put_slice(&e);
        wire.put_u64(10);
        let mut dec = MsgAppDecoder::new(2, 1);
        let got = trickle(&wire, |b| dec.decode(b));
        assert_eq!(got[1], append(4, 4, 9, vec![entry(4, 10, b"v")], 10));
    }

    #[test]
    fn unknown_frames_and_huge_lengths_are_refused() {
        let mut dec = MsgAppDecoder::new(2, 1);
        let mut buf = BytesMut::from(&[7u8][..]);
        assert_eq!(
            dec.decode(&mut buf).unwrap_err().to_string(),
            "failed to parse type 7 in msgappv2 stream"
        );
        let mut buf = BytesMut::new();
        buf.put_u64(READ_LIMIT + 1);
        assert!(matches!(
            MessageDecoder.decode(&mut buf),
            Err(CodecError::TooLarge(_))
        ));
        let mut buf = BytesMut::from(&[0, 0, 0, 0, 0, 0, 0, 2, 0xff, 0xff][..]);
        assert!(matches!(
            MessageDecoder.decode(&mut buf),
            Err(CodecError::Protobuf(_))
        ));
    }

    impl MsgAppEncoder {
        /// Encodes `m` and says which frame type it chose.
        fn encode_kind(&mut self, m: &Message, out: &mut BytesMut) -> u8 {
            let at = out.len();
            self.encode(m, out);
            out[at]
        }
    }
}
