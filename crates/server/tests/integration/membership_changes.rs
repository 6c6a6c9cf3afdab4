//! Membership changes through the Cluster service, on in-process members with real
//! sockets and the real peer transport, driven by the etcd-client crate: a one-member
//! cluster grows to three and shrinks back while it takes writes; a removed member stops
//! and may not start again with its data; the strict reconfiguration checks refuse the
//! seed-004 accident (adding a voter while a member is down); a learner serves only
//! what etcd's learners serve, cannot be promoted before it has caught up, and then is.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common;

use common::{InProc, free_port};
use etcd_client::{Client, GetOptions, MemberAddOptions};
use oxcd_config::settings::Settings;

/// A member's name and peer URL.
#[derive(Clone)]
struct Seat {
    name: String,
    peer: String,
}

impl Seat {
    fn new(name: &str) -> Seat {
        Seat {
            name: name.to_string(),
            peer: format!("http://127.0.0.1:{}", free_port()),
        }
    }
}

/// `--initial-cluster` naming `seats`.
fn initial(seats: &[&Seat]) -> Vec<(String, Vec<String>)> {
    seats
        .iter()
        .map(|s| (s.name.clone(), vec![s.peer.clone()]))
        .collect()
}

/// Starts `seat` in `dir` with `--initial-cluster` from `cluster`, joining a running
/// cluster when `existing`.
async fn start(dir: &Path, seat: &Seat, cluster: &[&Seat], existing: bool) -> InProc {
    try_start(dir, seat, cluster, existing)
        .await
        .unwrap_or_else(|e| panic!("{} did not start: {e}", seat.name))
}

async fn try_start(
    dir: &Path,
    seat: &Seat,
    cluster: &[&Seat],
    existing: bool,
) -> Result<InProc, String> {
    let (seat, cluster) = (seat.clone(), initial(cluster));
    InProc::try_start(dir.join(&seat.name), move |s: &mut Settings| {
        s.name = seat.name.clone();
        s.peer_urls = vec![seat.peer.clone()];
        s.listen_peer_urls = vec![seat.peer.clone()];
        s.initial_cluster = cluster;
        s.initial_cluster_existing = existing;
    })
    .await
}

/// Adds a voter at `seat`'s peer URL through `c`; returns its id.
async fn add_voter(c: &Client, seat: &Seat) -> u64 {
    let resp = common::cluster::healthy_retry(|| {
        let mut c = c.clone();
        let urls = vec![seat.peer.clone()];
        async move { c.member_add(urls, None).await }
    })
    .await
    .expect("member add");
    resp.member().expect("the added member").id()
}

/// The (name, learner) of every member `c` lists, sorted.
async fn listed(c: &mut Client) -> Vec<(String, bool)> {
    let mut v: Vec<(String, bool)> = c
        .member_list()
        .await
        .expect("member list")
        .members()
        .iter()
        .map(|m| (m.name().to_string(), m.is_learner()))
        .collect();
    v.sort();
    v
}

/// Writes keys `prefix0..` through `c` until told to stop; returns the keys acknowledged.
fn write_load(
    mut c: Client,
    prefix: &'static str,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Vec<String>>,
) {
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let mut acked = Vec::new();
        for i in 0.. {
            if stop_rx.try_recv().is_ok() {
                break;
            }
            let k = format!("{prefix}{i:06}");
            if c.put(k.clone(), "v", None).await.is_ok() {
                acked.push(k);
            } else {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        acked
    });
    (stop_tx, task)
}

/// Checks every acknowledged key is on `m` (a serializable read after a linearizable one
/// so that it has applied everything).
async fn holds_all(m: &InProc, acked: &[String], prefix: &str) {
    let mut c = m.client().await;
    c.get("settle", None).await.expect("linearizable read");
    let got = c
        .get(
            prefix,
            Some(GetOptions::new().with_prefix().with_keys_only()),
        )
        .await
        .expect("range");
    let keys: std::collections::HashSet<String> = got
        .kvs()
        .iter()
        .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
        .collect();
    let missing: Vec<&String> = acked.iter().filter(|k| !keys.contains(*k)).collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged keys missing, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(3)]
    );
}

