//! Named scenarios for etcd's known bug classes, and the run of any scenario: start a
//! cluster, run the workload while injecting faults, recover, check the history.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::checker::watch::WatchSummary;
use crate::checker::{self, Summary};
use crate::cluster::{Cluster, ClusterConfig};
use crate::faults::{self, Fault, FaultPlan, Target};
use crate::history::Outcome;
use crate::watches;
use crate::workload::{self, WorkloadConfig};

/// A run to make.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Its name.
    pub name: String,
    /// Cluster size.
    pub members: usize,
    /// More flags for every member.
    pub flags: Vec<String>,
    /// The clients.
    pub workload: WorkloadConfig,
    /// The faults.
    pub plan: FaultPlan,
    /// Whether a client compacts the history every half second.
    pub compact: bool,
    /// Client and peer traffic over TLS.
    pub tls: bool,
    /// Lease clients and a watcher instead of the KV workload ([`crate::leases`]).
    pub leases: bool,
    /// Auth on: the workload runs as root beside users whose grants change
    /// ([`crate::auth`]).
    pub auth: bool,
    /// Keep the data, logs and history of a run that passed too.
    pub keep: bool,
    /// etcd members beside oxcd ones ([`crate::cluster::Mixed`]); the run also checks
    /// that every member holds the same HashKV and that no alarm was raised.
    pub mixed: Option<crate::cluster::Mixed>,
    /// Clients ranging over large values on every member beside the workload, this
    /// many per member, and connections churned ([`crate::storm`]); 0: none.
    pub storm: usize,
}

/// The named scenarios.
pub const NAMES: &[&str] = &[
    "kill-1member",
    "kill-compaction",
    "pause-leader",
    "partition-heal",
    "kill-snapshot",
    "kill-tls",
    "kill-leases",
    "kill-auth",
    "reconfigure",
    "mixed",
    "mixed-leader",
    "overload",
];

fn workload(clients: usize, write_percent: u64, seed: u64) -> WorkloadConfig {
    WorkloadConfig {
        clients,
        keys: 8,
        write_percent,
        op_timeout: Duration::from_secs(2),
        seed,
    }
}

/// A scenario with the given faults on 3 members (the `--faults` form).
pub fn custom(faults: Vec<Fault>, seed: u64) -> Scenario {
    Scenario {
        name: "custom".into(),
        members: 3,
        flags: Vec::new(),
        workload: workload(8, 50, seed),
        plan: FaultPlan {
            faults,
            gap_ms: (1000, 2500),
            hold_ms: (500, 2000),
            target: Target::Index,
            seed,
        },
        compact: false,
        tls: false,
        leases: false,
        auth: false,
        keep: false,
        mixed: None,
        storm: 0,
    }
}

