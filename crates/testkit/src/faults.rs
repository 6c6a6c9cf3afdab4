//! A seeded schedule of faults: the same seed picks the same faults, targets (by member
//! index) and timings. One fault at a time: inject, hold, recover, wait.

use std::time::Instant;

use crate::cluster::Cluster;
use crate::rng::Rng;

/// A kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// SIGKILL a member, then restart it with its data dir.
    Kill,
    /// SIGSTOP a member, then SIGCONT it.
    Pause,
    /// Cut a member off from the others, then heal.
    Partition,
    /// Replace a member, as an operator replaces a failed machine: `member remove`,
    /// then `member add` at the same address and a new process with an empty data dir.
    Replace,
    /// As [`Fault::Replace`], the new member added as a learner and promoted once it
    /// has caught up.
    ReplaceLearner,
}

impl std::str::FromStr for Fault {
    type Err = String;
    fn from_str(s: &str) -> Result<Fault, String> {
        match s {
            "kill" => Ok(Fault::Kill),
            "pause" => Ok(Fault::Pause),
            "partition" => Ok(Fault::Partition),
            "replace" => Ok(Fault::Replace),
            "replace-learner" => Ok(Fault::ReplaceLearner),
            other => Err(format!(
                "unknown fault {other:?} (kill, pause, partition, replace, replace-learner)"
            )),
        }
    }
}

/// Whom a fault hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The member with this index (the seed decides).
    Index,
    /// Whoever leads when the fault starts.
    Leader,
}

/// What to inject.
#[derive(Debug, Clone)]
pub struct FaultPlan {
    /// The kinds to choose from (none: no faults).
    pub faults: Vec<Fault>,
    /// Pause between faults, in ms (range).
    pub gap_ms: (u64, u64),
    /// How long a fault lasts, in ms (range).
    pub hold_ms: (u64, u64),
    /// Whom to hit.
    pub target: Target,
    /// Seed.
    pub seed: u64,
}

/// Injects faults until `until`; returns a line per fault injected.
pub async fn run(
    cluster: &mut Cluster,
    plan: &FaultPlan,
    until: Instant,
) -> Result<Vec<String>, String> {
    let mut rng = Rng::new(plan.seed);
    let mut log = Vec::new();
    let n = cluster.members.len() as u64;
    if plan.faults.is_empty() {
        tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
        return Ok(log);
    }
    loop {
        let gap = rng.millis(plan.gap_ms.0, plan.gap_ms.1);
        let fault = plan.faults[rng.below(plan.faults.len() as u64) as usize];
        let hold = rng.millis(plan.hold_ms.0, plan.hold_ms.1);
        let mut victim = rng.below(n) as usize;
        if Instant::now() + gap + hold >= until {
            tokio::time::sleep(until.saturating_duration_since(Instant::now())).await;
            return Ok(log);
        }
        tokio::time::sleep(gap).await;
        if plan.target == Target::Leader
            && let Some(l) = cluster.leader().await
        {
            victim = l;
        }
        let name = cluster.members[victim].name.clone();
        let started = Instant::now();
        match fault {
            Fault::Kill => {
                cluster.kill(victim)?;
                tokio::time::sleep(hold).await;
                cluster.restart(victim).await?;
            }
            Fault::Pause => {
                cluster.pause(victim)?;
                tokio::time::sleep(hold).await;
                cluster.resume(victim)?;
            }
            Fault::Partition => {
                cluster.isolate(&[victim]);
                tokio::time::sleep(hold).await;
                cluster.heal();
            }
            Fault::Replace => cluster.replace_member(victim, false).await?,
            Fault::ReplaceLearner => cluster.replace_member(victim, true).await?,
        }
        log.push(format!(
            "{fault:?} {name} for {hold:?} (back after {:?})",
            started.elapsed()
        ));
    }
}
