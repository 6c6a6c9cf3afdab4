//! Latency histograms the disk paths fill and the server's `/metrics` reads: fixed
//! bucket bounds (etcd's), counts and a sum kept in atomics, so that recording costs
//! two relaxed additions and never a lock.
//!
//! Invariant: `count` is the sum of the bucket counts; a reader may see a recording
//! half done (one more in a bucket than in the total), never a torn value.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A latency histogram with bounds in seconds.
#[derive(Debug)]
pub struct Histogram {
    bounds: Vec<f64>,
    /// One count per bound (observations at most that bound and above the previous
    /// one), then one for those above the last.
    counts: Vec<AtomicU64>,
    sum_nanos: AtomicU64,
}

/// What a histogram holds at one moment, cumulated as Prometheus exposes it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSnapshot {
    /// Each bound with the observations at most it.
    pub buckets: Vec<(f64, u64)>,
    /// All observations.
    pub count: u64,
    /// Their sum in seconds.
    pub sum: f64,
}

impl Histogram {
    /// A histogram with `n` bounds: `start`, then each `factor` times the one before
    /// (Prometheus's exponential buckets).
    pub fn exponential(start: f64, factor: f64, n: usize) -> Histogram {
        let mut bounds = Vec::with_capacity(n);
        let mut b = start;
        for _ in 0..n {
            bounds.push(b);
            b *= factor;
        }
        Histogram::with_bounds(bounds)
    }

    /// A histogram with these bounds (ascending).
    pub fn with_bounds(bounds: Vec<f64>) -> Histogram {
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        Histogram {
            bounds,
            counts,
            sum_nanos: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = self.bounds.partition_point(|b| *b < secs);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(
            d.as_nanos().min(u128::from(u64::MAX)) as u64,
            Ordering::Relaxed,
        );
    }

    /// The histogram now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut running = 0;
        let mut buckets = Vec::with_capacity(self.bounds.len());
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            running += c.load(Ordering::Relaxed);
            buckets.push((*b, running));
        }
        let count = running
            + self
                .counts
                .last()
                .map(|c| c.load(Ordering::Relaxed))
                .unwrap_or(0);
        HistogramSnapshot {
            buckets,
            count,
            sum: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

/// What the WAL reports as it writes: the time of each write-and-fdatasync (etcd's
/// buckets: 1 ms doubling to 8.192 s) and the bytes written.
#[derive(Debug)]
pub struct WalStats {
    /// Write-and-fdatasync times.
    pub fsyncs: Histogram,
    /// Bytes written.
    pub written: AtomicU64,
}

impl Default for WalStats {
    fn default() -> WalStats {
        WalStats {
            fsyncs: Histogram::exponential(0.001, 2.0, 14),
            written: AtomicU64::new(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_cumulated_buckets() {
        let h = Histogram::exponential(0.001, 2.0, 3);
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(1));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(1));
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![(0.001, 2), (0.002, 2), (0.004, 3)]);
        assert_eq!(s.count, 4);
        assert!((s.sum - 1.0045).abs() < 1e-9);
    }
}