/// Waits until `m` stops on its own (a removed member stops itself); Ok is a clean stop.
async fn stops_by_itself(m: InProc) {
    tokio::time::timeout(Duration::from_secs(20), m.wait())
        .await
        .expect("a removed member stops by itself")
        .expect("it stops cleanly");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_member_grows_to_three_and_shrinks_back_under_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b, c) = (Seat::new("a"), Seat::new("b"), Seat::new("c"));
    let ma = start(dir.path(), &a, &[&a], false).await;
    let ca = ma.client().await;
    let (stop, load) = write_load(ca.clone(), "grow/");

    let b_id = add_voter(&ca, &b).await;
    let mb = start(dir.path(), &b, &[&a, &b], true).await;
    let c_id = add_voter(&ca, &c).await;
    let mc = start(dir.path(), &c, &[&a, &b, &c], true).await;
    let mut cc = mc.client().await;
    assert_eq!(
        listed(&mut cc).await,
        [("a", false), ("b", false), ("c", false)].map(|(n, l)| (n.to_string(), l))
    );
    let _ = stop.send(());
    let grown = load.await.expect("load");
    assert!(grown.len() > 20, "only {} writes acknowledged", grown.len());
    let members = vec![ma, mb, mc];
    for m in &members {
        holds_all(m, &grown, "grow/").await;
    }
    let hashes = common::cluster::state_hashes(&members, None).await;
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:?}");
    let (stop, load) = write_load(ca.clone(), "shrink/");

    // Shrink back: each removed member stops by itself.
    let [ma, mb, mc]: [InProc; 3] = members.try_into().ok().expect("three");
    common::cluster::healthy_retry(|| {
        let mut c = ca.clone();
        async move { c.member_remove(c_id).await }
    })
    .await
    .expect("remove c");
    stops_by_itself(mc).await;
    common::cluster::healthy_retry(|| {
        let mut c = ca.clone();
        async move { c.member_remove(b_id).await }
    })
    .await
    .expect("remove b");
    stops_by_itself(mb).await;
    let _ = stop.send(());
    let acked = load.await.expect("load");
    assert!(acked.len() > 20, "only {} writes acknowledged", acked.len());
    holds_all(&ma, &acked, "shrink/").await;
    holds_all(&ma, &grown, "grow/").await;
    let mut ca = ca;
    assert_eq!(listed(&mut ca).await, [("a".to_string(), false)]);

    // A removed member may not come back with its data.
    let err = try_start(dir.path(), &c, &[&a, &b, &c], true)
        .await
        .err()
        .expect("a removed member is refused");
    assert!(
        err.contains("the member has been permanently removed from the cluster"),
        "{err}"
    );
    ma.stop().await;
}

/// The member id `m` reports.
async fn member_id(m: &InProc) -> u64 {
    let mut c = m.client().await;
    let st = c.status().await.expect("status");
    st.header().expect("header").member_id()
}

