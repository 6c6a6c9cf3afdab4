//! The load of the side-by-side benchmarks that measure an event under writes
//! (`learner-catchup`, `backup`): the fill (many unique keys of incompressible values,
//! as fast as a fixed number of concurrent puts allow; again over part of them to leave
//! history behind) and the background writers (closed-loop puts, rate-capped or not,
//! whose every latency and completion time is kept, to be cut into windows afterwards).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use oxcd_api::etcdserverpb::RangeRequest;
use oxcd_client::{Client, ConnectOptions};
use serde::Serialize;

use crate::keys::mix;

/// Connects to `url` alone, requests bounded by `request_timeout`.
pub async fn connect(url: &str, request_timeout: Duration) -> Result<Client, String> {
    let opts = ConnectOptions {
        dial_timeout: Duration::from_secs(5),
        request_timeout,
        ..ConnectOptions::default()
    };
    Client::connect(&[url.to_string()], &opts)
        .await
        .map_err(|e| format!("{url}: {e}"))
}

/// `len` bytes that no compressor shrinks, different for every `seed`.
pub fn incompressible(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 8);
    let mut n = mix(seed);
    while out.len() < len {
        n = mix(n);
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The prefix of every fill key.
pub const FILL_PREFIX: &[u8] = b"fill/";

/// The key of fill put `n`: `fill/` and `n` zero-padded to 10 digits (unique, sorted).
pub fn fill_key(n: u64) -> Vec<u8> {
    format!("fill/{n:010}").into_bytes()
}

/// How many fill keys the member at `c` holds, and at which revision; `serializable`:
/// from its own state, without asking the leader.
pub async fn fill_keys(c: &Client, serializable: bool) -> Result<(i64, i64), String> {
    let req = RangeRequest {
        key: FILL_PREFIX.to_vec(),
        range_end: oxcd_client::prefix_end(FILL_PREFIX),
        serializable,
        count_only: true,
        ..RangeRequest::default()
    };
    let r = c
        .range(req)
        .await
        .map_err(|e| format!("count of the fill keys: {e}"))?;
    Ok((r.count, r.header.map(|h| h.revision).unwrap_or_default()))
}

/// What the fill did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Fill {
    pub puts: u64,
    /// Bytes of values written.
    pub value_bytes: u64,
    pub secs: f64,
    /// Puts that failed once and were sent again.
    pub retried: u64,
}

impl Fill {
    /// Value bytes per second, in MiB.
    pub fn mib_per_sec(&self) -> f64 {
        if self.secs > 0.0 {
            self.value_bytes as f64 / (1024.0 * 1024.0) / self.secs
        } else {
            0.0
        }
    }
}

