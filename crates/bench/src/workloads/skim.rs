//! A Watch response read only for what the bench counts: whether it confirms a create
//! request, and how many events it carries. Events are skipped, never built, so the load
//! generator, which shares the machine's cores with the servers, spends as little as it
//! can per event and the delivery rows measure the servers. Both systems are read with
//! it alike.

use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType, skip_field};

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

impl prost::Message for Skimmed {
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
}
