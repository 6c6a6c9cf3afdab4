//! KV.Range served by hand: a plain range (key order, no revision filters, values
//! wanted) sends the rows as the backend stores them, already encoded `mvccpb.KeyValue`
//! messages, instead of decoding every key-value and encoding it again. tonic decodes
//! the request and answers errors; a successful answer's HTTP body is built here, the
//! stored rows sent as they were read (no copy into an encoding buffer), so a range of
//! 150,000 values of 1 KB is one copy out of the backend with no key-value built. Every
//! other KV method goes to the generated server.
//!
//! A multi-key range's answer is charged to the member's [`RangeBudget`] as its rows are
//! read, and holds its charge until its body is dropped (sent, or the connection gone):
//! a range that would pass the bound beside others is stopped and refused with etcd's
//! "etcdserver: too many requests".
//!
//! Invariants: a [`RangeOut`]'s pieces carry exactly the bytes of the `RangeResponse` it
//! stands for (fields in field order) after the gRPC prefix; the answer (rows, `more`, `count`, header
//! revision, errors) is the one [`super::read::range`] gives for the same request.

use bytes::{Bytes, BytesMut};

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use oxcd_api::etcdserverpb::{RangeRequest, RangeResponse, ResponseHeader};
use oxcd_mvcc::{KeyRange, RangeOptions, Store};
use prost::bytes::BufMut;
use prost::encoding::{self, WireType};
use tonic::Status;

use oxcd_api::oxcdpb::RequestAuth;

use super::read as range;
use crate::domains::kv::KvHandles;
use crate::domains::kv::validate;
use crate::machine::applier::ApplyError;
use crate::machine::range_budget::{Charge, RangeBudget};
use oxcd_auth::Access;

/// etcd's path of KV.Range.
/// `RangeResponse.kvs`' field number.
const KVS_FIELD: u32 = 2;
/// A gRPC message's prefix: the compression flag and the length.
const GRPC_PREFIX: usize = 5;
/// The largest answer sent, as grpc-go's server default (etcd's).
const MAX_SEND_BYTES: usize = i32::MAX as usize;

/// A range answer as it is sent.
#[derive(Debug)]
pub struct RangeOut {
    /// Everything but the encoded rows (it holds decoded key-values on the general path).
    pub resp: RangeResponse,
    /// Rows already encoded as `kvs` fields, sent after `resp.kvs`, in pieces sent in
    /// order.
    pub encoded: Vec<Vec<u8>>,
    /// The answer's share of the member's range budget, held until it is sent.
    pub charge: Option<Charge>,
}

impl From<RangeResponse> for RangeOut {
    fn from(resp: RangeResponse) -> RangeOut {
        RangeOut {
            resp,
            encoded: Vec::new(),
            charge: None,
        }
    }
}

/// A successful answer as it is sent: the pieces of its gRPC message, and its charge.
pub(crate) struct Frames {
    pub pieces: Vec<Bytes>,
    pub charge: Option<Charge>,
}

impl RangeOut {
    /// The fields before the stored rows: the header and the decoded key-values.
    fn encode_head(&self, buf: &mut impl BufMut) {
        let r = &self.resp;
        if let Some(h) = &r.header {
            encoding::message::encode(1, h, buf);
        }
        for kv in &r.kvs {
            encoding::message::encode(KVS_FIELD, kv, buf);
        }
    }

    /// The fields after the stored rows: `more` and `count`.
    fn encode_tail(&self, buf: &mut impl BufMut) {
        let r = &self.resp;
        if r.more {
            encoding::bool::encode(3, &r.more, buf);
        }
        if r.count != 0 {
            encoding::int64::encode(4, &r.count, buf);
        }
    }

    /// The answer as one gRPC message in pieces (length prefix and head, the stored
    /// rows' pieces as they are, tail): the rows are not copied again.
    pub(crate) fn into_frames(self) -> Result<Frames, Status> {
        let mut head = BytesMut::new();
        head.put_bytes(0, GRPC_PREFIX);
        self.encode_head(&mut head);
        let mut tail = BytesMut::new();
        self.encode_tail(&mut tail);
        let rows: usize = self.encoded.iter().map(Vec::len).sum();
        let len = head.len() - GRPC_PREFIX + rows + tail.len();
        if len > MAX_SEND_BYTES {
            return Err(Status::resource_exhausted(format!(
                "grpc: trying to send message larger than max ({len} vs. {MAX_SEND_BYTES})"
            )));
        }
        // Uncompressed (the first byte stays 0), then the length.
        head[1..GRPC_PREFIX].copy_from_slice(&(len as u32).to_be_bytes());
        let mut frames = Vec::with_capacity(self.encoded.len() + 2);
        frames.push(head.freeze());
        frames.extend(self.encoded.into_iter().map(Bytes::from));
        frames.push(tail.freeze());
        Ok(Frames {
            pieces: frames,
            charge: self.charge,
        })
    }
}

