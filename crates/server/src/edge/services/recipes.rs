//! What etcd's Lock and Election services do through an in-process client (the recipes
//! of etcd's `client/v3/concurrency`), done with the member's own primitives: txns,
//! deletes and lease grants proposed through raft, linearizable reads after the
//! ReadIndex barrier, and waits on the watch feed.
//!
//! Errors surface as etcd's do: its services call the server through a client, which
//! turns the server's gRPC errors into plain errors, so clients receive every error of
//! these services with code `Unknown` and etcd's message ([`client_error`]).
//!
//! Invariant: a wait subscribes to the feed before it reads, so no change made after
//! the read goes unnoticed (the apply thread publishes every batch, or a gap, after
//! readers can see it).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use oxcd_api::etcdserverpb::range_request::{SortOrder, SortTarget};
use oxcd_api::etcdserverpb::request_op::Request as OpRequest;
use oxcd_api::etcdserverpb::{
    Compare, DeleteRangeRequest, DeleteRangeResponse, LeaseGrantRequest, PutRequest, RangeRequest,
    RangeResponse, RequestOp, ResponseHeader, TxnRequest, TxnResponse,
};
use oxcd_api::mvccpb::event::EventType;
use oxcd_api::oxcdpb::RequestAuth;
use tonic::{Code, Status};

use crate::domains::kv::read as range;
use crate::domains::kv::validate;
use crate::domains::watch::{Feed, Subscription};

use crate::machine::quota;
use oxcd_auth::Access;

/// The TTL of the lease a request without one gets (concurrency's default session TTL).
const SESSION_TTL: i64 = 60;

/// What the recipes work with: the member's own primitives.
pub struct RecipeHandles {
    /// Who makes a request, and the permission checks.
    pub callers: crate::domains::auth::caller::Callers,
    /// Linearizable reads and headers.
    pub reads: crate::machine::reads::Reads,
    /// Txns, deletes and lease grants.
    pub writes: crate::machine::writes::Writes,
    /// The leases (a session lease's id and shortest TTL).
    pub leases: Arc<crate::domains::lease::Lessor>,
    /// The watch feed the waits follow.
    pub hub: Arc<crate::domains::watch::WatchHub>,
    /// `--max-txn-ops`.
    pub max_txn_ops: usize,
}

/// Leases granted for requests without one, to vary the ids chosen.
static GRANTS: AtomicU64 = AtomicU64::new(0);

/// An error as etcd's Lock and Election services return it: code `Unknown`, the
/// message of the underlying error.
pub fn client_error(e: EtcdError) -> Status {
    unknown(e.message())
}

/// An error of the recipes themselves ("election: not leader", ...): code `Unknown`.
pub fn unknown(message: &str) -> Status {
    Status::new(Code::Unknown, message)
}

/// `name` + "/": the prefix under which every contender's key lives.
pub fn prefix(name: &[u8]) -> Vec<u8> {
    let mut p = name.to_vec();
    p.push(b'/');
    p
}

/// A contender's key: the prefix and its lease id in lowercase hex, as Go's `%x` prints
/// an int64 (a sign, then the magnitude).
pub fn session_key(prefix: &[u8], lease: i64) -> Vec<u8> {
    let hex = if lease < 0 {
        format!("-{:x}", lease.unsigned_abs())
    } else {
        format!("{lease:x}")
    };
    let mut k = prefix.to_vec();
    k.extend_from_slice(hex.as_bytes());
    k
}

/// The end of the range of keys starting with `prefix` (etcd's `GetPrefixRangeEnd`).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.last_mut() {
        if *last < 0xff {
            *last += 1;
            return end;
        }
        end.pop();
    }
    vec![0]
}

/// Get of the key under `prefix` created first (`WithFirstCreate`).
pub fn first_created(prefix: &[u8]) -> RangeRequest {
    RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        sort_order: SortOrder::Ascend as i32,
        sort_target: SortTarget::Create as i32,
        limit: 1,
        ..Default::default()
    }
}

/// Get of the key under `prefix` created last at or below `max_create_rev`
/// (`WithLastCreate`, `WithMaxCreateRev`).
fn last_created(prefix: &[u8], max_create_rev: i64) -> RangeRequest {
    RangeRequest {
        key: prefix.to_vec(),
        range_end: prefix_end(prefix),
        sort_order: SortOrder::Descend as i32,
        sort_target: SortTarget::Create as i32,
        limit: 1,
        max_create_revision: max_create_rev,
        ..Default::default()
    }
}

