//! `/metrics`: the Prometheus families etcd 3.5 exports that its official Grafana
//! dashboard and the kube-prometheus etcd alerts read, under etcd's names, types,
//! labels, help texts and buckets (the list and what is left out: docs/metrics.md).
//!
//! Most figures are read from the parts that keep them when a scrape comes (raft's
//! status, the store, the backend, the WAL's and backend's latency histograms, `/proc`);
//! what no part keeps is counted here ([`Metrics`]): health checks, failed proposals and
//! the gRPC calls ([`grpc`]). [`render`] writes the scrape.
//!
//! Invariant: counting is a relaxed atomic addition, never a lock on a request's path.

pub mod client_bytes;
pub mod grpc;
pub mod process;
pub mod render;
pub mod text;
pub mod timing;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use oxcd_storage::timing::Histogram;
use text::{Exposition, Family, Kind};

use crate::peer::traffic::PeerTraffic;

/// The results of one named check: the last one, then how many succeeded and failed.
#[derive(Debug, Default, Clone, Copy)]
struct CheckCounts {
    last_ok: bool,
    successes: u64,
    failures: u64,
}

/// What `/metrics` counts that no other part keeps.
#[derive(Debug, Default)]
pub struct Metrics {
    health_success: AtomicU64,
    health_failures: AtomicU64,
    /// `/livez` and `/readyz` checks by (type, name).
    named_checks: Mutex<BTreeMap<(String, &'static str), CheckCounts>>,
    proposals_failed: AtomicU64,
    /// The gRPC calls (shared with the counting middleware).
    pub grpc: Arc<grpc::GrpcMetrics>,
    /// The traffic with each peer (shared with the peer transport and service).
    pub peers: Arc<PeerTraffic>,
    /// The bytes of the client port (shared with its listeners).
    pub client_bytes: Arc<client_bytes::ClientBytes>,
    /// Defragmentations running now.
    defrags_running: AtomicU64,
    /// The time of each defragmentation (etcd's buckets: 100 ms doubling to 409.6 s).
    defrag_timing: DefragTiming,
    /// Every cluster version (major.minor) a scrape has seen: etcd keeps a replaced
    /// version's `etcd_cluster_version` sample, at 0.
    cluster_versions_seen: Seen,
    /// Every alarm a scrape has seen: etcd keeps a cleared one's sample, at 0.
    alarms_seen: Seen,
    /// The time of each applied operation (shared with the apply thread).
    pub apply: Arc<timing::ApplyTiming>,
    /// The time of each Range (`etcd_server_range_duration_seconds`), by outcome.
    pub range: timing::ByOutcome,
}

/// Label values a scrape has seen: a Go gauge vector keeps a sample once set, so a
/// value no longer current is still exported, at 0.
#[derive(Debug, Default)]
struct Seen(Mutex<std::collections::BTreeSet<Vec<String>>>);

impl Seen {
    /// Adds `current` to what was seen; gives everything seen, each with whether it is
    /// current.
    fn mark(&self, current: impl IntoIterator<Item = Vec<String>>) -> Vec<(Vec<String>, bool)> {
        let current: std::collections::BTreeSet<Vec<String>> = current.into_iter().collect();
        let mut seen = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.extend(current.iter().cloned());
        seen.iter()
            .map(|v| (v.clone(), current.contains(v)))
            .collect()
    }
}

/// etcd's defragmentation histogram, made with its buckets.
#[derive(Debug)]
struct DefragTiming(Histogram);

impl Default for DefragTiming {
    fn default() -> DefragTiming {
        DefragTiming(Histogram::exponential(0.1, 2.0, 13))
    }
}

/// A defragmentation being timed: counted running until dropped, its time recorded then.
pub struct DefragTimer<'a> {
    metrics: &'a Metrics,
    started: std::time::Instant,
}

impl Drop for DefragTimer<'_> {
    fn drop(&mut self) {
        self.metrics.defrags_running.fetch_sub(1, Ordering::Relaxed);
        self.metrics.defrag_timing.0.observe(self.started.elapsed());
    }
}