/// Whether `r` wants the rows as stored: key order, every value, no revision filter.
fn plain(r: &RangeRequest) -> bool {
    let key_order = r.sort_target == SortTarget::Key as i32
        && (r.sort_order == SortOrder::None as i32 || r.sort_order == SortOrder::Ascend as i32);
    key_order && !r.keys_only && !r.count_only && !range::revision_filtered(r)
}

/// A plain range with the rows as stored, each row charged to `charge` (if any) as it
/// is read.
fn encoded(
    store: &Store,
    r: &RangeRequest,
    charge: Option<Charge>,
) -> Result<RangeOut, ApplyError> {
    let take = if r.limit > 0 {
        r.limit as usize
    } else {
        usize::MAX
    };
    let opts = RangeOptions {
        // One more than asked, to learn whether there is more.
        limit: if r.limit > 0 { r.limit as usize + 1 } else { 0 },
        rev: r.revision,
        count_only: false,
    };
    let (read, parts) = store.range_encoded(
        KeyRange::new(&r.key, &r.range_end),
        opts,
        take,
        crate::machine::reads::cores(),
        Pieces::default,
        |pieces: &mut Pieces, row| {
            // The field's key (1 byte) and the row's length (at most 10).
            let mut field = [0u8; 11];
            let mut rest = &mut field[..];
            encoding::encode_key(KVS_FIELD, WireType::LengthDelimited, &mut rest);
            encoding::encode_varint(row.len() as u64, &mut rest);
            let used = 11 - rest.len();
            pieces.put(&field[..used], charge.as_ref()) && pieces.put(row, charge.as_ref())
        },
    )?;
    Ok(RangeOut {
        resp: RangeResponse {
            header: Some(ResponseHeader {
                revision: read.rev,
                ..Default::default()
            }),
            kvs: Vec::new(),
            more: read.found > take,
            count: read.count as i64,
        },
        encoded: parts.into_iter().flat_map(|p| p.list).collect(),
        charge,
    })
}

/// The first piece of a share's rows grows as a vector does, up to this size.
const FIRST_PIECE: usize = 64 << 10;
/// Every later piece has exactly this capacity, filled to the end (rows span pieces).
const PIECE: usize = 1 << 20;

/// One share of an answer's encoded rows, in pieces that are never reallocated: after a
/// small first piece, each piece is made at its full size and charged for it, so the
/// bytes held are the bytes charged (no doubling vector holds twice its rows, nothing
/// is copied to grow).
#[derive(Default)]
struct Pieces {
    list: Vec<Vec<u8>>,
}

impl Pieces {
    /// Appends `data`; false if a new piece was refused by `charge`.
    fn put(&mut self, mut data: &[u8], charge: Option<&Charge>) -> bool {
        if self.list.len() <= 1 {
            if self.list.is_empty() {
                self.list.push(Vec::new());
            }
            let first = &mut self.list[0];
            if first.len() + data.len() <= FIRST_PIECE && first.capacity() <= FIRST_PIECE {
                first.extend_from_slice(data);
                return true;
            }
        }
        while !data.is_empty() {
            let room = match self.list.last() {
                Some(last) if self.list.len() > 1 => last.capacity() - last.len(),
                _ => 0,
            };
            if room == 0 {
                if let Some(c) = charge
                    && !c.add(PIECE)
                {
                    return false;
                }
                self.list.push(Vec::with_capacity(PIECE));
                continue;
            }
            let n = room.min(data.len());
            if let Some(last) = self.list.last_mut() {
                last.extend_from_slice(&data[..n]);
            }
            data = &data[n..];
        }
        true
    }
}

/// Answers a range request: validated, behind the read barrier unless serializable;
/// with the rows as stored when `as_stored` and the request is plain. A single key is
/// read on the calling worker; a range of keys (any size, up to the whole keyspace) is
/// read on the blocking pool, a few at a time, so that async workers never wait on
/// the backend for long.
pub(crate) async fn answer(
    kv: &KvHandles,
    caller: Option<RequestAuth>,
    r: RangeRequest,
    as_stored: bool,
) -> Result<RangeOut, Status> {
    validate::range(&r)?;
    if !r.serializable {
        if kv.membership.is_learner() {
            return Err(EtcdError::LearnerNotSupported.into());
        }
        kv.reads.barrier().await?;
    }
    let auth = kv.callers.auth();
    auth.check(caller.as_ref(), &r.key, &r.range_end, Access::Read)?;
    // etcd counts the range its read transaction makes.
    kv.reads.store().counts().add_range();
    let started = std::time::Instant::now();
    let read = if r.range_end.is_empty() {
        read(kv.reads.store(), &r, as_stored, None)
    } else {
        let _turn = kv.reads.range_turn().await?;
        let budget = kv.reads.range_budget().clone();
        kv.reads
            .blocking(move |store| read(store, &r, as_stored, Some(&budget)))
            .await?
    };
    kv.metrics.range.observe(read.is_ok(), started.elapsed());
    let mut out = read.map_err(ApplyError::into_read_error)?;
    // As etcd: an answer read while the auth store changed is refused (the permission
    // it was read under may be gone).
    if let Some(c) = &caller
        && c.revision != auth.revision()
    {
        return Err(EtcdError::AuthOldRevision.into());
    }
    let rev = out.resp.header.as_ref().map_or(0, |h| h.revision);
    out.resp.header = Some(kv.reads.header(rev));
    Ok(out)
}

