//! A Watch response read only for what the bench counts: whether it confirms a create
//! request, and how many events it carries. Events are skipped, never built, so the load
//! generator, which shares the machine's cores with the servers, spends as little as it
//! can per event and the delivery rows measure the servers. Both systems are read with
//! it alike. A response that arrives in one piece (tonic hands each message over in one
//! buffer) is walked as a byte slice: one varint per field and one length skip per
//! event, no per-field buffer bookkeeping.

use prost::DecodeError;
use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType, decode_varint, skip_field};

/// `WatchResponse.created`'s field number.
const CREATED_FIELD: u32 = 3;
/// `WatchResponse.events`' field number.
const EVENTS_FIELD: u32 = 11;

/// What a skimmed Watch response says.
#[derive(Debug, Default)]
pub struct Skimmed {
    /// It confirms a create request.
    pub created: bool,
    /// Events it carries.
    pub events: u64,
}

impl Skimmed {
    /// Reads the top-level fields of an encoded response held in one slice; None when it
    /// is malformed.
    fn skim(mut b: &[u8]) -> Option<Skimmed> {
        let mut s = Skimmed::default();
        while !b.is_empty() {
            let key = decode_varint(&mut b).ok()?;
            let field = key >> 3;
            match key & 7 {
                0 => {
                    let v = decode_varint(&mut b).ok()?;
                    if field == u64::from(CREATED_FIELD) {
                        s.created = v != 0;
                    }
                }
                1 => b = b.get(8..)?,
                2 => {
                    let len = usize::try_from(decode_varint(&mut b).ok()?).ok()?;
                    b = b.get(len..)?;
                    if field == u64::from(EVENTS_FIELD) {
                        s.events += 1;
                    }
                }
                5 => b = b.get(4..)?,
                _ => return None,
            }
        }
        Some(s)
    }

    /// Reads the response field by field (in pieces, or to name what is malformed).
    fn merge_fields(&mut self, mut buf: impl Buf) -> Result<(), DecodeError> {
        let ctx = DecodeContext::default();
        while buf.has_remaining() {
            let (tag, wire_type) = prost::encoding::decode_key(&mut buf)?;
            prost::Message::merge_field(self, tag, wire_type, &mut buf, ctx.clone())?;
        }
        Ok(())
    }
}

impl prost::Message for Skimmed {
    fn merge(&mut self, mut buf: impl Buf) -> Result<(), DecodeError> {
        let len = buf.remaining();
        if buf.chunk().len() < len {
            return self.merge_fields(buf);
        }
        match Skimmed::skim(&buf.chunk()[..len]) {
            Some(s) => {
                self.created |= s.created;
                self.events += s.events;
                buf.advance(len);
                Ok(())
            }
            None => self.merge_fields(buf),
        }
    }

    fn encode_raw(&self, _buf: &mut impl BufMut) {
        // Only read, never sent.
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            CREATED_FIELD => prost::encoding::bool::merge(wire_type, &mut self.created, buf, ctx),
            EVENTS_FIELD => {
                self.events += 1;
                skip_field(wire_type, tag, buf, ctx)
            }
            _ => skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        0
    }

    fn clear(&mut self) {
        *self = Skimmed::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::etcdserverpb::WatchResponse;
    use oxcd_api::mvccpb::Event;
    use prost::Message;

    #[test]
    fn counts_events_and_reads_created() {
        let resp = WatchResponse {
            created: true,
            watch_id: 3,
            events: vec![Event::default(), Event::default(), Event::default()],
            ..WatchResponse::default()
        };
        let s = Skimmed::decode(resp.encode_to_vec().as_slice()).expect("decodes");
        assert!(s.created);
        assert_eq!(s.events, 3);
    }

    #[test]
    fn a_response_in_pieces_reads_the_same_and_a_truncated_one_is_refused() {
        let resp = WatchResponse {
            header: Some(Default::default()),
            watch_id: 7,
            events: vec![Event::default(); 5],
            ..WatchResponse::default()
        };
        let bytes = resp.encode_to_vec();
        let (a, b) = bytes.split_at(bytes.len() / 2);
        let s = Skimmed::decode(a.chain(b)).expect("decodes");
        assert_eq!((s.created, s.events), (false, 5));
        assert!(Skimmed::decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
