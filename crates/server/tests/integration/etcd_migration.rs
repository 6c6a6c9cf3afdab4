//! The rolling replacement of issue 35's point 4, both ways, under load: a 3-member
//! etcd 3.5.16 cluster becomes a 3-member oxcd cluster one member at a time (add an
//! oxcd learner, let it catch up, promote it, hand it the leadership, remove an etcd
//! member), then the oxcd cluster becomes an etcd cluster again the same way. etcd's
//! own procedure for replacing a member (etcd's docs, "runtime reconfiguration":
//! `member add --learner`, `member promote`, `member remove`), with etcd's corruption
//! checks on throughout.
//!
//! A writer, a watcher and a lease holder run from the first step to the last, each on
//! one member at a time and moving to another when theirs goes away. At the end: every
//! acknowledged write is there at its revision, the watcher saw each write once and in
//! order (no gap, no duplicate, across every reconnection), the kept-alive lease kept
//! its TTL and its key, and every member's HashKV is equal.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions, PutOptions, WatchOptions};
use oxcd_config::settings::Settings;
use tokio::sync::watch;

use crate::common::etcd::{Etcd, join_etcd, log_of, start_etcd_member};
use crate::common::{InProc, free_port, revision_at};
use crate::etcd_peer::{add_learner, eventually, peer_hash_kv};

/// How long a client request may take before the worker moves to another member.
pub(crate) const REQUEST: Duration = Duration::from_secs(3);
/// The lease holder's TTL.
const LEASE_TTL: i64 = 6;
/// etcd's corruption checks, at start and every 2 s from the leader.
pub(crate) const CHECKS: [&str; 2] = [
    "--experimental-initial-corrupt-check=true",
    "--experimental-corrupt-check-time=2s",
];

/// A member of the cluster under test: an etcd process, an in-process oxcd, or a
/// process the test holds itself.
pub(crate) enum Process {
    Etcd(Etcd),
    Oxcd(InProc),
    Elsewhere,
}

pub(crate) struct Member {
    pub(crate) name: String,
    pub(crate) id: u64,
    pub(crate) peer_url: String,
    pub(crate) client_url: String,
    pub(crate) process: Process,
}

/// The members' client URLs the workers pick from, as the steps change them.
pub(crate) type Endpoints = Arc<Mutex<Vec<String>>>;

pub(crate) fn endpoints_of(members: &[Member]) -> Vec<String> {
    members.iter().map(|m| m.client_url.clone()).collect()
}

/// The `--initial-cluster` of `members` and one more.
fn initial_cluster(members: &[Member], name: &str, peer_url: &str) -> Vec<(String, Vec<String>)> {
    let mut all: Vec<(String, Vec<String>)> = members
        .iter()
        .map(|m| (m.name.clone(), vec![m.peer_url.clone()]))
        .collect();
    all.push((name.to_string(), vec![peer_url.to_string()]));
    all
}

fn etcd_flag(cluster: &[(String, Vec<String>)]) -> String {
    cluster
        .iter()
        .map(|(n, u)| format!("{n}={}", u[0]))
        .collect::<Vec<_>>()
        .join(",")
}

/// A client of the member at `url`.
pub(crate) async fn client_of(url: &str) -> Option<Client> {
    let opts = etcd_client::ConnectOptions::new()
        .with_connect_timeout(REQUEST)
        .with_timeout(REQUEST);
    Client::connect([url.to_string()], Some(opts)).await.ok()
}