/// The message of a failed call.
fn refusal<T: std::fmt::Debug>(r: Result<T, etcd_client::Error>) -> String {
    match r {
        Ok(v) => panic!("expected a refusal, got {v:?}"),
        Err(etcd_client::Error::GRpcStatus(s)) => s.message().to_string(),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adding_a_voter_while_a_member_is_down_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut members, _) = common::cluster::three(dir.path()).await;
    let leader = common::cluster::leader_index(&members).await;
    let down = (leader + 1) % 3;
    let down_id = member_id(&members[down]).await;
    let live_follower = (leader + 2) % 3;
    let live_id = member_id(&members[live_follower]).await;
    members.remove(down).stop().await;
    let c = members[0].client().await;
    let new = Seat::new("m3");
    // Seed 004: the new member would make four voters with one down and one not
    // started: two of four cannot make a quorum.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = c.clone();
        match c.member_add([new.peer.clone()], None).await {
            Err(etcd_client::Error::GRpcStatus(s))
                if s.message() == "etcdserver: unhealthy cluster" =>
            {
                break;
            }
            other => {
                assert!(
                    Instant::now() < deadline,
                    "member add while a member is down: {other:?}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    // Removing a live member would leave one of two.
    let mut c2 = c.clone();
    assert_eq!(
        refusal(c2.member_remove(live_id).await),
        "etcdserver: unhealthy cluster"
    );
    // Removing the member that is down is safe, once the live follower has been
    // connected for etcd's 5 s health interval (the cluster may be younger than that).
    common::cluster::healthy_retry(|| {
        let mut c = c2.clone();
        async move { c.member_remove(down_id).await }
    })
    .await
    .expect("remove the member that is down");
    let mut listed_by = members[0].client().await;
    assert_eq!(listed(&mut listed_by).await.len(), 2);
    c2.put("still", "writable", None).await.expect("put");
    for m in members {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_serves_reads_only_and_is_promoted_once_caught_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, peers) = common::cluster::three(dir.path()).await;
    let leader = common::cluster::leader_index(&members).await;
    let follower = (leader + 1) % 3;
    let mut c = members[follower].client().await;
    for i in 0..200 {
        c.put(format!("k{i:03}"), "v", None).await.expect("put");
    }
    let seats: Vec<Seat> = peers
        .iter()
        .enumerate()
        .map(|(i, p)| Seat {
            name: format!("m{i}"),
            peer: format!("http://127.0.0.1:{p}"),
        })
        .collect();
    let l = Seat::new("learner");
    let added = common::cluster::healthy_retry(|| {
        let mut c = c.clone();
        let urls = vec![l.peer.clone()];
        async move {
            c.member_add(urls, Some(MemberAddOptions::new().with_is_learner()))
                .await
        }
    })
    .await
    .expect("add a learner");
    let l_id = added.member().expect("added").id();
    assert!(added.member().expect("added").is_learner());
    // --max-learners is 1.
    let other = Seat::new("other");
    assert_eq!(
        refusal(
            c.member_add(
                [other.peer.clone()],
                Some(MemberAddOptions::new().with_is_learner())
            )
            .await
        ),
        "etcdserver: too many learner members in cluster"
    );
    // Not started: not caught up (asked through a follower: forwarded to the leader).
    assert_eq!(
        refusal(c.member_promote(l_id).await),
        "etcdserver: can only promote a learner member which is in sync with leader"
    );
    let all: Vec<&Seat> = seats.iter().chain([&l]).collect();
    let ml = start(dir.path(), &l, &all, true).await;
    let mut lc = ml.client().await;
    // A learner serves serializable reads and status, and nothing else.
    let got = lc
        .get(
            "k",
            Some(GetOptions::new().with_prefix().with_serializable()),
        )
        .await
        .expect("serializable read on a learner");
    assert!(got.count() <= 200);
    lc.status().await.expect("status on a learner");
    for refused in [
        refusal(lc.get("k000", None).await),
        refusal(lc.put("k", "v", None).await),
        refusal(lc.member_list().await),
    ] {
        assert_eq!(refused, "etcdserver: rpc not supported for learner");
    }
    // Caught up: promoted (through the follower again).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match c.member_promote(l_id).await {
            Ok(_) => break,
            Err(e) => {
                assert!(
                    Instant::now() < deadline && e.to_string().contains("in sync with leader"),
                    "promote: {e}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    assert_eq!(
        refusal(c.member_promote(l_id).await),
        "etcdserver: can only promote a learner member"
    );
    assert_eq!(
        listed(&mut c).await,
        [
            ("learner", false),
            ("m0", false),
            ("m1", false),
            ("m2", false)
        ]
        .map(|(n, l)| (n.to_string(), l))
    );
    // A voter now: it serves everything.
    let got = lc
        .get("k", Some(GetOptions::new().with_prefix()))
        .await
        .expect("linearizable read");
    assert_eq!(got.count(), 200);
    let mut all = members;
    all.push(ml);
    let hashes = common::cluster::state_hashes(&all, None).await;
    assert!(hashes.windows(2).all(|w| w[0] == w[1]), "{hashes:?}");
    for m in all {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_new_cluster_restarts_a_survivor_alone_with_its_data_and_it_grows_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (members, peers) = common::cluster::three(dir.path()).await;
    let mut c = members[0].client().await;
    for i in 0..100 {
        c.put(format!("k{i:03}"), "v", None).await.expect("put");
    }
    let dirs: Vec<_> = members.iter().map(|m| m.data_dir.clone()).collect();
    for m in members {
        m.stop().await;
    }
    // The majority is lost for good: m0 is brought back alone.
    let cluster = common::cluster::cluster_of(&peers);
    let forced = {
        let cluster = cluster.clone();
        InProc::start(dirs[0].clone(), move |s| {
            common::cluster::configure(s, 0, &cluster);
            s.force_new_cluster = true;
        })
        .await
    };
    let mut c = forced.client().await;
    assert_eq!(listed(&mut c).await, [("m0".to_string(), false)]);
    let got = c
        .get("k", Some(GetOptions::new().with_prefix().with_count_only()))
        .await
        .expect("read");
    assert_eq!(got.count(), 100, "the survivor keeps its data");
    c.put("after", "force", None).await.expect("writable alone");
    // It grows again: a new member joins it.
    let m0 = Seat {
        name: "m0".into(),
        peer: cluster[0].1[0].clone(),
    };
    let fresh = Seat::new("fresh");
    add_voter(&c, &fresh).await;
    let joined = start(dir.path(), &fresh, &[&m0, &fresh], true).await;
    let mut j = joined.client().await;
    let got = j
        .get("k", Some(GetOptions::new().with_prefix().with_count_only()))
        .await
        .expect("read on the new member");
    assert_eq!(got.count(), 100);
    let both = vec![forced, joined];
    let hashes = common::cluster::state_hashes(&both, None).await;
    assert_eq!(hashes[0], hashes[1]);
    for m in both {
        m.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auto_promotion_a_caught_up_learner_becomes_a_voter_by_itself() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, l) = (Seat::new("a"), Seat::new("l"));
    let ma = {
        let cluster = initial(&[&a]);
        let a = a.clone();
        InProc::start(dir.path().join("a"), move |s| {
            s.name = a.name.clone();
            s.peer_urls = vec![a.peer.clone()];
            s.listen_peer_urls = vec![a.peer.clone()];
            s.initial_cluster = cluster;
            s.auto_promote_learners = true;
        })
        .await
    };
    let mut c = ma.client().await;
    for i in 0..100 {
        c.put(format!("k{i:03}"), "v", None).await.expect("put");
    }
    common::cluster::healthy_retry(|| {
        let mut c = c.clone();
        let urls = vec![l.peer.clone()];
        async move {
            c.member_add(urls, Some(MemberAddOptions::new().with_is_learner()))
                .await
        }
    })
    .await
    .expect("add a learner");
    // Not started: it stays a learner.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        listed(&mut c).await,
        [("".to_string(), true), ("a".to_string(), false)]
    );
    let ml = start(dir.path(), &l, &[&a, &l], true).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while listed(&mut c).await != [("a".to_string(), false), ("l".to_string(), false)] {
        assert!(Instant::now() < deadline, "the learner was not promoted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut lc = ml.client().await;
    let got = lc
        .get("k", Some(GetOptions::new().with_prefix().with_count_only()))
        .await
        .expect("a voter serves linearizable reads");
    assert_eq!(got.count(), 100);
    ml.stop().await;
    ma.stop().await;
}
