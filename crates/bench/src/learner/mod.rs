//! `oxcd-bench learner-catchup`: how long a learner added to a full cluster takes to be
//! in sync, and what it costs the writers meanwhile, on etcd and on oxcd with the same
//! settings and disk, one system after the other.
//!
//! Per system: a 3-member cluster ([`crate::cluster`]), filled with
//! `--data-mb` of unique keys; background writers at a capped rate; then (t0) a
//! MemberAdd of a learner on the leader and the learner's process started as etcd's
//! runbook says (`--initial-cluster-state existing`); MemberPromote on the leader every
//! 100 ms until it is accepted (t1). Both systems refuse the promotion until the
//! learner's match index is 90% of the leader's (etcd's rule), so t1 - t0 is the time
//! to catch up by the same measure. The writes finished in [t0, t1] are compared with
//! those of as many seconds before t0; the leader's term is watched throughout.

pub mod report;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;

use crate::cluster::{Cluster, Settings, disk_usage};
use crate::load::{self, Fill, Window, Writers};
use crate::versus::{self, Bench, Measured, Round};

/// The name the learner gets.
const LEARNER: &str = "m3";

/// etcd's refusal of a membership change while the leader has not been connected to
/// every peer for 5 s (`--strict-reconfig-check`).
const UNHEALTHY: &str = "etcdserver: unhealthy cluster";

/// The error both systems answer a promotion with until the learner is in sync.
pub const NOT_IN_SYNC: &str =
    "etcdserver: can only promote a learner member which is in sync with leader";

#[derive(Debug, Clone, Args)]
pub struct LearnerArgs {
    #[command(flatten)]
    pub versus: versus::Flags,
    /// MiB of values written before the learner is added.
    #[arg(long, default_value_t = 1024)]
    pub data_mb: u64,
    /// Size of each fill value, in bytes (incompressible).
    #[arg(long, default_value_t = 1024)]
    pub value_size: usize,
    /// Concurrent puts of the fill.
    #[arg(long, default_value_t = 64)]
    pub fill_clients: usize,
    /// Connections of the fill (to the leader).
    #[arg(long, default_value_t = 8)]
    pub fill_conns: usize,
    /// Background writers (one connection each, to the leader).
    #[arg(long, default_value_t = 8)]
    pub writers: usize,
    /// The background writers' puts per second, all together (a cap).
    #[arg(long, default_value_t = 1000)]
    pub write_rate: u64,
    /// The background writers' value size, in bytes.
    #[arg(long, default_value_t = 256)]
    pub write_value_size: usize,
    /// --snapshot-count of every member (small enough that the learner must get a
    /// snapshot of the backend rather than the log's entries).
    #[arg(long, default_value_t = 10_000)]
    pub snapshot_count: u64,
    /// Seconds between the fill's end and the writers' start.
    #[arg(long, default_value_t = 5)]
    pub settle_secs: u64,
    /// Seconds the writers run before the learner is added: the baseline is the same
    /// length as the catch-up, at most this long.
    #[arg(long, default_value_t = 30)]
    pub baseline_secs: u64,
    /// Also writes every background put as `utc_ms,latency_us` lines to
    /// `<dir>/round<N>-<system>/latencies.csv`, kept with the members' logs, to line
    /// latency spikes up with what the members logged.
    #[arg(long)]
    pub latencies: bool,
    /// Gives up on a catch-up after this many seconds.
    #[arg(long, default_value_t = 1800)]
    pub timeout_secs: u64,
    /// Starts the learner from this binary instead of the system's own: with
    /// `--only etcd --learner-binary target/release/oxcd`, an oxcd learner joins an etcd
    /// 3.5 cluster (issue 35), to compare with an etcd learner of the same cluster.
    #[arg(long)]
    pub learner_binary: Option<std::path::PathBuf>,
}

impl LearnerArgs {
    fn settings(&self) -> Settings {
        Settings {
            heartbeat_ms: 100,
            election_ms: 1000,
            snapshot_count: self.snapshot_count,
            quota_bytes: 8 << 30,
            tls: None,
        }
    }

    /// Puts of the fill.
    fn fill_puts(&self) -> u64 {
        (self.data_mb * 1024 * 1024).div_ceil(self.value_size.max(1) as u64)
    }
}