/// A client of one of `endpoints`, the `turn`-th (round robin), retried until one
/// connects.
async fn any_client(endpoints: &Endpoints, turn: &mut usize) -> Client {
    loop {
        let url = {
            let e = endpoints.lock().expect("endpoints");
            e[*turn % e.len()].clone()
        };
        *turn += 1;
        if let Some(c) = client_of(&url).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the writer saw: acknowledged keys with their revisions, and each write's
/// latency with the phase it fell in.
#[derive(Default)]
struct Written {
    acked: BTreeMap<String, i64>,
    latencies: Vec<(String, Duration)>,
}

/// Puts `load/<n>` one after another (every 10 ms) until `stop`.
async fn writer(
    endpoints: Endpoints,
    phase: watch::Receiver<String>,
    stop: watch::Receiver<bool>,
) -> Written {
    let mut out = Written::default();
    let mut turn = 0;
    let mut c = any_client(&endpoints, &mut turn).await;
    let mut n = 0u64;
    while !*stop.borrow() {
        let key = format!("load/{n:06}");
        n += 1;
        let started = Instant::now();
        match c.put(key.as_str(), "v", None).await {
            Ok(r) => {
                let rev = r.header().expect("header").revision();
                out.acked.insert(key, rev);
                out.latencies
                    .push((phase.borrow().clone(), started.elapsed()));
            }
            Err(_) => c = any_client(&endpoints, &mut turn).await,
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    out
}

/// Watches `load/` from revision `from` until `stop`, moving to another member when
/// its stream ends, from the revision after the last it saw: every event's (key,
/// revision), in the order received.
async fn watcher(
    endpoints: Endpoints,
    from: i64,
    stop: watch::Receiver<bool>,
) -> (Vec<(String, i64)>, usize) {
    let mut seen: Vec<(String, i64)> = Vec::new();
    let mut turn = 0;
    let mut reconnects = 0;
    let mut next = from;
    while !*stop.borrow() {
        let mut c = any_client(&endpoints, &mut turn).await;
        let opts = WatchOptions::new()
            .with_prefix()
            .with_start_revision(next)
            .with_progress_notify();
        let Ok(mut stream) = c.watch("load/", Some(opts)).await else {
            continue;
        };
        loop {
            let got = tokio::time::timeout(Duration::from_millis(500), stream.message()).await;
            match got {
                Ok(Ok(Some(r))) => {
                    if r.canceled() {
                        break;
                    }
                    for e in r.events() {
                        if let Some(kv) = e.kv() {
                            let key = String::from_utf8_lossy(kv.key()).into_owned();
                            seen.push((key, kv.mod_revision()));
                            next = kv.mod_revision() + 1;
                        }
                    }
                }
                Ok(_) => break,
                Err(_) if *stop.borrow() => return (seen, reconnects),
                Err(_) => {}
            }
        }
        reconnects += 1;
    }
    (seen, reconnects)
}

/// Holds a lease of [`LEASE_TTL`] with `lease/held` on it, keeping it alive every
/// second through whichever member answers, until `stop`: the lease's id and the
/// keepalives that failed.
async fn lease_holder(endpoints: Endpoints, ttl: i64, stop: watch::Receiver<bool>) -> (i64, usize) {
    let mut turn = 0;
    let mut c = any_client(&endpoints, &mut turn).await;
    let id = c.lease_grant(ttl, None).await.expect("lease grant").id();
    c.put("lease/held", "v", Some(PutOptions::new().with_lease(id)))
        .await
        .expect("put on the lease");
    let mut failed = 0;
    while !*stop.borrow() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let kept = async {
            let (mut keeper, mut stream) = c.lease_keep_alive(id).await?;
            keeper.keep_alive().await?;
            stream.message().await
        };
        match tokio::time::timeout(REQUEST, kept).await {
            Ok(Ok(Some(r))) if r.ttl() > 0 => {}
            Ok(Ok(Some(r))) => panic!("the lease expired: {r:?}"),
            _ => {
                failed += 1;
                c = any_client(&endpoints, &mut turn).await;
            }
        }
    }
    (id, failed)
}

/// The writer, the watcher (from a revision) and the lease holder, running together
/// over `endpoints`; each write is counted in the phase named last.
pub(crate) struct Workload {
    phase: watch::Sender<String>,
    stop: watch::Sender<bool>,
    writing: tokio::task::JoinHandle<Written>,
    watching: tokio::task::JoinHandle<(Vec<(String, i64)>, usize)>,
    holding: tokio::task::JoinHandle<(i64, usize)>,
    lease_ttl: i64,
}

/// What the workload saw, once stopped.
pub(crate) struct Finished {
    written: Written,
    /// Watch events (key, revision), in the order received.
    seen: Vec<(String, i64)>,
    /// Times the watcher moved to another member.
    reconnects: usize,
    /// The held lease.
    lease: i64,
    /// Its TTL.
    lease_ttl: i64,
    /// Keepalives retried on another member.
    keepalive_failures: usize,
}

impl Workload {
    pub(crate) fn start(endpoints: &Endpoints, watch_from: i64, phase: &str) -> Workload {
        Workload::with_lease_ttl(endpoints, watch_from, phase, LEASE_TTL)
    }

    /// As [`Workload::start`], the lease granted with `lease_ttl`.
    pub(crate) fn with_lease_ttl(
        endpoints: &Endpoints,
        watch_from: i64,
        phase: &str,
        lease_ttl: i64,
    ) -> Workload {
        let (phase_tx, phase_rx) = watch::channel(phase.to_string());
        let (stop_tx, stop) = watch::channel(false);
        Workload {
            writing: tokio::spawn(writer(endpoints.clone(), phase_rx, stop.clone())),
            watching: tokio::spawn(watcher(endpoints.clone(), watch_from, stop.clone())),
            holding: tokio::spawn(lease_holder(endpoints.clone(), lease_ttl, stop)),
            phase: phase_tx,
            stop: stop_tx,
            lease_ttl,
        }
    }

    /// Counts the writes from now on in `phase`.
    pub(crate) fn phase(&self, phase: impl Into<String>) {
        self.phase.send_replace(phase.into());
    }

    pub(crate) async fn finish(self) -> Finished {
        self.stop.send_replace(true);
        let written = self.writing.await.expect("writer");
        let (seen, reconnects) = self.watching.await.expect("watcher");
        let (lease, keepalive_failures) = self.holding.await.expect("lease holder");
        Finished {
            written,
            seen,
            reconnects,
            lease,
            lease_ttl: self.lease_ttl,
            keepalive_failures,
        }
    }
}

/// Whether the member at `url` takes a write within a while.
pub(crate) async fn takes_writes(url: &str) -> bool {
    let url = url.to_string();
    eventually(|| {
        let url = url.clone();
        async move {
            match client_of(&url).await {
                Some(mut c) => c.put("ready", "v", None).await.is_ok(),
                None => false,
            }
        }
    })
    .await
}

/// Retries `op` on `client` while the cluster answers that it is not ready for a
/// membership change yet (etcd's strict reconfiguration checks, a learner not caught
/// up): its answer.
pub(crate) async fn reconfigure<T, F, Fut>(what: &str, op: F) -> T
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
{
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match op().await {
            Ok(t) => return t,
            Err(e) if Instant::now() < deadline => {
                let text = e.to_string();
                let not_yet = [
                    "unhealthy cluster",
                    "in sync with leader",
                    "not enough started members",
                    "too many learner members",
                    "leader changed",
                    "timed out",
                    "no leader",
                ];
                assert!(not_yet.iter().any(|t| text.contains(t)), "{what}: {text}");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }
}

/// The revision of the member at `url` (a linearizable read of the load's keys).
pub(crate) async fn revision_of(url: &str) -> i64 {
    revision_at(&mut client_of(url).await.expect("client"), "load/").await
}

/// Waits until the member at `url` serves revision `rev` (a serializable read).
pub(crate) async fn caught_up(url: &str, rev: i64) -> bool {
    let url = url.to_string();
    eventually(|| {
        let url = url.clone();
        async move {
            let Some(mut c) = client_of(&url).await else {
                return false;
            };
            c.get("load/", Some(GetOptions::new().with_serializable()))
                .await
                .is_ok_and(|r| r.header().is_some_and(|h| h.revision() >= rev))
        }
    })
    .await
}

/// Whether the member at `peer_url` reports the cluster version `v` (its peer port's
/// `/version`, `etcdcluster`) within a while.
pub(crate) async fn cluster_version_becomes(peer_url: &str, v: &str) -> bool {
    let (url, v) = (peer_url.to_string(), v.to_string());
    eventually(|| {
        let (url, v) = (url.clone(), v.clone());
        async move {
            let Ok(answer) = oxcd_server::peer::etcd::client::get(
                &oxcd_server::peer::PeerDialer::default(),
                &url,
                "/version",
                REQUEST,
            )
            .await
            else {
                return false;
            };
            serde_json::from_slice::<serde_json::Value>(&answer.body)
                .is_ok_and(|j| j["etcdcluster"] == v.as_str())
        }
    })
    .await
}

/// Settings of an oxcd member `name` joining `cluster` at `peer_url`, acting as etcd
/// 3.5, with etcd's timing.
fn oxcd_joining(s: &mut Settings, name: &str, peer_url: &str, cluster: Vec<(String, Vec<String>)>) {
    s.name = name.into();
    s.listen_peer_urls = vec![peer_url.to_string()];
    s.peer_urls = vec![peer_url.to_string()];
    s.initial_cluster = cluster;
    s.initial_cluster_existing = true;
    s.emulated_version = oxcd_go::semver::Version::new(3, 5, 0);
    s.heartbeat = Duration::from_millis(100);
    s.election_timeout = Duration::from_millis(1000);
}

/// Replaces `members[0]` with a new member `name` of the other kind (oxcd for etcd,
/// etcd for oxcd): learner, caught up, promoted, leading; then the old one removed and
/// stopped. Returns how long the step took.
async fn replace_first(
    members: &mut Vec<Member>,
    name: &str,
    oxcd: bool,
    dir: &std::path::Path,
    endpoints: &Endpoints,
) -> Duration {
    let started = Instant::now();
    let ctl = client_of(&members[members.len() - 1].client_url)
        .await
        .expect("control client");
    let peer = free_port();
    let peer_url = format!("http://127.0.0.1:{peer}");
    let id = add_learner(&ctl, &peer_url).await;
    let cluster = initial_cluster(members, name, &peer_url);
    let (process, client_url) = if oxcd {
        let p = InProc::start(dir.join(name), |s| {
            oxcd_joining(s, name, &peer_url, cluster)
        })
        .await;
        let url = p.endpoint();
        (Process::Oxcd(p), url)
    } else {
        let flags: Vec<String> = CHECKS.iter().map(|f| f.to_string()).collect();
        let p = join_etcd(&dir.join(name), name, peer, &etcd_flag(&cluster), &flags);
        let url = format!("http://{}", p.endpoint);
        (Process::Etcd(p), url)
    };
    let rev = revision_at(&mut ctl.clone(), "load/").await;
    assert!(caught_up(&client_url, rev).await, "{name} caught up");
    reconfigure(&format!("promote {name}"), || {
        let mut c = ctl.clone();
        async move { c.member_promote(id).await }
    })
    .await;
    members.push(Member {
        name: name.to_string(),
        id,
        peer_url,
        client_url,
        process,
    });
    lead(members, id).await;
    endpoints
        .lock()
        .expect("endpoints")
        .push(members[members.len() - 1].client_url.clone());
    let old = members.remove(0);
    endpoints
        .lock()
        .expect("endpoints")
        .retain(|u| *u != old.client_url);
    let new_ctl = client_of(&members[members.len() - 1].client_url)
        .await
        .expect("control client");
    reconfigure(&format!("remove {}", old.name), || {
        let mut c = new_ctl.clone();
        async move { c.member_remove(old.id).await }
    })
    .await;
    match old.process {
        Process::Etcd(e) => drop(e),
        Process::Oxcd(o) => o.stop().await,
        Process::Elsewhere => {}
    }
    started.elapsed()
}

/// Moves leadership to member `to`, asking the member that leads (etcd's MoveLeader is
/// the leader's), again until `to` leads (a member promoted a moment ago ignores the
/// leader's MsgTimeoutNow).
async fn lead(members: &[Member], to: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut leader = 0;
        for m in members {
            if let Some(mut c) = client_of(&m.client_url).await
                && let Ok(s) = c.status().await
                && s.leader() != 0
            {
                leader = s.leader();
                break;
            }
        }
        if leader == to {
            return;
        }
        assert!(Instant::now() < deadline, "leadership not moved to {to:x}");
        if let Some(m) = members.iter().find(|m| m.id == leader)
            && let Some(mut c) = client_of(&m.client_url).await
        {
            let _ = tokio::time::timeout(REQUEST, c.move_leader(to)).await;
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Replaces every member of `members`, oldest first, with members `<prefix><i>` of the
/// other kind ([`replace_first`]), counting the writes of each step in a phase of its
/// own: how long each step took.
async fn replace_all(
    members: &mut Vec<Member>,
    prefix: &str,
    oxcd: bool,
    dir: &std::path::Path,
    endpoints: &Endpoints,
    load: &Workload,
) -> Vec<Duration> {
    let mut steps = Vec::new();
    for i in 0..members.len() {
        let name = format!("{prefix}{i}");
        load.phase(format!("step {name} in"));
        let old = members[0].name.clone();
        let took = replace_first(members, &name, oxcd, dir, endpoints).await;
        eprintln!("{name} replaced {old} in {took:?}");
        steps.push(took);
    }
    steps
}

/// The HashKV every member answers at `rev` on its peer port, equal.
pub(crate) async fn hashes_equal(members: &[Member], rev: i64) -> String {
    let mut hashes = Vec::new();
    for m in members {
        assert!(caught_up(&m.client_url, rev).await, "{} at {rev}", m.name);
        let answer = peer_hash_kv(&m.peer_url, rev).await;
        // The header is the member's current revision; the hash is of `rev`'s.
        let v: serde_json::Value = serde_json::from_str(&answer).expect("etcd's JSON");
        hashes.push(format!(
            "hash {} compact_revision {}",
            v["hash"], v["compact_revision"]
        ));
    }
    assert!(
        hashes.iter().all(|h| *h == hashes[0]),
        "HashKV at {rev}: {hashes:#?}"
    );
    hashes[0].clone()
}

/// The 50th and 99th percentiles of `d`.
fn percentiles(mut d: Vec<Duration>) -> (Duration, Duration) {
    d.sort();
    if d.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    let at = |q: f64| d[((d.len() as f64 * q) as usize).min(d.len() - 1)];
    (at(0.5), at(0.99))
}

/// The checks at the end of a run: every write acknowledged is stored at its revision,
/// the watcher saw every stored write once and in order, the lease kept its TTL and
/// key, every member's HashKV is equal, and the etcd members (`etcd_names`, data dirs
/// under `dir`) never logged a corruption finding. Prints the write latencies by phase.
pub(crate) async fn check_end(
    members: &[Member],
    finished: Finished,
    dir: &std::path::Path,
    etcd_names: &[&str],
) {
    let Finished {
        written,
        seen,
        reconnects,
        lease,
        lease_ttl,
        keepalive_failures,
    } = finished;
    // Every acknowledged write is there, at its revision (asked again while the
    // cluster elects a leader after a restart).
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut c, all) = loop {
        if let Some(mut c) = client_of(&members[0].client_url).await
            && let Ok(all) = c.get("load/", Some(GetOptions::new().with_prefix())).await
        {
            break (c, all);
        }
        assert!(Instant::now() < deadline, "the cluster serves again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let stored: BTreeMap<String, i64> = all
        .kvs()
        .iter()
        .map(|kv| {
            (
                String::from_utf8_lossy(kv.key()).into_owned(),
                kv.mod_revision(),
            )
        })
        .collect();
    let lost: Vec<_> = written
        .acked
        .iter()
        .filter(|(k, r)| stored.get(*k) != Some(r))
        .collect();
    eprintln!(
        "writes acknowledged {}, stored {}, lost {}",
        written.acked.len(),
        stored.len(),
        lost.len()
    );
    assert!(lost.is_empty(), "lost: {lost:?}");
    // The watcher saw every stored write once, in revision order.
    let revisions: Vec<i64> = seen.iter().map(|(_, r)| *r).collect();
    assert!(
        revisions.windows(2).all(|w| w[0] < w[1]),
        "watch events out of order or repeated"
    );
    let watched: BTreeMap<String, i64> = seen.into_iter().collect();
    let end_rev = all.header().expect("header").revision();
    let expected: BTreeMap<String, i64> =
        stored.into_iter().filter(|(_, r)| *r <= end_rev).collect();
    let missing = expected
        .iter()
        .filter(|(k, r)| watched.get(*k) != Some(r))
        .count();
    eprintln!(
        "watch: {} events over {reconnects} reconnections, {missing} missing",
        watched.len()
    );
    assert_eq!(missing, 0, "the watcher saw every write");
    assert_eq!(watched.len(), expected.len(), "and nothing else");
    // The lease kept its TTL and its key.
    let ttl = c
        .lease_time_to_live(
            lease,
            Some(etcd_client::LeaseTimeToLiveOptions::new().with_keys()),
        )
        .await
        .expect("time-to-live");
    eprintln!(
        "lease: granted {} s, {} s left, {keepalive_failures} keepalives retried",
        ttl.granted_ttl(),
        ttl.ttl()
    );
    assert_eq!(ttl.granted_ttl(), lease_ttl);
    assert!(ttl.ttl() > 0);
    assert_eq!(ttl.keys(), [b"lease/held".to_vec()]);
    // Every member's HashKV is equal.
    let hash = hashes_equal(members, end_rev).await;
    eprintln!(
        "at the end: HashKV at {end_rev} equal on {} members: {hash}",
        members.len()
    );
    // etcd's corruption checks never found the oxcd members' data different.
    for name in etcd_names {
        let text = std::fs::read_to_string(log_of(&dir.join(name))).unwrap_or_default();
        for bad in [
            "found hash mismatch",
            "then hashes must match",
            "found different hash values",
            "found different compact revision",
        ] {
            assert!(!text.contains(bad), "{name} logged {bad:?}");
        }
    }
    // Write latency by phase (debug builds in one process: for the record, not a bound).
    let mut by_phase: BTreeMap<String, Vec<Duration>> = BTreeMap::new();
    for (p, d) in written.latencies {
        by_phase.entry(p).or_default().push(d);
    }
    for (p, d) in by_phase {
        let n = d.len();
        let (p50, p99) = percentiles(d);
        eprintln!("writes during {p:<22} n={n:<5} p50 {p50:?} p99 {p99:?}");
    }
}

#[tokio::test]
async fn an_etcd_cluster_becomes_an_oxcd_cluster_and_back_under_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Three etcd members, bootstrapped together.
    let peers: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let cluster: String = peers
        .iter()
        .enumerate()
        .map(|(i, p)| format!("etcd{i}=http://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let flags: Vec<String> = CHECKS.iter().map(|f| f.to_string()).collect();
    let mut members: Vec<Member> = peers
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let name = format!("etcd{i}");
            let ports = (p, free_port());
            let e = start_etcd_member(
                &dir.path().join(&name),
                &name,
                ports,
                &cluster,
                "new",
                &flags,
            );
            Member {
                name,
                id: 0,
                peer_url: format!("http://127.0.0.1:{p}"),
                client_url: format!("http://{}", e.endpoint),
                process: Process::Etcd(e),
            }
        })
        .collect();
    let first = members[0].client_url.clone();
    assert!(takes_writes(&first).await, "the etcd cluster serves");
    let mut ctl = client_of(&first).await.expect("client");
    for m in ctl.member_list().await.expect("member list").members() {
        if let Some(ours) = members.iter_mut().find(|x| x.name == m.name()) {
            ours.id = m.id();
        }
    }
    let start_rev = revision_at(&mut ctl, "ready").await;

    let endpoints: Endpoints = Arc::new(Mutex::new(endpoints_of(&members)));
    let load = Workload::start(&endpoints, start_rev + 1, "all etcd");
    tokio::time::sleep(Duration::from_secs(3)).await;

    let mut steps = replace_all(&mut members, "oxcd", true, dir.path(), &endpoints, &load).await;
    load.phase("all oxcd");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rev = revision_of(&members[0].client_url).await;
    let hash = hashes_equal(&members, rev).await;
    eprintln!("all oxcd: HashKV at {rev} equal on 3 members: {hash}");
    // The oxcd members act as etcd 3.5 (`--emulated-version=3.5`): with no etcd member
    // left the cluster stays at 3.5, so etcd 3.5 members can join again. (Without the
    // flag the cluster version rises to 3.6 as in a rolling upgrade to etcd 3.6, and
    // etcd 3.5 joins no 3.6 cluster, downgrading or not: its `allowedVersionRange`.)
    for m in &members {
        assert!(
            cluster_version_becomes(&m.peer_url, "3.5.0").await,
            "{} at 3.5",
            m.name
        );
    }

    steps.extend(
        replace_all(
            &mut members,
            "etcd-back",
            false,
            dir.path(),
            &endpoints,
            &load,
        )
        .await,
    );
    load.phase("all etcd again");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let finished = load.finish().await;

    check_end(
        &members,
        finished,
        dir.path(),
        &[
            "etcd0",
            "etcd1",
            "etcd2",
            "etcd-back0",
            "etcd-back1",
            "etcd-back2",
        ],
    )
    .await;
    eprintln!("steps took {steps:?}");
    for m in members {
        match m.process {
            Process::Etcd(e) => drop(e),
            Process::Oxcd(o) => o.stop().await,
            Process::Elsewhere => {}
        }
    }
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
pub(crate) fn signal(pid: u32, signal: &str) {
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -{signal} {pid}");
}

/// The oxcd binary as a member `name` of `cluster` (etcd's `--initial-cluster` text) at
/// `peer_url`, serving clients at `client_url`, joining an existing cluster (ignored once
/// its data dir holds a member), acting as etcd 3.5, snapshots as `snapshots`.
fn oxcd_binary(
    dir: &std::path::Path,
    name: &str,
    client_url: &str,
    peer_url: &str,
    cluster: &str,
    snapshots: &[String],
) -> crate::common::OxcdProcess {
    let mut flags: Vec<String> = [
        "--name",
        name,
        "--listen-peer-urls",
        peer_url,
        "--initial-advertise-peer-urls",
        peer_url,
        "--initial-cluster",
        cluster,
        "--initial-cluster-state",
        "existing",
        "--emulated-version",
        "3.5",
        "--heartbeat-interval",
        "100",
        "--election-timeout",
        "1000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    flags.extend_from_slice(snapshots);
    crate::common::OxcdProcess::spawn_at(dir, client_url, &flags).wait_ready()
}

/// Issue 35's point 7: faults in a mixed cluster of real processes (two etcd 3.5.16
/// members and the oxcd binary), under the writer, the watcher and the lease holder,
/// with raft snapshots every 50 entries so that a member that comes back behind is
/// brought back by a snapshot: kill -9 of the oxcd member (back by etcd's snapshot),
/// kill -9 of an etcd follower while the oxcd member leads (back by oxcd's snapshot),
/// a paused oxcd leader (the etcd members elect one of theirs; it rejoins as a
/// follower), and kill -9 of every member at once. Nothing acknowledged is lost, the
/// watch has no gap and no duplicate, the lease survives, HashKV is equal and etcd's
/// corruption checks stay silent.
#[tokio::test]
async fn a_mixed_cluster_survives_kills_pauses_and_snapshots_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshots: Vec<String> = [
        "--snapshot-count=50",
        "--experimental-snapshot-catchup-entries=10",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut etcd_flags: Vec<String> = CHECKS.iter().map(|f| f.to_string()).collect();
    etcd_flags.extend_from_slice(&snapshots);
    // (peer, client) ports, the same when a member restarts.
    let ports: Vec<(u16, u16)> = (0..2).map(|_| (free_port(), free_port())).collect();
    let etcd_cluster: String = ports
        .iter()
        .enumerate()
        .map(|(i, (p, _))| format!("etcd{i}=http://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let start_etcd = |i: usize, state: &str, cluster: &str| {
        let name = format!("etcd{i}");
        start_etcd_member(
            &dir.path().join(&name),
            &name,
            ports[i],
            cluster,
            state,
            &etcd_flags,
        )
    };
    let mut etcds: Vec<Etcd> = (0..2)
        .map(|i| start_etcd(i, "new", &etcd_cluster))
        .collect();
    let etcd_urls: Vec<String> = etcds
        .iter()
        .map(|e| format!("http://{}", e.endpoint))
        .collect();
    let first = etcd_urls[0].clone();
    assert!(takes_writes(&first).await, "the etcd cluster serves");
    let ctl = client_of(&first).await.expect("client");
    let oxcd_peer_url = format!("http://127.0.0.1:{}", free_port());
    let oxcd_url = format!("http://127.0.0.1:{}", free_port());
    let oxcd_id = add_learner(&ctl, &oxcd_peer_url).await;
    let cluster = format!("{etcd_cluster},oxcd={oxcd_peer_url}");
    let oxcd_dir = dir.path().join("oxcd");
    let start_oxcd = || {
        oxcd_binary(
            &oxcd_dir,
            "oxcd",
            &oxcd_url,
            &oxcd_peer_url,
            &cluster,
            &snapshots,
        )
    };
    let mut oxcd = start_oxcd();
    let mut members: Vec<Member> = Vec::new();
    for m in ctl
        .clone()
        .member_list()
        .await
        .expect("member list")
        .members()
    {
        let url = if m.id() == oxcd_id {
            oxcd_url.clone()
        } else {
            m.client_urls()[0].clone()
        };
        members.push(Member {
            name: m.name().to_string(),
            id: m.id(),
            peer_url: m.peer_urls()[0].clone(),
            client_url: url,
            process: Process::Elsewhere,
        });
    }
    let rev = revision_at(&mut ctl.clone(), "ready").await;
    assert!(
        caught_up(&oxcd_url, rev).await,
        "the oxcd learner caught up"
    );
    reconfigure("promote oxcd", || {
        let mut c = ctl.clone();
        async move { c.member_promote(oxcd_id).await }
    })
    .await;
    // The oxcd member applies its promotion after etcd's leader answers it: until then
    // it still answers the clients as a learner ("rpc not supported for learner").
    let promoted_there = eventually(|| async {
        let Some(mut c) = client_of(&oxcd_url).await else {
            return false;
        };
        c.member_list().await.is_ok_and(|l| {
            l.members()
                .iter()
                .any(|m| m.id() == oxcd_id && !m.is_learner())
        })
    })
    .await;
    assert!(promoted_there, "the oxcd member applied its promotion");
    let start_rev = revision_at(&mut ctl.clone(), "ready").await;
    let endpoints: Endpoints = Arc::new(Mutex::new(endpoints_of(&members)));
    let load = Workload::start(&endpoints, start_rev + 1, "steady");
    tokio::time::sleep(Duration::from_secs(2)).await;

    // 1. kill -9 the oxcd member; 200 writes on; back by etcd's snapshot.
    load.phase("oxcd killed");
    drop(oxcd);
    let rev = revision_of(&etcd_urls[0]).await;
    assert!(
        caught_up(&etcd_urls[1], rev + 200).await,
        "writes go on without oxcd"
    );
    oxcd = start_oxcd();
    let rev = revision_of(&etcd_urls[0]).await;
    assert!(caught_up(&oxcd_url, rev).await, "oxcd back");
    let installed = oxcd.logged("received a snapshot from an etcd member").len();
    eprintln!("1. oxcd killed and back at {rev}, by {installed} snapshot(s) from etcd");
    assert!(installed >= 1, "oxcd came back by etcd's snapshot");

    // 2. oxcd leads; kill -9 an etcd follower; back by oxcd's snapshot.
    load.phase("etcd killed");
    lead(&members, oxcd_id).await;
    let victim = members
        .iter()
        .position(|m| m.name == "etcd1")
        .expect("etcd1");
    drop(etcds.remove(1));
    let rev = revision_of(&oxcd_url).await;
    assert!(
        caught_up(&oxcd_url, rev + 200).await,
        "writes go on under oxcd"
    );
    etcds.push(start_etcd(1, "existing", &etcd_cluster));
    let rev = revision_of(&oxcd_url).await;
    assert!(
        caught_up(&members[victim].client_url, rev).await,
        "etcd1 back"
    );
    let metrics = crate::common::scrape(&members[victim].client_url).await;
    let received = format!("etcd_network_snapshot_receive_success{{From=\"{oxcd_id:x}\"}}");
    eprintln!(
        "2. etcd1 killed and back at {rev}: {:?}",
        metrics.lines().find(|l| l.starts_with(&received))
    );
    assert!(
        metrics.contains(&received),
        "etcd1 came back by oxcd's snapshot"
    );

    // 3. the oxcd leader paused for 3 s: an etcd member leads; oxcd rejoins.
    load.phase("oxcd leader paused");
    lead(&members, oxcd_id).await;
    signal(oxcd.child.id(), "STOP");
    tokio::time::sleep(Duration::from_secs(3)).await;
    signal(oxcd.child.id(), "CONT");
    let rev = revision_of(&etcd_urls[0]).await;
    assert!(caught_up(&oxcd_url, rev).await, "oxcd back after the pause");
    let leader = client_of(&etcd_urls[0])
        .await
        .expect("client")
        .status()
        .await
        .expect("status")
        .leader();
    eprintln!("3. oxcd paused while leading; leader now {leader:x}");

    // 4. every member killed at once, then restarted.
    load.phase("all killed");
    drop(oxcd);
    etcds.clear();
    tokio::time::sleep(Duration::from_millis(500)).await;
    etcds = (0..2)
        .map(|i| start_etcd(i, "existing", &etcd_cluster))
        .collect();
    oxcd = start_oxcd();
    load.phase("after");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let finished = load.finish().await;
    check_end(&members, finished, dir.path(), &["etcd0", "etcd1"]).await;
    drop(oxcd);
    drop(etcds);
}