/// Reads a range from `store`, the stored rows as they are when `as_stored` allows,
/// within `budget` if given (a range of keys; a single key is at most a request's size
/// and is not charged): stored rows are charged as they are read, a decoded answer its
/// encoded size once built.
fn read(
    store: &Store,
    r: &RangeRequest,
    as_stored: bool,
    budget: Option<&std::sync::Arc<RangeBudget>>,
) -> Result<RangeOut, ApplyError> {
    let charge = budget.map(|b| b.charge());
    if as_stored && plain(r) {
        return encoded(store, r, charge);
    }
    let mut out = RangeOut::from(range::range(store, r)?);
    if let Some(charge) = charge {
        if !charge.add(prost::Message::encoded_len(&out.resp)) {
            return Err(ApplyError::Request(EtcdError::TooManyRequests));
        }
        out.charge = Some(charge);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxcd_api::mvccpb::KeyValue;
    use prost::Message;

    /// The message the hand-built body carries, its uncompressed prefix checked.
    fn sent(out: RangeOut) -> Vec<u8> {
        let frames = out.into_frames().expect("small answer");
        let bytes: Vec<u8> = frames
            .pieces
            .iter()
            .flat_map(|b| b.iter().copied())
            .collect();
        assert_eq!(bytes[0], 0);
        let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        assert_eq!(len, bytes.len() - GRPC_PREFIX);
        bytes[GRPC_PREFIX..].to_vec()
    }

    fn kv(key: &str, value: &str, rev: i64) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: value.into(),
            create_revision: rev,
            mod_revision: rev,
            version: 1,
            lease: 0,
        }
    }

    #[test]
    fn pieces_hold_the_rows_in_order_in_fixed_pieces_each_charged() {
        let budget = RangeBudget::new(usize::MAX);
        let charge = budget.charge();
        let mut pieces = Pieces::default();
        let mut all = Vec::new();
        for (i, size) in [10, 3_000, 70_000, 5, PIECE + 17, 200, 2 * PIECE]
            .into_iter()
            .enumerate()
        {
            let row = vec![i as u8; size];
            assert!(pieces.put(&row, Some(&charge)));
            all.extend_from_slice(&row);
        }
        assert_eq!(pieces.list.concat(), all, "the bytes in order");
        assert!(pieces.list[0].len() <= FIRST_PIECE);
        for p in &pieces.list[1..] {
            assert_eq!(p.capacity(), PIECE, "never grown");
        }
        let full: Vec<_> = pieces.list[1..pieces.list.len() - 1].to_vec();
        assert!(full.iter().all(|p| p.len() == PIECE), "filled to the end");
        let fixed = pieces.list.len() - 1;
        assert_eq!(
            charge.bytes(),
            fixed * PIECE - crate::machine::range_budget::FREE_BYTES
        );
        // A small answer stays in its first piece, uncharged.
        let small = budget.charge();
        let mut one = Pieces::default();
        assert!(one.put(b"row", Some(&small)));
        assert_eq!((one.list.len(), small.bytes()), (1, 0));
    }

    #[test]
    fn stored_rows_encode_as_the_plain_response() {
        let kvs = vec![kv("a", "1", 2), kv("b", "22", 3)];
        let header = Some(ResponseHeader {
            cluster_id: 9,
            member_id: 8,
            revision: 3,
            raft_term: 2,
        });
        let plain = RangeResponse {
            header,
            kvs: kvs.clone(),
            more: true,
            count: 5,
        };
        // One piece per row, as when every row's share is read by a thread of its own.
        let mut rows = Vec::new();
        for kv in &kvs {
            let stored = kv.encode_to_vec();
            let mut piece = Vec::new();
            encoding::encode_key(KVS_FIELD, WireType::LengthDelimited, &mut piece);
            encoding::encode_varint(stored.len() as u64, &mut piece);
            piece.extend_from_slice(&stored);
            rows.push(piece);
        }
        let out = RangeOut {
            resp: RangeResponse {
                kvs: Vec::new(),
                ..plain.clone()
            },
            encoded: rows,
            charge: None,
        };
        assert_eq!(sent(out), plain.encode_to_vec());
        let general = RangeOut::from(plain.clone());
        assert_eq!(sent(general), plain.encode_to_vec());
        let empty = RangeOut::from(RangeResponse::default());
        assert_eq!(sent(empty), RangeResponse::default().encode_to_vec());
    }
}
