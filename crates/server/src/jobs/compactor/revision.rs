//! Revision auto-compaction with retention `R`, as etcd 3.5's `Revision`: every
//! interval (etcd: 5 minutes), while this member leads, compact to
//! `current revision - R` when that is above zero and not what the last success
//! compacted to; a failure is retried at the next interval.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{compact, go_text, wait};
use crate::jobs::JobHandles;

/// Runs until `stop`: keeps `retention` revisions below the current one.
pub async fn run(
    member: Arc<JobHandles>,
    retention: i64,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut prev = 0;
    loop {
        if !wait(interval, &mut stop).await {
            return;
        }
        if !member.role.is_leader() {
            continue;
        }
        let rev = member.reads.store().current_rev().saturating_sub(retention);
        if rev <= 0 || rev == prev {
            continue;
        }
        tracing::info!(
            revision = rev,
            "revision-compaction-retention" = retention,
            "starting auto revision compaction"
        );
        let started = Instant::now();
        match compact(&member, rev, &mut stop).await {
            None => return,
            Some(Ok(())) => {
                prev = rev;
                tracing::info!(
                    revision = rev,
                    "revision-compaction-retention" = retention,
                    took = %go_text(started.elapsed()),
                    "completed auto revision compaction"
                );
            }
            Some(Err(e)) => tracing::warn!(
                revision = rev,
                "revision-compaction-retention" = retention,
                "retry-interval" = %go_text(interval),
                error = %e,
                "failed auto revision compaction"
            ),
        }
    }
}
