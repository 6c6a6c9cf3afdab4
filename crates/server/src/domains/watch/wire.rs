//! The Watch stream's outgoing message: a `WatchResponse` whose events may be carried
//! already encoded, so that an event published once and wanted by a thousand watchers is
//! encoded once, not a thousand times.
//!
//! Invariants: the bytes on the wire are exactly those of the `WatchResponse` with the
//! events appended in order (field 11, `events`, length-delimited; protobuf allows a
//! repeated field's elements after the other fields), so clients cannot tell the two
//! apart. Only the server encodes this type; it is never decoded.

use std::sync::OnceLock;

use oxcd_api::etcdserverpb::WatchResponse;
use oxcd_api::mvccpb::Event;
use prost::Message;
use prost::bytes::{Buf, BufMut, Bytes};
use prost::encoding::{DecodeContext, WireType};

/// `WatchResponse.events`' field number.
const EVENTS_FIELD: u32 = 11;

/// A response as the Watch stream sends it.
#[derive(Debug, Default)]
pub struct WatchOut {
    /// Everything but the shared events (it may hold events of its own too).
    pub resp: WatchResponse,
    /// Events already encoded as `events` fields, sent after `resp`'s fields.
    pub encoded: Vec<Bytes>,
}

impl From<WatchResponse> for WatchOut {
    fn from(resp: WatchResponse) -> WatchOut {
        WatchOut {
            resp,
            encoded: Vec::new(),
        }
    }
}

impl Message for WatchOut {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        self.resp.encode_raw(buf);
        for e in &self.encoded {
            buf.put_slice(e);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        // Never decoded: the server only sends it.
        prost::encoding::skip_field(wire_type, tag, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        self.resp.encoded_len() + self.encoded.iter().map(Bytes::len).sum::<usize>()
    }

    fn clear(&mut self) {
        self.resp.clear();
        self.encoded.clear();
    }
}

/// A batch's events, each encoded once as a `WatchResponse.events` field, on first use.
#[derive(Debug, Default)]
pub struct EncodedEvents(OnceLock<Vec<Bytes>>);

impl EncodedEvents {
    /// The encoding of each of `events` (the batch these were made for).
    pub fn get(&self, events: &[Event]) -> &[Bytes] {
        self.0.get_or_init(|| {
            let mut buf = Vec::new();
            let mut ends = Vec::with_capacity(events.len());
            for e in events {
                prost::encoding::message::encode(EVENTS_FIELD, e, &mut buf);
                ends.push(buf.len());
            }
            let all = Bytes::from(buf);
            let mut start = 0;
            ends.into_iter()
                .map(|end| {
                    let piece = all.slice(start..end);
                    start = end;
                    piece
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::etcdserverpb::ResponseHeader;
    use oxcd_api::mvccpb::KeyValue;

    fn event(key: &str, rev: i64) -> Event {
        Event {
            kv: Some(KeyValue {
                key: key.into(),
                value: b"v".to_vec(),
                mod_revision: rev,
                create_revision: rev,
                version: 1,
                lease: 0,
            }),
            ..Event::default()
        }
    }

    #[test]
    fn shared_events_encode_as_the_plain_response() {
        let events = vec![event("a", 5), event("b", 5), event("c", 6)];
        let base = WatchResponse {
            header: Some(ResponseHeader {
                cluster_id: 1,
                member_id: 2,
                revision: 6,
                raft_term: 3,
            }),
            watch_id: 7,
            ..WatchResponse::default()
        };
        let plain = WatchResponse {
            events: vec![events[0].clone(), events[2].clone()],
            ..base.clone()
        };
        let shared = EncodedEvents::default();
        let pieces = shared.get(&events);
        let out = WatchOut {
            resp: base,
            encoded: vec![pieces[0].clone(), pieces[2].clone()],
        };
        assert_eq!(out.encode_to_vec(), plain.encode_to_vec());
        assert_eq!(out.encoded_len(), plain.encoded_len());
        let back = WatchResponse::decode(out.encode_to_vec().as_slice()).expect("decodes");
        assert_eq!(back, plain);
    }
}
