//! KV.RangeStream (etcd 3.7): a range answered in chunks, so that a member's memory
//! holds a chunk or two whatever the range's size. As etcd v3.7.0
//! (`server/etcdserver/api/v3rpc/key.go` `RangeStream`, `server/etcdserver/v3_server.go`
//! `rangeStream`):
//! - Range's checks, then `Unimplemented` for an ordering other than key order and for
//!   revision filters; one read barrier (unless serializable) and one permission check,
//!   both before the first chunk; an auth store changed meanwhile fails the stream at
//!   its end;
//! - every chunk reads at the revision the first one pinned (the current one when the
//!   request asks 0), in a read of its own; a compaction past it ends the stream with
//!   etcd's error, possibly after chunks were sent;
//! - chunks are counted in keys: 10 first, doubled after a chunk under half of
//!   `--max-request-bytes`, halved after one over twice it, never past the request's
//!   limit; middle chunks carry only `kvs`, the last one the header (the pinned
//!   revision), `more` and `count` (the keys sent, plus the rest when the limit cut the
//!   range); `count_only` is one message;
//! - keys-only chunks come from the index alone (etcd 3.7's fast keys-only range: no
//!   value, no lease).
//!
//! Better than etcd: with `sort_order` NONE and another `sort_target`, etcd sorts each
//! chunk by the target and takes the next key from the chunk's last element, which can
//! skip or repeat keys; oxcd sorts each chunk alike but continues after its largest key.
//! The producer waits for the client: one chunk is queued at most.

use std::sync::Arc;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use oxcd_api::etcdserverpb::{RangeRequest, RangeResponse, RangeStreamResponse};
use oxcd_api::mvccpb::KeyValue;
use oxcd_api::oxcdpb::RequestAuth;
use oxcd_auth::Access;
use oxcd_mvcc::{KeyRange, RangeOptions};
use prost::Message as _;
use tokio::sync::mpsc;
use tonic::Status;

use super::KvHandles;
use super::{read, validate};
use crate::machine::applier::mvcc_err;

/// The stream RangeStream answers with.
pub type RangeChunks =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<RangeStreamResponse, Status>> + Send>>;

/// Keys in the first chunk.
const FIRST_CHUNK: usize = 10;

/// The keys of the next chunk after one of `keys` keys that encoded to `size` bytes,
/// aiming at chunks of about `target` bytes.
pub fn next_chunk(keys: usize, size: usize, target: usize) -> usize {
    if size < target / 2 {
        keys.saturating_mul(2)
    } else if size > target.saturating_mul(2) {
        (keys / 2).max(1)
    } else {
        keys
    }
}

/// etcd 3.7's checks of a RangeStream request, after Range's.
fn check(r: &RangeRequest) -> Result<(), Status> {
    validate::range(r)?;
    let default_order = r.sort_order == SortOrder::None as i32
        || (r.sort_target == SortTarget::Key as i32 && r.sort_order == SortOrder::Ascend as i32);
    if !default_order {
        return Err(Status::unimplemented(
            "RangeStream does not support custom sort orders",
        ));
    }
    if read::revision_filtered(r) {
        return Err(Status::unimplemented(
            "RangeStream does not support revision filters",
        ));
    }
    Ok(())
}

/// Starts answering `r` for `caller`: the checks and the barrier now, the chunks from a
/// task that sends each once the client has taken the one before.
pub async fn start(
    kv: Arc<KvHandles>,
    caller: Option<RequestAuth>,
    r: RangeRequest,
) -> Result<RangeChunks, Status> {
    check(&r)?;
    if !r.serializable {
        kv.reads.barrier().await?;
    }
    kv.callers
        .auth()
        .check(caller.as_ref(), &r.key, &r.range_end, Access::Read)?;
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        if let Err(e) = produce(&kv, caller.as_ref(), r, &tx).await {
            let _ = tx.send(Err(e)).await;
        }
    });
    Ok(Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx)))
}

