//! Corruption checks between members, as etcd's `--experimental-initial-corrupt-check`
//! and `--experimental-corrupt-check-time`.
//!
//! Both compare etcd's HashKV (same rows, same algorithm on every member) over the peer
//! service, and beyond etcd the hash of every replicated table (leases and meta too)
//! whenever a peer answers at the raft index the local member is at (and neither is
//! still deleting a compaction's rows, which members do each at their own pace).
//! Members that hold the same history at the same compaction point must have the same
//! hash at a revision; a peer that is behind, ahead or compacted differently is skipped,
//! never accused.
//!
//! - Initial check: before serving clients (after joining a leader and replaying the
//!   log, so unlike etcd the local state is current), compare with every reachable peer
//!   at the local revision; a mismatch stops the member with etcd's error.
//! - Periodic check: the leader compares its hash with the followers' at its revision;
//!   a mismatch raises the CORRUPT alarm through raft, after which every member refuses
//!   writes with "etcdserver: corrupt cluster" until an operator disarms it.

use std::sync::Arc;
use std::time::Duration;

use oxcd_api::etcdserverpb::alarm_request::AlarmAction;
use oxcd_api::etcdserverpb::{AlarmRequest, AlarmType};
use oxcd_api::oxcdpb::peer_client::PeerClient;
use oxcd_api::oxcdpb::{HashUnavailable, PeerHashKvRequest, PeerHashKvResponse};
use oxcd_mvcc::MvccError;
use oxcd_storage::StorageError;
use oxcd_storage::backend::StateHash;
use oxcd_storage::tables::differing_tables;
use tokio::sync::watch;

use crate::jobs::JobHandles;
use crate::machine::reads::ReadFailed;
use crate::peer::PeerDialer;
use crate::peer::remote::AskError;
use crate::peer::transport::Link;

/// How long a peer has to answer a hash request.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// Why this member's own hash could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LocalHashError {
    /// The hash of the key table failed.
    #[error("failed to get hash value ({0})")]
    Kv(MvccError),
    /// The hash of every replicated table failed.
    #[error("failed to get state hash ({0})")]
    State(StorageError),
    /// The read on the blocking pool ended without an answer.
    #[error(transparent)]
    Read(#[from] ReadFailed),
}

