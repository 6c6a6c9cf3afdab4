//! Periodic auto-compaction with retention `P`, as etcd 3.5's `Periodic`:
//!
//! - every `min(P, 1h) / 10` it samples the current revision, keeping the last
//!   `P / that + 1` samples, so the oldest is the revision of about `P` ago;
//! - the first compaction comes no sooner than `P` after start, later ones every
//!   `min(P, 1h)`, each to the oldest sample; a failure is retried at the next sample.
//!
//! Where etcd divides by zero (`P` under 10 ns), the sampling interval is 1 ns.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use super::{compact, go_text, wait};
use crate::jobs::JobHandles;

/// The intervals etcd derives from the retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// The retention `P`.
    pub period: Duration,
    /// Between compactions after the first: `min(P, 1h)`.
    pub compact_interval: Duration,
    /// Between samples (and retries): `min(P, 1h) / 10`.
    pub sample_interval: Duration,
    /// Samples kept: `P / sample_interval + 1`.
    pub samples: usize,
}

impl Schedule {
    /// etcd's schedule for retention `period`.
    pub fn new(period: Duration) -> Schedule {
        let compact_interval = period.min(Duration::from_secs(3600));
        let sample_interval = (compact_interval / 10).max(Duration::from_nanos(1));
        let samples = usize::try_from(period.as_nanos() / sample_interval.as_nanos())
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        Schedule {
            period,
            compact_interval,
            sample_interval,
            samples,
        }
    }
}

/// The revisions sampled over the last retention period, oldest first.
#[derive(Debug)]
struct Samples {
    revs: VecDeque<i64>,
    keep: usize,
}

impl Samples {
    fn push(&mut self, rev: i64) {
        self.revs.push_back(rev);
        if self.revs.len() > self.keep {
            self.revs.pop_front();
        }
    }

    /// The revision of about one retention period ago.
    fn oldest(&self) -> Option<i64> {
        self.revs.front().copied()
    }
}

/// Runs until `stop`: compacts, while this member leads, to the revision of about
/// `period` ago.
pub async fn run(member: Arc<JobHandles>, period: Duration, mut stop: watch::Receiver<bool>) {
    let schedule = Schedule::new(period);
    let mut samples = Samples {
        revs: VecDeque::new(),
        keep: schedule.samples,
    };
    let mut last_success = Instant::now();
    // The first compaction waits the whole retention; later ones the compact interval.
    let mut due_after = schedule.period;
    loop {
        samples.push(member.reads.store().current_rev());
        if !wait(schedule.sample_interval, &mut stop).await {
            return;
        }
        if !member.role.is_leader() || last_success.elapsed() < due_after {
            continue;
        }
        due_after = schedule.compact_interval;
        let Some(rev) = samples.oldest() else {
            continue;
        };
        tracing::info!(
            revision = rev,
            "compact-period" = %go_text(period),
            "starting auto periodic compaction"
        );
        let started = Instant::now();
        match compact(&member, rev, &mut stop).await {
            None => return,
            Some(Ok(())) => {
                tracing::info!(
                    revision = rev,
                    "compact-period" = %go_text(period),
                    took = %go_text(started.elapsed()),
                    "completed auto periodic compaction"
                );
                last_success = Instant::now();
            }
            Some(Err(e)) => tracing::warn!(
                revision = rev,
                "compact-period" = %go_text(period),
                "retry-interval" = %go_text(schedule.sample_interval),
                error = %e,
                "failed auto periodic compaction"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: u64 = 60;

    /// The examples of etcd's own comments and the research notes.
    #[test]
    fn schedules_as_etcd() {
        let s = Schedule::new(Duration::from_secs(3600));
        assert_eq!(s.compact_interval, Duration::from_secs(3600));
        assert_eq!(s.sample_interval, Duration::from_secs(6 * MIN));
        assert_eq!(s.samples, 11);
        let s = Schedule::new(Duration::from_secs(10 * 3600));
        assert_eq!(s.compact_interval, Duration::from_secs(3600));
        assert_eq!(s.sample_interval, Duration::from_secs(6 * MIN));
        assert_eq!(s.samples, 101);
        let s = Schedule::new(Duration::from_secs(59 * MIN));
        assert_eq!(s.compact_interval, Duration::from_secs(59 * MIN));
        assert_eq!(s.sample_interval, Duration::from_secs(354));
        assert_eq!(s.samples, 11);
        let s = Schedule::new(Duration::from_secs(5));
        assert_eq!(s.compact_interval, Duration::from_secs(5));
        assert_eq!(s.sample_interval, Duration::from_millis(500));
        assert_eq!(s.samples, 11);
        // 90 minutes: hourly compactions to the revision of 90 minutes ago.
        let s = Schedule::new(Duration::from_secs(90 * MIN));
        assert_eq!(s.compact_interval, Duration::from_secs(3600));
        assert_eq!(s.samples, 16);
        // Where etcd would divide by zero.
        let s = Schedule::new(Duration::from_nanos(5));
        assert_eq!(s.sample_interval, Duration::from_nanos(1));
        assert_eq!(s.samples, 6);
    }

    #[test]
    fn the_oldest_sample_is_one_period_old() {
        let mut s = Samples {
            revs: VecDeque::new(),
            keep: 3,
        };
        assert_eq!(s.oldest(), None);
        for rev in 1..=5 {
            s.push(rev);
        }
        assert_eq!(s.oldest(), Some(3));
        assert_eq!(s.revs.len(), 3);
    }
}
