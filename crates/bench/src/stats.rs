//! What a run measured and how it is printed: etcd `benchmark`'s text layout (summary,
//! histogram, latency distribution, error counts) or one JSON object.
//!
//! Invariant: latencies are of successful requests only; failures are counted by message.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

/// The raw outcome of a run.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    /// Latency of every successful request.
    pub latencies: Vec<Duration>,
    /// Failures by error message.
    pub errors: BTreeMap<String, u64>,
    /// Wall time of the whole run.
    pub elapsed: Duration,
}

impl Samples {
    /// Adds another client's samples (elapsed is the caller's).
    pub fn merge(&mut self, other: Samples) {
        self.latencies.extend(other.latencies);
        for (e, n) in other.errors {
            *self.errors.entry(e).or_default() += n;
        }
    }
}

/// One histogram bucket: requests with latency up to `upper_ms`.
#[derive(Debug, Clone, Serialize)]
pub struct Bucket {
    pub upper_ms: f64,
    pub count: u64,
}

/// Summary figures in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub min: f64,
    pub avg: f64,
    pub stddev: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// The summary of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Which workload.
    pub name: String,
    /// Successful requests.
    pub ok: u64,
    /// Failed requests.
    pub failed: u64,
    pub total_secs: f64,
    /// Successful requests per second.
    pub qps: f64,
    pub latency_ms: Latency,
    pub histogram: Vec<Bucket>,
    pub errors: BTreeMap<String, u64>,
    /// Further figures a workload reports (e.g. events delivered).
    pub extra: BTreeMap<String, f64>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The latency at quantile `q` of sorted samples (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Report {
    /// Summarises `s`.
    pub fn new(name: &str, mut s: Samples) -> Report {
        s.latencies.sort_unstable();
        let l = &s.latencies;
        let n = l.len();
        let sum: f64 = l.iter().map(|d| ms(*d)).sum();
        let avg = if n == 0 { 0.0 } else { sum / n as f64 };
        let var = if n == 0 {
            0.0
        } else {
            l.iter().map(|d| (ms(*d) - avg).powi(2)).sum::<f64>() / n as f64
        };
        let min = l.first().copied().unwrap_or_default();
        let max = l.last().copied().unwrap_or_default();
        let secs = s.elapsed.as_secs_f64();
        Report {
            name: name.to_string(),
            ok: n as u64,
            failed: s.errors.values().sum(),
            total_secs: secs,
            qps: if secs > 0.0 { n as f64 / secs } else { 0.0 },
            latency_ms: Latency {
                min: ms(min),
                avg,
                stddev: var.sqrt(),
                p50: ms(quantile(l, 0.5)),
                p90: ms(quantile(l, 0.9)),
                p99: ms(quantile(l, 0.99)),
                p999: ms(quantile(l, 0.999)),
                max: ms(max),
            },
            histogram: histogram(l, 10),
            errors: s.errors,
            extra: BTreeMap::new(),
        }
    }

    /// etcd `benchmark`'s text layout.
    pub fn text(&self) -> String {
        let secs = |v_ms: f64| v_ms / 1000.0;
        let l = &self.latency_ms;
        let mut out = String::new();
        let _ = writeln!(out, "\nSummary:");
        let _ = writeln!(out, "  Total:\t{:.4} secs.", self.total_secs);
        let _ = writeln!(out, "  Slowest:\t{:.4} secs.", secs(l.max));
        let _ = writeln!(out, "  Fastest:\t{:.4} secs.", secs(l.min));
        let _ = writeln!(out, "  Average:\t{:.4} secs.", secs(l.avg));
        let _ = writeln!(out, "  Stddev:\t{:.4} secs.", secs(l.stddev));
        let _ = writeln!(out, "  Requests/sec:\t{:.4}", self.qps);
        if self.ok > 0 {
            let _ = writeln!(out, "\nResponse time histogram:");
            let widest = self.histogram.iter().map(|b| b.count).max().unwrap_or(1);
            for b in &self.histogram {
                let bar = "∎".repeat((b.count * 40).div_ceil(widest.max(1)) as usize);
                let _ = writeln!(out, "  {:.4} [{}]\t|{}", secs(b.upper_ms), b.count, bar);
            }
            let _ = writeln!(out, "\nLatency distribution:");
            for (p, v) in [
                ("50", l.p50),
                ("90", l.p90),
                ("99", l.p99),
                ("99.9", l.p999),
            ] {
                let _ = writeln!(out, "  {p}% in {:.4} secs.", secs(v));
            }
        }
        for (k, v) in &self.extra {
            let _ = writeln!(out, "  {k}:\t{v:.4}");
        }
        if !self.errors.is_empty() {
            let _ = writeln!(out, "\nError distribution:");
            for (e, n) in &self.errors {
                let _ = writeln!(out, "  [{n}]\t{e}");
            }
        }
        out
    }
}

/// `buckets` equal-width buckets from the fastest to the slowest sample.
fn histogram(sorted: &[Duration], buckets: usize) -> Vec<Bucket> {
    let (Some(first), Some(last)) = (sorted.first(), sorted.last()) else {
        return Vec::new();
    };
    let (lo, hi) = (ms(*first), ms(*last));
    let width = (hi - lo) / buckets as f64;
    let mut out: Vec<Bucket> = (0..=buckets)
        .map(|i| Bucket {
            upper_ms: lo + width * i as f64,
            count: 0,
        })
        .collect();
    for d in sorted {
        let v = ms(*d);
        let i = if width > 0.0 {
            ((v - lo) / width).ceil() as usize
        } else {
            0
        };
        out[i.min(buckets)].count += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(ms_list: &[u64], errors: &[(&str, u64)]) -> Samples {
        Samples {
            latencies: ms_list.iter().map(|m| Duration::from_millis(*m)).collect(),
            errors: errors.iter().map(|(e, n)| (e.to_string(), *n)).collect(),
            elapsed: Duration::from_secs(2),
        }
    }

    #[test]
    fn figures_of_a_known_distribution() {
        let r = Report::new("put", samples(&(1..=1000).collect::<Vec<_>>(), &[("x", 3)]));
        assert_eq!(r.ok, 1000);
        assert_eq!(r.failed, 3);
        assert!((r.qps - 500.0).abs() < 1e-9);
        assert!((r.latency_ms.min - 1.0).abs() < 1e-9);
        assert!((r.latency_ms.max - 1000.0).abs() < 1e-9);
        assert!((r.latency_ms.p50 - 500.0).abs() < 1e-9);
        assert!((r.latency_ms.p99 - 990.0).abs() < 1e-9);
        assert!((r.latency_ms.p999 - 999.0).abs() < 1e-9);
        assert!((r.latency_ms.avg - 500.5).abs() < 1e-9);
        assert_eq!(r.histogram.iter().map(|b| b.count).sum::<u64>(), 1000);
        let text = r.text();
        assert!(text.contains("Requests/sec:\t500.0000"), "{text}");
        assert!(text.contains("[3]\tx"), "{text}");
    }

    #[test]
    fn an_empty_run_prints_without_dividing_by_zero() {
        let r = Report::new("range", samples(&[], &[("down", 5)]));
        assert_eq!(r.ok, 0);
        assert_eq!(r.latency_ms.p99, 0.0);
        assert!(r.histogram.is_empty());
        assert!(r.text().contains("Error distribution"));
    }
}