/// Why a peer gave no hash to compare.
#[derive(Debug, thiserror::Error)]
enum PeerHashError {
    /// Its revision is below the one asked: it is behind.
    #[error("behind the revision asked")]
    Behind,
    /// The revision asked is compacted there.
    #[error("the revision asked is compacted there")]
    Compacted,
    /// It has no peer URL to ask.
    #[error("no peer URL")]
    NoPeerUrl,
    /// It could not be dialed, refused the request or did not answer in time.
    #[error(transparent)]
    Ask(#[from] AskError),
}

/// Why the initial check stops the member.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// This member's hash could not be taken.
    #[error(transparent)]
    Local(#[from] LocalHashError),
    /// A peer at the same compaction point has another hash (etcd's text).
    #[error("{0:x} found data inconsistency with peers")]
    Mismatch(u64),
}

/// This member's HashKV at `rev` (0: current): (hash, compact revision, revision).
async fn local_hash(member: &JobHandles, rev: i64) -> Result<(u32, i64, i64), LocalHashError> {
    member
        .reads
        .blocking(move |store| store.hash_kv(rev))
        .await?
        .map_err(LocalHashError::Kv)
}

/// This member's hash of every replicated table and the raft index it was read at;
/// None while a compaction's rows are being deleted (not comparable then).
async fn local_state_hash(member: &JobHandles) -> Result<Option<StateHash>, LocalHashError> {
    member
        .reads
        .blocking(|store| store.backend().state_hash_at_index())
        .await?
        .map_err(LocalHashError::State)
}

/// Asks one peer for its HashKV at `rev`.
async fn peer_hash(
    member: &JobHandles,
    dialer: &PeerDialer,
    url: &str,
    rev: i64,
) -> Result<PeerHashKvResponse, PeerHashError> {
    let link = Link {
        me: member.reads.ids().member_id,
        cluster_id: member.reads.ids().cluster_id,
        url: url.to_string(),
        dialer: dialer.clone(),
    };
    let call = async {
        let channel = link.connect().await?;
        PeerClient::new(channel)
            .hash_kv(link.request(PeerHashKvRequest { revision: rev }))
            .await
            .map(|r| r.into_inner())
            .map_err(|s| AskError::Refused(Box::new(s)))
    };
    let answer = tokio::time::timeout(PEER_TIMEOUT, call)
        .await
        .map_err(|_| AskError::TimedOut)??;
    match answer.unavailable() {
        HashUnavailable::HashAvailable => Ok(answer),
        HashUnavailable::HashFutureRevision => Err(PeerHashError::Behind),
        HashUnavailable::HashCompacted => Err(PeerHashError::Compacted),
    }
}

/// Every other member's answer (or why there is none), by member id.
async fn peer_hashes(
    member: &JobHandles,
    dialer: &PeerDialer,
    rev: i64,
) -> Vec<(u64, Result<PeerHashKvResponse, PeerHashError>)> {
    let mut out = Vec::new();
    for m in member
        .roster
        .members()
        .iter()
        .filter(|m| m.id != member.reads.ids().member_id)
    {
        let res = match m.peer_urls.first() {
            Some(url) => peer_hash(member, dialer, url, rev).await,
            None => Err(PeerHashError::NoPeerUrl),
        };
        out.push((m.id, res));
    }
    out
}

/// etcd's initial check: Err (etcd's message) if a peer at the same compaction point has
/// a different hash at this member's revision.
pub async fn initial_check(member: &JobHandles, dialer: &PeerDialer) -> Result<(), CheckError> {
    let me = format!("{:x}", member.reads.ids().member_id);
    tracing::info!(local_member_id = %me, "starting initial corruption check");
    let (hash, compact, rev) = local_hash(member, 0).await?;
    let mut mismatch = 0;
    for (id, res) in peer_hashes(member, dialer, rev).await {
        let peer = format!("{id:x}");
        match res {
            Ok(p) if p.hash != hash && p.compact_revision == compact => {
                tracing::warn!(local_member_id = %me, local_member_revision = rev, local_member_compact_revision = compact, local_member_hash = hash, remote_peer_id = %peer, remote_peer_hash = p.hash, remote_peer_compact_revision = p.compact_revision, "found different hash values from remote peer");
                mismatch += 1;
            }
            Ok(p) if p.hash != hash => {
                tracing::warn!(local_member_id = %me, local_member_compact_revision = compact, remote_peer_id = %peer, remote_peer_compact_revision = p.compact_revision, "found different compact revision values from remote peer");
            }
            Ok(_) => {}
            Err(PeerHashError::Behind) => {
                tracing::warn!(remote_peer_id = %peer, "cannot fetch hash from slow remote peer")
            }
            Err(PeerHashError::Compacted) => {
                tracing::warn!(remote_peer_id = %peer, "cannot fetch hash from remote peer; local member is behind")
            }
            Err(e) => {
                tracing::warn!(remote_peer_id = %peer, "cannot fetch hash from remote peer: {e}")
            }
        }
    }
    if mismatch > 0 {
        return Err(CheckError::Mismatch(member.reads.ids().member_id));
    }
    tracing::info!(local_member_id = %me, "initial corruption checking passed; no corruption");
    Ok(())
}

/// How long the leader waits to apply what a follower already applied.
const LAGGING_LEADER: Duration = Duration::from_secs(5);

/// Waits, at most [`LAGGING_LEADER`], until this member's revision and compaction
/// revision are at least `want`'s; returns them as they are then. Both change only when
/// a batch is applied: the wait follows the store's applied index.
async fn reach(member: &JobHandles, want: (i64, i64)) -> (i64, i64) {
    let store = member.reads.store();
    let reached = || store.current_rev() >= want.0 && store.compact_rev() >= want.1;
    let mut applied = store.applied_index();
    let _ = tokio::time::timeout(LAGGING_LEADER, applied.wait_for(|_| reached())).await;
    (store.current_rev(), store.compact_rev())
}

/// One leader-side check, as etcd's periodic check: returns the members found
/// inconsistent (the leader itself if its own hash changed under the same revision).
async fn check_once(member: &JobHandles, dialer: &PeerDialer) -> Result<Vec<u64>, LocalHashError> {
    let (h1, compact1, rev) = local_hash(member, 0).await?;
    let local1 = local_state_hash(member).await?;
    let peers = peer_hashes(member, dialer, rev).await;
    let (h2, compact2, rev2) = local_hash(member, 0).await?;
    let local2 = local_state_hash(member).await?;
    let mut bad = Vec::new();
    if let (Some(s1), Some(s2)) = (&local1, &local2)
        && s2.hash != s1.hash
        && s2.index == s1.index
    {
        tracing::warn!(
            index = s1.index,
            tables = ?differing_tables(&s1.tables, &s2.tables),
            "found state hash mismatch on the leader itself"
        );
        bad.push(member.reads.ids().member_id);
    }
    if h2 != h1 && rev2 == rev && compact1 == compact2 {
        tracing::warn!(revision = rev, "found hash mismatch on the leader itself");
        bad.push(member.reads.ids().member_id);
    }
    // A follower may apply a committed entry before the leader does (the leader's apply
    // can lag behind its own commits): a follower ahead is accused only if this member
    // does not reach its revision and compaction within LAGGING_LEADER.
    let answered = peers.iter().filter_map(|(_, r)| r.as_ref().ok());
    let want = answered.fold((rev2, compact2), |(r, c), p| {
        (r.max(p.revision), c.max(p.compact_revision))
    });
    let (rev_reached, compact_reached) = reach(member, want).await;
    let mut checked = 0;
    for (id, res) in peers {
        let Ok(p) = res else { continue };
        checked += 1;
        let peer = format!("{id:x}");
        if p.revision > rev_reached {
            tracing::warn!(remote_peer_id = %peer, remote_peer_revision = p.revision, leader_revision = rev_reached, "revision from follower must be less than or equal to leader's");
            bad.push(id);
        } else if p.compact_revision > compact_reached {
            tracing::warn!(remote_peer_id = %peer, remote_peer_compact_revision = p.compact_revision, leader_compact_revision = compact_reached, "compact revision from follower must be less than or equal to leader's");
            bad.push(id);
        } else if p.compact_revision == compact1 && p.hash != h1 {
            tracing::warn!(remote_peer_id = %peer, revision = rev, leader_hash = h1, follower_hash = p.hash, "same compact revision then hashes must match");
            bad.push(id);
        } else if let Some(leader_state) = [&local1, &local2]
            .into_iter()
            .flatten()
            .find(|s| p.state_index != 0 && s.index == p.state_index)
            && p.state_hash != leader_state.hash
        {
            tracing::warn!(remote_peer_id = %peer, index = p.state_index, leader_state_hash = leader_state.hash, follower_state_hash = p.state_hash, tables = ?differing_tables(&leader_state.tables, &p.table_hashes), "same applied index then state hashes (keys, leases, meta, auth, members) must match");
            bad.push(id);
        }
    }
    tracing::info!(
        number_of_peers_checked = checked,
        "finished peer corruption check"
    );
    Ok(bad)
}

/// Runs the periodic check every `every` while this member leads, raising the CORRUPT
/// alarm for the first member found inconsistent.
pub async fn periodic(
    member: Arc<JobHandles>,
    dialer: PeerDialer,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    tracing::info!(interval = ?every, "enabled corruption checking");
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if !member.role.is_leader() {
            continue;
        }
        let bad = match check_once(&member, &dialer).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("corruption check failed: {e}");
                continue;
            }
        };
        if let Some(&id) = bad.first() {
            let alarm = AlarmRequest {
                action: AlarmAction::Activate as i32,
                member_id: id,
                alarm: AlarmType::Corrupt as i32,
            };
            match member.writes.propose(alarm, None).await {
                Ok(_) => {
                    tracing::error!(member_id = %format!("{id:x}"), "raised the CORRUPT alarm")
                }
                Err(e) => tracing::warn!("failed to raise the CORRUPT alarm: {e}"),
            }
        }
    }
}
