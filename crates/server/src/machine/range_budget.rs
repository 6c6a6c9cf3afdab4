//! The memory bound on Range answers (`--max-inflight-range-bytes`): the bytes of every
//! multi-key Range answer being read or sent on this member at once. A burst of large
//! LISTs makes an etcd member build every answer whole at the same time and run out of
//! memory (etcd issues 12342, 16598); here an answer that would take the total past the
//! bound is refused with etcd's "etcdserver: too many requests" as soon as its rows pass
//! it, and the client may retry.
//!
//! Invariants:
//! - The bytes charged are released when the [`Charge`] is dropped: for an answer that
//!   was sent, when its HTTP body is dropped (sent, or its connection gone).
//! - An answer is refused only while others hold part of the bound: one answer alone
//!   may pass it (up to gRPC's message limit), so no range is refused on an idle member.
//! - The first [`FREE_BYTES`] of every answer are not charged: small ranges (a few
//!   keys, a count) are never refused, whatever the large ones hold.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The bytes of each answer not charged.
pub const FREE_BYTES: usize = 64 << 10;

/// The bound and what is charged against it now. Shared by every Range on the member.
#[derive(Debug)]
pub struct RangeBudget {
    limit: usize,
    used: AtomicUsize,
}

impl RangeBudget {
    /// A bound of `limit` bytes.
    pub fn new(limit: usize) -> Arc<RangeBudget> {
        Arc::new(RangeBudget {
            limit,
            used: AtomicUsize::new(0),
        })
    }

    /// The bytes charged now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// An empty charge for one answer.
    pub fn charge(self: &Arc<RangeBudget>) -> Charge {
        Charge {
            budget: self.clone(),
            seen: AtomicUsize::new(0),
            mine: AtomicUsize::new(0),
        }
    }
}

/// One answer's share of the bound. Added to from the threads that read its rows.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<RangeBudget>,
    /// Every byte added, charged or free.
    seen: AtomicUsize,
    /// The bytes charged to the budget.
    mine: AtomicUsize,
}

impl Charge {
    /// Adds `bytes` to the answer, charging what passes its free share; false (the
    /// answer must stop) if that passes the bound while other answers hold part of it.
    pub fn add(&self, bytes: usize) -> bool {
        let before = self.seen.fetch_add(bytes, Ordering::Relaxed);
        let after = before.saturating_add(bytes);
        let bytes = after.saturating_sub(FREE_BYTES) - before.saturating_sub(FREE_BYTES);
        if bytes == 0 {
            return true;
        }
        let used = &self.budget.used;
        let mut now = used.load(Ordering::Relaxed);
        loop {
            let mine = self.mine.load(Ordering::Relaxed);
            let alone = now <= mine;
            if now.saturating_add(bytes) > self.budget.limit && !alone {
                return false;
            }
            match used.compare_exchange_weak(
                now,
                now.saturating_add(bytes),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    self.mine.fetch_add(bytes, Ordering::Relaxed);
                    return true;
                }
                Err(seen) => now = seen,
            }
        }
    }

    /// The bytes this answer holds of the budget.
    pub fn bytes(&self) -> usize {
        self.mine.load(Ordering::Relaxed)
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        let mine = *self.mine.get_mut();
        self.budget.used.fetch_sub(mine, Ordering::AcqRel);
    }
}

/// The bound when `--max-inflight-range-bytes` is 0: a quarter of the memory this
/// process may use (its cgroup's limit, else the machine's RAM), at least 64 MiB; 1 GiB
/// when neither can be read.
pub fn default_limit() -> usize {
    let quarter = memory_limit().map(|m| m / 4);
    quarter.map_or(1 << 30, |q| q.max(64 << 20)) as usize
}

/// The memory this process may use: cgroup v2's `memory.max`, else v1's limit, else
/// `MemTotal`; None if none can be read.
fn memory_limit() -> Option<u64> {
    let read = |p: &str| std::fs::read_to_string(p).ok();
    let cgroup = read("/sys/fs/cgroup/memory.max")
        .or_else(|| read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))
        .and_then(|s| s.trim().parse::<u64>().ok());
    let total = read("/proc/meminfo").and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    });
    match (cgroup, total) {
        (Some(c), Some(t)) => Some(c.min(t)),
        (c, t) => c.or(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_alone_may_pass_the_bound_but_not_beside_another() {
        let b = RangeBudget::new(100);
        let first = b.charge();
        assert!(first.add(FREE_BYTES + 80));
        assert!(first.add(80), "alone, it passes the bound");
        assert_eq!(first.bytes(), 160);
        let second = b.charge();
        assert!(second.add(FREE_BYTES), "the free share is never refused");
        assert!(!second.add(10), "beside the first, nothing more fits");
        assert_eq!(b.used(), 160);
        drop(first);
        assert_eq!(b.used(), 0);
        assert!(second.add(90));
        let third = b.charge();
        assert!(third.add(FREE_BYTES + 10));
        assert!(!third.add(1));
        drop((second, third));
        assert_eq!(b.used(), 0);
    }

    #[test]
    fn the_default_is_a_quarter_of_memory() {
        let d = default_limit();
        assert!(d >= 64 << 20, "{d}");
    }
}