impl Metrics {
    /// Counters from zero, applies timed by `apply`.
    pub fn with_apply_timing(apply: timing::ApplyTiming) -> Metrics {
        Metrics {
            apply: Arc::new(apply),
            ..Metrics::default()
        }
    }

    /// Records `current` (major.minor) as the cluster version now, and gives every
    /// version seen, each with whether it is the current one.
    pub fn cluster_versions(&self, current: Option<String>) -> Vec<(String, bool)> {
        self.cluster_versions_seen
            .mark(current.map(|c| vec![c]))
            .into_iter()
            .filter_map(|(mut labels, now)| Some((labels.pop()?, now)))
            .collect()
    }

    /// Records the alarms raised now, as (alarm type, member id) pairs, and gives every
    /// one seen, each with whether it is raised (etcd's gauge keeps a cleared alarm's
    /// sample, at 0).
    pub fn alarms(&self, raised: Vec<(String, String)>) -> Vec<((String, String), bool)> {
        self.alarms_seen
            .mark(raised.into_iter().map(|(a, m)| vec![a, m]))
            .into_iter()
            .filter_map(|(labels, now)| match <[String; 2]>::try_from(labels) {
                Ok([a, m]) => Some(((a, m), now)),
                Err(_) => None,
            })
            .collect()
    }

    /// Counts a `/health` answer.
    pub fn health_checked(&self, healthy: bool) {
        let c = if healthy {
            &self.health_success
        } else {
            &self.health_failures
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one check of `/livez` or `/readyz` (`kind`).
    pub fn named_check(&self, kind: &str, name: &'static str, ok: bool) {
        let mut checks = self
            .named_checks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = checks.entry((kind.to_string(), name)).or_default();
        entry.last_ok = ok;
        if ok {
            entry.successes += 1;
        } else {
            entry.failures += 1;
        }
    }

    /// A defragmentation starts: running until the timer is dropped.
    pub fn defrag_started(&self) -> DefragTimer<'_> {
        self.defrags_running.fetch_add(1, Ordering::Relaxed);
        DefragTimer {
            metrics: self,
            started: std::time::Instant::now(),
        }
    }

    /// Counts a proposal that failed (dropped, timed out, or the member stopping).
    pub fn proposal_failed(&self) {
        self.proposals_failed.fetch_add(1, Ordering::Relaxed);
    }

    fn add_health(&self, e: &mut Exposition) {
        e.single(
            "etcd_server_health_success",
            Kind::Counter,
            "The total number of successful health checks",
            self.health_success.load(Ordering::Relaxed) as f64,
        );
        e.single(
            "etcd_server_health_failures",
            Kind::Counter,
            "The total number of failed health checks",
            self.health_failures.load(Ordering::Relaxed) as f64,
        );
        let checks = self
            .named_checks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if checks.is_empty() {
            return;
        }
        let mut gauge = Family::new(
            "etcd_server_healthcheck",
            Kind::Gauge,
            "The result of each kind of healthcheck.",
        );
        let mut total = Family::new(
            "etcd_server_healthchecks_total",
            Kind::Counter,
            "The total number of each kind of healthcheck.",
        );
        let mut by_name: Vec<_> = checks.iter().collect();
        by_name.sort_by(|a, b| (a.0.1, &a.0.0).cmp(&(b.0.1, &b.0.0)));
        for ((kind, name), c) in by_name {
            gauge.sample(
                &[("type", kind), ("name", name)],
                f64::from(u8::from(c.last_ok)),
            );
            if c.failures > 0 {
                total.sample(
                    &[("type", kind), ("name", name), ("status", "error")],
                    c.failures as f64,
                );
            }
            if c.successes > 0 {
                total.sample(
                    &[("type", kind), ("name", name), ("status", "success")],
                    c.successes as f64,
                );
            }
        }
        e.add(gauge);
        e.add(total);
    }
}