/// Sends every chunk of `r`; Err ends the stream with it.
async fn produce(
    kv: &KvHandles,
    caller: Option<&RequestAuth>,
    r: RangeRequest,
    tx: &mpsc::Sender<Result<RangeStreamResponse, Status>>,
) -> Result<(), Status> {
    let send = |resp: RangeResponse| async move {
        tx.send(Ok(RangeStreamResponse {
            range_response: Some(resp),
        }))
        .await
        .is_ok()
    };
    if r.count_only {
        let res = count(kv, r.key.clone(), r.range_end.clone(), r.revision).await?;
        kv.reads.store().counts().add_range();
        check_auth_unchanged(kv, caller)?;
        send(RangeResponse {
            header: Some(kv.reads.header(res.rev)),
            count: res.count as i64,
            ..RangeResponse::default()
        })
        .await;
        return Ok(());
    }
    let total_limit = if r.limit > 0 {
        r.limit as usize
    } else {
        usize::MAX
    };
    let target = kv.max_request_bytes;
    let sort_by = SortTarget::try_from(r.sort_target).unwrap_or(SortTarget::Key);
    let mut chunk = FIRST_CHUNK.min(total_limit);
    let mut pinned = r.revision;
    let mut header_rev = 0;
    let mut cursor = r.key.clone();
    let mut sent = 0usize;
    let mut first = true;
    loop {
        let (from, end, at) = (cursor.clone(), r.range_end.clone(), pinned);
        let keys_only = r.keys_only;
        let page = kv
            .reads
            .blocking(move |store| {
                store.range_page(KeyRange::new(&from, &end), at, chunk, keys_only)
            })
            .await?
            .map_err(mvcc_err)?;
        kv.reads.store().counts().add_range();
        if first {
            header_rev = page.rev;
            pinned = page.at;
            first = false;
        }
        sent += page.kvs.len();
        let done = !page.more || sent >= total_limit;
        // Continue after the largest key read, whatever order the chunk is sent in.
        if let Some(last) = page.kvs.last() {
            cursor = last.key.clone();
            cursor.push(0);
        }
        let mut kvs = page.kvs;
        if sort_by != SortTarget::Key {
            // As a unary Range with `sort_order` NONE sorts: ascending, ties in key order.
            read::sort(&mut kvs, sort_by, false);
        }
        if done {
            let mut total = sent as i64;
            if page.more {
                // The request's limit cut the range: count the rest, as Range counts.
                let rest = count(kv, cursor.clone(), r.range_end.clone(), pinned).await?;
                total += rest.count as i64;
            }
            check_auth_unchanged(kv, caller)?;
            send(RangeResponse {
                header: Some(kv.reads.header(header_rev)),
                kvs,
                more: page.more,
                count: total,
            })
            .await;
            return Ok(());
        }
        let size: usize = kvs.iter().map(KeyValue::encoded_len).sum();
        if !send(RangeResponse {
            kvs,
            ..RangeResponse::default()
        })
        .await
        {
            return Ok(()); // the client went away
        }
        chunk = next_chunk(chunk, size, target).min(total_limit - sent);
    }
}

/// The keys in `[key, end)` at `rev` (0: the current revision), counted in the index on
/// the blocking pool.
async fn count(
    kv: &KvHandles,
    key: Vec<u8>,
    end: Vec<u8>,
    rev: i64,
) -> Result<oxcd_mvcc::RangeResult, Status> {
    let counted = kv
        .reads
        .blocking(move |store| {
            store.range(
                KeyRange::new(&key, &end),
                RangeOptions {
                    limit: 0,
                    rev,
                    count_only: true,
                },
            )
        })
        .await?
        .map_err(mvcc_err)?;
    Ok(counted)
}

/// As etcd: an answer read while the auth store changed is refused at the end.
fn check_auth_unchanged(kv: &KvHandles, caller: Option<&RequestAuth>) -> Result<(), Status> {
    if let Some(c) = caller
        && c.revision != kv.callers.auth().revision()
    {
        return Err(EtcdError::AuthOldRevision.into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // etcd v3.7.0 server/etcdserver/v3_server.go adjustChunkLimit.
    #[test]
    fn chunks_grow_and_shrink_toward_the_target() {
        assert_eq!(next_chunk(10, 100, 1000), 20);
        assert_eq!(next_chunk(10, 700, 1000), 10);
        assert_eq!(next_chunk(10, 2500, 1000), 5);
        assert_eq!(next_chunk(1, 5000, 1000), 1);
    }
}