/// Puts keys `keys` ([`fill_key`]) to `url`, each with `value_size` incompressible bytes
/// of its own (`generation` makes them differ from an earlier fill of the same keys),
/// from `clients` concurrent puts over `conns` connections. A failed put is sent again
/// (up to 5 times) so the data written is exactly what was asked.
pub async fn fill(
    url: &str,
    keys: std::ops::Range<u64>,
    generation: u64,
    value_size: usize,
    clients: usize,
    conns: usize,
) -> Result<Fill, String> {
    let mut connections = Vec::new();
    for _ in 0..conns.max(1) {
        connections.push(connect(url, Duration::from_secs(60)).await?);
    }
    let puts = keys.end.saturating_sub(keys.start);
    let next = Arc::new(AtomicU64::new(keys.start));
    let retried = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..clients.max(1) {
        let c = connections[i % connections.len()].clone();
        let (next, retried) = (next.clone(), retried.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= keys.end {
                    return Ok::<(), String>(());
                }
                let value = incompressible(n ^ (generation << 48), value_size);
                let mut tries = 0;
                loop {
                    match c.put(fill_key(n), value.clone()).await {
                        Ok(_) => break,
                        Err(e) if tries < 5 => {
                            tries += 1;
                            retried.fetch_add(1, Ordering::Relaxed);
                            eprintln!("fill put {n} failed ({e}), sending it again");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(e) => return Err(format!("fill put {n} failed 6 times: {e}")),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(Fill {
        puts,
        value_bytes: puts * value_size as u64,
        secs: start.elapsed().as_secs_f64(),
        retried: retried.load(Ordering::Relaxed),
    })
}

/// One background put: when it finished, how long it took, and its error if it failed.
#[derive(Debug, Clone)]
pub struct Sample {
    pub done: Instant,
    pub latency: Duration,
    pub error: Option<String>,
}

/// The longest stretch of `[from, to]` in which no put succeeded, in ms: how long the
/// writers were held, all of them. A put that fails (a timeout) does not end it, so a
/// server that holds writes longer than the clients' timeout is still measured.
pub fn longest_stall_ms(samples: &[Sample], from: Instant, to: Instant) -> f64 {
    let mut done: Vec<Instant> = samples
        .iter()
        .filter(|s| s.error.is_none() && s.done > from && s.done <= to)
        .map(|s| s.done)
        .collect();
    done.sort_unstable();
    let mut last = from;
    let mut longest = Duration::ZERO;
    for d in done.into_iter().chain(std::iter::once(to)) {
        longest = longest.max(d.saturating_duration_since(last));
        last = d;
    }
    longest.as_secs_f64() * 1e3
}

impl Sample {
    /// When the put was sent.
    pub fn sent(&self) -> Instant {
        self.done - self.latency
    }
}

/// Background writers running until [`Writers::stop`] or until dropped.
pub struct Writers {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<Sample>>>,
}

impl Drop for Writers {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Keys per writer that the background puts overwrite in turn.
const WRITER_KEYS: u64 = 1000;

impl Writers {
    /// Starts `clients` writers sharing `conns` connections to `url`, each putting
    /// `value_size`-byte values one at a time (closed loop): at most `rate / clients`
    /// times a second, or as fast as answered when `rate` is 0. A put slower than its
    /// interval delays the next, it does not pile up.
    pub async fn start(
        url: &str,
        clients: usize,
        conns: usize,
        rate: u64,
        value_size: usize,
    ) -> Result<Writers, String> {
        let clients = clients.max(1);
        let mut connections = Vec::new();
        for _ in 0..conns.clamp(1, clients) {
            connections.push(connect(url, Duration::from_secs(60)).await?);
        }
        let interval = (rate > 0).then(|| Duration::from_secs_f64(clients as f64 / rate as f64));
        let stop = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        for w in 0..clients {
            let c = connections[w % connections.len()].clone();
            let stop = stop.clone();
            // Staggered so the writers' puts spread over each interval.
            let mut ticks = interval.map(|interval| {
                let first =
                    tokio::time::Instant::now() + interval.mul_f64(w as f64 / clients as f64);
                let mut ticks = tokio::time::interval_at(first, interval);
                ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                ticks
            });
            tasks.push(tokio::spawn(async move {
                let mut samples = Vec::new();
                let mut n: u64 = 0;
                while !stop.load(Ordering::Relaxed) {
                    if let Some(ticks) = ticks.as_mut() {
                        ticks.tick().await;
                    }
                    let key = format!("load/{w}/{:04}", n % WRITER_KEYS);
                    let value = incompressible((w as u64) << 40 | n, value_size);
                    let sent = Instant::now();
                    let got = c.put(key, value).await;
                    let done = Instant::now();
                    samples.push(Sample {
                        done,
                        latency: done - sent,
                        error: got.err().map(|e| e.to_string()),
                    });
                    n += 1;
                }
                samples
            }));
        }
        Ok(Writers { stop, tasks })
    }

    /// Stops the writers (each after its put in flight) and returns every sample.
    pub async fn stop(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for t in std::mem::take(&mut self.tasks) {
            if let Ok(s) = t.await {
                all.extend(s);
            }
        }
        all
    }
}

/// The background puts that finished in a window of time.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Window {
    pub secs: f64,
    /// Successful puts.
    pub ok: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Failed puts by message.
    pub errors: BTreeMap<String, u64>,
}

impl Window {
    /// The samples that finished in `[from, to]`.
    pub fn of(samples: &[Sample], from: Instant, to: Instant) -> Window {
        let finished = samples.iter().filter(|s| s.done >= from && s.done <= to);
        Window::summary(finished, from, to)
    }

    /// The samples that were in flight at some moment of `[from, to]`: sent before its
    /// end, finished after its start (a put that waited through it counts whole).
    pub fn overlapping(samples: &[Sample], from: Instant, to: Instant) -> Window {
        let overlapping = samples.iter().filter(|s| s.sent() <= to && s.done >= from);
        Window::summary(overlapping, from, to)
    }

    /// The samples sent in `(from, to]`, wherever they finished.
    pub fn sent_in(samples: &[Sample], from: Instant, to: Instant) -> Window {
        let sent = samples.iter().filter(|s| s.sent() > from && s.sent() <= to);
        Window::summary(sent, from, to)
    }

    fn summary<'a>(
        samples: impl Iterator<Item = &'a Sample>,
        from: Instant,
        to: Instant,
    ) -> Window {
        let mut lat: Vec<Duration> = Vec::new();
        let mut errors = BTreeMap::new();
        for s in samples {
            match &s.error {
                None => lat.push(s.latency),
                Some(e) => *errors.entry(e.clone()).or_default() += 1,
            }
        }
        lat.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        Window {
            secs: to.saturating_duration_since(from).as_secs_f64(),
            ok: lat.len() as u64,
            p50_ms: ms(quantile(&lat, 0.50)),
            p99_ms: ms(quantile(&lat, 0.99)),
            max_ms: ms(lat.last().copied().unwrap_or_default()),
            errors,
        }
    }

    /// Failed puts.
    pub fn failed(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// The value at quantile `q` of sorted values (nearest rank); zero if none.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_sized_distinct_and_keys_sort_in_order() {
        let (a, b) = (incompressible(1, 1024), incompressible(2, 1024));
        assert_eq!((a.len(), b.len()), (1024, 1024));
        assert_ne!(a, b);
        assert_eq!(incompressible(1, 1024), a);
        assert!(fill_key(9) < fill_key(10));
        assert_eq!(fill_key(7), b"fill/0000000007");
    }

    #[test]
    fn a_window_counts_only_what_finished_inside_it() {
        let t = Instant::now();
        let s = |at: u64, lat: u64, error: Option<&str>| Sample {
            done: t + Duration::from_millis(at),
            latency: Duration::from_millis(lat),
            error: error.map(str::to_string),
        };
        let samples = [
            s(0, 100, None),
            s(10, 1, None),
            s(20, 3, None),
            s(30, 2, Some("boom")),
            s(40, 50, None),
        ];
        let w = Window::of(
            &samples,
            t + Duration::from_millis(5),
            t + Duration::from_millis(35),
        );
        assert_eq!(w.ok, 2);
        assert_eq!(w.failed(), 1);
        assert_eq!((w.p50_ms, w.p99_ms, w.max_ms), (1.0, 3.0, 3.0));
        assert!((w.secs - 0.030).abs() < 1e-9);
        // In flight during [25, 35]: the one that failed at 30 and the one that took
        // 50 ms to finish at 40, not the one sent at 17 that finished at 20.
        let w = Window::overlapping(
            &samples,
            t + Duration::from_millis(25),
            t + Duration::from_millis(35),
        );
        assert_eq!((w.ok, w.failed(), w.max_ms), (1, 1, 50.0));
        let w = Window::sent_in(
            &samples,
            t + Duration::from_millis(15),
            t + Duration::from_millis(30),
        );
        assert_eq!((w.ok, w.failed(), w.max_ms), (1, 1, 3.0));
    }
}