/// A change of the leader or its term, seen by polling the first leader's Status.
#[derive(Debug, Clone, Serialize)]
pub struct TermChange {
    /// Seconds after t0.
    pub at_secs: f64,
    pub term: u64,
    /// The leader's id, hexadecimal as etcdctl prints it.
    pub leader: String,
}

/// Everything measured on one system in one round.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub system: String,
    /// The learner's binary, when not the system's own (`--learner-binary`).
    pub learner_binary: Option<String>,
    pub fill: Fill,
    /// The leader's id and term once filled (hexadecimal id).
    pub leader_before: String,
    pub term_before: u64,
    /// The learner's id (hexadecimal).
    pub learner: String,
    /// t1 - t0: MemberAdd sent until a MemberPromote accepted.
    pub catchup_secs: f64,
    /// When the learner's process first answered Status, seconds after t0.
    pub learner_status_secs: Option<f64>,
    /// When the promoted learner first served every fill key (serializable count from
    /// its own state), seconds after t0.
    pub learner_all_keys_secs: Option<f64>,
    /// Promotions refused as not in sync.
    pub promote_refused: u64,
    /// Promotions that failed otherwise, by message.
    pub promote_errors: std::collections::BTreeMap<String, u64>,
    /// Background puts finished in [t0, t1].
    pub during: Window,
    /// Background puts finished from t0 until the learner served every fill key (or
    /// t1, if later); None when it did not.
    pub until_served: Option<Window>,
    /// Background puts finished in the same length of time before t0 (at most
    /// --baseline-secs).
    pub baseline: Window,
    /// Every background put finished before t0 (--baseline-secs of them).
    pub baseline_all: Window,
    pub leader_after: String,
    pub term_after: u64,
    /// Changes of term or leader seen from t0 to t1 (polled every 250 ms).
    pub term_changes: Vec<TermChange>,
    /// Status polls of the first leader that failed during the catch-up.
    pub status_failures: u64,
    /// Disk usage (du) of the leader's data dir after the catch-up.
    pub leader_du_bytes: u64,
    /// Disk usage (du) of the learner's data dir after the catch-up.
    pub learner_du_bytes: u64,
}

impl Outcome {
    pub fn term_changed(&self) -> bool {
        self.term_after != self.term_before || !self.term_changes.is_empty()
    }

    pub fn leader_changed(&self) -> bool {
        self.leader_after != self.leader_before
            || self
                .term_changes
                .iter()
                .any(|c| c.leader != self.leader_before)
    }
}

impl Measured for Outcome {
    fn system(&self) -> &str {
        &self.system
    }
}

/// What [`versus::run`] runs for this subcommand.
impl Bench for LearnerArgs {
    const NAME: &'static str = "learner-catchup";
    type Outcome = Outcome;

    fn flags(&self) -> &versus::Flags {
        &self.versus
    }

    async fn measure(&self, system: &str, binary: &Path, dir: &Path) -> Result<Outcome, String> {
        measure(system, binary, dir, self).await
    }

    fn markdown(
        &self,
        date: &str,
        versions: &[(String, String, String)],
        rounds: &[Round<Outcome>],
    ) -> String {
        report::markdown(date, self, versions, rounds)
    }
}

/// Hexadecimal, as etcdctl prints member ids.
fn hex(id: u64) -> String {
    format!("{id:x}")
}