/// Get of one key.
pub fn get_key(key: &[u8]) -> RangeRequest {
    RangeRequest {
        key: key.to_vec(),
        ..Default::default()
    }
}

/// Compare: `key`'s create revision equals `rev` (0: the key does not exist).
pub fn created_at(key: &[u8], rev: i64) -> Compare {
    Compare {
        result: CompareResult::Equal as i32,
        target: CompareTarget::Create as i32,
        key: key.to_vec(),
        target_union: Some(TargetUnion::CreateRevision(rev)),
        ..Default::default()
    }
}

/// A txn op putting `value` at `key` with `lease`.
pub fn put_op(key: &[u8], value: &[u8], lease: i64) -> RequestOp {
    RequestOp {
        request: Some(OpRequest::RequestPut(PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            lease,
            ..Default::default()
        })),
    }
}

/// A txn op reading `r`.
pub fn range_op(r: RangeRequest) -> RequestOp {
    RequestOp {
        request: Some(OpRequest::RequestRange(r)),
    }
}

/// A txn op deleting `key`.
pub fn delete_op(key: &[u8]) -> RequestOp {
    RequestOp {
        request: Some(OpRequest::RequestDeleteRange(DeleteRangeRequest {
            key: key.to_vec(),
            ..Default::default()
        })),
    }
}

/// The revision of a response header.
pub fn rev_of(h: &Option<ResponseHeader>) -> i64 {
    h.as_ref().map(|h| h.revision).unwrap_or(0)
}

/// Who a recipe runs for: its steps are checked as that user's requests (etcd runs its
/// recipes through an in-process client that carries the caller's token).
pub type Caller = Option<RequestAuth>;

/// A txn through raft, answered with this member's header.
pub async fn txn(
    handles: &RecipeHandles,
    caller: &Caller,
    r: TxnRequest,
) -> Result<TxnResponse, EtcdError> {
    let admitted = handles.writes.admit(quota::txn_cost(&r)).await?;
    validate::txn(&r, handles.max_txn_ops)?;
    handles
        .writes
        .propose_admitted(r, caller.clone(), admitted)
        .await
}

/// A delete of one key through raft.
pub async fn delete(
    handles: &RecipeHandles,
    caller: &Caller,
    key: &[u8],
) -> Result<DeleteRangeResponse, EtcdError> {
    let r = DeleteRangeRequest {
        key: key.to_vec(),
        ..Default::default()
    };
    validate::delete_range(&r)?;
    handles.writes.propose(r, caller.clone()).await
}

/// A linearizable read.
pub async fn get(
    handles: &RecipeHandles,
    caller: &Caller,
    r: &RangeRequest,
) -> Result<RangeResponse, EtcdError> {
    handles.reads.barrier().await?;
    read(handles, caller, r)
}

/// A read of what this member has applied.
fn read(
    handles: &RecipeHandles,
    caller: &Caller,
    r: &RangeRequest,
) -> Result<RangeResponse, EtcdError> {
    validate::range(r)?;
    handles
        .callers
        .auth()
        .check(caller.as_ref(), &r.key, &r.range_end, Access::Read)?;
    let mut resp = range::range(&**handles.reads.store(), r)
        .map_err(crate::machine::applier::ApplyError::into_read_error)?;
    resp.header = Some(handles.reads.header(rev_of(&resp.header)));
    Ok(resp)
}

/// The lease a request names, or for 0 a new one of concurrency's session TTL (what
/// etcd's `NewSession` grants when given no lease).
pub async fn session_lease(
    handles: &RecipeHandles,
    caller: &Caller,
    lease: i64,
) -> Result<i64, EtcdError> {
    if lease != 0 {
        return Ok(lease);
    }
    // A counter of its own, apart from the Lease service's: mark it so the seeds differ.
    let n = GRANTS.fetch_add(1, Ordering::Relaxed) | 1 << 24;
    let id = crate::domains::lease::service::new_lease_id(
        &handles.leases,
        handles.reads.ids().member_id,
        n,
    );
    let grant = LeaseGrantRequest {
        ttl: SESSION_TTL.max(handles.leases.min_ttl()),
        id,
    };
    let admitted = handles.writes.admit(quota::LEASE_OVERHEAD).await?;
    let resp = handles
        .writes
        .propose_admitted(grant, caller.clone(), admitted)
        .await?;
    Ok(resp.id)
}

/// A place in the watch feed for the keys under one prefix, and the member's stop
/// signal.
pub struct Changes {
    feed: Subscription,
    closed: tokio::sync::watch::Receiver<bool>,
}

