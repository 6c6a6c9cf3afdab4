//! `--auto-promote-learners` (oxcd's own flag, off by default): the leader promotes a
//! learner by itself once it has caught up, with the same checks as a client's
//! MemberPromote (in sync with the leader, `--strict-reconfig-check`). Replacing a
//! member is then one command: `member add --learner`, start it, and it becomes a voter
//! when it is ready, never before (which an operator's promote may be).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::requests;
use crate::domains::membership::MembershipHandles;

/// How often the leader looks at its learners.
const EVERY: Duration = Duration::from_millis(500);

/// Runs until `stop`: while this member leads, promotes each learner that is ready.
pub async fn run(membership: Arc<MembershipHandles>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        if !membership.role.is_leader() {
            continue;
        }
        let learners: Vec<u64> = membership
            .roster
            .members()
            .into_iter()
            .filter(|m| m.is_learner)
            .map(|m| m.id)
            .collect();
        for id in learners {
            match requests::promote_here(&membership, id).await {
                Ok(_) => tracing::info!(
                    learner = %format!("{id:x}"),
                    "promoted a learner that caught up (--auto-promote-learners)"
                ),
                Err(e) => tracing::debug!(learner = %format!("{id:x}"), "not promoted yet: {e}"),
            }
        }
    }
}