/// The scenario called `name`.
pub fn named(name: &str, seed: u64) -> Option<Scenario> {
    let base = custom(Vec::new(), seed);
    let plan = |faults: Vec<Fault>, target, hold_ms| FaultPlan {
        faults,
        target,
        hold_ms,
        ..base.plan.clone()
    };
    let s = match name {
        // etcd lost acknowledged writes when killed under heavy writes.
        "kill-1member" => Scenario {
            members: 1,
            workload: workload(8, 90, seed),
            plan: FaultPlan {
                gap_ms: (500, 1500),
                ..plan(vec![Fault::Kill], Target::Index, (100, 500))
            },
            ..base
        },
        // etcd's revision went backwards after a crash during compaction.
        "kill-compaction" => Scenario {
            workload: workload(8, 70, seed),
            plan: plan(vec![Fault::Kill], Target::Leader, (300, 1500)),
            compact: true,
            ..base
        },
        // A paused leader must not answer linearizable reads from stale state.
        "pause-leader" => Scenario {
            workload: workload(8, 30, seed),
            plan: plan(vec![Fault::Pause], Target::Leader, (1000, 3000)),
            ..base
        },
        "partition-heal" => Scenario {
            plan: plan(vec![Fault::Partition], Target::Leader, (1000, 3000)),
            ..base
        },
        // A member killed long enough to need a snapshot; kills land during sends too.
        "kill-snapshot" => Scenario {
            flags: [
                "--snapshot-count",
                "100",
                "--experimental-snapshot-catchup-entries",
                "20",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            workload: workload(8, 80, seed),
            // Held down long enough that even a slow machine writes past the catch-up
            // window meanwhile.
            plan: plan(vec![Fault::Kill], Target::Index, (2000, 4000)),
            ..base
        },
        // The leader killed while clients and peers talk TLS with certificates checked
        // both ways: reconnections and elections over TLS.
        "kill-tls" => Scenario {
            workload: workload(8, 60, seed),
            plan: plan(
                vec![Fault::Kill, Fault::Partition],
                Target::Leader,
                (500, 2000),
            ),
            tls: true,
            ..base
        },
        // Leases kept alive and left to expire while the leader is killed or cut off:
        // expiry decided by whoever leads, keepalives through any member, watchers
        // resuming after broken streams.
        "kill-leases" => Scenario {
            plan: plan(
                vec![Fault::Kill, Fault::Partition],
                Target::Leader,
                (500, 2000),
            ),
            leases: true,
            ..base
        },
        // The seeds' scenario: auth on, users writing while their grants change and
        // members are killed with -9 and restarted, again and again (etcd 3.4 let
        // members disagree about the data after such restarts, issue 11651).
        "kill-auth" => Scenario {
            workload: workload(6, 60, seed),
            plan: plan(vec![Fault::Kill], Target::Index, (300, 2000)),
            auth: true,
            ..base
        },
        // Members replaced under load (removed, added again at the same address with an
        // empty data dir, as a voter or as a learner promoted once caught up), between
        // kills: the seeds' accidents during reconfiguration.
        "reconfigure" => Scenario {
            workload: workload(8, 60, seed),
            plan: FaultPlan {
                gap_ms: (500, 1500),
                ..plan(
                    vec![Fault::Replace, Fault::ReplaceLearner, Fault::Kill],
                    Target::Index,
                    (300, 1500),
                )
            },
            ..base
        },
        // etcd 3.5 and oxcd in one cluster (issue 35): m1 runs the reference etcd, m0
        // and m2 were swapped to oxcd on their data dirs; kills, pauses and partitions
        // of either kind, etcd's corruption checks on, HashKV compared at the end.
        "mixed" | "mixed-leader" => Scenario {
            flags: [
                "--experimental-initial-corrupt-check=true",
                "--experimental-corrupt-check-time=2s",
                "--snapshot-count=300",
                "--experimental-snapshot-catchup-entries=50",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            workload: workload(8, 60, seed),
            plan: plan(
                vec![Fault::Kill, Fault::Pause, Fault::Partition],
                if name == "mixed" {
                    Target::Index
                } else {
                    Target::Leader
                },
                (500, 2500),
            ),
            mixed: Some(crate::cluster::Mixed {
                etcd: crate::reference::etcd_binary(),
                oxcd: vec![0, 2],
            }),
            ..base
        },
        // Load the members cannot serve at once (issue 36): on every member, clients
        // ranging over 3 MiB again and again with a 1 MiB range bound, so ranges are
        // refused with "too many requests" beside the checked clients, and bursts of
        // new connections; the leader killed or paused meanwhile. Shedding the load must
        // not drop, reorder or invent acknowledged work.
        "overload" => Scenario {
            flags: vec![format!(
                "--max-inflight-range-bytes={}",
                crate::storm::BOUND_BYTES
            )],
            workload: workload(8, 60, seed),
            plan: plan(vec![Fault::Kill, Fault::Pause], Target::Leader, (500, 2000)),
            storm: 3,
            ..base
        },
        _ => return None,
    };
    Some(Scenario {
        name: name.to_string(),
        ..s
    })
}

/// What a run did and found.
#[derive(Debug)]
pub struct Report {
    /// Answered operations.
    pub ok: usize,
    /// Operations that surely did nothing.
    pub failed: usize,
    /// Operations with no answer.
    pub indeterminate: usize,
    /// The faults injected.
    pub faults: Vec<String>,
    /// Snapshots members installed from their leader.
    pub snapshots: usize,
    /// The check: a summary, or the violation file.
    pub result: Result<Summary, (String, PathBuf)>,
    /// The watchers' check against the same history, or what broke.
    pub watch: Result<WatchSummary, String>,
    /// Where the members' data dirs and logs are (kept on a violation).
    pub data: PathBuf,
    /// The workload's lease work.
    pub leases: LeaseCounts,
    /// With auth on: the permission decisions checked, and what the settled cluster
    /// showed; or what broke.
    pub auth: Option<Result<(crate::auth::DecisionSummary, crate::auth::Settled), String>>,
    /// In a mixed cluster: every member's HashKV at one revision, equal, and no alarm
    /// (etcd's corruption checks raise CORRUPT); or what differed.
    pub hashes: Option<Result<String, String>>,
    /// What the storm beside the workload did, if there was one.
    pub storm: Option<crate::storm::StormCounts>,
}

/// Waits until every member at `urls` is at one revision, then compares their HashKV
/// there and lists the alarms: a line saying so, or what differed.
async fn same_state(
    urls: &[String],
    opts: &Option<etcd_client::ConnectOptions>,
) -> Result<String, String> {
    let mut clients = Vec::new();
    for u in urls {
        let c = etcd_client::Client::connect([u.clone()], opts.clone())
            .await
            .map_err(|e| format!("{u}: {e}"))?;
        clients.push(c);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let rev = loop {
        let mut revs = Vec::new();
        for c in &mut clients {
            // A linearizable read through each member: it has applied the leader's
            // commit index by then.
            let r = c.get("same-state-probe", None).await;
            revs.push(r.ok().and_then(|r| r.header().map(|h| h.revision())));
        }
        if let Some(Some(first)) = revs.first()
            && revs.iter().all(|r| *r == Some(*first))
        {
            break *first;
        }
        if Instant::now() > deadline {
            return Err(format!("members never agreed on a revision: {revs:?}"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let mut hashes = Vec::new();
    for (u, c) in urls.iter().zip(&mut clients) {
        let h = c
            .hash_kv(rev)
            .await
            .map_err(|e| format!("{u}: hashkv: {e}"))?;
        hashes.push(h.hash());
    }
    if hashes.iter().any(|h| *h != hashes[0]) {
        return Err(format!("HashKV at revision {rev} differs: {hashes:?}"));
    }
    let alarms = clients[0]
        .alarm(
            etcd_client::AlarmAction::Get,
            etcd_client::AlarmType::None,
            None,
        )
        .await
        .map_err(|e| format!("alarm list: {e}"))?;
    if !alarms.alarms().is_empty() {
        let raised: Vec<String> = alarms
            .alarms()
            .iter()
            .map(|a| format!("{:?} on {:x}", a.alarm(), a.member_id()))
            .collect();
        return Err(format!("alarms raised: {raised:?}"));
    }
    Ok(format!(
        "HashKV {} on {} members at revision {rev}, no alarm",
        hashes[0],
        hashes.len()
    ))
}

/// What the workload's clients did with leases.
#[derive(Debug, Default, Clone, Copy)]
pub struct LeaseCounts {
    /// Grants answered.
    pub granted: usize,
    /// Puts with a lease answered.
    pub puts: usize,
    /// Revocations answered.
    pub revoked: usize,
    /// Leases that expired with keys, at a revision the watchers saw.
    pub expired: usize,
}

impl LeaseCounts {
    fn of(history: &[crate::history::Operation]) -> LeaseCounts {
        use crate::history::Op;
        let mut c = LeaseCounts::default();
        for o in history
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Ok(_)))
        {
            match o.op {
                Op::LeaseGrant { .. } => c.granted += 1,
                Op::PutLease { .. } => c.puts += 1,
                Op::LeaseRevoke { .. } => c.revoked += 1,
                Op::LeaseExpire { .. } => c.expired += 1,
                _ => {}
            }
        }
        c
    }
}

async fn compactor(url: String, opts: Option<etcd_client::ConnectOptions>, stop: Arc<AtomicBool>) {
    let Ok(mut c) = etcd_client::Client::connect([url], opts).await else {
        return;
    };
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Ok(Ok(st)) = tokio::time::timeout(Duration::from_secs(1), c.status()).await {
            let rev = st.header().map(|h| h.revision()).unwrap_or(0) - 20;
            if rev > 1 {
                let _ = tokio::time::timeout(Duration::from_secs(2), c.compact(rev, None)).await;
            }
        }
    }
}

/// Runs `s` for `duration` with the `oxcd` at `binary`, writing a violation (and keeping
/// the data) under `out`.
pub async fn run(
    s: &Scenario,
    binary: &Path,
    duration: Duration,
    out: &Path,
) -> Result<Report, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{}-", s.name))
        .tempdir_in(out)
        .map_err(|e| e.to_string())?;
    match run_in(s, binary, duration, out, dir.path()).await {
        Ok(report)
            if report.result.is_ok()
                && report.watch.is_ok()
                && !report.auth.as_ref().is_some_and(|a| a.is_err())
                && !report.hashes.as_ref().is_some_and(|h| h.is_err())
                && !s.keep =>
        {
            Ok(report)
        }
        Ok(report) => {
            let _ = dir.keep();
            Ok(report)
        }
        Err(e) => {
            let kept = dir.keep();
            Err(format!("{e} (data and logs kept in {})", kept.display()))
        }
    }
}

/// What a lease run did and found.
#[derive(Debug)]
pub struct LeaseReport {
    /// The faults injected.
    pub faults: Vec<String>,
    /// The checks' summary, or the violation.
    pub result: Result<crate::leases::LeaseSummary, String>,
}

/// Runs a lease scenario (`s.leases`) for `duration`; data and logs are kept under `out`
/// on a violation.
pub async fn run_leases(
    s: &Scenario,
    binary: &Path,
    duration: Duration,
    out: &Path,
) -> Result<LeaseReport, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let dir = tempfile::Builder::new()
        .prefix(&format!("{}-", s.name))
        .tempdir_in(out)
        .map_err(|e| e.to_string())?;
    let mut cluster = Cluster::start(&ClusterConfig {
        binary: binary.to_path_buf(),
        members: s.members,
        dir: dir.path().to_path_buf(),
        extra_flags: s.flags.clone(),
        tls: s.tls,
        mixed: s.mixed.clone(),
    })
    .await?;
    let opts = cluster.connect_options();
    let urls = cluster.client_urls();
    let running = crate::leases::start(&urls, opts.clone(), s.workload.clients);
    let faults = faults::run(&mut cluster, &s.plan, Instant::now() + duration).await;
    cluster.recover().await?;
    let result = running.finish(&urls, opts).await;
    drop(cluster);
    let faults = faults?;
    if result.is_err() {
        let _ = dir.keep();
    }
    Ok(LeaseReport { faults, result })
}

async fn run_in(
    s: &Scenario,
    binary: &Path,
    duration: Duration,
    out: &Path,
    dir: &Path,
) -> Result<Report, String> {
    let mut cluster = Cluster::start(&ClusterConfig {
        binary: binary.to_path_buf(),
        members: s.members,
        dir: dir.to_path_buf(),
        extra_flags: s.flags.clone(),
        tls: s.tls,
        mixed: s.mixed.clone(),
    })
    .await?;
    let storm = match s.storm {
        0 => None,
        n => Some(crate::storm::start(&cluster.client_urls(), cluster.connect_options(), n).await?),
    };
    // What the storm wrote lies below the checked history, outside its keys.
    let base_rev = storm.as_ref().map_or(1, |st| st.base_rev);
    let start = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let mut opts = cluster.connect_options();
    if s.auth {
        crate::auth::setup(&cluster.client_urls()[0], &opts).await?;
        opts = Some(crate::auth::login(
            &opts,
            "root",
            crate::auth::ROOT_PASSWORD,
        ));
    }
    let users = s.auth.then(|| {
        crate::auth::start(
            &cluster.client_urls(),
            &cluster.connect_options(),
            s.workload.clients,
            s.workload.seed,
            start,
            stop.clone(),
        )
    });
    let clients = workload::start(
        &cluster.client_urls(),
        opts.clone(),
        &s.workload,
        start,
        stop.clone(),
    );
    let watching = watches::start(&cluster.client_urls(), opts.clone(), start);
    let compacting = s.compact.then(|| {
        tokio::spawn(compactor(
            cluster.client_urls()[0].clone(),
            opts.clone(),
            stop.clone(),
        ))
    });
    let faults = faults::run(&mut cluster, &s.plan, start + duration).await;
    stop.store(true, Ordering::Relaxed);
    let storm = match storm {
        Some(st) => Some(st.finish().await),
        None => None,
    };
    let mut history = clients.await.map_err(|e| e.to_string())?;
    let changes = match users {
        Some(users) => {
            let (ops, changes) = users.finish().await;
            history.extend(ops);
            history.sort_by_key(|o| (o.invoke, o.client));
            for (i, o) in history.iter_mut().enumerate() {
                o.id = i;
            }
            Some(changes)
        }
        None => None,
    };
    if let Some(c) = compacting {
        let _ = c.await;
    }
    cluster.recover().await?;
    let auth = match &changes {
        Some(changes) => Some(match crate::auth::decisions::check(changes, &history) {
            Ok(summary) => {
                crate::auth::finish(&cluster.client_urls(), &cluster.connect_options(), &history)
                    .await
                    .map(|settled| (summary, settled))
            }
            Err(e) => Err(e),
        }),
        None => None,
    };
    let watched = watching.finish(&cluster.client_urls(), opts.clone()).await;
    let hashes = match &s.mixed {
        Some(_) => Some(same_state(&cluster.client_urls(), &opts).await),
        None => None,
    };
    let snapshots = cluster
        .members
        .iter()
        .map(|m| m.log_lines("installed the leader's snapshot").len())
        .sum();
    drop(cluster);
    let faults = faults?;
    let count = |f: fn(&Outcome) -> bool| history.iter().filter(|o| f(&o.outcome)).count();
    let ok = count(|o| matches!(o, Outcome::Ok(_)));
    let failed = count(|o| matches!(o, Outcome::Failed(_)));
    let indeterminate = count(|o| matches!(o, Outcome::Indeterminate(_)));
    if let Ok((logs, _)) = &watched {
        crate::expiries::resolve(&mut history, logs);
    }
    let saved = dir.join("history.json");
    std::fs::write(
        &saved,
        serde_json::to_vec(&history).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("{}: {e}", saved.display()))?;
    let result = if let Err(e) = &watched {
        // Without the watchers the leases' expiries cannot be placed, and the search
        // would try every way to fit them into every gap: the run fails as it is.
        Err((
            format!("not checked: the watchers failed ({e}), and they place the lease expiries"),
            saved.clone(),
        ))
    } else {
        match checker::check_from(&history, base_rev) {
            Ok(summary) => Ok(summary),
            Err(v) => {
                let path =
                    checker::write_violation(out, &history, &v).map_err(|e| e.to_string())?;
                Err((v.reason, path))
            }
        }
    };
    let watch = match watched {
        Ok((logs, mut ending)) => {
            ending.base_rev = base_rev;
            let saved = dir.join("watches.json");
            let doc = serde_json::json!({ "logs": logs, "ending": ending });
            std::fs::write(&saved, serde_json::to_vec(&doc).map_err(|e| e.to_string())?)
                .map_err(|e| format!("{}: {e}", saved.display()))?;
            checker::watch::check(&history, &logs, &ending)
        }
        Err(e) => Err(e),
    };
    let data = dir.to_path_buf();
    let leases = LeaseCounts::of(&history);
    Ok(Report {
        storm,
        hashes,
        auth,
        leases,
        ok,
        failed,
        indeterminate,
        faults,
        snapshots,
        result,
        watch,
        data,
    })
}