/// What the feed said next.
pub enum Change {
    /// A batch and its events.
    Batch(Arc<Feed>),
    /// Changes were missed (a gap or a lag): read the state again.
    Missed,
}

impl Changes {
    /// Starts listening to the keys under `prefix`: every change to them made visible
    /// after this call will be seen.
    pub fn subscribe(handles: &RecipeHandles, prefix: &[u8]) -> Changes {
        let feed = handles.hub.subscribe();
        feed.add_interest(prefix, &prefix_end(prefix));
        Changes {
            feed,
            closed: handles.hub.closed(),
        }
    }

    /// The next change; `Stopped` once the member stops.
    pub async fn next(&mut self) -> Result<Change, EtcdError> {
        tokio::select! {
            r = self.feed.recv() => match r {
                Some(_) if self.feed.take_lagged() => Ok(Change::Missed),
                Some(f) if f.events.is_some() => Ok(Change::Batch(f)),
                Some(_) => Ok(Change::Missed),
                None => Err(EtcdError::Stopped),
            },
            _ = self.closed.wait_for(|c| *c) => Err(EtcdError::Stopped),
        }
    }
}

/// Waits until no key under `prefix` has a create revision at or below `max_create_rev`
/// (concurrency's `waitDeletes`: etcd watches for the deletion of the last such key,
/// again and again; re-reading after each deletion under the prefix, or after changes
/// were missed, comes to the same).
pub async fn wait_deletes(
    handles: &RecipeHandles,
    caller: &Caller,
    prefix: &[u8],
    max_create_rev: i64,
) -> Result<(), EtcdError> {
    let mut changes = Changes::subscribe(handles, prefix);
    handles.reads.barrier().await?;
    let below = last_created(prefix, max_create_rev);
    while !read(handles, caller, &below)?.kvs.is_empty() {
        // Only a deletion under the prefix can end the wait: skip other batches.
        while let Change::Batch(feed) = changes.next().await?
            && !deletes_under(&feed, prefix)
        {}
    }
    Ok(())
}

/// Whether `feed` deletes a key under `prefix`.
fn deletes_under(feed: &Feed, prefix: &[u8]) -> bool {
    feed.events.iter().flatten().any(|e| {
        e.r#type == EventType::Delete as i32
            && e.kv.as_ref().is_some_and(|kv| kv.key.starts_with(prefix))
    })
}

/// What a cleanup proposes: the lock's key deleted, or the leader's key resigned.
pub enum Undo {
    /// Delete one key.
    Delete(DeleteRangeRequest),
    /// A txn (the resignation: delete the key if it is still the leader's).
    Txn(TxnRequest),
}

impl Undo {
    /// Proposes it for `caller`.
    async fn propose(self, handles: &RecipeHandles, caller: Caller) -> Result<(), EtcdError> {
        match self {
            Undo::Delete(d) => handles.writes.propose(d, caller).await.map(drop),
            Undo::Txn(t) => {
                let admitted = handles.writes.admit(quota::txn_cost(&t)).await?;
                handles
                    .writes
                    .propose_admitted(t, caller, admitted)
                    .await
                    .map(drop)
            }
        }
    }
}

/// A cleanup proposal made if the request waiting for it is abandoned (the client went
/// away): etcd's services unlock or resign then.
pub struct Cleanup {
    handles: Arc<RecipeHandles>,
    caller: Caller,
    op: Option<Undo>,
}

impl Cleanup {
    /// Will propose `op` for `caller` unless disarmed or run first.
    pub fn new(handles: Arc<RecipeHandles>, caller: &Caller, op: Undo) -> Cleanup {
        Cleanup {
            handles,
            caller: caller.clone(),
            op: Some(op),
        }
    }

    /// No cleanup after all.
    pub fn disarm(mut self) {
        self.op = None;
    }

    /// Proposes the cleanup now; its own failure is only logged (etcd ignores it too).
    pub async fn run(mut self) {
        if let Some(op) = self.op.take()
            && let Err(e) = op.propose(&self.handles, self.caller.take()).await
        {
            tracing::warn!("lock or election cleanup failed: {e}");
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let Some(op) = self.op.take() else { return };
        let handles = self.handles.clone();
        let caller = self.caller.take();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = op.propose(&handles, caller).await {
                    tracing::warn!("lock or election cleanup failed: {e}");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_print_lease_ids_as_go_does() {
        assert_eq!(session_key(b"l/", 0x694d_8a1b), b"l/694d8a1b".to_vec());
        assert_eq!(session_key(b"l/", -26), b"l/-1a".to_vec());
        assert_eq!(prefix_end(b"a/"), b"a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }
}