/// Polls `url`'s Status every `every` until stopped, noting each change of (term,
/// leader) and counting failed polls.
fn watch_term(
    url: String,
    t0: Instant,
    first: (u64, u64),
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(Vec<TermChange>, u64)> {
    tokio::spawn(async move {
        let mut changes = Vec::new();
        let mut failures = 0;
        let mut last = first;
        let c = load::connect(&url, Duration::from_secs(2)).await.ok();
        while !stop.load(Ordering::Relaxed) {
            match c.as_ref().map(|c| c.status()) {
                Some(f) => match f.await {
                    Ok(s) if (s.raft_term, s.leader) != last => {
                        last = (s.raft_term, s.leader);
                        changes.push(TermChange {
                            at_secs: t0.elapsed().as_secs_f64(),
                            term: s.raft_term,
                            leader: hex(s.leader),
                        });
                    }
                    Ok(_) => {}
                    Err(_) => failures += 1,
                },
                None => failures += 1,
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        (changes, failures)
    })
}

/// Polls the learner's Status until it first answers (or `until`); seconds after t0.
fn first_status(url: String, t0: Instant, until: Instant) -> tokio::task::JoinHandle<Option<f64>> {
    tokio::spawn(async move {
        while Instant::now() < until {
            if let Ok(c) = load::connect(&url, Duration::from_secs(1)).await
                && c.status().await.is_ok()
            {
                return Some(t0.elapsed().as_secs_f64());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    })
}

/// Waits (up to `within`) until member `url` serves `count` fill keys from its own
/// state; seconds after t0.
async fn all_keys_served(url: &str, count: u64, t0: Instant, within: Duration) -> Option<f64> {
    let deadline = Instant::now() + within;
    let c = load::connect(url, Duration::from_secs(30)).await.ok()?;
    while Instant::now() < deadline {
        if let Ok((served, _)) = load::fill_keys(&c, true).await
            && served >= count as i64
        {
            return Some(t0.elapsed().as_secs_f64());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// One system, one round, on a fresh cluster under `dir`.
async fn measure(
    name: &str,
    binary: &Path,
    dir: &Path,
    a: &LearnerArgs,
) -> Result<Outcome, String> {
    let mut cluster = Cluster::start(binary, dir, &a.settings())?;
    cluster.wait_ready(Duration::from_secs(30)).await?;
    let (li, _, _) = cluster.leader().await?;
    let leader_url = cluster.members[li].client_url.clone();
    eprintln!(
        "   fill: {} puts of {} B to {} ({} concurrent, {} conns)",
        a.fill_puts(),
        a.value_size,
        cluster.members[li].name,
        a.fill_clients,
        a.fill_conns
    );
    let fill = load::fill(
        &leader_url,
        0..a.fill_puts(),
        0,
        a.value_size,
        a.fill_clients,
        a.fill_conns,
    )
    .await?;
    eprintln!(
        "   filled in {:.1} s ({:.1} MiB/s)",
        fill.secs,
        fill.mib_per_sec()
    );
    tokio::time::sleep(Duration::from_secs(a.settle_secs)).await;
    // The leader may have moved during the fill: the writers and the membership calls
    // go to the leader of now.
    let (li, leader_id, term_before) = cluster.leader().await?;
    let leader_url = cluster.members[li].client_url.clone();
    let leader_dir = cluster.members[li].data_dir.clone();
    // One connection per writer.
    let writers = Writers::start(
        &leader_url,
        a.writers,
        a.writers,
        a.write_rate,
        a.write_value_size,
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(a.baseline_secs)).await;

    let admin = load::connect(&leader_url, Duration::from_secs(30)).await?;
    let learner = cluster.prepare_member(LEARNER)?;
    let learner_url = cluster.members[learner].client_url.clone();
    let learner_peer = cluster.members[learner].peer_url.clone();
    // etcd refuses a MemberAdd until the leader has been connected to every peer for
    // 5 s ("etcdserver: unhealthy cluster"): a cluster that young is asked again; t0 is
    // when the accepted MemberAdd was sent.
    let mut refused_adds = 0;
    let (t0, added) = loop {
        let sent = Instant::now();
        match admin.member_add(vec![learner_peer.clone()], true).await {
            Ok(added) => break (sent, added),
            Err(e) if e.to_string() == UNHEALTHY && refused_adds < 100 => {
                refused_adds += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(format!("MemberAdd of the learner: {e}")),
        }
    };
    if refused_adds > 0 {
        eprintln!("   MemberAdd refused {refused_adds}x as {UNHEALTHY:?} before it was accepted");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let terms = watch_term(
        leader_url.clone(),
        t0,
        (term_before, leader_id),
        stop.clone(),
    );
    let learner_id = added.member.as_ref().map(|m| m.id).unwrap_or_default();
    // As etcdctl prints it for the new member: every member's name (the new one's
    // given here) with its peer URLs.
    let initial: Vec<String> = added
        .members
        .iter()
        .flat_map(|m| {
            let name = if m.id == learner_id {
                LEARNER.to_string()
            } else {
                m.name.clone()
            };
            m.peer_ur_ls.iter().map(move |u| format!("{name}={u}"))
        })
        .collect();
    match &a.learner_binary {
        Some(binary) => cluster.join_with(learner, &initial.join(","), binary)?,
        None => cluster.join(learner, &initial.join(","))?,
    }
    // Not stopped at t1: etcd's learner serves clients only once it has published
    // itself, which may be after its promotion.
    let status = first_status(
        learner_url.clone(),
        t0,
        t0 + Duration::from_secs(a.timeout_secs + 120),
    );
    let mut refused = 0;
    let mut promote_errors = std::collections::BTreeMap::new();
    let deadline = t0 + Duration::from_secs(a.timeout_secs);
    let t1 = loop {
        match admin.member_promote(learner_id).await {
            Ok(_) => break Instant::now(),
            Err(e) if e.to_string() == NOT_IN_SYNC => refused += 1,
            Err(e) => *promote_errors.entry(e.to_string()).or_insert(0) += 1,
        }
        if Instant::now() > deadline {
            stop.store(true, Ordering::Relaxed);
            status.abort();
            let _ = writers.stop().await;
            return Err(format!(
                "{name}: the learner was not promoted within {} s ({refused} refusals, other errors: {promote_errors:?})",
                a.timeout_secs
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    stop.store(true, Ordering::Relaxed);
    let catchup = t1 - t0;
    eprintln!("   promoted after {:.2} s", catchup.as_secs_f64());
    // The writers go on until the learner serves every key: a learner that installs
    // what it received after its promotion still loads the machine until then.
    let learner_all_keys_secs =
        all_keys_served(&learner_url, fill.puts, t0, Duration::from_secs(120)).await;
    let served = learner_all_keys_secs.map(|s| t0 + Duration::from_secs_f64(s));
    let samples = writers.stop().await;
    if a.latencies {
        write_latencies(&samples, &dir.join("latencies.csv"))?;
    }
    let (term_changes, status_failures) = terms.await.map_err(|e| e.to_string())?;
    let before = catchup.min(t0 - writers_started_after(&samples, t0));
    let during = Window::of(&samples, t0, t1);
    let until_served = served.map(|at| Window::of(&samples, t0, at.max(t1)));
    let baseline = Window::of(&samples, t0 - before, t0);
    let baseline_all = Window::of(&samples, writers_started_after(&samples, t0), t0);
    let now = cluster.leader().await;
    let (leader_after, term_after) = match now {
        Ok((_, id, term)) => (hex(id), term),
        Err(_) => ("none".to_string(), 0),
    };
    let learner_status_secs = if status.is_finished() || learner_all_keys_secs.is_some() {
        status.await.map_err(|e| e.to_string())?
    } else {
        status.abort();
        None
    };
    let outcome = Outcome {
        system: name.to_string(),
        learner_binary: a.learner_binary.as_ref().map(|b| b.display().to_string()),
        fill,
        leader_before: hex(leader_id),
        term_before,
        learner: hex(learner_id),
        catchup_secs: catchup.as_secs_f64(),
        learner_status_secs,
        learner_all_keys_secs,
        promote_refused: refused,
        promote_errors,
        during,
        until_served,
        baseline,
        baseline_all,
        leader_after,
        term_after,
        term_changes,
        status_failures,
        leader_du_bytes: disk_usage(&leader_dir),
        learner_du_bytes: disk_usage(&cluster.members[learner].data_dir),
    };
    drop(cluster);
    Ok(outcome)
}

/// Writes `utc_ms,latency_us` for every sample, in completion order.
fn write_latencies(samples: &[load::Sample], path: &Path) -> Result<(), String> {
    let (now, utc) = (Instant::now(), std::time::SystemTime::now());
    let utc_ms = |done: Instant| {
        let at = utc - now.saturating_duration_since(done);
        at.duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    };
    let mut sorted: Vec<_> = samples.iter().collect();
    sorted.sort_by_key(|s| s.done);
    let mut out = String::with_capacity(sorted.len() * 24);
    for s in sorted {
        out.push_str(&format!("{},{}\n", utc_ms(s.done), s.latency.as_micros()));
    }
    std::fs::write(path, out).map_err(|e| format!("{}: {e}", path.display()))
}

/// When the writers' first put finished (t0 if none did before it): the baseline
/// starts no earlier.
fn writers_started_after(samples: &[load::Sample], t0: Instant) -> Instant {
    samples
        .iter()
        .map(|s| s.done)
        .filter(|d| *d <= t0)
        .min()
        .unwrap_or(t0)
}
