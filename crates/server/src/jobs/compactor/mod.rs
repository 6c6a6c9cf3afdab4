//! Auto-compaction (`--auto-compaction-mode`, `--auto-compaction-retention`), as etcd
//! 3.5's v3compactor: [`periodic`] keeps about a duration of history, [`revision`] a
//! number of revisions; [`oxcd_config::auto_compaction`] reads the flags.
//!
//! Invariants:
//! - Only the leader compacts: each loop looks at leadership on every tick and does
//!   nothing while this member follows (etcd pauses its compactor on followers and
//!   resumes it on the leader; samples of the revision go on while paused).
//! - A compaction is a `Compaction` request proposed through raft, the path a client's
//!   `Compact` takes; "required revision has been compacted" counts as done.
//! - The loops end when the member stops (an unfinished proposal is abandoned).

pub mod periodic;
pub mod revision;

use std::sync::Arc;
use std::time::Duration;

use oxcd_api::errors::EtcdError;
use oxcd_api::etcdserverpb::CompactionRequest;
// A duration as etcd's logs print it (Go's `Duration.String()`), for periodic.rs and
// revision.rs.
use oxcd_go::duration::format_std as go_text;
use tokio::sync::watch;

use oxcd_config::auto_compaction::AutoCompaction;

use crate::jobs::JobHandles;

/// Runs auto-compaction `mode` for `member` until `stop`; `revision_interval` is how
/// often revision mode looks ([`oxcd_config::auto_compaction::REVISION_INTERVAL`] but in tests).
pub async fn run(
    member: Arc<JobHandles>,
    mode: AutoCompaction,
    revision_interval: Duration,
    stop: watch::Receiver<bool>,
) {
    match mode {
        AutoCompaction::Periodic(period) => periodic::run(member, period, stop).await,
        AutoCompaction::Revision(keep) => {
            revision::run(member, keep, revision_interval, stop).await
        }
    }
}

/// Waits `d`; false when the member stops first.
async fn wait(d: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = stop.wait_for(|s| *s) => false,
    }
}

/// Compacts to `rev` through raft (an already compacted revision counts as done);
/// None when the member stops first.
async fn compact(
    member: &JobHandles,
    rev: i64,
    stop: &mut watch::Receiver<bool>,
) -> Option<Result<(), EtcdError>> {
    let compaction = CompactionRequest {
        revision: rev,
        physical: false,
    };
    tokio::select! {
        r = member.writes.propose(compaction, None) => Some(match r {
            Ok(_) | Err(EtcdError::Compacted) => Ok(()),
            Err(e) => Err(e),
        }),
        _ = stop.wait_for(|s| *s) => None,
    }
}
